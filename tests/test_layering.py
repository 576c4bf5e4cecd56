"""Layering: the online service must not depend on torch, gensim or the training package; no import cycles."""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FORBIDDEN = {"torch", "gensim", "training"}


def test_service_never_imports_training_torch_or_gensim() -> None:
    offenders = []
    for path in sorted((REPO / "service").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{path.relative_to(REPO)}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert not offenders, "service/ imports forbidden modules:\n" + "\n".join(offenders)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """Project modules that a file imports anywhere (module level or inside functions)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found & modules


def test_no_import_cycles() -> None:
    """No two modules of service/ or training/ import each other, directly or through others."""
    paths: dict[str, Path] = {}
    for root in ("service", "training"):
        for path in sorted((REPO / root).rglob("*.py")):
            name = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
            paths[name] = path
    edges = {name: _imports(path, set(paths)) - {name} for name, path in paths.items()}
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
