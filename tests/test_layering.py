"""The online service must not depend on torch, gensim or the training package."""

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
