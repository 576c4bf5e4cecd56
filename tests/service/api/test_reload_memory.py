"""A replaced generation is released (issue 32, item 5): a server that reloads its index 20 times holds no more memory
than after the first reload (within 1.1x, anonymous memory) and keeps no map of a file its old engines had open.

Measured in a fresh process (``/proc/self/status`` and ``/proc/self/maps`` of that process only), on the real index
with an added segment (a live generation: each segment's passage index is mapped where it lies, and a reload reuses
the maps of the segments the running engine has open, so the files mapped stay the same from reload to reload; no
map may outlive its engine as a ``(deleted)`` file either), through the server's own reload (``POST /admin/reload``)
with a search and a passage search between reloads.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
RELOADS = 20

SCRIPT = r"""
import json, sys
from pathlib import Path
from fastapi.testclient import TestClient
from service.api import create_app
from service.settings import Settings

def anon_mb():
    status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
    return int(status["RssAnon"].split()[0]) / 1024

def deleted_maps():
    lines = open("/proc/self/maps").read().splitlines()
    return len({line.split(None, 5)[-1] for line in lines if line.endswith("(deleted)")})

def index_maps():  # the index's files mapped now (each once however often it is mapped)
    lines = open("/proc/self/maps").read().splitlines()
    return len({line.split(None, 5)[-1] for line in lines if str(idx) in line})

idx, reloads = Path(sys.argv[1]), int(sys.argv[2])
settings = Settings(index_dir=idx, admin_key="k", reload_interval_s=0)
out = {"anon": [], "deleted": [], "mapped": [], "generations": []}
with TestClient(create_app(settings)) as c:
    for i in range(reloads):
        r = c.post("/admin/reload", headers={"X-API-Key": "k"})
        assert r.status_code == 200, r.text
        out["generations"].append(r.json()["current"]["generation"])
        assert c.post("/search", json={"query": "transformer tank with expansion vessel", "k": 10}).status_code == 200
        assert c.post("/passages", json={"query": "Hochspannungsanordnung mit einem Transformator", "lang": "de",
                                         "k": 10}).status_code == 200
        out["anon"].append(anon_mb())
        out["deleted"].append(deleted_maps())
        out["mapped"].append(index_maps())
print(json.dumps(out))
"""


@pytest.mark.slow
def test_twenty_reloads_hold_the_memory_of_one(real_index: Path, real_corpus: Path, tmp_path: Path) -> None:
    from index_copy import copy_index

    from service.corpus.jsonl import read_corpus
    from service.index.folder import IndexFolder
    from service.index.live import add_documents

    idx = tmp_path / "index"
    copy_index(real_index, idx)
    records = list(read_corpus(real_corpus))
    add_documents(idx, records[:5], progress=False)  # a replace of 5 documents: a second segment
    assert len(IndexFolder.open(idx, verify=False).segments) == 2

    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(idx), str(RELOADS)], cwd=REPO, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    anon, deleted, mapped = got["anon"], got["deleted"], got["mapped"]
    print(f"\nanonymous memory after reload 1: {anon[0]:.0f} MB, after {RELOADS}: {anon[-1]:.0f} MB "
          f"({anon[-1] / anon[0]:.2f}x); maps of deleted files {deleted[0]} -> {deleted[-1]}; index files mapped "
          f"{mapped[0]} -> {mapped[-1]}")
    assert len(set(got["generations"])) == 1  # the same generation each time: nothing but the reload changes
    assert anon[-1] <= 1.1 * anon[0], anon
    assert deleted[-1] <= deleted[0], deleted  # no map of a released engine's files is left
    assert mapped[0] > 0 and mapped[-1] == mapped[0], mapped  # the same files: reused, never joined into new ones
