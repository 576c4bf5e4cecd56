"""Text analysis shared by indexing, querying and training: normalise, tokenise, stop, stem (``analysis``), split
German compounds (``compounds``), and the PSQ translation tables from one language's index terms to another's
(``translation``)."""

from service.text.analysis import Analyzer, detect_language, get_analyzer, tokenize

__all__ = ["Analyzer", "detect_language", "get_analyzer", "tokenize"]
