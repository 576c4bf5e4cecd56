"""service/filecache.py: objects read from index files are shared while the file is unchanged and held."""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path

from service.filecache import load_shared


class Loaded:
    reads = 0

    def __init__(self, path: Path) -> None:
        Loaded.reads += 1
        self.value = json.loads(path.read_text())


def test_an_unchanged_file_held_elsewhere_is_read_once(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"a": 1}')
    before = Loaded.reads
    first = load_shared(path, Loaded)
    assert load_shared(path, Loaded) is first and Loaded.reads == before + 1
    assert load_shared(path, Loaded, "other settings") is not first  # the key shapes the object


def test_a_replaced_file_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"a": 1}')
    first = load_shared(path, Loaded)
    tmp = tmp_path / "t.json.tmp"
    tmp.write_text('{"a": 2}')
    os.replace(tmp, path)  # as the index writers replace a file: a new inode
    second = load_shared(path, Loaded)
    assert second is not first and second.value == {"a": 2} and first.value == {"a": 1}


def test_an_object_nobody_holds_is_not_kept(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"a": 1}')
    before = Loaded.reads
    load_shared(path, Loaded)
    gc.collect()
    load_shared(path, Loaded)
    assert Loaded.reads == before + 2  # the first was freed with its last holder, not cached for good


def test_a_verified_file_is_read_again_only_when_it_changed(tmp_path: Path) -> None:
    """``verified``: the checksum of a file seen unchanged is not computed again; a file written since (in place, a
    byte flipped, its old times set back) or one written just before its check (its times may not move) is."""
    import hashlib

    from service.filecache import verified

    reads: list[Path] = []

    def check(p: Path) -> str:
        reads.append(p)
        return hashlib.sha256(p.read_bytes()).hexdigest()

    path = tmp_path / "postings.npy"
    path.write_bytes(b"abc" * 1000)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert verified(path, sha, check) and verified(path, sha, check)
    assert len(reads) == 2  # written just now: not remembered
    old = os.stat(path).st_mtime_ns - 10_000_000_000
    os.utime(path, ns=(old, old))  # ctime is still now: still checked
    assert verified(path, sha, check) and len(reads) == 3

    settled = tmp_path / "settled.npy"
    settled.write_bytes(b"xyz" * 1000)
    sha2 = hashlib.sha256(settled.read_bytes()).hexdigest()
    import service.filecache as fc

    before = fc._SETTLED_NS
    fc._SETTLED_NS = -10_000_000_000  # as if written long ago
    try:
        n = len(reads)
        assert verified(settled, sha2, check) and verified(settled, sha2, check)
        assert len(reads) == n + 1  # the second time from memory
        assert not verified(settled, "0" * 64, check)  # another checksum asked for: read again, refused
        st = os.stat(settled)
        with open(settled, "r+b") as fh:  # a byte flipped in place, its times set back: ctime moves
            fh.write(b"Q")
        os.utime(settled, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert not verified(settled, sha2, check)
    finally:
        fc._SETTLED_NS = before


def test_an_engine_reloaded_shares_the_cpc_titles_its_predecessor_read(tmp_path: Path) -> None:
    """A reload after each add read the CPC title list again (1.5 s of the server's CPU a generation): the titles are
    read once while an engine holds them, and again once the file changes."""
    from service.engine import _load_scheme
    from service.settings import Settings

    titles = tmp_path / "titles.tsv"
    titles.write_text("H\t\tElectricity\nH01\t\tBasic elements\nH01F\t\tMagnets\nH01F27/00\t0\tDetails\n")
    settings = Settings(cpc_titles=titles)
    first = _load_scheme(settings, None)  # type: ignore[arg-type]
    assert _load_scheme(settings, None) is first  # type: ignore[arg-type]
    assert first.title("H01F") == "Magnets"
    titles.write_text("H\t\tElectricity\nH01\t\tBasic elements\nH01F\t\tInductances\nH01F27/00\t0\tDetails\n")
    again = _load_scheme(settings, None)  # type: ignore[arg-type]
    assert again is not first and again.title("H01F") == "Inductances"
