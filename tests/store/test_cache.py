"""The judge-reply cache: a re-run reuses every probe and asks the judge nothing."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import math
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from typing import Any

import pytest
from pydantic import BaseModel

from ragas_relevancy_ext import AnswerRelevancy
from ragas_relevancy_ext.scoring.prompts import AnswerRelevanceOutput
from ragas_relevancy_ext.store.cache import CachedJudge, SqliteStore, disk_store, reply_key
from ragas_relevancy_ext.store.sqlite import CACHE_FILE, CacheError
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge, ScriptedJudge

ROWS = [
    {"user_input": "Where is order A17?", "response": "Order A17 shipped on 3 March."},
    {"user_input": "Can I pay by card?", "response": "Yes, we take Visa and Mastercard."},
]


def run(judge, rows=ROWS, embeddings=None, probe_prompt="stock"):
    metric = AnswerRelevancy(
        llm=judge,
        embeddings=embeddings or HashEmbeddings(),
        strictness=3,
        probe_prompt=probe_prompt,
    )
    return asyncio.run(metric.abatch_score(rows))


def probes_of(results):
    return [[(p.question, p.noncommittal) for p in r.report.probes] for r in results]


@pytest.mark.parametrize("probe_prompt", ["stock", "sequential", "diverse", "angles"])
def test_rerun_with_other_embeddings_makes_no_judge_call(tmp_path, probe_prompt):
    first_judge = PretendJudge()
    first = run(
        CachedJudge(first_judge, disk_store(tmp_path), "offline"), probe_prompt=probe_prompt
    )
    assert first_judge.calls > 0

    again_judge = PretendJudge()
    cached = CachedJudge(again_judge, disk_store(tmp_path), "offline")
    again = run(cached, embeddings=HashEmbeddings(width=64), probe_prompt=probe_prompt)
    assert again_judge.calls == 0
    assert (cached.hits, cached.misses) == (first_judge.calls, 0)
    assert probes_of(again) == probes_of(first)
    assert [r.value for r in again] != [r.value for r in first]  # other embeddings, other cosines


def test_stock_mode_keeps_n_independent_replies_for_one_prompt(tmp_path):
    replies = [("When did A17 ship?", 0), ("Has A17 shipped?", 0), ("Where is A17?", 1)]
    row = ROWS[:1]
    first = run(CachedJudge(ScriptedJudge(replies), disk_store(tmp_path), "judge-x"), row)
    # the n calls run at once: which call gets which scripted reply is the loop's order
    assert [sorted(probes) for probes in probes_of(first)] == [sorted(replies)]

    empty = ScriptedJudge([])  # would raise if asked
    again = run(CachedJudge(empty, disk_store(tmp_path), "judge-x"), row)
    assert empty.calls == 0
    assert [sorted(probes) for probes in probes_of(again)] == [sorted(replies)]
    assert again[0].value == first[0].value


def test_started_over_a_judge_answers_a_prompt_asked_again_with_its_first_reply(tmp_path):
    replies = [("When did A17 ship?", 0), ("Has A17 shipped?", 0), ("Where is A17?", 1)]
    cached = CachedJudge(ScriptedJudge(replies * 2), disk_store(tmp_path), "judge-x")
    row = ROWS[:1]
    first = run(cached, row)
    cached.start_over()  # the same prompts again: the replies stored for the first askings
    again = run(cached, row)
    # the n calls run at once: which call gets which reply is the loop's order
    assert [sorted(p) for p in probes_of(again)] == [sorted(p) for p in probes_of(first)]
    assert [sorted(p) for p in probes_of(first)] == [sorted(replies)]
    assert (cached.hits, cached.misses) == (3, 3)


def test_other_judge_models_do_not_share_replies(tmp_path):
    run(CachedJudge(PretendJudge(), disk_store(tmp_path), "model-a"), ROWS[:1])
    other = PretendJudge()
    run(CachedJudge(other, disk_store(tmp_path), "model-b"), ROWS[:1])
    assert other.calls == 3


def test_failed_calls_are_not_cached(tmp_path):
    class Down(PretendJudge):
        async def agenerate(self, prompt, response_model):
            self.prompts.append(prompt)
            raise ConnectionError("judge unreachable")

    down = run(CachedJudge(Down(), disk_store(tmp_path), "m"), ROWS[:1])
    assert "judge unreachable" in down[0].report.reason
    judge = PretendJudge()
    run(CachedJudge(judge, disk_store(tmp_path), "m"), ROWS[:1])
    assert judge.calls == 3


def test_key_depends_on_model_prompt_output_and_occurrence():
    keys = {
        reply_key("m", "p", AnswerRelevanceOutput, 0),
        reply_key("m", "p", AnswerRelevanceOutput, 1),
        reply_key("n", "p", AnswerRelevanceOutput, 0),
        reply_key("m", "q", AnswerRelevanceOutput, 0),
    }
    assert len(keys) == 4
    assert reply_key("m", "p", AnswerRelevanceOutput, 0) == reply_key(
        "m", "p", AnswerRelevanceOutput, 0
    )


def test_key_depends_on_the_output_model():
    class Other(AnswerRelevanceOutput):
        pass

    assert reply_key("m", "p", AnswerRelevanceOutput, 0) != reply_key("m", "p", Other, 0)


def test_one_prompt_asked_for_two_output_models_gets_two_replies(tmp_path):
    from ragas_relevancy_ext.scoring.prompts import DiverseProbeOutput

    judge = ScriptedJudge([("Where is A17?", 0), [("When did A17 ship?", 0)]])
    cached = CachedJudge(judge, disk_store(tmp_path), "m")
    one = asyncio.run(cached.agenerate("same prompt", AnswerRelevanceOutput))
    listed = asyncio.run(cached.agenerate("same prompt", DiverseProbeOutput))
    assert judge.calls == 2 and cached.misses == 2
    assert one.question == "Where is A17?"
    assert [p.question for p in listed.probes] == ["When did A17 ship?"]


def test_a_stale_reply_is_asked_again_and_replaced(tmp_path):
    # a reply stored under an output model of the same name but another shape (an older
    # version of the model) does not parse any more: the judge is asked again
    class AnswerRelevanceOutput(BaseModel):  # the old shape, same name, so the same key
        text: str

    old_judge = ScriptedJudge([{"text": "an old reply"}])
    asyncio.run(
        CachedJudge(old_judge, disk_store(tmp_path), "m").agenerate("prompt", AnswerRelevanceOutput)
    )
    from ragas_relevancy_ext.scoring.prompts import AnswerRelevanceOutput as Current

    judge = ScriptedJudge([("Where is A17?", 1)])
    cached = CachedJudge(judge, disk_store(tmp_path), "m")
    reply = asyncio.run(cached.agenerate("prompt", Current))
    assert (reply.question, reply.noncommittal) == ("Where is A17?", 1)
    assert (judge.calls, cached.hits, cached.misses) == (1, 0, 1)

    again = CachedJudge(ScriptedJudge([]), disk_store(tmp_path), "m")
    assert asyncio.run(again.agenerate("prompt", Current)) == reply
    assert (again.hits, again.misses) == (1, 0)


def test_the_key_of_a_reply_stays_the_same_from_version_to_version():
    # a disk cache written now must be found by the next version: this is today's key, from
    # [KEY_VERSION, model, output model's name, prompt, occurrence] as JSON, non-ASCII as is
    key = reply_key("openai:gpt-4o-mini", "Où est la commande A17 ?", AnswerRelevanceOutput, 2)
    assert key == (
        "ragas-relevancy-ext:05b0f0588452b9b4253fd663c3229cec7708bac9c391d956d3459d8ce01cf73c"
    )


def _in_a_forked_child(work) -> int:
    """Run ``work()`` in a forked child, killed after 30 s; its exit code (0: it returned True)."""
    pid = os.fork()
    if pid == 0:  # the child never returns into pytest
        code = 1
        try:
            signal.alarm(30)  # a hang ends the child, and the test fails on its code
            code = 0 if work() else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_forked_child_writes_the_cache_with_a_writer_of_its_own():
    from ragas_relevancy_ext.store import cache

    def writer() -> Any:
        return cache._writer(os.getpid())  # as CachedJudge finds the writer of its process

    writer().submit(int).result()  # the parent's writer thread exists: the child has none
    assert _in_a_forked_child(lambda: writer().submit(int, "7").result() == 7) == 0


def test_a_forked_child_loads_the_language_model_a_parent_thread_was_loading():
    from concurrent.futures import Future
    from unittest import mock

    from ragas_relevancy_ext.scoring import languages

    # as when a parent thread is loading the model at the fork: the child has no such thread
    with mock.patch.dict(languages._DETECTORS, {os.getpid(): Future()}):
        code = _in_a_forked_child(lambda: languages.detect_language("Where is my order?") == "en")
    assert code == 0


# -- processes sharing one cache ----------------------------------------------------------------

# Another process holding the cache's write lock until its standard input says "release"
HOLD_WRITE_LOCK = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
db.execute("COMMIT")
"""


