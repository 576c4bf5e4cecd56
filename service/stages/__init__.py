"""Pipeline stages, one module each (composed by :func:`service.pipeline.compose`, in this order; the table with
what each requires and provides: docs/ARCHITECTURE.md, "The stages").

- :mod:`service.stages.resolve`: ``resolve``, the query resolved once (language, text, query document, codes,
  filters);
- :mod:`service.stages.first`: ``bm25``, the first stage (BM25 + PSQ translation + filters); a sharded index's
  ingress has the fan-out ``shards`` (:class:`service.shards.ShardFanOut`) in its place;
- :mod:`service.stages.dense`: ``dense``, FAISS nearest documents of the query vector;
- :mod:`service.stages.rerank`: ``rerank``, the ONNX rankers (``text``, ``meta``, ``joint`` components);
- :mod:`service.stages.ltr`: ``wordpair`` and ``domain``, the learning-to-rank models;
- ``fusion``: :class:`service.fusion.FusionStep`;
- :mod:`service.stages.evidence`: ``evidence``, the first documents ordered by the learned ranker or their best
  passage (it holds the passage index);
- :mod:`service.stages.results`: ``collapse`` (families grouped) and ``explain`` (the matched words of the results
  shown).
"""
