"""The analyst's workflow, built on the engine's public methods (service/workflow/chart.py ``Engine``): claim
elements, claim charts and search reports.

``claims``: split a claim into its elements (en/de/fr, dependent claims resolved), and the claim references parser
ingestion uses too. ``chart``: each element of a claim against each document's best passage. ``report``: the search
report, and claim charts and reports as CSV and printable HTML. The API (service/api/routes/workflow.py) serves
them. What the engine itself answers with lives below it: families (service/corpus/families.py), notices in an
analyst's words (service/notices.py), relevance feedback (service/retrieval/feedback.py).
"""