def hold_write_lock(path) -> subprocess.Popen:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_WRITE_LOCK, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
    return holder


def integrity(path) -> str:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return db.execute("PRAGMA integrity_check").fetchone()[0]


def hundred_rows(worker: int) -> list[dict[str, str]]:
    """100 rows, half of them shared by every worker."""
    return [
        {"user_input": f"Where is order {n if n < 50 else f'{worker}-{n}'}?", "response": "Soon."}
        for n in range(100)
    ]


_FORKED: dict[str, Any] = {}  # what forked workers inherit from the test


def _score_with_the_parent_s_store(worker: int) -> int:
    """In a forked worker: score 100 rows through the store its parent opened; rows scored."""
    judge = CachedJudge(PretendJudge(), _FORKED["store"], "m")
    results = run(judge, hundred_rows(worker), probe_prompt="diverse")
    return sum(math.isfinite(r.value) for r in results)


@pytest.mark.slow
# the fork with a thread running is what this test is about
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_forked_workers_score_with_a_cache_a_parent_thread_is_writing(tmp_path):
    store = _FORKED["store"] = disk_store(tmp_path)
    holder = hold_write_lock(store.path)  # so the parent's writer waits inside the cache
    stop, started = threading.Event(), threading.Event()

    def parent_writes() -> None:
        n = 0
        while not stop.is_set():
            started.set()
            store.set(f"parent-{n}", "{}")
            n += 1

    writer = threading.Thread(target=parent_writes)
    writer.start()
    started.wait(timeout=60)
    try:
        with multiprocessing.get_context("fork").Pool(4) as pool:  # forked now
            holder.communicate("release\n", timeout=60)
            scored = pool.map_async(_score_with_the_parent_s_store, range(4)).get(timeout=120)
    finally:
        stop.set()
        writer.join(timeout=60)
        holder.kill()
    assert scored == [100] * 4
    assert integrity(store.path) == "ok"
    assert store.get("parent-0") == "{}"


