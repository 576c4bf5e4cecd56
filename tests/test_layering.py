"""Layering: the online service never imports torch, gensim or the training package; no import cycles; no module
imports a module of a higher layer (:data:`LAYERS`, the order docs/ARCHITECTURE.md "Layers" gives too)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FORBIDDEN = {"torch", "gensim", "training", "lab"}

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("service", "service.settings", "service.versioned", "service.phases", "service.heap",
                    "service.filecache")),
    ("text, codes, corpus", ("service.text", "service.codes", "service.classification", "service.code_classifier",
                              "service.code_vectors", "service.corpus")),
    ("schema", ("service.schema",)),
    ("index", ("service.index",)),
    ("query language", ("service.querylang",)),
    ("passages", ("service.passages",)),
    ("retrieval", ("service.retrieval", "service.query")),
    ("indexing", ("service.index.live", "service.index.components")),
    ("pipeline", ("service.candidates", "service.ranker", "service.kernel_pooling", "service.stages", "service.fusion",
                  "service.notices", "service.pipeline", "service.shards")),
    ("engine", ("service.engine",)),
    ("workflow", ("service.workflow", "service.watch")),
    ("api", ("service.api", "service.startup", "service.serve_ray")),
    ("training", ("training",)),
    ("lab", ("lab",)),
)
"""Lowest first. A module is in the layer of the longest name listed that is the module itself or a package above
it (``service`` names the package's ``__init__`` alone); it may import its own layer and the layers below."""


def _modules() -> dict[str, Path]:
    """Every module of service/ and training/, by dotted name (a package by its own name)."""
    paths: dict[str, Path] = {}
    for root in ("service", "training", "lab"):
        for path in sorted((REPO / root).rglob("*.py")):
            paths[".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")] = path
    return paths


def layer_of(module: str) -> int | None:
    """The index in :data:`LAYERS` of ``module``'s layer; ``None`` when no name listed covers it."""
    best: tuple[int, int] | None = None  # (length of the name that matched, layer)
    for i, (_, names) in enumerate(LAYERS):
        for name in names:
            covers = module == name or (name != "service" and module.startswith(name + "."))
            if covers and (best is None or len(name) > best[0]):
                best = (len(name), i)
    return None if best is None else best[1]


def imported(source: str, module: str, *, is_package: bool = False) -> set[str]:
    """Every name ``source`` (the text of ``module``) imports anywhere: at module level, inside functions, under
    ``if TYPE_CHECKING:``; relative imports resolved; for ``from m import x`` both ``m`` and ``m.x`` (``x`` may be a
    submodule)."""
    here = module.split(".") if is_package else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*here[: len(here) - node.level + 1], *([node.module] if node.module else [])])
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return found


def upward_imports(sources: dict[str, tuple[str, bool]]) -> list[str]:
    """One line per import of a higher layer among ``sources`` (module -> (text, is a package))."""
    out = []
    for name, (source, is_package) in sorted(sources.items()):
        mine = layer_of(name)
        if mine is None:
            continue
        for other in sorted(imported(source, name, is_package=is_package) & set(sources)):
            theirs = layer_of(other)
            if theirs is not None and theirs > mine:
                out.append(f"{name} ({LAYERS[mine][0]}) imports {other} ({LAYERS[theirs][0]})")
    return out


def _sources() -> dict[str, tuple[str, bool]]:
    return {name: (path.read_text(encoding="utf-8"), path.name == "__init__.py") for name, path in _modules().items()}


def test_service_never_imports_training_torch_or_gensim() -> None:
    offenders = []
    for name, (source, is_package) in sorted(_sources().items()):
        if name.startswith("service"):
            offenders += [f"{name}: {n}" for n in sorted(imported(source, name, is_package=is_package))
                          if n.split(".")[0] in FORBIDDEN]
    assert not offenders, "service/ imports forbidden modules:\n" + "\n".join(offenders)


def test_every_module_has_a_layer() -> None:
    missing = sorted(name for name in _modules() if layer_of(name) is None)
    assert not missing, ("modules in no layer (add them to LAYERS here and to docs/ARCHITECTURE.md):\n"
                         + "\n".join(missing))


def test_no_module_imports_a_higher_layer() -> None:
    """Function-level imports and ``TYPE_CHECKING`` imports count: a layer that needs a higher one's name needs
    that name moved down, or a protocol."""
    bad = upward_imports(_sources())
    assert not bad, "imports of a higher layer:\n" + "\n".join(bad)


def test_the_layer_check_sees_every_kind_of_import() -> None:
    """The check itself: an upward import at module level, in a function, under TYPE_CHECKING, relative, and as
    ``from package import module`` is each reported; a downward or same-layer import is not."""
    engine = "import numpy\nfrom service.query import Query\n"
    cases = {
        "module level": "from service.engine import Engine\n",
        "in a function": "def f():\n    from service.engine import Engine\n    return Engine\n",
        "TYPE_CHECKING": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from service.engine import Engine\n",
        "relative": "from ..engine import Engine\n",
        "plain import": "import service.engine\n",
        "submodule by from": "from service import engine\n",
    }
    for what, source in cases.items():
        found = upward_imports({"service.retrieval.x": (source, False), "service.engine": (engine, False),
                                "service.query": ("", False)})
        assert found == ["service.retrieval.x (retrieval) imports service.engine (engine)"], what
    downward = "from service.query import Query\nfrom service.retrieval.kernels import readonly\nimport numpy\n"
    assert upward_imports({"service.retrieval.x": (downward, False), "service.query": ("", False),
                           "service.retrieval.kernels": ("", False)}) == []
    live, sparse, store = (layer_of(m) for m in ("service.index.live", "service.retrieval.sparse",
                                                 "service.index.store"))
    assert live is not None and sparse is not None and store is not None and live > sparse > store
    assert layer_of("service") == 0 and layer_of("servicex") is None
    assert layer_of("training.cli") == len(LAYERS) - 2 and layer_of("lab.cli") == len(LAYERS) - 1


def test_architecture_gives_the_same_layers() -> None:
    """docs/ARCHITECTURE.md's "Layers" table lists the same layers, in the same order, with the same modules."""
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if re.match(r"\|\s*\d+\s*\|", line)]
    documented = []
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        documented.append((cells[1], tuple(re.findall(r"`([\w.]+)`", cells[2]))))
    assert documented == list(LAYERS)


def test_no_import_cycles() -> None:
    """No two modules of service/ or training/ import each other, directly or through others."""
    sources = _sources()
    edges = {name: (imported(source, name, is_package=is_package) & set(sources)) - {name}
             for name, (source, is_package) in sources.items()}
    cycles = []
    for start in sorted(edges):
        stack, seen = [(start, [start])], set()
        while stack:
            node, trail = stack.pop()
            for nxt in sorted(edges[node]):
                if nxt == start:
                    cycles.append(" -> ".join([*trail, start]))
                elif nxt not in seen and nxt > start:  # each cycle reported once, from its smallest module
                    seen.add(nxt)
                    stack.append((nxt, [*trail, nxt]))
    assert not cycles, "import cycles:\n" + "\n".join(cycles)
