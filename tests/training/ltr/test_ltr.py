"""Learning to rank: the l1 SGD, the word-pair and domain models, LinLearn/Borda, train-ltr and the stages."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import numpy as np
import pytest

from service.corpus.jsonl import write_corpus
from service.corpus.record import Citation, Claim, PatentRecord
from service.retrieval.domain import FEATURES, DomainModel, DomainStore, normalise_name, normalise_ref, query_meta
from service.retrieval.wordpair import DocTermStore, WordPairModel, doc_term_hashes, pair_buckets, query_term_hashes
from training.ltr.linlearn import (
    CandidateList,
    LinLearnConfig,
    fit_pairwise_linear,
    list_measure,
    train_linlearn,
    tune_borda,
)
from training.ltr.wordpair import L1HingeSGD

# ------------------------------------------------------------------------------------ the l1 SGD


def _toy_tuples(rng: np.random.Generator, n: int, planted: int, noise: np.ndarray) -> list[tuple[np.ndarray,
                                                                                                 np.ndarray]]:
    """The better side always has the planted bucket; both sides draw noise buckets the same way."""
    out = []
    for _ in range(n):
        plus = np.concatenate([[planted], rng.choice(noise, 3, replace=False)])
        minus = rng.choice(noise, 3, replace=False)
        out.append((plus.astype(np.int64), minus.astype(np.int64)))
    return out


@pytest.mark.parametrize("l1", [0.0, 0.05])
def test_l1_sgd_learns_the_planted_feature_and_zeroes_the_noise(l1: float) -> None:
    rng = np.random.default_rng(0)
    noise = np.arange(1, 41)
    sgd = L1HingeSGD(64, lr=0.1, l1=l1)
    for plus, minus in _toy_tuples(rng, 3000, 0, noise):
        sgd.step(plus, minus)
    sgd.settle()
    assert sgd.w[0] > 0.5
    if l1:
        assert np.all(sgd.w[noise] == 0.0), "l1 clipping must leave the noise weights at exactly 0"
        assert np.count_nonzero(sgd.w) == 1
    else:  # the same data without l1 leaves noise weights behind: the zeros above come from the penalty
        assert np.count_nonzero(sgd.w[noise]) > 10


def test_cumulative_penalty_never_crosses_zero() -> None:
    sgd = L1HingeSGD(4, lr=1.0, l1=0.3)
    sgd.w[:] = [1.0, -1.0, 0.2, 0.0]
    sgd.u = 0.5  # penalty owed to every weight
    sgd.settle()
    assert sgd.w.tolist() == [0.5, -0.5, 0.0, 0.0]
    assert sgd.c.tolist() == [-0.5, 0.5, -0.2, 0.0]
    sgd.u = 0.7
    sgd.settle()  # only what is still owed is taken
    assert np.allclose(sgd.w, [0.3, -0.3, 0.0, 0.0])


def test_word_pair_sgd_learns_a_planted_translation() -> None:
    """German queries with 'pump' (stem of Pumpe) are relevant to documents with 'pump'; everything else is noise."""
    rng = np.random.default_rng(1)
    bits = 16
    vocab_q = [f"wort{i}" for i in range(30)]
    vocab_d = [f"word{i}" for i in range(30)]

    def tuple_(q: list[str]) -> tuple[np.ndarray, np.ndarray]:
        good = ["pump", *rng.choice(vocab_d, 5, replace=False)]
        bad = list(rng.choice(vocab_d, 6, replace=False))
        hq = query_term_hashes(q, "de")
        return (pair_buckets(hq, doc_term_hashes(good), bits).ravel(),
                pair_buckets(hq, doc_term_hashes(bad), bits).ravel())

    sgd = L1HingeSGD(2**bits, lr=0.05, l1=0.02)
    for _ in range(1500):
        sgd.step(*tuple_(["pump", *rng.choice(vocab_q, 4, replace=False)]))
    sgd.settle()
    model = WordPairModel.from_dense(sgd.w.astype(np.float32), {})
    planted = pair_buckets(query_term_hashes(["pump"], "de"), doc_term_hashes(["pump"]), bits)[0, 0]
    assert model.w[planted] == model.w.max() > 0
    assert model.nnz < 20  # sparse: the noise pairs are gone
    docs = [PatentRecord(id=f"US0000000{i}B1", country="US", number=f"0000000{i}", kind="B1", source="test",
                         claims={"en": [Claim(num=1, text=t)]})
            for i, t in enumerate(["a word3 word7 pump", "word3 word7 word9", "word1 word2"])]
    s = model.score("Eine Pumpe wort3 wort9", "de", docs)
    assert s[0] > s[1] and s[0] > s[2]


# ------------------------------------------------------------------------------ domain features


def _dom_rec(doc_id: str, **kw: object) -> PatentRecord:
    base: dict[str, object] = {"id": doc_id, "country": doc_id[:2], "number": doc_id[2:-2], "kind": doc_id[-2:],
                               "source": "test"}
    base.update(kw)
    return PatentRecord.model_validate(base)


def test_name_and_reference_normalisation() -> None:
    assert normalise_name("Landes, Greg M.") == normalise_name("Greg Landes") == "greg landes"
    assert normalise_name("Samsung Electronics Co., Ltd.") == normalise_name("SAMSUNG ELECTRONICS") == \
        "electronics samsung"
    assert normalise_name("Müller GmbH & Co. KG") == "muller"
    assert normalise_ref("US 06,837,151 B2") == normalise_ref("US6837151") == "US6837151"
    assert normalise_ref("EP0640886A1") == "EP640886"
    assert normalise_ref("not a number") is None


def test_domain_features_on_hand_made_records() -> None:
    docs = [
        _dom_rec("US00000010B1", ipc=["H01F27/14", "H01F27/16", "H02K1/00"], applicants=["ACME Corp."],
                 inventors=["Doe, Jane"], citations=[Citation(text="x", id="US5000000A"),
                                                     Citation(text="y", id="EP0640886A1")],
                 publication_date=date(2000, 1, 1), claims={"en": [Claim(num=1, text="coil core SO2 coil winding")]}),
        _dom_rec("EP0640886B1", ipc=["H02K3/00"], applicants=["Other AG"], inventors=["Jane Doe", "Max Mustermann"],
                 publication_date=date(2010, 7, 2), claims={"en": [Claim(num=1, text="motor stator")]}),
        _dom_rec("US00000030S1", claims={"en": [Claim(num=1, text="ornamental design")]}),
    ]
    store = DomainStore.from_records(docs)
    q = query_meta("A coil with SO2 and a housing", "en", codes=["H01F27/99", "H02K"], date_=date(2005, 1, 1))
    q.applicants, q.inventors = ["Acme Corporation"], ["J. Doe", "Jane Doe"]
    q.citations, q.own_id = ["US 5,000,000", "US00000030S1"], "US7777777B2"
    x = store.features(q, np.array([0, 1, 2]))
    assert x.shape == (3, len(FEATURES))
    f = {name: x[:, i].tolist() for i, name in enumerate(FEATURES)}
    # codes: query H01F27/99 and H02K (subclass only); doc 0 has H01F27/14, H01F27/16, H02K1/00
    assert f["codes_section_shared"] == [1, 1, 0]  # H
    assert f["codes_class_shared"] == [2, 1, 0]  # H01, H02
    assert f["codes_subclass_shared"] == [2, 1, 0]  # H01F, H02K
    assert f["codes_main_group_shared"] == [1, 0, 0]  # H01F27/00
    assert f["codes_subgroup_shared"] == [0, 0, 0]
    assert f["codes_main_group_any"] == [1, 0, 0] and f["codes_class_any"] == [1, 1, 0]
    assert f["doc_no_codes"] == [0, 0, 1]
    assert f["applicants_shared"] == [1, 0, 0]  # ACME Corp. == Acme Corporation
    assert f["inventors_shared"] == [1, 1, 0]  # 'Jane Doe' (J. Doe loses the initial: 'doe', no match)
    assert f["citations_shared"] == [1, 0, 0]  # US5000000
    assert f["query_cites_doc"] == [0, 0, 1]  # the query cites US00000030S1
    assert f["doc_cites_query"] == [0, 0, 0]
    assert f["doc_earlier"] == [1, 0, 0]
    assert np.allclose(f["years_apart"], [(date(2005, 1, 1) - date(2000, 1, 1)).days / 365.25,
                                          (date(2010, 7, 2) - date(2005, 1, 1)).days / 365.25, 0.0])
    assert f["date_unknown"] == [0, 0, 1]
    # query terms: coil, so2, hous (3 distinct, 4 analysed? 'a', 'with', 'and' are stop words)
    assert q.terms == ["coil", "so2", "hous"] and q.n_terms == 3
    assert f["identical_terms"] == [2, 0, 0] and np.allclose(f["identical_terms_frac"], [2 / 3, 0, 0])
    lengths = [5, 2, 2]  # analysed terms of each document's claims
    assert np.allclose(f["log_len_ratio"], [np.log(4 / (n + 1)) for n in lengths])
    assert np.allclose(f["abs_log_len_ratio"], np.abs(f["log_len_ratio"]))
    # a publication-number style query: the second document cites EP0640886 -> doc_cites_query for row 1? no:
    q2 = query_meta("motor", "en")
    q2.own_id = "EP0640886B1"
    assert store.features(q2, np.array([0, 1, 2]))[:, FEATURES.index("doc_cites_query")].tolist() == [1, 0, 0]
    assert store.features(q2, np.array([2, 0]))[:, FEATURES.index("doc_cites_query")].tolist() == [0, 1]
    # without a query date the date features do not fire
    x3 = store.features(query_meta("coil", "en"), np.array([0]))
    assert x3[0, FEATURES.index("doc_earlier")] == 0 and x3[0, FEATURES.index("date_unknown")] == 1


def test_domain_store_and_model_files(tmp_path: Path) -> None:
    docs = [_dom_rec("US00000010B1", ipc=["H01F27/14"], applicants=["ACME"],
                     claims={"en": [Claim(num=1, text="coil")]}),
            _dom_rec("US00000011B1", claims={"en": [Claim(num=1, text="valve")]})]
    terms = DocTermStore.from_records(docs)
    store = DomainStore.from_records(docs, terms)
    terms.save(tmp_path)
    store.save(tmp_path)
    back = DomainStore.load(tmp_path, DocTermStore.load(tmp_path))
    q = query_meta("coil", "en", codes=["H01F27/14"])
    assert np.array_equal(back.features(q, np.array([0, 1])), store.features(q, np.array([0, 1])))
    assert back.row_meta(0)["applicants"] == ["acme"] and back.row_meta(1)["date"] is None
    model = DomainModel(["codes_subgroup_any", "identical_terms"], np.array([0.5, 0.0]), np.array([0.5, 1.0]),
                        np.array([2.0, 1.0]))
    assert np.allclose(model.score(store.features(q, np.array([0, 1]))), [2.0 + 1.0, -2.0])
    model.save(tmp_path / "domain.json")
    assert np.allclose(DomainModel.load(tmp_path / "domain.json").weights, [2.0, 1.0])


# ------------------------------------------------------------------------------- LinLearn / Borda


def _toy_lists(rng: np.random.Generator, w_true: np.ndarray, n_q: int = 60, n_c: int = 30) -> list[CandidateList]:
    lists = []
    for q in range(n_q):
        x = rng.random((n_c, len(w_true)))
        util = x @ w_true + rng.normal(scale=0.02, size=n_c)
        rels = np.zeros(n_c, dtype=np.int64)
        rels[np.argsort(-util)[:3]] = 1
        # the lists hold raw scores; min-max per list is what LinLearn sees, so rescale them per list
        scores = {f"s{k}": x[:, k] * (k + 1) * 10 + k for k in range(len(w_true))}
        lists.append(CandidateList(f"q{q}", [f"d{i}" for i in range(n_c)], scores, rels, 3))
    return lists


def test_linlearn_recovers_a_planted_weight_direction() -> None:
    rng = np.random.default_rng(3)
    w_true = np.array([0.7, -0.2, 0.0, 0.5])
    lists = _toy_lists(rng, w_true)
    res = train_linlearn(lists, [f"s{k}" for k in range(4)], LinLearnConfig(epochs=80, l1=1e-4, lr=0.05))
    w = np.array([res.weights[f"s{k}"] for k in range(4)])
    # min-max keeps each feature in [0, 1] exactly as generated, so the direction is comparable
    cos = float(w @ w_true / np.linalg.norm(w) / np.linalg.norm(w_true))
    assert cos > 0.97, (w, cos)
    assert res.weights["s1"] < 0 < res.weights["s0"]
    assert res.dev > 0.8 and res.pairs == 60 * 3 * 27


def test_pairwise_linear_l1_drops_an_irrelevant_feature() -> None:
    rng = np.random.default_rng(4)
    x = rng.normal(size=(2000, 3))
    diffs = x[x[:, 0] > 0]  # pairs whose sign is set by feature 0 only
    w, history = fit_pairwise_linear(diffs, 3, epochs=30, lr=0.05, l1=0.3, margin=1.0)
    assert w[0] > 0 and w[1] == 0.0 and w[2] == 0.0
    assert len(history) == 30 and history[-1]["nnz"] == 1


def test_borda_weight_is_tuned_on_dev_lists() -> None:
    rng = np.random.default_rng(5)
    lists = []
    for q in range(20):
        rels = np.zeros(20, dtype=np.int64)
        rels[q % 20] = 1
        good = rels + rng.random(20) * 0.5  # ranks the relevant document first
        lists.append(CandidateList(f"q{q}", [f"d{i}" for i in range(20)],
                                   {"good": good, "noise": rng.random(20)}, rels, 1))
    kappa, best, curve = tune_borda(lists, "good", "noise", step=0.1)
    assert best == 1.0 and kappa >= 0.5 and len(curve) == 11
    assert dict(curve)[0.0] < 1.0
    kappa2, _, _ = tune_borda(lists, "noise", "good", step=0.1)
    assert kappa2 <= 0.5


def test_list_measures_by_hand() -> None:
    rels = np.array([0, 1, 0, 1])
    fused = np.array([0.9, 0.8, 0.7, 0.1])
    assert list_measure(fused, rels, 2, "mrr") == 0.5
    assert list_measure(fused, rels, 2, "map") == pytest.approx((1 / 2 + 2 / 4) / 2)
    assert list_measure(fused, rels, 3, "map") == pytest.approx((1 / 2 + 2 / 4) / 3)  # one relevant never retrieved


# ------------------------------------------------------------------ train-ltr and the service stages


@pytest.fixture(scope="module")
def synth_setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """Synthetic patents whose trilingual grants are renamed EP grants, indexed in English only: the xling
    dev task suits the index, so the combination is learned on leak-free dev topics. 10 s: the tests that use it
    are marked slow."""
    from training.build import build_index
    from training.synth import generate

    root = tmp_path_factory.mktemp("ltr")
    corpus = root / "corpus.jsonl"
    records = []
    for r in generate(160, seed=3):
        if r.kind == "B1" and r.claims.get("de") and r.claims.get("fr"):
            r = r.model_copy(update={"id": "EP" + r.id[2:], "country": "EP"})
        records.append(r)
    write_corpus(records, corpus)
    build_index(corpus, root / "index", index_langs="en", progress=False)
    return corpus, root / "models", root / "index"


@pytest.mark.slow
def test_learn_combination_installs_only_what_beats_bm25() -> None:
    from training.ltr.train import TrainLtrConfig, learn_combination

    rng = np.random.default_rng(5)
    lists = []
    for i in range(20):
        rels = np.zeros(30, dtype=np.int64)
        rels[rng.choice(30, 2, replace=False)] = 1
        scores = {"bm25": rng.normal(size=30) + 0.3 * rels, "wordpair": rng.normal(size=30) + 3.0 * rels,
                  "domain": rng.normal(size=30)}
        lists.append(CandidateList(f"G{i // 2}-{'de' if i % 2 else 'fr'}:nocodes", [f"d{j}" for j in range(30)],
                                   scores, rels, 2))
    out = learn_combination(lists, TrainLtrConfig())
    assert out["systems"] == ["bm25", "wordpair", "domain"] and out["borda_pair"] == "bm25+wordpair"
    assert out["linlearn"]["installable"] and out["borda"]["installable"]
    assert out["cv_map"]["linlearn"] > out["cv_map"]["bm25"] and out["linlearn"]["weights"]["wordpair"] > 0
    for c in lists:  # nothing better than BM25 left: neither is installable
        c.scores["wordpair"] = rng.normal(size=30)
        c.scores["bm25"] = c.scores["bm25"] + 10.0 * c.rels
    out = learn_combination(lists, TrainLtrConfig())
    assert not out["linlearn"]["installable"] and not out["borda"]["installable"]


@pytest.mark.slow
def test_train_ltr_writes_a_folder_the_service_loads(synth_setup: tuple[Path, Path, Path]) -> None:
    from service.index.folder import IndexFolder, load_meta
    from service.index.store import DocStore
    from service.pipeline import compose
    from service.query import Query
    from service.settings import Settings
    from service.stages.ltr import LtrFolderError, load_ltr_stages
    from training.ltr.data import LtrConfig
    from training.ltr.domain import DomainConfig
    from training.ltr.train import TrainLtrConfig, install_ltr, topic_fields, train_ltr
    from training.ltr.wordpair import WordPairConfig

    corpus, models, index = synth_setup
    cfg = TrainLtrConfig(ltr=LtrConfig(max_train_topics=60, max_dev_topics=15),
                         wordpair=WordPairConfig(epochs=2, l1_grid=(1e-3,), bits=16),
                         domain=DomainConfig(epochs=3), depth=30)
    out = train_ltr(corpus, models, index, cfg, install=True)
    meta = out.meta
    assert (models / "ltr" / "meta.json").is_file() and (index / "ltr" / "meta.json").is_file()
    assert meta["split"]["source"] == "make_split"
    assert set(meta["files"]) >= {"wordpair/wordpair.json", "wordpair/wordpair.indices.npy", "domain.json",
                                  "docside/terms.ids.npy", "docside/domain.refs.ids.npy"}
    comb = meta["dev"]["combination"]
    assert comb is not None and comb["tasks"]["xling"] > 0 and comb["topics"] > 0  # leak-free xling dev topics
    assert {"bm25", "wordpair"} <= set(comb["systems"])
    fusion = json.loads((index / "fusion.json").read_text())
    for method in ("borda", "linlearn"):  # in fusion.json exactly when it beat BM25 on the held-out folds
        assert (fusion[method] is not None) == comb[method]["installable"]
    assert json.loads((index / "meta.json").read_text())["components"]["ltr"]["folder"] == "ltr"
    folder = IndexFolder.open(index)
    install_ltr(models / "ltr", folder, {"folder": "ltr", "again": True})  # a second install replaces the first
    assert load_meta(index, verify=True).components["ltr"]["again"] is True
    assert topic_fields("EP1:ta.de") >= {"title", "abstract"} and topic_fields("EP1:claim2.fr") == {"claims"}

    pipe = compose(IndexFolder.open(index), Settings(index_dir=index))
    assert pipe.names == ["resolve", "bm25", "dense", "wordpair", "domain", "fusion", "evidence", "collapse", "explain"]
    docs = pipe.docs
    text = docs.get_row(0).text("en", ("title", "abstract"))
    for method in pipe.fusion.model.methods:
        q = Query(text=text, lang="en", k=5, depth=30, fusion=method)
        cands, _ = pipe.run(q)
        assert len(cands) == 5 and set(cands.scores) == {"bm25", "dense", "wordpair"} and cands.skipped["domain"]
        assert cands.fusion is not None and cands.fusion.method == method
    # the stages score exactly what the trained models score
    wp = WordPairModel.load(models / "ltr" / "wordpair")
    records = [docs.get_row(int(r)) for r in cands.rows]
    assert np.allclose(cands.scores["wordpair"], wp.score(text, "en", records), atol=1e-4)
    # a publication-number query: the domain step applies and takes the record's metadata from its store row
    q = Query(text=docs.ids[3], k=5, depth=30)
    cands, _ = pipe.run(q)
    assert docs.ids[3] not in [docs.ids[int(r)] for r in cands.rows] and "domain" in cands.scores
    # an ltr folder built for another index refuses to load
    ids_path = index / "doc_ids.json"
    saved = ids_path.read_text()
    try:
        ids_path.write_text(json.dumps(list(reversed(json.loads(saved)))))
        folder = IndexFolder.open(index, verify=False)
        folder.meta.files["doc_ids.json"]["sha256"] = "0" * 64
        with pytest.raises(LtrFolderError, match="another index"):
            load_ltr_stages(folder, DocStore.load(index))
    finally:
        ids_path.write_text(saved)


# ------------------------------------------------------------------------------------ experiment


@pytest.mark.slow
def test_ltr_experiment_cross_fits_and_writes_its_reports(tmp_path: Path) -> None:
    """The cross-fitted experiment on synthetic patents whose trilingual grants are renamed EP grants."""
    from lab.experiments.ltr import LtrExperimentSettings, run_ltr_experiment
    from training.ltr.domain import DomainConfig
    from training.ltr.wordpair import WordPairConfig
    from training.synth import generate

    records = []
    for r in generate(60, seed=3):
        if r.kind == "B1" and r.claims.get("de"):
            r = r.model_copy(update={"id": "EP" + r.id[2:], "country": "EP"})
        records.append(r)
    s = LtrExperimentSettings(folds=3, wordpair=WordPairConfig(epochs=1, l1_grid=(1e-3,), bits=16),
                              domain=DomainConfig(epochs=2), permutations=200, dictd_dir=str(tmp_path / "none"))
    res = run_ltr_experiment(None, s, records=records, out_dir=tmp_path / "out", progress=False)
    grants = {r.id for r in records if r.country == "EP"}
    assert res.topics == 2 * len(grants) and res.systems == ["bm25", "psq", "wordpair", "domain"]
    assert {"borda(bm25+psq)", "borda(wordpair+domain)", "linlearn(all)", "linlearn(wordpair+domain)"} <= set(res.rows)
    assert len(res.rows) == 4 + 6 + 2
    assert all(0 <= p <= 1 for p in res.p_values.values()) and res.best_single not in res.p_values
    assert [f["round"] for f in res.folds] == ["fold0", "fold1", "fold2"]
    assert any("lexicon" in n for n in res.notes)  # no FreeDict in tmp_path: psq uses the aligned model alone
    out = tmp_path / "out"
    for name in ("ltr.json", "ltr.md", "qrels.txt", "runs/linlearn-all.run", "orthogonality/orthogonality.png"):
        assert (out / name).is_file(), name
    from training.evaluation.trec import read_run

    assert len(read_run(out / "runs" / "wordpair.run")) == res.topics
