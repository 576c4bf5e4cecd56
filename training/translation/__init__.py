"""Word-translation resources for cross-lingual queries: IBM model 1 on aligned EP claims, dictionary lexicons
(FreeDict, Ding; ``lexicons`` chooses and combines them), and the merged translation tables
(``service.text.translation.TranslationTable``)."""
