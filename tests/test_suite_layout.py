"""The test tree mirrors the packages: every folder under tests/service and tests/training is a package of the same
name, test basenames are unique (the folders are not packages: pytest imports each file by its basename), and the
files that tests/conftest.py hands out first exist."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


def test_test_folders_mirror_the_packages() -> None:
    for top in ("service", "training"):
        for folder in sorted(p for p in (TESTS / top).rglob("*") if p.is_dir() and p.name != "__pycache__"):
            package = REPO / folder.relative_to(TESTS)
            assert (package / "__init__.py").is_file(), f"{folder.relative_to(REPO)} mirrors no package ({package})"


def test_basenames_are_unique() -> None:
    names = Counter(p.name for p in TESTS.rglob("*.py") if p.name != "conftest.py" and "__pycache__" not in p.parts)
    assert [name for name, n in names.items() if n > 1] == []


def test_longest_first_names_existing_files() -> None:
    tree = ast.parse((TESTS / "conftest.py").read_text(encoding="utf-8"))
    found = [node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
             and any(isinstance(t, ast.Name) and t.id == "LONGEST_FIRST" for t in node.targets)]
    assert len(found) == 1
    paths = ast.literal_eval(found[0])
    assert paths and [p for p in paths if not (REPO / p).is_file()] == []
