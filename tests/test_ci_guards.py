"""What keeps CI honest: every imported package is declared, and a missing [local] extra fails
the run when CI asks for it instead of quietly skipping the local-model tests."""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
import sys
from collections import defaultdict
from importlib.metadata import distributions, requires
from pathlib import Path

import pytest
from common import REQUIRE_LOCAL

ROOT = Path(__file__).resolve().parent.parent


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _imported_top_levels(folder: Path) -> set[str]:
    names: set[str] = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    local = (
        {p.stem for p in ROOT.glob("*/*.py")}
        | {p.stem for p in (ROOT / "tests").rglob("*.py")}  # test modules import each other
        | {p.parent.name for p in ROOT.glob("*/*/__init__.py")}
    )
    return names - set(sys.stdlib_module_names) - local - {"ragas_relevancy_ext"}


def _declared(groups: list[str]) -> set[str]:
    """The packages the installed package requires, and those of the extras in ``groups``
    (its metadata, as pip and uv read pyproject.toml: reinstall after changing it)."""
    names = set()
    for requirement in requires("ragas-relevancy-ext") or []:
        extra = re.search(r'extra == "([^"]+)"', requirement)
        if extra is None or extra.group(1) in groups:
            names.add(_normal(re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0]))
    return names


@functools.cache
def _owners() -> dict[str, list[str]]:
    """Each top-level import name's distributions, from their top_level.txt and their files, as
    packages_distributions() reads them from 3.11 (3.10's reads top_level.txt alone, which
    wheels such as OpenTelemetry's do not have)."""
    owners: defaultdict[str, list[str]] = defaultdict(list)
    for dist in distributions():
        files = [f for f in dist.files or [] if f.suffix == ".py"]
        inferred = {f.parts[0] if len(f.parts) > 1 else f.stem for f in files}
        for name in set((dist.read_text("top_level.txt") or "").split()) | inferred:
            owners[name].append(dist.metadata["Name"])
    return owners


def _undeclared(folder: str, groups: list[str]) -> list[str]:
    owners = _owners()
    declared = _declared(groups)
    missing = []
    for name in sorted(_imported_top_levels(ROOT / folder)):
        dists = {_normal(d) for d in owners.get(name, [name])}
        if not dists & declared:
            missing.append(f"{name} (from {sorted(dists)})")
    return missing


def test_every_package_the_package_imports_is_declared():
    assert _undeclared("ragas_relevancy_ext", ["local", "otel", "pandas", "pytest", "ray"]) == []


def test_every_package_the_tests_import_is_declared():
    assert _undeclared("tests", ["local", "pandas", "pytest", "ray", "test"]) == []


def test_the_scan_sees_the_direct_imports():
    assert {"typer", "rich", "pydantic", "numpy", "ragas"} <= _imported_top_levels(
        ROOT / "ragas_relevancy_ext"
    )


def _load_local_model_tests() -> None:
    spec = importlib.util.spec_from_file_location(
        "local_model_under_guard", ROOT / "tests" / "test_local_model.py"
    )
    spec.loader.exec_module(importlib.util.module_from_spec(spec))


def test_a_missing_local_extra_fails_the_run_when_ci_requires_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # as if not installed
    monkeypatch.setenv(REQUIRE_LOCAL, "1")
    with pytest.raises(ImportError, match="sentence_transformers"):
        _load_local_model_tests()
    monkeypatch.delenv(REQUIRE_LOCAL)
    with pytest.raises(pytest.skip.Exception):
        _load_local_model_tests()
