"""The live index (issue 18): add / replace / delete equal a full build, generations, crashes, bad input."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from service.corpus.jsonl import read_corpus, write_corpus
from service.corpus.record import PatentRecord
from service.engine import Engine
from service.index.folder import IndexFolder, IndexFormatError, Layout, current_generation
from service.index.live import LiveIndexError, add_documents, compact, delete_documents
from service.index.parts import INDEX_PARTS, open_part
from service.query import resolve
from service.retrieval.segments import SparseGeneration
from service.schema import PassageRequest, SearchRequest
from service.settings import Settings
from training.build import build_index

REPO = Path(__file__).resolve().parents[3]


def _top(engine: Engine, text: str, lang: str, k: int = 100,
         evidence_docs: int | None = None) -> list[tuple[str, float, float | None]]:
    res = engine.search(SearchRequest(query=text, lang=lang, k=k, evidence_docs=evidence_docs))
    return [(h.id, h.score, h.components["bm25"]) for h in res.results]


def _assert_same(live: Engine, full: Engine, queries: list[tuple[str, str]], evidence_docs: int | None = None) -> int:
    """/search on both engines: the same ids and scores (``evidence_docs`` None: the first 10 ordered by passage
    evidence, as by default)."""
    compared = 0
    for text, lang in queries:
        a, b = _top(live, text, lang, evidence_docs=evidence_docs), _top(full, text, lang, evidence_docs=evidence_docs)
        assert [x[0] for x in a] == [x[0] for x in b], f"{lang} query {text[:60]!r}: different ids"
        for (_, sa, ba), (_, sb, bb) in zip(a, b, strict=True):
            assert sa == pytest.approx(sb, rel=1e-9, abs=1e-12)
            assert ba == pytest.approx(bb, rel=1e-9, abs=1e-12)
        compared += len(a)
    return compared


def _assert_same_passages(live: Engine, work: Path, queries: list[tuple[str, str]]) -> int:
    """The generation's passages, searched segment by segment in place, against the segments joined into one
    folder: the same hits (ids, texts, highlights) and scores, for each query's /passages candidates."""
    from service.passages import PassageIndex
    from service.passages.builder import concat_passage_indexes
    from service.passages.segments import PassageGeneration

    seg = live.evidence.passage_index()
    assert isinstance(seg, PassageGeneration)
    parts = [s.folder.path(Layout.PASSAGES) for s in live.folder.segments]
    gone = np.concatenate([s.start + s.deleted for s in live.folder.segments])
    joined = PassageGeneration([PassageIndex.open(work / "joined", info=concat_passage_indexes(parts,
                                                                                                   work / "joined"))],
                                   deleted=[gone])
    compared = 0
    for text, lang in queries:
        images, words = live.evidence.passage_query(text, lang)
        query = live.query(SearchRequest(query=text, lang=lang), depth=100)
        query.k = query.depth
        cands = live.pipeline.run(query)[0]
        a, b = (p.rank(images, lang, cands.rows, cands.fused, words=words, analyzers=live.resources.analyzers,
                       langs=set(images), k=20) for p in (seg, joined))
        assert [(h.passage_id, h.text, h.highlights) for h in a.hits] == [(h.passage_id, h.text, h.highlights)
                                                                          for h in b.hits], f"{lang}: {text[:60]!r}"
        np.testing.assert_allclose([h.score for h in a.hits], [h.score for h in b.hits], rtol=1e-9, atol=1e-12)
        compared += len(a.hits)
    return compared


