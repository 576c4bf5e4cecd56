"""Code vectors and the code-embedding feature (service/code_vectors.py, training/code_vectors.py; issue 59 item 4):
a code without a vector counts as its nearest ancestor that has one, the similarity is the cosine of the query's
weighted codes and the document's main groups (0 where either has none), DeepWalk puts codes of one subclass closer
than codes of another section, and a build whose ranker reads the feature gives the index the vectors that /search's
evidence reads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from service.code_vectors import CodeVectors
from service.codes import codes_at, record_codes
from service.ranker import CODE_EMBEDDING, FEATURES
from training.code_vectors import NoCodes, train_code_vectors
from training.ranker import first_evidence


def _vectors() -> CodeVectors:
    return CodeVectors(["H04W", "H04W4/00", "A61K", "A61K9/00"],
                       [[1.0, 0.0, 0.0], [2.0, 2.0, 0.0], [0.0, 0.0, 3.0], [0.0, 1.0, 1.0]])


def test_a_code_without_a_vector_counts_as_its_nearest_ancestor_with_one() -> None:
    cv = _vectors()
    assert np.allclose(np.linalg.norm(cv.vectors, axis=1), 1.0)  # unit rows
    assert cv.row("H04W4/00") == 1 and cv.row("H04W 4/02") == 1  # a subgroup: its main group's
    assert cv.row("H04W72/00") == 0  # an unknown main group: its subclass
    assert cv.row("B65D") == -1 and cv.row("not a code") == -1


def test_the_similarity_is_the_cosine_of_the_weighted_query_codes_and_the_documents_main_groups() -> None:
    cv = _vectors()
    docs = [["H04W4/02", "A61K9/00"], ["H04W"], ["B65D1/00"], []]
    got = cv.similarity([("H04W4/00", 0.75), ("A61K", 0.25)], docs)
    q = 0.75 * cv.vectors[1] + 0.25 * cv.vectors[2]
    q /= np.linalg.norm(q)
    d0 = cv.vectors[1] + cv.vectors[3]  # its two main groups
    d0 /= np.linalg.norm(d0)
    assert got[0] == pytest.approx(float(q @ d0))
    assert got[1] == pytest.approx(float(q @ cv.vectors[0]))  # a subclass only: the subclass's vector
    assert got[2] == 0.0 and got[3] == 0.0  # no vector for its codes, or no code
    assert not cv.similarity([("B65D", 1.0)], docs).any()  # a query whose codes have no vector
    assert not cv.similarity([], docs).any()


def test_code_vectors_are_saved_and_read_back(tmp_path: Path) -> None:
    cv = _vectors()
    cv.save(tmp_path / "cv")
    back = CodeVectors.load(tmp_path / "cv")
    assert back.codes == cv.codes and np.array_equal(back.vectors, cv.vectors)


def test_deepwalk_puts_the_codes_of_one_subclass_closer_than_those_of_another_section() -> None:
    near = ["H04W4/00", "H04W8/00", "H04W12/00", "H04W24/00", "H04W28/00", "H04W36/00", "H04W48/00", "H04W72/00"]
    far = ["A61K9/00", "A61K31/00", "A61K35/00", "A61K38/00", "A61K39/00", "A61K47/00", "A61K49/00", "A61K51/00"]
    cv = train_code_vectors([*near, *far])  # no title list: the tree of the codes' shapes
    assert set(near + far) <= set(cv.codes) and {"H04W", "A61K", "H04", "A"} <= set(cv.codes)
    within = np.mean([cv.vectors[cv.row(a)] @ cv.vectors[cv.row(b)] for a in near for b in near if a != b])
    across = np.mean([cv.vectors[cv.row(a)] @ cv.vectors[cv.row(b)] for a in near for b in far])
    assert within > across + 0.2, (within, across)  # (measured: 0.99 against 0.70)
    with pytest.raises(NoCodes):
        train_code_vectors(["not a code"])


@pytest.mark.slow
def test_a_build_whose_ranker_reads_the_feature_has_the_vectors_and_search_reads_them(tmp_path: Path) -> None:
    """The build gives the index the part ``code_vectors`` only where the ranker reads ``code_embedding`` (over the
    corpus' own scheme, given as ``--cpc``); the evidence's column is the vectors' similarity of the query's predicted
    codes (the classifier's main groups) and each document's codes; without the part the column is 0."""
    from service.engine import Engine
    from service.index.folder import IndexFolder
    from service.schema import SearchRequest
    from service.settings import Settings
    from training.build import build_index
    from training.ranker import RANKER_FEATURES, TopicEvidence, install_into, learn, ranker_part, write_ranker
    from training.synth import SynthConfig, write_synthetic

    scheme = tmp_path / "scheme.tsv.gz"
    write_synthetic(tmp_path / "all.jsonl", SynthConfig(n=150, seed=7), scheme_path=scheme, progress=False)
    features = (*RANKER_FEATURES, CODE_EMBEDDING)
    rng = np.random.default_rng(3)  # a ranker that reads the feature (what it learned does not matter here)
    topics = [TopicEvidence(f"q{q}", [f"d{q}-{i}" for i in range(20)], rng.random((20, len(FEATURES))),
                            np.eye(20)[int(rng.integers(20))], []) for q in range(40)]
    model = learn("gbm", [t.only(features) for t in topics])
    folder = write_ranker(tmp_path / "ranker", ranker_part("gbm", model, docs=20, report={}, features=features))
    options = {"translation": False, "compounds": "", "progress": False, "cpc": scheme}
    build_index(tmp_path / "all.jsonl", tmp_path / "idx", ranker=folder, **options)
    index = IndexFolder.open(tmp_path / "idx")  # verified: the vectors are checksummed with the rest
    assert index.components["code_vectors"]["codes"] > 0 and "code_vectors/vectors.npy" in index.meta.files
    engine = Engine.load(tmp_path / "idx", settings=Settings(index_dir=tmp_path / "idx"))
    ev_step = engine.evidence
    assert ev_step.code_vectors is not None and ev_step.ranker is not None and CODE_EMBEDDING in ev_step.ranker.features
    rec = engine.docs.get_row(0)
    text = rec.title["en"] + " " + rec.abstract.get("en", "")
    cands, ev = first_evidence(engine, engine.query(SearchRequest(query=text, lang="en", k=20)), 20)
    assert ev is not None
    images, _ = engine.evidence.passage_query(text, "en")
    classified = engine.evidence.classify(images)
    assert classified is not None and classified["main_group"]
    held = [record_codes(engine.docs.header_row(int(r))) for r in cands.rows[:20]]
    got = ev.X[:, FEATURES.index(CODE_EMBEDDING)]
    assert np.allclose(got, engine.evidence.code_vectors.similarity(classified["main_group"], held))
    assert got.max() > 0.5 and got.min() < got.max()  # the documents differ in how close their codes are
    assert codes_at(record_codes(rec), "subclass")
    engine.close()
    build_index(tmp_path / "all.jsonl", tmp_path / "plain", ranker="none", **options)
    assert "code_vectors" not in IndexFolder.open(tmp_path / "plain").components
    plain = Engine.load(tmp_path / "plain", settings=Settings(index_dir=tmp_path / "plain"))
    _, ev = first_evidence(plain, plain.query(SearchRequest(query=text, lang="en", k=20)), 20)
    assert ev is not None and not ev.X[:, FEATURES.index(CODE_EMBEDDING)].any()
    plain.close()
    # `priorart install-ranker`: the ranker goes in with the vectors it reads; an index whose ranker reads them but
    # has none is ordered by the passage rule, and says so
    install_into(tmp_path / "plain", folder)
    assert IndexFolder.open(tmp_path / "plain").components["code_vectors"]["codes"] > 0
    plain = Engine.load(tmp_path / "plain", settings=Settings(index_dir=tmp_path / "plain"))
    assert plain.evidence.ranker is not None and plain.evidence.code_vectors is not None
    plain.close()
    IndexFolder.open(tmp_path / "plain").register({}, remove=["code_vectors"])
    plain = Engine.load(tmp_path / "plain", settings=Settings(index_dir=tmp_path / "plain"))
    assert plain.evidence.ranker is None and any("code-embedding feature" in n for n in plain.notices)
    plain.close()
