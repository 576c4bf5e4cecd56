"""The searcher's query language (docs/QUERY_LANGUAGE.md): Boolean, proximity, truncation and field queries over the
word index every index folder holds, across languages through the index's translation tables."""
