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
