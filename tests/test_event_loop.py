"""Slow work never runs on a running event loop: the language model's load, the reply cache's
SQLite writes, the OpenAI SDK's embeddings module import; and the command line imports the
local model's library beside RAGAS, not after it.

Each test records WHERE the work ran (the thread, and whether an event loop was running in
it), never how long it took.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import py3langid.langid
import pytest
from typer.testing import CliRunner

from ragas_relevancy_ext import AnswerRelevancy
from ragas_relevancy_ext.cli import app
from ragas_relevancy_ext.cli import setup as cli_setup
from ragas_relevancy_ext.cli.providers import Built, MissingKeyError, ProviderError, Spec
from ragas_relevancy_ext.scoring import languages
from ragas_relevancy_ext.store.cache import CachedJudge, disk_store
from ragas_relevancy_ext.store.sqlite import SqliteStore
from ragas_relevancy_ext.testing.loopback import LoopbackServer
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "Where is my order #48213?"
ANSWER = "Order #48213 left our warehouse on Monday and reaches you tomorrow."


def where() -> tuple[str, bool]:
    """This thread's name, and whether an event loop is running in it."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return threading.current_thread().name, False
    return threading.current_thread().name, True


class _Identifier:
    def classify(self, text: str) -> tuple[str, float]:
        return "en", 1.0


@pytest.fixture
def model_loads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """py3langid's model made unloaded again, its loader recording where each load ran."""
    loads: list[tuple[str, bool]] = []

    def load(*args: Any, **kwargs: Any) -> _Identifier:
        loads.append(where())
        return _Identifier()

    monkeypatch.setattr(py3langid.langid, "IDENTIFIER", None)
    monkeypatch.setattr(py3langid.langid, "_load_identifier", load)
    monkeypatch.setattr(languages, "_DETECTORS", {})
    return loads


def test_the_first_score_leaves_the_language_model_to_a_thread(model_loads) -> None:
    metric = AnswerRelevancy(llm=PretendJudge(), embeddings=HashEmbeddings())
    result = metric.score(user_input=QUESTION, response=ANSWER)
    main = threading.main_thread().name
    assert [load for load in model_loads if load[0] == main] == []  # not paid by score()
    # still worked out when first read, with the model loaded once
    assert result.report.question_language == "en"
    assert [p.language for p in result.report.probes] == ["en"] * 3
    assert result.reason.startswith("Score")
    assert len(model_loads) == 1
    assert model_loads[0][1] is False


