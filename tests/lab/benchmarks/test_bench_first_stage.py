"""``priorart-lab bench first-stage`` at a tiny size: the table with every peer's row (figures not asserted)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from lab.benchmarks import first_stage, peers
from lab.commands import bench


@pytest.mark.slow
def test_bench_prints_every_peer_beside_ours_and_reuses_its_cache(tmp_path: Path) -> None:
    cache, work = tmp_path / "cache", tmp_path / "work"
    work.mkdir()
    rows = first_stage.run_first_stage_bench([60], 5, bm25_queries=5, work_dir=work, cache_dir=cache, progress=False,
                                             index_langs="en", peers=("rank-bm25", "bm25s", "pisa", "pisa-core"))
    (row,) = rows
    assert row["n_docs"] == 60 and row["top10_checked"] == 5
    assert row["top10_identical"] == 5  # rank-bm25 computes our formula: the same tokens give the same top 10
    table = first_stage.format_table(rows)
    assert "p50 ms" in table and "p99 ms" in table and "warm p50" in table and "top10 overlap" in table
    for name in ("rank-bm25", "bm25s", "pisa", "pisa-core"):
        if name in row["skipped"]:
            assert f"{name:<12} skipped: " in table
        else:
            e = row["engines"][name]
            assert e["timed_queries"] == 5 and 0 <= e["top10_overlap"] <= 1 and e["p99_ms"] >= e["p50_ms"] > 0
            assert e["warm_rounds"] == 3 and e["warm_p99_ms"] >= e["warm_p50_ms"] > 0
            assert any(line.startswith(name) for line in table.splitlines())
    assert row["engines"]["rank-bm25"]["top10_overlap"] == 1.0
    assert not list(work.iterdir())  # the peers' temporary indexes are removed
    (d,) = cache.iterdir()
    built = (d / "build.json").stat().st_mtime_ns
    (again,) = first_stage.run_first_stage_bench([60], 3, work_dir=work, cache_dir=cache, progress=False,
                                                 index_langs="en", peers=())
    assert (d / "build.json").stat().st_mtime_ns == built  # corpus, index and tokens reused
    assert list(again["engines"]) == ["ours"] and again["engines"]["ours"]["timed_queries"] == 3


class _Missing(peers.Peer):
    name = "missing"
    modules = ("priorart_no_such_engine",)


def test_a_peer_not_installed_is_skipped_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(peers.PEERS, "missing", _Missing)
    found, skipped = peers.make_peers(["missing"], 1.2, 0.75)
    assert found == [] and "priorart_no_such_engine not installed" in skipped["missing"]
    table = first_stage.format_table([{
        "n_docs": 10, "k": 10, "build_docs_per_s": 1.0, "build_docs_per_cpu_s": 1.0, "build_peak_rss_mb": 1.0,
        "index_mb": 1.0, "n_queries": 1, "query_text": "first-claim", "mean_query_terms": 3.0,
        "engines": {"ours": {"p50_ms": 1.0, "p99_ms": 1.0, "mean_ms": 1.0, "timed_queries": 1, "warm_p50_ms": 1.0,
                             "warm_p99_ms": 1.0}},
        "skipped": skipped, "top10_identical": None, "top10_checked": 0,
    }])
    assert "missing      skipped: priorart_no_such_engine not installed" in table
    with pytest.raises(ValueError, match="valid: rank-bm25"):
        peers.make_peers(["lucene"], 1.2, 0.75)


def test_peers_rank_a_tiny_collection_alike(tmp_path: Path) -> None:
    vocab = ["pump", "valve", "check", "coil", "motor", "shaft"]
    docs = [np.array(d, dtype=np.int32) for d in ([0, 1, 2], [1, 2, 3, 3], [2, 3, 4, 5, 5], [0, 0, 5], [4])]
    found, _ = peers.make_peers(["rank-bm25", "bm25s", "pisa", "pisa-core"], 1.2, 0.75)
    for peer in found:
        peer.build(docs, vocab, tmp_path)
        assert peer.search([0, 5, 5], 3)[0] == 3, peer.name  # "pump shaft shaft": the document with both, twice
        assert peer.search([], 3) == []


def test_cli_refuses_an_unknown_peer() -> None:
    app = typer.Typer()
    bench.register(app)
    res = CliRunner().invoke(app, ["bench", "first-stage", "--sizes", "50", "--peers", "bm25s,lucene"])
    assert res.exit_code == 2 and "lucene" in res.output
