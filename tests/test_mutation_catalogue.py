"""The mutation catalogue (``tools/mutate.py``) still fits the code: every mutant's text occurs
once in its module, so a rewrite of the code cannot leave mutants that silently test nothing.

Reads the source only; no mutant is run (``python tools/mutate.py`` does that, by hand).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def mutate():
    spec = importlib.util.spec_from_file_location("mutate", ROOT / "tools" / "mutate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutate"] = module  # dataclasses look their module up by name
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules["mutate"]


def test_every_mutant_applies_to_the_code_as_it_is(mutate):
    assert mutate.catalogue_problems(ROOT) == []
    assert len(mutate.MUTANTS) >= 100


def test_check_exits_zero_on_the_catalogue(mutate, capsys):
    assert mutate.main(["--check"]) == 0
    assert capsys.readouterr().out == f"{len(mutate.MUTANTS)} mutants, 0 problem(s)\n"


def test_a_mutant_whose_text_is_gone_is_an_error(mutate, monkeypatch, capsys):
    gone = mutate.Mutant("scoring.py", "return 'no such line'", "return None", "gone")
    twice = mutate.Mutant("scoring.py", "import", "imp0rt", "found twice")
    monkeypatch.setattr(mutate, "MUTANTS", [gone, twice])
    monkeypatch.setattr(mutate, "EQUIVALENT", {"scoring.py: renamed": "no such mutant"})
    imports = (ROOT / "ragas_relevancy_ext" / "scoring.py").read_text().count("import")
    assert imports > 1
    assert mutate.catalogue_problems(ROOT) == [
        "EQUIVALENT 'scoring.py: renamed' names no mutant",
        f"STALE scoring.py: found twice: old text found {imports} times, not once",
        "STALE scoring.py: gone: old text found 0 times, not once",
    ]
    assert mutate.main(["--check"]) == 1
    assert "error: STALE scoring.py: gone" in capsys.readouterr().err


def test_a_stale_mutant_fails_the_run_and_is_named(mutate, capsys):
    gone = mutate.Mutant("scoring.py", "return 'no such line'", "return None", "gone")
    kept = mutate.Mutant("scoring.py", "x", "y", "kept")
    outcomes = [
        mutate.Outcome(kept, "killed", "1 failed"),
        mutate.Outcome(gone, "stale", "old text found 0 times, not once"),
    ]
    assert mutate._report(outcomes) == 1
    out, err = capsys.readouterr()
    assert out.splitlines()[2].split() == ["scoring.py", "1/1", "100", "0", "1"]  # 1 stale
    assert "STALE (error): scoring.py: gone (old text found 0 times, not once)" in err
    assert mutate._report(outcomes[:1]) == 0
