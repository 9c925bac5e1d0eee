"""Slow work never runs on a running event loop: the language model's load, the reply cache's
SQLite writes, the OpenAI SDK's embeddings module import; and the command line imports the
local model's library beside RAGAS, not after it.

Each test records WHERE the work ran (the thread, and whether an event loop was running in
it), never how long it took.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

import pytest
from common import where
from openai import AsyncOpenAI
from ragas.embeddings.base import BaseRagasEmbedding
from typer.testing import CliRunner

from ragas_relevancy_ext import AnswerRelevancy
from ragas_relevancy_ext.cli import app
from ragas_relevancy_ext.cli import setup as cli_setup
from ragas_relevancy_ext.cli.providers import Built, MissingKeyError, ProviderError, Spec
from ragas_relevancy_ext.store.cache import CachedJudge, disk_store
from ragas_relevancy_ext.store.sqlite import SqliteStore
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge

QUESTION = "Where is my order #48213?"
ANSWER = "Order #48213 left our warehouse on Monday and reaches you tomorrow."


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


@pytest.fixture
def sdk_module_imports(monkeypatch) -> list[bool]:
    """The openai SDK's embeddings module made unimported again (put back after the test); each
    import of it notes whether an event loop was running in its thread."""
    import openai.resources

    name = "openai.resources.embeddings"
    seen: list[bool] = []

    class Note:  # a finder that finds nothing: it only notes where an import starts
        def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
            if fullname == name:
                seen.append(where()[1])

    monkeypatch.delitem(sys.modules, name)
    monkeypatch.delattr(openai.resources, "embeddings")
    monkeypatch.setattr(sys, "meta_path", [Note(), *sys.meta_path])
    return seen


class OnClient(BaseRagasEmbedding):
    """Embeddings on an SDK client whose embeddings resource each call reads, as a real
    request does (the vectors are hash vectors: no request is sent)."""

    def __init__(self) -> None:
        self.client = AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="unused")

    def embed_text(self, text: str, **kwargs: Any) -> list[float]:
        raise NotImplementedError

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
        assert self.client.embeddings is not None
        return HashEmbeddings().embed_text(text)


def test_the_openai_embeddings_module_is_imported_off_the_loop(sdk_module_imports) -> None:
    metric = AnswerRelevancy(llm=PretendJudge(), embeddings=OnClient())
    assert metric.score(user_input=QUESTION, response=ANSWER).report.cause is None
    assert sdk_module_imports == [False]  # imported once, in a thread with no loop running


def test_embeddings_on_no_openai_client_import_no_openai_embeddings_module(
    sdk_module_imports,
) -> None:
    metric = AnswerRelevancy(llm=PretendJudge(), embeddings=HashEmbeddings())
    assert metric.score(user_input=QUESTION, response=ANSWER).report.cause is None
    assert sdk_module_imports == []


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
    joined = threading.Event()
    finished: list[bool] = []

    class Thread(threading.Thread):
        def join(self, timeout: float | None = None) -> None:
            joined.set()  # prepare waits for the import: let it end
            super().join(timeout)

    def import_local_model() -> None:
        joined.wait(timeout=60)  # held until prepare waits for it (or the test looks)
        finished.append(True)

    def build_judge(spec: str, **kwargs: Any) -> Built:
        raise ProviderError("the judge cannot be built")

    monkeypatch.setattr(threading, "Thread", Thread)
    monkeypatch.setattr(cli_setup, "_import_local_model", import_local_model)
    monkeypatch.setattr(cli_setup, "local_extra_installed", lambda: True)
    monkeypatch.setattr(cli_setup, "build_judge", build_judge)
    monkeypatch.delitem(sys.modules, cli_setup.LOCAL_MODEL_MODULE, raising=False)
    try:
        with pytest.raises(ProviderError):
            cli_setup.prepare(cli_setup.Settings(embeddings="local"))
        assert finished == [True]  # the import had ended before prepare raised
    finally:
        joined.set()


def test_a_missing_key_fails_before_the_local_model_import_starts(monkeypatch) -> None:
    started: list[bool] = []
    monkeypatch.setattr(cli_setup, "_import_local_model", lambda: started.append(True))
    monkeypatch.setattr(cli_setup, "local_extra_installed", lambda: True)
    monkeypatch.delitem(sys.modules, cli_setup.LOCAL_MODEL_MODULE, raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingKeyError, match="OPENAI_API_KEY"):
        cli_setup.prepare(cli_setup.Settings(judge="openai:gpt-4o-mini", embeddings="local"))
    assert started == []
