"""The loaded index out of the collector's full passes: frozen by ``heap.settle`` at startup and on reload."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service import heap
from service.api import create_app
from service.settings import Settings


@pytest.fixture()
def thawed() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # leave the test process as other tests expect it


def _walked(obj: object) -> bool:
    """Whether the collector's passes still walk ``obj`` (frozen objects are not in ``gc.get_objects()``)."""
    return any(o is obj for o in gc.get_objects())


def test_settle_freezes_what_is_alive_and_refcounting_still_frees_it(thawed: None) -> None:
    class Node:
        pass

    alive = [Node() for _ in range(3)]
    assert _walked(alive[0])
    heap.settle()
    assert gc.get_freeze_count() > 0 and not _walked(alive[0])
    later = Node()
    assert _walked(later)  # what requests allocate afterwards is collected as usual
    gone = gc.get_freeze_count()
    del alive
    assert gc.get_freeze_count() < gone  # released by reference counting, frozen or not


def test_the_server_freezes_its_engine_at_startup_and_after_a_reload(thawed: None, tmp_path: Path) -> None:
    from training.build import build_index
    from training.synth import generate

    build_index(list(generate(40, 5)), tmp_path / "idx", translation=False, compounds="", progress=False)
    settings = Settings(index_dir=tmp_path / "idx", admin_key="k", reload_interval_s=0)
    with TestClient(create_app(settings)) as c:
        first = c.app.state.engines.engine  # type: ignore[attr-defined]
        assert not _walked(first)
        assert c.post("/admin/reload", headers={"X-API-Key": "k"}).status_code == 200
        second = c.app.state.engines.engine  # type: ignore[attr-defined]
        assert second is not first and not _walked(second)
        assert c.post("/search", json={"query": "a valve", "lang": "en", "k": 3}).status_code == 200


def test_a_replaced_objects_cycles_are_freed_at_the_next_settle(thawed: None) -> None:
    """Objects in a reference cycle that were frozen with a loaded index (a replaced engine's) are garbage once
    released; the next settle (after a reload) unfreezes before it collects, so they are freed, not kept frozen."""
    import weakref

    class Node:
        other: object = None

    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle: reference counting alone never frees it
    gone = weakref.ref(a)
    heap.settle()  # loaded: frozen with everything else
    del a, b  # replaced and released
    heap.settle()  # the reload's settle
    assert gone() is None