def _queries(records: list[PatentRecord]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for lang in ("de", "fr", "en"):
        with_text = [r for r in records if r.claims.get(lang)]
        for rec in with_text[:: max(1, len(with_text) // 3)][:3]:
            out.append((" ".join(c.text for c in rec.claims[lang][:2])[:800], lang))
        titled = [r for r in records if lang in r.title]
        out.append((titled[len(titled) // 2].title[lang], lang))
    return out


@pytest.mark.realdata
@pytest.mark.slow
def test_three_adds_with_replace_and_delete_equal_one_build(real_corpus: Path, real_translation: Path,
                                                             tmp_path: Path) -> None:
    records = list(read_corpus(real_corpus))
    assert len(records) > 400
    b1, b2, b3 = records[:200], records[200:350], records[350:]
    live = tmp_path / "live"
    build_index(b1, live, translation_dir=real_translation, progress=False)
    replaced = b1[10]
    new_text = {**replaced.abstract, "en": "A replaced abstract about an electric motor winding and its rotor."}
    replacement = replaced.model_copy(update={"abstract": new_text})
    r1 = add_documents(live, [*b2, replacement], progress=False)
    assert (r1.generation, r1.added, r1.replaced) == (1, len(b2), 1)
    gone = [b1[20].id, b2[50].id]
    r2 = delete_documents(live, gone)
    assert (r2.generation, r2.deleted) == (2, 2)
    r3 = add_documents(live, b3, progress=False)
    assert r3.generation == 3 and r3.segments == 3
    # the same final collection in the live row order, built at once with every learned part of the live index
    # (`priorart build --like`: tables, word lists, word vectors, code classifier, ranker, fusion, encoder maps)
    final = [r for r in b1 if r.id not in {replaced.id, *gone}] + [r for r in b2 if r.id not in gone]
    final += [replacement, *b3]
    full = tmp_path / "full"
    build_index(final, full, like=live, progress=False)
    theirs, mine = IndexFolder.open(live), IndexFolder.open(full)
    for name in ("translation", "analysis", "ranker", "word_vectors", "code_classifier", "fusion"):
        assert INDEX_PARTS[name].present(theirs) and INDEX_PARTS[name].present(mine), name  # there, to be the same
    vt, vm = open_part("word_vectors", theirs), open_part("word_vectors", mine)
    assert vt.keys == vm.keys and np.array_equal(vt.vectors, vm.vectors)
    assert theirs.meta.components["encoder"]["doc_maps"]["sha256"] == mine.meta.components["encoder"]["doc_maps"][
        "sha256"]
    e_live = Engine.load(live, settings=Settings(index_dir=live))
    e_full = Engine.load(full, settings=Settings(index_dir=full))
    assert e_live.generation == 3 and e_live.num_docs == e_full.num_docs == len(final)
    # /search with passage evidence (the first 10 by their best passage): the deleted rows' text has left the
    # passages' collection model, as one build of the live documents has it
    compared = _assert_same(e_live, e_full, _queries(final))
    print(f"\nlive (3 segments, 1 replace, 2 deletes) vs one build: {compared} hits equal")
    for text, lang in _queries(final):
        a, b = (e.passages(PassageRequest(query=text, lang=lang, k=20)) for e in (e_live, e_full))
        assert [(h.passage_id, h.text) for h in a.results] == [(h.passage_id, h.text) for h in b.results]
        np.testing.assert_allclose([h.score for h in a.results], [h.score for h in b.results], rtol=1e-9, atol=1e-12)
    passages = _assert_same_passages(e_live, tmp_path, _queries(final))
    print(f"passages searched in the 3 segments vs the segments joined: {passages} passages equal")
    for pid in gone:
        assert e_live.document(pid) is None
    assert e_live.document(replaced.id).abstract["en"].startswith("A replaced abstract")  # type: ignore[union-attr]
    # the query language (issue 61 item 3): its word index in every segment, read as one row space, matches what one
    # build's matches, for queries of every operator and field; a Boolean /search ranks as the build's
    from querylang_reference import generate

    boolean = generate([json.loads(r.model_dump_json()) for r in final], 80, seed=3)
    for text in boolean:
        sets = []
        for e in (e_live, e_full):
            q = e.query(SearchRequest(query=text, syntax="query"))
            r = resolve(q, e.docs, e.resources)
            sets.append({e.docs.ids[i] for i in np.flatnonzero(r.mask if r.mask is not None else [])})
        assert sets[0] == sets[1], text
    for text in boolean[:10]:
        a, b = (e.search(SearchRequest(query=text, k=10)) for e in (e_live, e_full))
        assert [h.id for h in a.results] == [h.id for h in b.results], text
    res = e_live.search(SearchRequest(query=replacement.title.get("en") or "motor", lang="en", k=1000))
    assert not {h.id for h in res.results} & set(gone) and res.generation == 3
    # compaction: one segment, the same results
    rc = compact(live, progress=False)
    assert rc.segments == 1 and rc.generation == 4
    e_comp = Engine.load(live, settings=Settings(index_dir=live))
    assert len(e_comp.folder.segments) == 1
    _assert_same(e_comp, e_full, _queries(final)[:3])  # with passage evidence: no deleted row is left


# ------------------------------------------------------------------------------------------ synthetic


def _synth(path: Path, n: int, seed: int = 0) -> list[PatentRecord]:
    """``n`` synthetic records, each cut to its first two description sections and three claims per language: the
    crash trials below run the CLI dozens of times, and a write meets the same steps whatever the text's length."""
    from training.synth import SynthConfig, write_synthetic

    write_synthetic(path, SynthConfig(n=n, seed=seed), progress=False)
    return [r.model_copy(update={"description": r.description[:2],
                                 "claims": {lang: claims[:3] for lang, claims in r.claims.items()}})
            for r in read_corpus(path)]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[PatentRecord]]:
    d = tmp_path_factory.mktemp("live-small")
    records = _synth(d / "all.jsonl", 260)
    return d, records


def _base(d: Path, records: list[PatentRecord], name: str) -> Path:
    out = d / name
    build_index(records[:150], out, translation=False, compounds="", progress=False)
    return out


@pytest.mark.slow
def test_older_folder_is_generation_zero_and_bad_input_changes_nothing(small: tuple[Path, list[PatentRecord]]) -> None:
    d, records = small
    idx = _base(d, records, "bad-input")
    folder = IndexFolder.open(idx)
    assert folder.generation == 0 and not folder.is_live and folder.n_live == 150
    bad = d / "bad.jsonl"
    write_corpus(records[150:160], bad)
    with open(bad, "a", encoding="utf-8") as fh:
        fh.write('{"id": "EP1", "title": 5}\n')
    from service.corpus.jsonl import CorpusFormatError

    with pytest.raises(CorpusFormatError):
        add_documents(idx, read_corpus(bad), progress=False)
    with pytest.raises(LiveIndexError, match="twice"):
        add_documents(idx, [records[151], records[151]], progress=False)
    with pytest.raises(LiveIndexError, match="not in the index"):
        delete_documents(idx, ["EP9999999A1"])
    assert current_generation(idx) == 0 and not (idx / Layout.SEGMENTS).exists()


def test_disk_full_leaves_the_index_unchanged(small: tuple[Path, list[PatentRecord]],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    d, records = small
    idx = _base(d, records, "disk-full")

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("service.index.live.write_meta", full)
    with pytest.raises(LiveIndexError, match="no space left.*unchanged at generation 0"):
        add_documents(idx, records[150:170], progress=False)
    monkeypatch.undo()
    assert current_generation(idx) == 0 and not any((idx / Layout.SEGMENTS).iterdir())
    assert add_documents(idx, records[150:170], progress=False).generation == 1


def test_adds_merge_small_segments_by_tier_and_leave_the_build_alone(small: tuple[Path, list[PatentRecord]]) -> None:
    """Four adds of 10 (tier 1 of MERGE_FACTOR 4; the build's 150: tier 3): the fourth merges the four added segments
    into one, a generation of its own, and the build's segment is not rewritten; the results equal one build."""
    from service.index.live import MERGE_FACTOR

    d, records = small
    idx = _base(d, records, "tiers")
    root_meta = (idx / Layout.META).read_bytes()
    reports = [add_documents(idx, records[150 + 10 * i: 160 + 10 * i], progress=False) for i in range(MERGE_FACTOR)]
    assert [r.merges for r in reports] == [0, 0, 0, 1] and not any(r.compacted for r in reports)
    assert [r.segments for r in reports] == [2, 3, 4, 2] and reports[3].generation == 5
    folder = IndexFolder.open(idx)
    assert [s.dir for s in folder.segments] == [Layout.ROOT_SEGMENT, Layout.segment(5)] and folder.n_live == 190
    assert (idx / Layout.META).read_bytes() == root_meta
    assert folder.segments[1].folder.components["segment"]["compacted"] is True  # rows of older adds (the watches)
    full = d / "tiers-full"
    build_index(records[:190], full, translation=False, compounds="", progress=False)
    live_engine, full_engine = Engine.load(idx), Engine.load(full)
    try:
        assert _assert_same(live_engine, full_engine, _queries(records[:190])) > 0
    finally:
        live_engine.close()
        full_engine.close()
    # the segments of generations no longer kept (the newest KEEP_GENERATIONS + 1) are removed by the next writers
    kept = {p.name for p in (idx / Layout.SEGMENTS).iterdir()}
    assert kept == {Layout.segment(n).split("/")[-1] for n in range(1, 6)}
    for r in records[:3]:
        delete_documents(idx, [r.id])
    assert {p.name for p in (idx / Layout.SEGMENTS).iterdir()} == {"seg-000005"}
    assert IndexFolder.open(idx).n_live == 187


def test_one_build_is_the_folder_a_loader_maps_as_a_build(small: tuple[Path, list[PatentRecord]],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The loaders' one rule (``IndexFolder.one_build``): a build is its own; a generation of several segments, or
    with deleted rows, has none (its segments are joined or searched in turn); a compacted generation is its
    segment's, which every loader maps as a build's: nothing is joined."""
    from service.retrieval.sparse import SparseIndex

    d, records = small
    idx = _base(d, records, "one-build")
    folder = IndexFolder.open(idx)
    assert folder.one_build is folder
    add_documents(idx, records[150:160], progress=False)
    assert IndexFolder.open(idx).one_build is None
    compact(idx, progress=False)
    folder = IndexFolder.open(idx)
    assert folder.one_build is folder.segments[0].folder and folder.one_build.root != idx

    def no_join(*args: object, **kwargs: object) -> SparseIndex:
        raise AssertionError("a compacted generation was joined")

    monkeypatch.setattr(SparseIndex, "join", classmethod(no_join))
    engine = Engine.load(idx)
    try:
        text = " ".join([records[155].title.get("en", ""), records[155].abstract.get("en", "")])
        assert records[155].id in [h.id for h in engine.search(SearchRequest(query=text, lang="en", k=10)).results]
    finally:
        engine.close()
    delete_documents(idx, [records[0].id])
    assert IndexFolder.open(idx).one_build is None


def test_a_reload_opens_only_the_new_segment(small: tuple[Path, list[PatentRecord]],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A second engine of the same process, opened after an add: the files of the segments it verified before are
    not read for their checksums again (only the new segment's), its doc-store tables and sparse segments are the
    first engine's objects (the build's whole sparse index too, after the first add), its postings are searched in
    the segments where they lie, and it finds the added documents as an engine in a fresh process would (the same
    ranking)."""
    import service.filecache as filecache
    import service.index.folder as folder_mod

    d, records = small
    idx = _base(d, records, "reload")
    zero = Engine.load(idx)  # the build, one segment: its sparse index is the first part of the joins after it
    add_documents(idx, records[150:160], progress=False)
    monkeypatch.setattr(filecache, "_SETTLED_NS", -60_000_000_000)  # the test's files count as written long ago
    checked: list[Path] = []
    real = folder_mod._checksum
    monkeypatch.setattr(folder_mod, "_checksum", lambda p: checked.append(p) or real(p))
    first = Engine.load(idx)
    assert first.pipeline.generator.fs.indexes["en"].parts[0] is zero.pipeline.generator.fs.indexes["en"]
    zero.close()
    add_documents(idx, records[160:175], progress=False)
    checked.clear()
    second = Engine.load(idx)
    try:
        new_dir = second.folder.segments[-1].folder.root
        assert checked
        # (the encoder's files are hard links of the machine's converted encoder: another worker's build linking them
        # changes their ctime, and a changed file is read again, rightly)
        mine = [p for p in checked if not (p.parent.name == "encoder" and p.stat().st_nlink > 1)]
        assert mine and all(new_dir in p.parents for p in mine), [p for p in mine if new_dir not in p.parents]
        assert second.docs._tables[:2] == first.docs._tables[:2]
        assert all(a is b for a, b in zip(second.docs._tables, first.docs._tables[:2], strict=False))
        index = second.pipeline.generator.fs.indexes["en"]
        old = first.pipeline.generator.fs.indexes["en"]
        assert isinstance(index, SparseGeneration) and len(index.parts) == 3
        assert all(a is b for a, b in zip(index.parts[:2], old.parts, strict=True))
        text = " ".join([records[170].title.get("en", ""), records[170].abstract.get("en", "")])
        got = [(h.id, h.score) for h in second.search(SearchRequest(query=text, lang="en", k=20)).results]
        assert got[0][0] == records[170].id
    finally:
        first.close()
        second.close()
    fresh = subprocess.run([sys.executable, "-c", f"""
import json
from service.engine import Engine
from service.schema import PassageRequest, SearchRequest
e = Engine.load({str(idx)!r})
print(json.dumps([(h.id, h.score) for h in e.search(SearchRequest(query={text!r}, lang="en", k=20)).results]))
"""], capture_output=True, text=True, check=True, env=_cli_env())
    assert [tuple(x) for x in json.loads(fresh.stdout.strip().splitlines()[-1])] == got


def test_add_past_the_bound_merges_the_smallest_neighbours(small: tuple[Path, list[PatentRecord]]) -> None:
    """Tiered merges off (merge_factor 0): a generation past ``max_segments`` merges the neighbouring segments of the
    smallest total down to the bound, never the build's."""
    d, records = small
    idx = _base(d, records, "bound")
    sizes = [20, 5, 5, 10]
    lo = 150
    reports = []
    for n in sizes:
        reports.append(add_documents(idx, records[lo: lo + n], progress=False, max_segments=4, merge_factor=0))
        lo += n
    assert [r.merges for r in reports] == [0, 0, 0, 1] and reports[3].segments == 4
    folder = IndexFolder.open(idx)
    assert [s.n_live for s in folder.segments] == [150, 20, 10, 10] and folder.segments[0].dir == Layout.ROOT_SEGMENT


def test_merge_plan() -> None:
    from service.index.live import merge_plan

    assert merge_plan([1000, 10, 10, 10], factor=4) is None  # three of tier 1: not yet
    assert merge_plan([1000, 10, 10, 10, 10], factor=4) == (1, 5)
    assert merge_plan([1000, 200, 10, 10, 10, 10], factor=4) == (2, 6)  # the lowest tier first, the big ones stay
    assert merge_plan([1000, 10, 10, 10, 40], factor=4) is None  # 40 would be more than half of the merge
    assert merge_plan([1000, 10, 10, 10, 40, 10], factor=4) == (1, 6)  # the run of tiers <= 2
    assert merge_plan([1000, 1, 1, 1, 300, 1, 1], factor=4) is None  # neighbours only: 300 splits the run
    assert merge_plan([1000, 0, 1, 3, 2], factor=4) == (1, 5)  # an emptied segment (all replaced) merges away
    assert merge_plan([3, 2, 1, 1], factor=4) == (0, 4)  # a small build is a small segment like the others
    assert merge_plan([150, 10, 10, 10], factor=4) is None  # not the build's 150 for 30 added
    assert merge_plan([1000, 10, 10, 10, 10], factor=0) is None  # tiers off
    assert merge_plan([1000, 5, 50, 5, 5], factor=0, max_segments=4) == (3, 5)  # bound: the smallest neighbours
    assert merge_plan([1000, 5, 50, 5, 5], factor=0, max_segments=3) == (2, 5)  # (ties: the newest)
    assert merge_plan([1000, 5, 50], factor=0, max_segments=1) == (0, 3)  # bound 1: everything (a compaction)
    assert merge_plan([1000], factor=4, max_segments=1) is None


def _state(idx: Path) -> tuple[int, int, list[str]]:
    folder = IndexFolder.open(idx, verify=True)  # every checksum of the generation
    from service.index.store import DocStore

    docs = DocStore.of_folder(folder)
    ids = sorted(pid for r, pid in enumerate(docs.ids) if docs.live is None or docs.live[r])
    docs.close()
    return folder.generation, folder.n_live, ids


def _add_cmd(idx: Path, corpus: Path) -> list[str]:
    return [sys.executable, "-m", "training.cli", "add", str(idx), str(corpus), "--no-progress"]


def _cli_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


CRASH_AT_MANIFEST = """
import os, runpy, signal, sys
from pathlib import Path

rename = os.replace


def replace(src, dst, *args, **kwargs):
    if Path(dst).parent.name == "generations":  # a generation manifest: die with half of it written, not renamed
        tmp = Path(src)
        tmp.write_bytes(tmp.read_bytes()[: tmp.stat().st_size // 2])
        os.kill(os.getpid(), signal.SIGKILL)
    return rename(src, dst, *args, **kwargs)


os.replace = replace
sys.argv[0] = "priorart"
runpy.run_module("training.cli", run_name="__main__", alter_sys=True)
"""
"""The CLI with a fault injected: the process kills itself (SIGKILL) when it would rename a generation manifest into
place, leaving half of the manifest's temporary file, as a crash while writing it would."""


def _run_killed(cmd: list[str], *, at_manifest: bool, rng: random.Random, max_s: float, min_s: float = 0.3) -> None:
    """Run ``cmd`` (``python -m training.cli ...``) and kill it with SIGKILL: half-way through writing the manifest
    (:data:`CRASH_AT_MANIFEST`), or after a random time between ``min_s`` and ``max_s`` seconds."""
    if at_manifest:
        assert cmd[1:3] == ["-m", "training.cli"], cmd
        proc = subprocess.run([cmd[0], "-c", CRASH_AT_MANIFEST, *cmd[3:]], env=_cli_env(), capture_output=True,
                              timeout=300)
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        return
    proc_p = subprocess.Popen(cmd, env=_cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(rng.uniform(min_s, max_s))
    proc_p.send_signal(signal.SIGKILL)  # no-op when it has finished already
    proc_p.wait()


def _rerun(cmd: list[str]) -> float:
    """Run ``cmd`` to the end; its duration in seconds."""
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=_cli_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return time.perf_counter() - t0


@pytest.mark.slow
def test_kill_9_during_add_leaves_old_or_new_generation(small: tuple[Path, list[PatentRecord]]) -> None:
    d, records = small
    idx = _base(d, records, "crash")
    batch = d / "crash-batch.jsonl"
    write_corpus(records[150:260], batch)
    rng = random.Random(18)
    outcomes = {"old": 0, "new": 0}
    trials = 6  # 2 killed at the manifest, 4 at random times (each trial is two CLI runs: the suite's time)
    took = 3.0  # a run's duration, then that of the last rerun: random kills within it
    for trial in range(trials):
        before = _state(idx)
        # every 4th killed while writing the manifest (half of it written, not renamed), else at random times
        _run_killed(_add_cmd(idx, batch), at_manifest=trial % 4 == 0, rng=rng, max_s=took)
        after = _state(idx)
        if after[0] == before[0]:
            assert after == before
            outcomes["old"] += 1
        else:
            assert after[0] == before[0] + 1 and after[1] == 260
            outcomes["new"] += 1
        took = _rerun(_add_cmd(idx, batch))
        gen, n_live, ids = _state(idx)
        assert gen > after[0] and n_live == 260 and ids == sorted(r.id for r in records[:260])
    print(f"\nkill -9 during add, {trials} trials: {outcomes['old']} at the previous generation, "
          f"{outcomes['new']} at the new one; every rerun completed")
    assert outcomes["old"] >= 3  # the manifest kills and at least one random one before the commit


@pytest.mark.slow
def test_kill_9_during_delete_and_compact_leaves_old_or_new_generation(
        small: tuple[Path, list[PatentRecord]]) -> None:
    """``priorart delete`` and ``priorart compact`` killed with SIGKILL (at the manifest write, and at random
    times): the folder opens (every checksum verified) at the previous generation unchanged or at the new one
    complete, and running the same command again completes."""
    d, records = small
    idx = _base(d, records, "crash-dc")
    add_documents(idx, records[150:200], progress=False)  # two segments
    rng = random.Random(19)
    trials = 4
    outcomes = {op: {"old": 0, "new": 0} for op in ("delete", "compact")}
    cli = [sys.executable, "-m", "training.cli"]
    expected = sorted(r.id for r in records[:200])
    took = {"delete": 2.0, "compact": 3.0}  # a run's duration, then that of the last rerun: random kills near its end
    for trial in range(trials):
        # delete: a different 4 ids each time (from both segments)
        gone = [records[7 * trial].id, records[7 * trial + 1].id, records[150 + 7 * trial].id,
                records[151 + 7 * trial].id]
        before = _state(idx)
        _run_killed([*cli, "delete", str(idx), *gone], at_manifest=trial < 2, rng=rng,
                    min_s=0.5 * took["delete"], max_s=took["delete"])
        after = _state(idx)
        if after[0] == before[0]:
            assert after == before
            outcomes["delete"]["old"] += 1
        else:
            assert after[0] == before[0] + 1 and after[2] == sorted(set(before[2]) - set(gone))
            outcomes["delete"]["new"] += 1
        took["delete"] = _rerun([*cli, "delete", str(idx), *gone, "--missing-ok"])
        expected = sorted(set(expected) - set(gone))
        gen, n_live, ids = _state(idx)
        assert gen > after[0] and ids == expected and n_live == len(expected)
        # compact: a replace first, so that there are several segments and deleted rows to drop
        add_documents(idx, [records[100 + trial]], progress=False)
        before = _state(idx)
        assert len(IndexFolder.open(idx, verify=False).segments) >= 2
        _run_killed([*cli, "compact", str(idx), "--no-progress"], at_manifest=trial < 2, rng=rng,
                    min_s=0.5 * took["compact"], max_s=took["compact"])
        after = _state(idx)
        if after[0] == before[0]:
            assert after == before
            outcomes["compact"]["old"] += 1
        else:
            assert after[0] == before[0] + 1 and after[1:] == before[1:]
            assert len(IndexFolder.open(idx, verify=False).segments) == 1
            outcomes["compact"]["new"] += 1
        took["compact"] = _rerun([*cli, "compact", str(idx), "--no-progress"])
        gen, n_live, ids = _state(idx)
        folder = IndexFolder.open(idx, verify=True)
        assert gen > after[0] and ids == expected and len(folder.segments) == 1 and len(folder.segments[0].deleted) == 0
    for op, o in outcomes.items():
        print(f"\nkill -9 during {op}, {trials} trials: {o['old']} at the previous generation, {o['new']} at the "
              "new one; every rerun completed")
        assert o["old"] >= 2


def test_generation_manifest_is_checked(small: tuple[Path, list[PatentRecord]]) -> None:
    d, records = small
    idx = _base(d, records, "manifest")
    add_documents(idx, records[150:160], progress=False)
    seg_meta = idx / Layout.segment(1) / Layout.META
    data = json.loads(seg_meta.read_text())
    data["created"] = "tampered"
    seg_meta.write_text(json.dumps(data))
    with pytest.raises(IndexFormatError, match="sha256 does not match"):
        IndexFolder.open(idx)


# ------------------------------------------------------------------------------------------ with models


def _engine(index: Path) -> Engine:
    return Engine.load(index, settings=Settings(index_dir=index, device="cpu"))


def _same_vectors(live: Path, full: Path) -> int:
    """The live index's dense vectors and rerank encodings (segments joined) equal the full build's (1e-5)."""
    from service.retrieval.dense import DenseIndex
    from service.retrieval.neural import load_encodings

    a, b = IndexFolder.open(live), IndexFolder.open(full)
    assert a.n_rows == b.n_rows
    va, vb = DenseIndex.load(a, device="cpu").vectors, DenseIndex.load(b, device="cpu").vectors
    np.testing.assert_allclose(np.asarray(va), np.asarray(vb), atol=1e-5, rtol=0)
    ea, eb = load_encodings(a, a.n_rows), load_encodings(b, b.n_rows)
    assert set(ea) == set(eb) and ea
    for name in ea:
        np.testing.assert_allclose(np.asarray(ea[name]), np.asarray(eb[name]), atol=1e-5, rtol=0, err_msg=name)
    return len(ea)


def _same_results(live: Engine, full: Engine, queries: list[str], weights: dict[str, float] | None) -> int:
    compared = 0
    for text in queries:
        ra = live.search(SearchRequest(query=text, lang="en", k=10, weights=weights)).results
        rb = full.search(SearchRequest(query=text, lang="en", k=10, weights=weights)).results
        assert [h.id for h in ra] == [h.id for h in rb], f"{weights}: {text[:60]!r}"
        for ha, hb in zip(ra, rb, strict=True):
            assert ha.score == pytest.approx(hb.score, abs=1e-5)
            for name, value in ha.components.items():
                if value is not None:
                    assert value == pytest.approx(hb.components[name], abs=1e-5), name
        compared += len(ra)
    return compared


@pytest.mark.slow
def test_added_documents_are_encoded_as_a_full_build_encodes_them(tmp_path: Path) -> None:
    """An index with (tiny) models: two ``add`` batches are encoded by the installed models; their dense vectors
    and rerank encodings equal those a full build computes for the same documents (1e-5), the dense stage finds
    them, searches through every stage equal the full build's, and compaction keeps the vectors."""
    for module in ("onnxruntime", "faiss", "torch", "gensim"):
        pytest.importorskip(module)
    from models_fixture import tiny_models

    corpus, models = tiny_models()
    records = list(read_corpus(corpus))
    assert len(records) == 60
    opts: dict = {"models_dir": models, "fuse": False, "translation": False, "compounds": "", "device": "cpu",
                  "progress": False, "ranker": "none"}  # (the encodings are compared: 40 documents are too few for
    # the ranker's word vectors, 60 are not, and the two would order their first documents differently)
    live, full = tmp_path / "live", tmp_path / "full"
    build_index(records[:40], live, **opts)
    build_index(records, full, **opts)
    r1 = add_documents(live, records[40:50], device="cpu", progress=False)
    r2 = add_documents(live, records[50:], device="cpu", progress=False)
    assert (r1.generation, r2.generation, r2.segments, r2.live_documents) == (1, 2, 3, 60)
    seg = IndexFolder.open(live).segments[-1].folder
    assert seg.has("dense") and seg.has("rerank") and (seg.root / Layout.DENSE_VECTORS).is_file()
    encodings = _same_vectors(live, full)

    e_live, e_full = _engine(live), _engine(full)
    assert "dense" in e_live.pipeline.names and e_live.pipeline.names == e_full.pipeline.names
    added = records[40:]
    queries = [" ".join([r.title.get("en", ""), r.abstract.get("en", "")]) for r in added[::4]]
    # the dense stage alone: an added document's own text finds it as the full build's dense stage does
    dense_hits = _same_results(e_live, e_full, queries, {"dense": 1.0})
    ranks = []  # of each added document among all 60 for its own text, by the dense score alone
    for rec, text in zip(added[::4], queries, strict=True):
        hits = e_live.search(SearchRequest(query=text, lang="en", k=60, weights={"dense": 1.0})).results
        mine = [h for h in hits if h.id == rec.id]
        assert mine and mine[0].components.get("dense") is not None, f"{rec.id}: no dense score"
        ranks.append(hits.index(mine[0]) + 1)
    all_hits = _same_results(e_live, e_full, queries, None)  # every stage (bm25, dense, rerank)
    e_live.close()

    rc = compact(live, device="cpu", progress=False)
    assert rc.segments == 1 and rc.live_documents == 60
    _same_vectors(live, full)
    from service.retrieval.dense import DenseIndex
    dense = DenseIndex.load(IndexFolder.open(live), device="cpu")  # the segment's own FAISS index, mapped vectors
    assert "segments" not in dense.info and isinstance(dense.vectors, np.memmap)
    e_comp = _engine(live)
    _same_results(e_comp, e_full, queries, {"dense": 1.0})
    _same_results(e_comp, e_full, queries, None)
    e_comp.close()
    e_full.close()
    print(f"\nwith models: 20 added documents, dense + {encodings} rerank encodings equal to a full build's (1e-5); "
          f"{dense_hits} dense-only and {all_hits} all-stage hits ({'/'.join(e_live.pipeline.names)}) equal; "
          f"own-text dense ranks of added documents among 60 (tiny models) {ranks}; the same after compact")


@pytest.mark.slow
def test_bench_add_small_prints_both_figures(tmp_path: Path) -> None:
    """``priorart-lab bench add`` end to end at a tiny size: a rebuild and an add timed, the many-segment index and its
    compacted copy timed side by side on the same queries."""
    from lab.benchmarks.live import format_report, run_add_bench

    options = {"translation": False, "compounds": ()}  # the default builds' tables: slow
    r = run_add_bench(150, 30, segments=4, queries=9, rounds=2, work_dir=tmp_path, build_options=options)
    assert r["search"]["many"]["segments"] == 4 and r["search"]["one"]["segments"] == 1
    assert r["search"]["many"]["timed"] == r["search"]["one"]["timed"] == 18
    assert r["full_build_s"] > 0 and r["add_s"] > 0
    assert set(r["first_pass_ratio"]) == set(r["later_ratio"]) == {"p50_ms", "p99_ms"}
    text = format_report(r)
    assert "4 segments p50" in text and "1 segment p50" in text and "faster" in text and "first pass" in text
    again = run_add_bench(150, 30, segments=4, queries=9, rounds=1, work_dir=tmp_path, build_options=options)
    assert again["full_build_s"] == r["full_build_s"] and "later_ratio" not in again  # the kept indexes, timed again


@pytest.mark.slow
def test_bench_open_measures_each_generation_in_a_fresh_process(tmp_path: Path) -> None:
    """``priorart-lab bench open`` at a tiny size: the generation after an add (two segments) and its compacted copy,
    each opened in a fresh process that answers a /passages query; opening writes nothing (no joined copy); a
    second run reuses the indexes built in ``--work``."""
    from lab.benchmarks.live import format_open_report, run_open_bench

    r = run_open_bench(200, 0.05, rounds=2, work_dir=tmp_path, build_options={"translation": False, "compounds": ()})
    assert (r["added"]["segments"], r["compacted"]["segments"]) == (2, 1) and r["n_add"] == 10
    for name in ("added", "compacted"):
        assert len(r[name]["runs"]) == 2 and all(x["hits"] > 0 for x in r[name]["runs"])
        assert r[name]["written_bytes"] < 1_000_000  # logging at most: no passage index written at open
        assert r[name]["open_s"] > 0 and r[name]["max_rss_mb"] > 50
    assert "written at open" in format_open_report(r)
    built = (tmp_path / "added-200" / "meta.json").stat().st_mtime_ns
    assert run_open_bench(200, 0.05, rounds=1, work_dir=tmp_path)["n_add"] == 10
    assert (tmp_path / "added-200" / "meta.json").stat().st_mtime_ns == built


@pytest.mark.slow
def test_bench_merges_counts_what_each_policy_writes() -> None:
    """``priorart-lab bench merges`` at a small size: 10 adds of 5 to 100 documents; the old rule (here past 4 segments)
    compacts the whole index twice, the tiered merges rewrite only added documents, so they write less."""
    from lab.benchmarks.live import format_merge_report, run_merge_bench

    r = run_merge_bench(100, 5, 10, old_bound=4)
    added = 5 * 10
    assert r["old"]["written"] == added + 120 + 140  # the compactions at the 4th add and at the 8th
    # the 4th and the 8th add merge four segments of 5 (tier 1) into 20; the 10th [20, 20, 5, 5] (tiers <= 2) into 50
    assert r["tiered"]["written"] == added + 20 + 20 + 50
    assert r["tiered"]["segments"] == [2, 3, 4, 2, 3, 4, 5, 3, 4, 2] and r["old"]["segments"][3] == 1
    text = format_merge_report(r)
    assert "tiered merges: 140 documents written (90 by merges)" in text and "compaction past 4 segments" in text
