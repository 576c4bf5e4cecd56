"""priorart offline side: ingestion, synthetic data, index building, training, evaluation, CLI.

Heavy libraries (torch, gensim) are imported inside the functions that need them, never at import
time, so that ``priorart serve`` and ``priorart search`` run in an image without them.
"""
