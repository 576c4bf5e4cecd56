"""Index folder: meta.json writer/verifying loader, and the doc store (ids, dates, codes)."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import numpy as np
import pytest

from service.codes import truncate_code
from service.corpus.ids import looks_like_pub_id, normalise_pub_id
from service.corpus.record import Claim, PatentRecord
from service.index.folder import BuildSettings, IndexFormatError, Layout, load_meta, update_meta, write_meta
from service.index.store import DocStore, DocStoreWriter, UnknownDocumentError

SETTINGS = {
    "fields": ["title", "claims"],
    "index_langs": ["en"],
    "scoring": "bm25",
    "k1": 1.2,
    "b": 0.75,
    "epsilon": 0.25,
}


def _rec(pid: str, day: date | None, ipc: list[str], cpc: tuple[str, ...] = (), title: str = "t") -> PatentRecord:
    return PatentRecord(
        id=pid,
        country=pid[:2],
        number=pid[2:-2],
        kind=pid[-2:],
        source="synth",
        publication_date=day,
        title={"en": title},
        claims={"en": [Claim(num=1, text=f"claim of {pid}")]},
        ipc=ipc,
        cpc=list(cpc),
        lang="en",
    )


RECORDS = [
    _rec("EP0640886B1", date(1995, 3, 1), ["H01F 27/14"], ("H01F27/2823",), "transformer"),
    _rec("EP0640886A1", date(1994, 1, 5), ["H01F27/14"]),
    _rec("US07861316B2", date(2011, 1, 4), ["B05B7/00", "H01F38/00"], title="spray"),
    _rec("EP1000000A1", None, ["A61K"]),
]


def _folder(tmp_path: Path) -> Path:
    d = tmp_path / "idx"
    with DocStoreWriter(d) as w:
        for r in RECORDS:
            w.add(r)
    (d / "bm25" / "en").mkdir(parents=True)
    (d / "bm25" / "en" / "x.npy").write_bytes(b"0123456789")
    write_meta(d, SETTINGS, {"bm25": {"en": {"dir": "bm25/en"}}})
    return d


def test_meta_lists_every_file_with_checksum(tmp_path: Path) -> None:
    d = _folder(tmp_path)
    meta = load_meta(d)
    data = json.loads((d / "meta.json").read_text())
    assert data["format"] == "priorart-index" and data["version"] == 2 and data["priorart_version"]
    assert set(meta.files) >= {
        "docs.jsonl",
        "docs.offsets.npy",
        "doc_ids.json",
        "docs.dates.npy",
        "codes/subclass.json",
        "bm25/en/x.npy",
    }
    assert "meta.json" not in meta.files
    assert meta.files["bm25/en/x.npy"]["bytes"] == 10 and len(meta.files["bm25/en/x.npy"]["sha256"]) == 64
    assert meta.settings.to_dict() == SETTINGS and meta.components["bm25"]["en"]["dir"] == "bm25/en"


def test_load_refuses_missing_meta(tmp_path: Path) -> None:
    d = _folder(tmp_path)
    (d / "meta.json").unlink()
    with pytest.raises(IndexFormatError, match="meta.json is missing"):
        load_meta(d)
    with pytest.raises(IndexFormatError, match="does not exist"):
        load_meta(tmp_path / "nowhere")


@pytest.mark.parametrize(("key", "value", "message"),
                         [("format", "other", "format"), ("version", 1, "version 1.*rebuild")])
def test_load_refuses_other_format_or_version(tmp_path: Path, key: str, value: object, message: str) -> None:
    d = _folder(tmp_path)
    data = json.loads((d / "meta.json").read_text())
    data[key] = value
    (d / "meta.json").write_text(json.dumps(data))
    with pytest.raises(IndexFormatError, match=message):
        load_meta(d)


def test_load_refuses_missing_file(tmp_path: Path) -> None:
    d = _folder(tmp_path)
    (d / "bm25" / "en" / "x.npy").unlink()
    with pytest.raises(IndexFormatError, match=r"x\.npy is listed in meta.json but missing"):
        load_meta(d)


def test_load_refuses_size_and_checksum_mismatch(tmp_path: Path) -> None:
    d = _folder(tmp_path)
    f = d / "bm25" / "en" / "x.npy"
    f.write_bytes(b"01234567890")
    with pytest.raises(IndexFormatError, match=r"x\.npy has 11 bytes"):
        load_meta(d)
    f.write_bytes(b"0123456780")  # same size, one byte changed
    load_meta(d, verify=False)  # size-only check passes
    with pytest.raises(IndexFormatError, match=r"x\.npy: sha256 checksum does not match"):
        load_meta(d)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"scoring": "bm99"}, "scoring"),
        ({"k1": "high"}, "k1"),
        ({"index_langs": ["en", "xx"]}, "index_langs"),
        ({"surprise": 1}, "unexpected setting"),
    ],
)
def test_load_refuses_unexpected_settings(tmp_path: Path, change: dict[str, object], message: str) -> None:
    d = _folder(tmp_path)
    data = json.loads((d / "meta.json").read_text())
    data["settings"].update(change)
    (d / "meta.json").write_text(json.dumps(data))
    with pytest.raises(IndexFormatError, match=message):
        load_meta(d)


def test_build_settings_are_checked_when_made_and_round_trip_through_meta(tmp_path: Path) -> None:
    made = BuildSettings(fields=("title", "claims"), index_langs=("en",), scoring="bm25", k1=1.2, b=0.75, epsilon=0.25)
    assert made.to_dict() == SETTINGS and BuildSettings.from_dict(SETTINGS) == made
    assert BuildSettings(fields=["claims"], index_langs=["en"], scoring="bm25", k1=1.2, b=0.75,  # type: ignore[arg-type]
                         epsilon=0.25).fields == ("claims",)  # lists (a meta.json's) become tuples
    d = _folder(tmp_path)
    assert load_meta(d).settings == made and write_meta(d, made, {}).settings == made
    for bad, message in (({"k1": -1.0}, "k1 must be a number"), ({"fields": []}, "non-empty list"),
                         ({"index_langs": ["en", "en"]}, "lists a value twice")):
        with pytest.raises(ValueError, match=message):
            BuildSettings.from_dict({**SETTINGS, **bad})
    with pytest.raises(ValueError, match="missing setting"):
        BuildSettings.from_dict({k: v for k, v in SETTINGS.items() if k != "b"})


def test_load_checks_expected_settings(tmp_path: Path) -> None:
    d = _folder(tmp_path)
    load_meta(d, expected_settings={"scoring": "bm25"})
    with pytest.raises(IndexFormatError, match="'scoring' is 'bm25', expected 'tfidf'"):
        load_meta(d, expected_settings={"scoring": "tfidf"})


def test_update_meta_adds_files_and_components(tmp_path: Path) -> None:
    d = _folder(tmp_path)
    (d / "models").mkdir()
    (d / "models" / "ranker.onnx").write_bytes(b"onnx")
    meta = update_meta(d, {"models": {"ranker": "models/ranker.onnx"}})
    assert "models/ranker.onnx" in meta.files and meta.components["models"]["ranker"] == "models/ranker.onnx"
    assert "bm25" in meta.components and meta.updated
    assert load_meta(d).files["models/ranker.onnx"]["bytes"] == 4
    # a folder whose listed files changed is not re-blessed
    (d / "bm25" / "en" / "x.npy").write_bytes(b"9999999999")
    with pytest.raises(IndexFormatError, match="checksum"):
        update_meta(d, {"dense": {}})


def test_doc_store_random_access_and_tolerant_ids(tmp_path: Path) -> None:
    store = DocStore.load(_folder(tmp_path))
    assert len(store) == 4
    assert store.get("EP0640886B1") == RECORDS[0]
    assert store.get_row(2) == RECORDS[2]
    assert store.row("ep 0640886 b1") == 0
    assert store.row("US7861316B2") == 2  # leading zeros
    assert store.row("US 7,861,316 B2") == 2
    assert store.row("US7861316") == 2  # unique without kind code
    with pytest.raises(UnknownDocumentError, match="several"):
        store.row("EP0640886")
    with pytest.raises(UnknownDocumentError, match="not in this index"):
        store.row("EP9999999A1")
    assert store.find("EP9999999A1") is None
    with pytest.raises(IndexError):
        store.get_row(4)


def test_doc_store_headers_are_records_without_texts(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import service.index.store as store_mod

    folder = _folder(tmp_path)
    store = DocStore.load(folder)
    for row, rec in enumerate(RECORDS):
        head = store.header_row(row)
        assert head == rec.model_copy(update={"claims": {}})  # every field a hit list shows, no texts
        assert head.claims == {} and store.get_row(row).claims == rec.claims
    with pytest.raises(IndexError):
        store.header_row(len(RECORDS))
    # parsed headers are kept for the rows shown last (bounded), the same record again without a read
    assert store.header_row(1) is store.header_row(1)
    store.close()
    monkeypatch.setattr(store_mod, "HEADER_CACHE_ROWS", 2)
    store = DocStore.load(folder)
    for row in (0, 1, 0, 2):
        store.header_row(row)
    assert list(store._header_cache) == [0, 2]  # the least recently shown (1) left first
    assert store.header_row(1) == RECORDS[1].model_copy(update={"claims": {}})
    store.close()
    # an index built before headers were stored: whole records, and a warning that says to rebuild
    (folder / Layout.HEADERS).unlink()
    (folder / Layout.HEADER_OFFSETS).unlink()
    with caplog.at_level("WARNING"):
        old = DocStore.load(folder)
    assert "rebuild the index" in caplog.text
    assert old.header_row(2) == RECORDS[2]


def test_doc_store_date_and_code_filters(tmp_path: Path) -> None:
    store = DocStore.load(_folder(tmp_path))
    assert store.date_mask(date(1995, 3, 1)).tolist() == [False, True, False, False]  # strictly before; None out
    assert store.date_mask(date(2020, 1, 1)).tolist() == [True, True, True, False]
    assert store.code_mask(["H01F27/99"], "subclass").tolist() == [True, True, True, False]
    assert store.code_mask(["H01F27/99"], "main_group").tolist() == [True, True, False, False]
    assert store.code_mask(["H01F 27/2823"], "subgroup").tolist() == [True, False, False, False]  # from CPC
    assert store.code_mask(["H01F38/00"], "main_group").tolist() == [False, False, True, False]
    assert store.code_mask(["H"], "section").tolist() == [True, True, True, False]
    assert store.code_mask(["A61K"], "subclass").tolist() == [False, False, False, True]
    assert store.code_mask(["A61K"], "class").tolist() == [False, False, False, True]
    assert not store.code_mask(["G06F17/30"], "subgroup").any()
    with pytest.raises(ValueError, match="coarser"):
        store.code_mask(["H01F"], "main_group")
    with pytest.raises(ValueError, match="not a classification code"):
        store.code_mask(["hello"], "subclass")
    with pytest.raises(ValueError, match="subclass"):
        store.code_mask(["H01F"], "group")
    assert store.code_vocabulary("subclass") == ["A61K", "B05B", "H01F"]
    assert isinstance(store.dates, np.ndarray)


def test_doc_store_refuses_duplicate_ids(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="duplicate"), DocStoreWriter(tmp_path / "d") as w:
        w.add(RECORDS[0])
        w.add(RECORDS[0])


def test_code_truncation_and_id_helpers() -> None:
    assert [truncate_code("H01F27/14", lvl) for lvl in ("section", "class", "subclass", "main_group", "subgroup")] == [
        "H",
        "H01",
        "H01F",
        "H01F27/00",
        "H01F27/14",
    ]
    assert truncate_code("H01F", "main_group") is None
    assert normalise_pub_id(" ep-0640886 b1 ") == "EP0640886B1"
    assert looks_like_pub_id("EP0640886B1") and looks_like_pub_id("us 7,861,316 b2")
    assert not looks_like_pub_id("a transformer core") and not looks_like_pub_id("SO2 1234")
