"""Pipeline stages, one module each (composed by :func:`service.pipeline.compose`).

- :mod:`service.stages.first`: ``bm25``, the first stage (BM25 + PSQ translation + filters);
- :mod:`service.stages.dense`: ``dense``, FAISS nearest documents of the dual-encoder query vector;
- :mod:`service.stages.rerank`: ``rerank``, the ONNX rankers (``text``, ``meta``, ``joint`` components);
- :mod:`service.stages.ltr`: ``wordpair`` and ``domain``, the learning-to-rank models;
- the final ``fusion`` stage is :class:`service.fusion.FusionStep`.
"""