def test_score_command_rows_load_the_language_model_off_the_loop(model_loads, tmp_path) -> None:
    data = tmp_path / "rows.jsonl"
    data.write_text(
        "".join(
            json.dumps({"user_input": f"{QUESTION} ({n})", "response": ANSWER}) + "\n"
            for n in range(5)
        )
    )
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(
        app, ["score", str(data), "--embeddings", "hash", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert len(model_loads) == 1
    assert model_loads[0][1] is False  # no event loop was running in the loading thread
    assert {json.loads(line)["question_language"] for line in out.read_text().splitlines()} == {
        "en"
    }


def test_cached_replies_are_written_off_the_loop(monkeypatch, tmp_path) -> None:
    writes: list[tuple[str, bool]] = []
    real_set = SqliteStore.set

    def recorded_set(self: SqliteStore, key: str, value: Any) -> None:
        writes.append(where())
        real_set(self, key, value)

    monkeypatch.setattr(SqliteStore, "set", recorded_set)
    cached = CachedJudge(PretendJudge(), disk_store(tmp_path), "offline")
    metric = AnswerRelevancy(llm=cached, embeddings=HashEmbeddings())
    first = metric.score(user_input=QUESTION, response=ANSWER)
    assert cached.misses > 0 and len(writes) == cached.misses
    assert [running for _, running in writes] == [False] * len(writes)
    again = CachedJudge(PretendJudge(), disk_store(tmp_path), "offline")
    second = AnswerRelevancy(llm=again, embeddings=HashEmbeddings())
    assert second.score(user_input=QUESTION, response=ANSWER).value == first.value
    assert again.hits == cached.misses and again.misses == 0  # the writer thread wrote them


# A fresh process: the SDK's embeddings module is imported once per process, and this test
# needs it not imported yet. A finder on sys.meta_path notes where its import starts.
FIRST_SCORE = """
import asyncio, json, sys
from openai import AsyncOpenAI
from ragas.embeddings.base import BaseRagasEmbedding
from ragas_relevancy_ext import AnswerRelevancy
from ragas_relevancy_ext.scoring.embeddings import usage_http_client
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge
preloaded = "openai.resources.embeddings" in sys.modules  # openai before 1.6x imports it at once
seen = []
class Note:
    def find_spec(self, name, path=None, target=None):
        if name == "openai.resources.embeddings":
            try:
                asyncio.get_running_loop()
                seen.append(True)
            except RuntimeError:
                seen.append(False)
        return None
sys.meta_path.insert(0, Note())
class OnClient(BaseRagasEmbedding):  # holds an SDK client whose .embeddings is not made yet
    def __init__(self, url):
        self.client = AsyncOpenAI(base_url=url, api_key="unused", http_client=usage_http_client())
    def embed_text(self, text, **kwargs):
        raise NotImplementedError
    async def aembed_text(self, text, **kwargs):
        answer = await self.client.embeddings.create(input=[text], model="loop-embed")
        return answer.data[0].embedding
embeddings = HashEmbeddings() if sys.argv[1] == "hash" else OnClient(sys.argv[1])
metric = AnswerRelevancy(llm=PretendJudge(), embeddings=embeddings)
result = metric.score(user_input="Where is order 7?", response="Order 7 ships today.")
print(json.dumps({"loop_running": seen, "preloaded": preloaded,
                  "tokens": result.report.usage.embedding_tokens}))
"""


def first_score(embeddings: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", FIRST_SCORE, embeddings],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_openai_embeddings_module_is_imported_off_the_loop() -> None:
    with LoopbackServer() as server:
        seen = first_score(server.openai_base_url)
        embedding_requests = server.count("embeddings")
    # imported once, in a thread with no loop running (an SDK that imports it at once: never)
    assert seen["loop_running"] == ([] if seen["preloaded"] else [False])
    assert embedding_requests > 0 and seen["tokens"] > 0  # and its usage is still read


def test_embeddings_on_no_openai_client_import_no_openai_embeddings_module() -> None:
    assert first_score("hash")["loop_running"] == []


def test_the_local_model_library_loads_while_ragas_loads(monkeypatch) -> None:
    importing = threading.Event()
    judge_built = threading.Event()
    seen: dict[str, Any] = {}

    def import_local_model() -> None:
        seen["import thread"] = threading.current_thread().name
        importing.set()
        seen["judge built meanwhile"] = judge_built.wait(timeout=60)

    def build_judge(spec: str, **kwargs: Any) -> Built:
        seen["import under way"] = importing.wait(timeout=60)
        judge_built.set()
        return Built(PretendJudge(), "", Spec("offline"))

    def build_embeddings(spec: str, **kwargs: Any) -> Built:
        return Built(HashEmbeddings(), "", Spec("local"))

    monkeypatch.setattr(cli_setup, "_import_local_model", import_local_model)
    monkeypatch.setattr(cli_setup, "local_extra_installed", lambda: True)
    monkeypatch.setattr(cli_setup, "build_judge", build_judge)
    monkeypatch.setattr(cli_setup, "build_embeddings", build_embeddings)
    monkeypatch.delitem(sys.modules, cli_setup.LOCAL_MODEL_MODULE, raising=False)
    said: list[str] = []
    settings = cli_setup.Settings(embeddings="local")
    cli_setup.prepare(settings, say=said.append)
    assert seen == {
        "import thread": seen["import thread"],
        "import under way": True,
        "judge built meanwhile": True,
    }
    assert seen["import thread"] != threading.current_thread().name
    assert said == [
        "loading RAGAS and the local model (sentence-transformers)…",
        "loading the local model (sentence-transformers)…",
    ]


def test_a_store_that_cannot_be_written_warns_once_and_keeps_every_score(tmp_path, capsys):
    from ragas_relevancy_ext.store.sqlite import CacheError

    class Full(SqliteStore):
        def set(self, key: str, value: Any) -> None:
            raise CacheError(f"--cache {self.path}: cannot write to it (database or disk is full)")

    cached = CachedJudge(PretendJudge(), Full(tmp_path), "offline")
    metric = AnswerRelevancy(llm=cached, embeddings=HashEmbeddings(), probe_prompt="stock")
    rows = [{"user_input": f"{QUESTION} ({n})", "response": ANSWER} for n in range(6)]
    results = metric.batch_score(rows)
    assert [r.report.error for r in results] == [None] * 6  # every row scored
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning:" in line]
    assert len(warnings) == 1 and "cache is off" in warnings[0]
    assert cached.off is not None


def test_a_judge_that_fails_to_build_leaves_no_import_running(monkeypatch) -> None:
    # pytest's own in-process runs read sys.modules after a command fails: an import still
    # running in a thread would change it under them
    failed = threading.Event()
    finished: list[bool] = []

    def import_local_model() -> None:
        # held until the judge has failed, then while prepare waits (or until the test looks)
        failed.wait(timeout=60)
        returned.wait(timeout=0.5)
        finished.append(True)

    def build_judge(spec: str, **kwargs: Any) -> Built:
        failed.set()
        raise ProviderError("the judge cannot be built")

    returned = threading.Event()
    monkeypatch.setattr(cli_setup, "_import_local_model", import_local_model)
    monkeypatch.setattr(cli_setup, "local_extra_installed", lambda: True)
    monkeypatch.setattr(cli_setup, "build_judge", build_judge)
    monkeypatch.delitem(sys.modules, cli_setup.LOCAL_MODEL_MODULE, raising=False)
    with pytest.raises(ProviderError):
        cli_setup.prepare(cli_setup.Settings(embeddings="local"))
    assert finished == [True]  # the import had ended before prepare raised
    returned.set()


def test_a_missing_key_fails_before_the_local_model_import_starts(monkeypatch) -> None:
    started: list[bool] = []
    monkeypatch.setattr(cli_setup, "_import_local_model", lambda: started.append(True))
    monkeypatch.setattr(cli_setup, "local_extra_installed", lambda: True)
    monkeypatch.delitem(sys.modules, cli_setup.LOCAL_MODEL_MODULE, raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingKeyError, match="OPENAI_API_KEY"):
        cli_setup.prepare(cli_setup.Settings(judge="openai:gpt-4o-mini", embeddings="local"))
    assert started == []