class NotedStore(SqliteStore):
    """A store that notes when a write begins, and a read made after that."""

    writing = threading.Event()
    read_while_writing = threading.Event()

    def set(self, key: str, value: Any) -> None:
        self.writing.set()
        super().set(key, value)

    def get(self, key: str) -> str | None:
        value = super().get(key)
        if self.writing.is_set():
            self.read_while_writing.set()
        return value


@pytest.mark.slow
def test_a_write_lock_another_process_holds_never_stalls_the_event_loop(tmp_path, caplog):
    store = NotedStore(tmp_path)
    judge = CachedJudge(PretendJudge(), store, "m")
    rows = hundred_rows(0)[:40]
    run(judge, rows[:4], probe_prompt="diverse")  # imports and first uses before the watch
    store.writing, store.read_while_writing = threading.Event(), threading.Event()
    caplog.set_level(logging.WARNING, logger="asyncio")

    metric = AnswerRelevancy(llm=judge, embeddings=HashEmbeddings(), max_concurrency=8)

    async def watched() -> list[Any]:
        asyncio.get_running_loop().slow_callback_duration = 0.1  # asyncio debug mode reports
        first = asyncio.ensure_future(metric.ascore(**hundred_rows(1)[99]))
        await asyncio.to_thread(store.writing.wait, 60)  # its reply's write waits for the lock
        batch = asyncio.ensure_future(metric.abatch_score(rows))  # read while that write waits
        await asyncio.to_thread(store.read_while_writing.wait, 60)
        await asyncio.to_thread(holder.communicate, "release\n", 60)
        await first
        return await batch

    gc.collect()  # the run's steps are measured, not a collection of the test process's heap
    gc.freeze()  # (the command line freezes its heap too)
    holder = hold_write_lock(store.path)
    try:
        assert holder.poll() is None  # the lock is held as the run starts
        results = asyncio.run(watched(), debug=True)
    finally:
        holder.kill()
        gc.unfreeze()
    slow = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Executing")]
    assert slow == []
    assert all(math.isfinite(r.value) for r in results)
    with contextlib.closing(sqlite3.connect(store.path)) as db:  # every reply stored
        assert db.execute("SELECT count(*) FROM replies").fetchone()[0] == judge.misses
    assert judge.off is None


def test_a_planted_link_or_another_program_s_database_is_refused_untouched(tmp_path):
    mine = tmp_path / "notes.db"
    mine.write_bytes(b"")
    for name in (CACHE_FILE, f"{CACHE_FILE}-wal"):
        folder = tmp_path / name.replace(".", "_")
        folder.mkdir()
        (folder / name).symlink_to(mine)
        with pytest.raises(CacheError, match=f"{name} is a link; it was left as it is"):
            disk_store(folder)
        assert mine.read_bytes() == b""
    with contextlib.closing(sqlite3.connect(mine)) as db, db:
        db.execute("CREATE TABLE notes (text TEXT)")
    before = mine.read_bytes()
    with pytest.raises(CacheError, match="holds tables this tool did not write"):
        SqliteStore(tmp_path, name=mine.name)
    assert mine.read_bytes() == before


