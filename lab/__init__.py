"""priorart's lab: the research behind the product, kept out of it (not in the serving image).

- :mod:`lab.experiments`: the reproducible experiments behind docs/RESULTS.md (``priorart-lab experiment ...``);
- :mod:`lab.benchmarks`: benchmarks that print measured figures (``priorart-lab bench ...``), the passage ranker's
  reference oracle (``passages_reference``) and the real-data dump (``dump``);
- :mod:`lab.docs_results`: docs/RESULTS.md's and the README's tables rendered from the result files
  (``priorart-lab docs results``);
- :mod:`lab.cli`: the ``priorart-lab`` command line.

The lab imports the product (``service``, ``training``); nothing in the product imports the lab.
"""
