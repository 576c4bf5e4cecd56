"""The code classifier of the CPC titles (service/code_classifier.py, training/code_classifier.py): profiles of every
entry under a subclass or main group, BM25 over them, the prediction's shares, the files, and when an index gets it."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import numpy as np
import pytest

from service.classification import ClassificationScheme
from service.code_classifier import CodeClassifier, code_agreement
from service.text.analysis import get_analyzer
from training.code_classifier import index_classifier, profile_counts

LINES = """\
H\t\tELECTRICITY
H01\t\tELECTRIC ELEMENTS
H01F\t\tMAGNETS; INDUCTANCES; TRANSFORMERS
H01F27/00\t0\tDetails of transformers or inductances, in general
H01F27/08\t1\tCooling of transformers; Ventilating
H01F27/10\t2\tLiquid cooling with oil
H01F38/00\t0\tAdaptations of transformers for lamps
F\t\tMECHANICAL ENGINEERING
F16\t\tENGINEERING ELEMENTS
F16C\t\tSHAFTS; BEARINGS
F16C19/00\t0\tBearings with rolling contact, for rotary movement
F16C19/02\t1\twith balls in a cage of the bearing
F16C32/00\t0\tBearings not otherwise provided for
"""


@pytest.fixture()
def scheme() -> ClassificationScheme:
    return ClassificationScheme.from_lines(LINES.splitlines())


def test_every_title_counts_in_its_subclass_and_main_group_profile(scheme: ClassificationScheme) -> None:
    en = get_analyzer("en")
    counts = profile_counts(scheme, en)
    assert set(counts["subclass"]) == {"H01F", "F16C"}  # sections and classes are above the level: no profile
    assert set(counts["main_group"]) == {"H01F27/00", "H01F38/00", "F16C19/00", "F16C32/00"}
    oil = en("oil")[0]
    assert counts["main_group"]["H01F27/00"][oil] == 1 and counts["subclass"]["H01F"][oil] == 1  # a subgroup's
    bearing = en("bearings")[0]
    assert counts["subclass"]["F16C"][bearing] == 4  # its own title, both main groups and the subgroup


def test_a_query_is_classified_by_bm25_over_the_profiles(scheme: ClassificationScheme) -> None:
    en = get_analyzer("en")
    counts = profile_counts(scheme, en)
    clf = CodeClassifier.from_counts(counts)
    probs = {t: 1.0 / 3 for t in en("rolling bearing balls")}
    got = clf.predict(probs, "main_group")
    assert got[0][0] == "F16C19/00" and math.isclose(sum(s for _, s in got), 1.0)
    assert [c for c, _ in clf.predict(probs, "subclass")] == ["F16C"]  # no query term in H01F's profile
    assert clf.predict({"zzz": 1.0}, "subclass") == []
    # the weight of one term in one profile: BM25 with the profiles as documents
    codes, _ = clf.levels["subclass"]
    tf, n_codes, df = counts["subclass"]["F16C"][en("balls")[0]], 2, 1
    lengths = [sum(counts["subclass"][c].values()) for c in codes]
    norm = 1.2 * (1 - 0.75 + 0.75 * lengths[codes.index("F16C")] / np.mean(lengths))
    want = math.log1p((n_codes - df + 0.5) / (df + 0.5)) * tf * 2.2 / (tf + norm)
    one = clf.predict({en("balls")[0]: 1.0}, "subclass", top=5)
    assert one == [("F16C", 1.0)]
    j = clf.terms.index(en("balls")[0])
    assert clf.levels["subclass"][1][codes.index("F16C"), j] == pytest.approx(want)


def test_the_classifier_reads_back_what_it_wrote(scheme: ClassificationScheme, tmp_path: Path) -> None:
    en = get_analyzer("en")
    clf = CodeClassifier.from_counts(profile_counts(scheme, en))
    clf.save(tmp_path / "c")
    back = CodeClassifier.load(tmp_path / "c")
    for query in ("transformer cooling oil", "bearing for a rotary shaft"):
        probs = {t: 1.0 for t in en(query)}
        for level in ("subclass", "main_group"):
            a, b = clf.predict(probs, level), back.predict(probs, level)
            assert [c for c, _ in a] == [c for c, _ in b] and np.allclose([s for _, s in a], [s for _, s in b])
    with pytest.raises(FileNotFoundError):
        CodeClassifier.load(tmp_path)  # no terms.json (the index part says which index's)
    (tmp_path / "terms.json").write_text("[]", encoding="utf-8")
    with pytest.raises(ValueError, match="no profiles"):
        CodeClassifier.load(tmp_path)


def test_the_best_codes_are_those_of_a_full_sort_ties_in_code_order() -> None:
    """The prediction picks its best codes among the many that score (a partition, then a sort of those): the same
    codes, in the same order, as a sort of every score, with ties -- many, across the cut -- in code order."""
    from scipy import sparse

    from service.code_classifier import TOP

    rng = np.random.default_rng(5)
    n_codes, terms = 300, ["alpha", "beta", "gamma"]
    codes = [f"H{i:03d}" for i in range(n_codes)]
    weights = rng.choice([0.0, 0.5, 1.0, 1.5], size=(n_codes, len(terms)))  # few distinct scores: ties everywhere
    clf = CodeClassifier(terms, {"subclass": (codes, sparse.csr_matrix(weights))})
    for probs in ({"alpha": 1.0}, {"alpha": 0.2, "beta": 0.3, "gamma": 0.5}, {"beta": 0.7, "gamma": 0.3}):
        scores = weights @ np.array([probs.get(t, 0.0) for t in terms])
        want = sorted((i for i in range(n_codes) if scores[i] > 0), key=lambda i: (-scores[i], i))[:TOP]
        got = clf.predict(probs, "subclass")
        assert [c for c, _ in got] == [codes[i] for i in want]
        assert sum(share for _, share in got) == pytest.approx(1.0)


def test_code_agreement_is_the_predicted_share_a_document_holds() -> None:
    got = code_agreement([("A01B", 0.5), ("H01F", 0.3), ("G06F", 0.2)], [["H01F", "G06F"], [], ["H01F", "H01F"]])
    assert np.allclose(got, [0.5, 0.0, 0.3])


def test_an_index_gets_the_classifier_only_where_the_list_knows_its_codes(scheme: ClassificationScheme,
                                                                          tmp_path: Path) -> None:
    cpc = tmp_path / "cpc.tsv.gz"
    with gzip.open(cpc, "wt", encoding="utf-8") as fh:
        fh.write(LINES)
    en = get_analyzer("en")
    clf, said = index_classifier(cpc, en, ["H01F27/10", "F16C19/02", "A61K9/00"])
    assert clf is not None and "2 subclass and 4 main group profiles" in said and "67%" in said
    clf, said = index_classifier(cpc, en, ["A61K9/00", "B65D1/00", "H01F27/10"])  # a third known
    assert clf is None and "33% of the corpus' 3 subclasses" in said
    assert index_classifier(None, en, ["H01F27/10"])[0] is None
    clf, said = index_classifier(cpc, None, ["H01F27/10"])
    assert clf is None and "no English index" in said
    clf, said = index_classifier(tmp_path / "missing.tsv.gz", en, ["H01F27/10"])
    assert clf is None and "not found" in said