class DictStore:
    """A store in memory that notes the thread of each read and write."""

    def __init__(self, replies: dict[str, str] | None = None):
        self.replies = dict(replies or {})
        self.read_in: set[int] = set()
        self.written_in: set[int] = set()

    def get(self, key: str) -> str | None:
        self.read_in.add(threading.get_ident())
        return self.replies.get(key)

    def set(self, key: str, value: str) -> None:
        self.written_in.add(threading.get_ident())
        self.replies[key] = value


def reply_json(question: str) -> str:
    return AnswerRelevanceOutput(question=question, noncommittal=0).model_dump_json()


def test_each_asking_of_a_prompt_reads_the_reply_stored_under_its_occurrence():
    store = DictStore(
        {reply_key("m", "p", AnswerRelevanceOutput, k): reply_json(f"Q{k}?") for k in range(3)}
    )
    cached = CachedJudge(ScriptedJudge([]), store, "m")  # would raise if asked

    async def ask_three_times() -> list[str]:
        return [(await cached.agenerate("p", AnswerRelevanceOutput)).question for _ in range(3)]

    assert asyncio.run(ask_three_times()) == ["Q0?", "Q1?", "Q2?"]
    assert (cached.hits, cached.misses) == (3, 0)


def test_a_prompt_s_occurrence_counts_the_askings_of_that_prompt_alone():
    store = DictStore()
    first = CachedJudge(
        ScriptedJudge([("Where is A17?", 0), ("Can I pay by card?", 0)]), store, "m"
    )

    async def ask(judge: CachedJudge, *prompts: str) -> list[str]:
        return [(await judge.agenerate(p, AnswerRelevanceOutput)).question for p in prompts]

    asyncio.run(ask(first, "p", "q"))
    alone = CachedJudge(ScriptedJudge([]), store, "m")  # a run that asks only the second prompt
    assert asyncio.run(ask(alone, "q")) == ["Can I pay by card?"]
    assert (alone.hits, alone.misses) == (1, 0)


def test_writes_go_to_one_writer_thread_never_to_the_threads_reads_use():
    # a write that waits for SQLite's lock must not hold a thread a read needs: with the loop's
    # threads cut to one, a write in them would share it with the reads
    from concurrent.futures import ThreadPoolExecutor

    stores = [DictStore(), DictStore()]

    async def main() -> None:
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=1))
        for store in stores:
            replies = [(f"Where is A{n}?", 0) for n in range(4)]
            judge = CachedJudge(ScriptedJudge(replies), store, "m")
            await asyncio.gather(*(run_one(judge, n) for n in range(4)))

    async def run_one(judge: CachedJudge, n: int) -> None:
        await judge.agenerate(f"prompt {n}", AnswerRelevanceOutput)

    asyncio.run(main())
    assert all(len(store.replies) == 4 for store in stores)
    written = stores[0].written_in | stores[1].written_in
    read = stores[0].read_in | stores[1].read_in
    assert len(written) == 1  # one writer for every cache
    assert not written & read
    assert threading.get_ident() not in written | read  # never the event loop's thread


# the fork with the writer thread running is what this test is about
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_stores_its_replies_after_the_parent_stored_some():
    store = DictStore()

    def ask(prompt: str) -> str:
        judge = CachedJudge(ScriptedJudge([(f"{prompt}?", 0)]), store, "m")
        return asyncio.run(judge.agenerate(prompt, AnswerRelevanceOutput)).question

    assert ask("parent") == "parent?"  # the parent's writer thread now exists

    def child_stores() -> bool:
        return ask("child") == "child?" and len(store.replies) == 2

    assert _in_a_forked_child(child_stores) == 0


def test_a_store_that_fails_is_switched_off_with_its_words_and_one_warning(capsys):
    class Broken(DictStore):
        def get(self, key: str) -> str | None:
            super().get(key)
            raise CacheError("--cache /x: cannot read it (disk I/O error)")

    store = Broken()
    judge = PretendJudge()
    cached = CachedJudge(judge, store, "m", kind="reply journal")
    rows = run(cached, ROWS[:1])
    assert math.isfinite(rows[0].value)
    assert judge.calls == 3  # every probe asked of the judge
    assert cached.off == "--cache /x: cannot read it (disk I/O error)"
    assert store.replies == {}  # switched off: nothing written after the failure
    assert capsys.readouterr().err.splitlines() == [
        "ragas-relevancy: warning: --cache /x: cannot read it (disk I/O error); the reply journal"
        " is off for the rest of this run (rows are scored as usual)"
    ]
