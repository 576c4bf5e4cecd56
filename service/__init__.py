"""priorart online side: corpus schema, text analysis, retrieval stages and the REST service.

Nothing in this package imports torch, gensim or the ``training`` package.
"""

__version__ = "0.1.0"
