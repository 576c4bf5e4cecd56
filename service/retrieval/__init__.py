"""Retrieval stages: sparse first stage (BM25/tf-idf + PSQ translation), dense, rerank, fusion, passages."""
