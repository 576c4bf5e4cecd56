"""Word-translation resources for cross-lingual queries: IBM model 1 on aligned EP claims, FreeDict lexicons,
and the merged translation tables (``service.retrieval.translate.TranslationTable``)."""
