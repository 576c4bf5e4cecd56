"""The corpus record schema and its JSON-lines reader/writer (shared by training and service)."""

from service.corpus.record import Citation, Claim, PatentRecord, Section

__all__ = ["Citation", "Claim", "PatentRecord", "Section"]
