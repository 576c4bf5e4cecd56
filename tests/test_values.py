"""One home per value: each vocabulary of the service is defined once, in the lowest module that needs it, and the
others take it from there. The API schema's ``Literal`` types are built from the domain's definitions (languages,
code levels), or the domain's tuples from the schema's (fusion methods, components, passage variants: the fusion
and the passage ranker sit above the schema), so that the two cannot drift apart."""

from __future__ import annotations

from typing import get_args

from service import schema
from service.codes import CODE_LEVELS, CodeLevel
from service.fusion import COMPONENTS, METHODS
from service.passages.lm import VARIANTS
from service.retrieval.dense import INDEX_KINDS
from service.settings import DEVICES, Settings
from service.text.analysis import LANG_NAMES, STEMMERS, SUPPORTED_LANGS, Language


def test_the_languages_are_defined_once() -> None:
    assert SUPPORTED_LANGS == get_args(Language) == ("en", "de", "fr")
    assert get_args(schema.Lang) == ("auto", *SUPPORTED_LANGS)
    assert set(LANG_NAMES) == set(STEMMERS) == set(SUPPORTED_LANGS)


def test_the_schema_takes_each_vocabulary_from_its_one_home() -> None:
    assert CODE_LEVELS == get_args(CodeLevel) == ("section", "class", "subclass", "main_group", "subgroup")
    assert get_args(schema.CodeFilter) == ("none", *CODE_LEVELS)
    assert get_args(schema.SearchRequest.model_fields["code_filter"].annotation) == ("none", *CODE_LEVELS)
    assert METHODS == get_args(schema.FusionMethod) == ("linear", "borda", "linlearn")
    assert COMPONENTS is schema.COMPONENTS
    assert get_args(schema.Variant) == VARIANTS and VARIANTS[-1] == "qsf_passage_propagate"
    assert DEVICES == get_args(Settings.model_fields["device"].annotation) == ("auto", "cpu", "cuda")
    assert INDEX_KINDS == ("flat", "hnsw", "ivf")


def test_the_api_refuses_a_value_outside_the_vocabulary() -> None:
    """What the JSON schema lists is what the domain accepts, and nothing else."""
    import pytest
    from pydantic import ValidationError

    for lang in SUPPORTED_LANGS:
        assert schema.SearchRequest(query="x", lang=lang).lang == lang
    for field, bad in (("lang", "it"), ("code_filter", "group"), ("fusion", "rrf")):
        with pytest.raises(ValidationError):
            schema.SearchRequest.model_validate({"query": "x", field: bad})
    with pytest.raises(ValidationError, match="unknown score names"):
        schema.SearchRequest(query="x", weights={"bm26": 1.0})


def test_one_publication_id_normaliser() -> None:
    """The doc store, the API's /documents, a priority claim (families) and a citation read an id the same way."""
    from service.corpus.families import group
    from service.corpus.ids import normalise_pub_id
    from service.corpus.record import PatentRecord

    assert normalise_pub_id(" jp 2002-156293 ") == normalise_pub_id("JP2002156293") == "JP2002156293"
    recs = [PatentRecord(id=f"EP000000{i}A1", country="EP", number=f"000000{i}", kind="A1", source="jsonl",
                         priority_ids=[p]) for i, p in enumerate(("JP 2002-156293", "jp2002156293"), start=1)]
    assert [(g.head, g.members) for g in group(recs)] == [(0, [1])]


def test_one_error_type_per_concept_and_one_check_of_the_bm25_parameters() -> None:
    import pytest

    import service.fusion
    import training.fusion
    from lab.experiments import ExperimentError, models, passages, xling
    from lab.experiments import ltr as ltr_experiment
    from service.index.folder import BuildSettings
    from service.retrieval.sparse import SparseIndexBuilder

    assert training.fusion.FusionError is service.fusion.FusionError
    assert xling.ExperimentError is models.ExperimentError is passages.ExperimentError is ExperimentError
    assert ltr_experiment.ExperimentError is ExperimentError
    settings = {"fields": ["claims"], "index_langs": ["en"], "scoring": "bm25", "k1": 1.2, "b": 0.75, "epsilon": 0.25}
    for name, bad in (("k1", 150.0), ("b", 1.5), ("epsilon", 2.0), ("k1", -1.0)):
        with pytest.raises(ValueError, match=f"{name} must be a number in") as built:
            SparseIndexBuilder(**{name: bad})  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=f"{name} must be a number in") as validated:
            BuildSettings.from_dict({**settings, name: bad})
        assert str(validated.value) == f"setting: {built.value}"
