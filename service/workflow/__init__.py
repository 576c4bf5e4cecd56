"""The analyst's workflow: claim elements and claim charts, families and duplicates, search reports
and notices in an analyst's words (relevance feedback, Rocchio, is retrieval: service/retrieval/feedback.py).

``claims``: split a claim into its elements (en/de/fr, dependent claims resolved), and the claim
references parser ingestion uses too. ``families``: collapse publications of one family / application / priority.
``report``: claim charts and search reports as CSV and printable HTML. ``notices``: what a notice means for
the results, in an analyst's words. The engine (service/engine.py) calls them; the API serves them.
"""
