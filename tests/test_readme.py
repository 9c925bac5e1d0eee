"""Every Python and shell snippet of README.md, run as written against the loopback server.

Python snippets run after a hidden setup (``GIVEN``); one defining tests runs as a pytest file,
one starting Ray in an interpreter of its own (Ray's workers take the environment of the process
that starts it). Shell snippets run in a folder holding the files they name (the example data
cut to every third row). The providers'
SDKs find the loopback server through their own environment variables (``OPENAI_BASE_URL``,
``GOOGLE_GEMINI_BASE_URL``), and a ``--base-url`` naming a provider is aimed at it too: nothing
leaves the machine. A ``ragas-relevancy`` command runs in this process (one that starts Ray in
bash). The blocks under "## Install" (a fresh environment: install, first run, the
tests) are run by ``.ci/run``, in a copy of the repository.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from common import EXAMPLES, ROOT
from ragas.dataset_schema import EvaluationResult
from typer.testing import CliRunner

from ragas_relevancy_ext import RelevancyResult, reports_for
from ragas_relevancy_ext.cli import app
from ragas_relevancy_ext.testing.loopback import LoopbackServer

README = ROOT / "README.md"
RUN_BY_CI = "## Install"
PIECES = re.compile(r"^(## [^\n]*)$|^```(python|bash)\n(.*?)^```$", re.M | re.S)
STARTS_RAY = re.compile(r"^import ray\b|ragas_relevancy_ext\.ray\b", re.M)

# What the Python snippets take as given: a judge and embeddings (on the loopback server, from
# the SDK's environment variables), a response, a RAGAS dataset, and an app under test.
GIVEN = """
import json as _json
from openai import AsyncOpenAI as _AsyncOpenAI
from ragas import EvaluationDataset as _EvaluationDataset
from ragas.embeddings import OpenAIEmbeddings as _OpenAIEmbeddings
from ragas.llms import llm_factory as _llm_factory

_client = _AsyncOpenAI()
llm = _llm_factory("gpt-4o-mini", client=_client)
embeddings = _OpenAIEmbeddings(client=_client)
_rows = [_json.loads(line) for line in open("data.jsonl", encoding="utf-8")]
response = _rows[1]["response"]
dataset = _EvaluationDataset.from_list(
    [{"user_input": r["user_input"], "response": r["response"]} for r in _rows[:3]]
)
QUESTION = _rows[0]["user_input"]


class bot:  # the app under test
    @staticmethod
    def answer(question):
        return next(r["response"] for r in _rows if r["user_input"] == question)
"""


def snippets(language: str) -> list[Any]:
    """The README's ``language`` snippets outside RUN_BY_CI, each padded with blank lines so
    that a traceback names the README's own line."""
    text = README.read_text(encoding="utf-8")
    section, found = "", []
    for piece in PIECES.finditer(text):
        if piece[1]:
            section = piece[1]
        elif piece[2] == language and section != RUN_BY_CI:
            line = text.count("\n", 0, piece.start(3))
            found.append(pytest.param("\n" * line + piece[3], id=f"README.md:{line + 1}"))
    return found


@pytest.fixture(scope="module")
def server():
    with LoopbackServer(width=64) as running:
        yield running


@pytest.fixture
def folder(server, tmp_path, monkeypatch) -> Path:
    """A working directory holding what the snippets name, and an environment aiming every
    provider at the loopback server."""
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    every = (EXAMPLES / "support_qa.jsonl").read_text(encoding="utf-8").splitlines()
    (tmp_path / "examples" / "support_qa.jsonl").write_text("\n".join(every[::3]) + "\n")
    rows = every[:6]
    for path in (tmp_path / "data.jsonl", tmp_path / "answers" / "part-0.jsonl"):
        path.parent.mkdir(exist_ok=True)
        path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    with (tmp_path / "data.csv").open("w", encoding="utf-8", newline="") as table:
        writer = csv.writer(table)
        writer.writerow(["question", "answer"])
        writer.writerows([r["user_input"], r["response"]] for r in map(json.loads, rows))
    monkeypatch.chdir(tmp_path)
    for name in ("a", "b"):  # two saved reports, for diff and plan
        saved = CliRunner().invoke(
            app, ["score", "data.jsonl", "--embeddings", "hash", "--out", f"{name}.jsonl"]
        )
        assert saved.exit_code == 0, saved.output
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-readme-not-a-real-key")
    monkeypatch.setenv("GEMINI_API_KEY", "readme-not-a-real-key")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    server.reset()
    return tmp_path


def run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


@pytest.mark.parametrize("code", snippets("python"))
def test_python_snippet(
    code: str, folder: Path, server: LoopbackServer, request: pytest.FixtureRequest
) -> None:
    if "def test_" in code:  # a test file: pytest runs it, with the plugin the package installs
        pytester: pytest.Pytester = request.getfixturevalue("pytester")  # its own folder
        shutil.copy(folder / "data.jsonl", pytester.path)
        pytester.makepyfile(test_example=GIVEN + code.lstrip("\n"))
        ran = pytester.runpytest_subprocess(
            "--relevancy-judge", "openai:gpt-4o-mini", "--relevancy-embeddings", "openai:embed"
        )
        counts, output = ran.parseoutcomes(), ran.stdout.str()
        assert counts.get("passed", 0) + counts.get("failed", 0) == code.count("def test_"), output
        assert output.count("cosine  nc  probe") == counts.get("failed", 0)  # a failure's probes
    elif STARTS_RAY.search(code):
        script = folder / "snippet.py"
        script.write_text(f"exec({GIVEN!r})\nexec(compile({code!r}, {str(README)!r}, 'exec'))\n")
        run([sys.executable, str(script)])
    else:
        given: dict[str, Any] = {"__name__": "readme"}
        exec(GIVEN, given)
        exec(compile(code, str(README), "exec"), given)
        reports = [r for value in given.values() for r in reports_of(value)]
        assert [r.cause for r in reports] == [None] * len(reports)  # every score measured...
        assert (server.count() > 0) is bool(reports)  # ...by the loopback server
        return
    assert server.count() > 0  # the judge asked was the loopback server


def reports_of(value: Any) -> list[Any]:
    """The reports of a result a snippet got: a score's, or an evaluate run's rows."""
    if isinstance(value, RelevancyResult):
        return [value.report]
    return reports_for(value) if isinstance(value, EvaluationResult) else []


@pytest.mark.parametrize("code", snippets("bash"))
def test_shell_snippet(code: str, folder: Path, server: LoopbackServer) -> None:
    aimed = re.sub(r"--base-url https://\S+", f"--base-url {server.openai_base_url}", code)
    for command in aimed.replace("\\\n", " ").splitlines():
        words = shlex.split(command, comments=True)
        if words[:1] == ["ragas-relevancy"] and "ray" not in words:
            # in this process, through the console script's app: no interpreter importing RAGAS
            done = CliRunner().invoke(app, words[1:])
            assert done.exit_code == 0, f"{command}\n{done.output}"
        elif words:
            run(["bash", "-euo", "pipefail", "-c", command])
    assert server.count() > 0  # the provider asked was the loopback server
