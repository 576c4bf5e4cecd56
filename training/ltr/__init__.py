"""Learning to rank and system combination (Schamoni et al. 2014; Schamoni and Riezler 2015).

- :mod:`training.ltr.data`: the neural rankers' topics, pairs and split (``training.models.pairs``)
  turned into what the linear learners read (term hashes, domain features);
- :mod:`training.ltr.wordpair`: the sparse word-pair model, l1-regularised pairwise hinge loss by SGD;
- :mod:`training.ltr.domain`: the dense domain-knowledge model;
- :mod:`training.ltr.linlearn`: the dense pairwise learner, LinLearn and Borda weight tuning;
- :mod:`training.ltr.train`: ``priorart train-ltr`` (models + combination weights -> ``MODELS_DIR/ltr``);
- :mod:`training.ltr.orthogonality`: Pearson / Kendall / Jaccard / Borda report over TREC runs;
(the experiment over them, cross-fitted on the real tasks, is the lab's: :mod:`lab.experiments.ltr`,
``priorart-lab experiment ltr``).
"""
