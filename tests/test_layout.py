"""The code's shape stays one a newcomer can read: small modules and classes (the import
contracts in pyproject.toml keep the layers; `make test` runs lint-imports)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODULE_LINES = 600
CLASS_LINES = 400


def _sources() -> list[Path]:
    return sorted([*REPO.joinpath("nodemanager").rglob("*.py"), *REPO.joinpath("cloud").rglob("*.py")])


def test_no_module_or_class_grows_past_what_one_sitting_reads() -> None:
    too_long = []
    for path in _sources():
        text = path.read_text()
        name = path.relative_to(REPO)
        if text.count("\n") > MODULE_LINES:
            too_long.append(f"{name}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None and node.end_lineno - node.lineno > CLASS_LINES:
                too_long.append(f"{name}: class {node.name}, {node.end_lineno - node.lineno} lines")
    assert too_long == []


def test_every_source_folder_is_a_package_that_the_import_contracts_can_see() -> None:
    """import-linter skips a folder without ``__init__.py`` (cloud/aws was one): its imports
    would break a contract unseen."""
    folders = {p.parent for p in _sources()}
    assert sorted(str(f.relative_to(REPO)) for f in folders if not (f / "__init__.py").exists()) == []
