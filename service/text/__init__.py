"""Text analysis shared by indexing, querying and training: normalise, tokenise, stop, stem."""

from service.text.analysis import Analyzer, detect_language, get_analyzer, tokenize

__all__ = ["Analyzer", "detect_language", "get_analyzer", "tokenize"]
