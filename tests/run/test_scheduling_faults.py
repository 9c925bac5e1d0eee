"""Faults of a run's scheduling, each reproduced through the public API and counted: slots,
tasks and requests, never time. The order of events is set by gates the tests open.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import Any

import pytest

from ragas_relevancy_ext import AnswerRelevancy, OneTextPerCall
from ragas_relevancy_ext.run.scheduler import Scheduler
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ROW = re.compile(r"A(\d+)\b")


def rows(n: int) -> list[dict[str, str]]:
    return [
        {"user_input": f"Where is order A{i}?", "response": f"Order A{i} shipped on day {i}."}
        for i in range(n)
    ]


def row_of(text: str) -> int:
    """The row a prompt or an embedded text belongs to (its order number)."""
    found = ROW.findall(text)
    return int(found[-1]) if found else -1


async def steps(n: int = 20) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def live_tasks() -> list[asyncio.Task[Any]]:
    """Tasks other than this one still running a coroutine."""
    current = asyncio.current_task()
    return [
        t
        for t in asyncio.all_tasks()
        if t is not current and not t.done() and hasattr(t.get_coro(), "cr_frame")
    ]


class LoggedJudge(PretendJudge):
    """Logs ``("judge", row)`` for each request; request number ``hold`` waits for ``go``."""

    def __init__(self, log: list[tuple[str, int]], hold: int = 0, hold_rows: bool = False):
        super().__init__()
        self.log = log
        self.hold = hold
        self.hold_rows = hold_rows  # every request of rows after row 0 waits for ``go``
        self.held = asyncio.Event()
        self.go = asyncio.Event()

    async def agenerate(self, prompt: str, response_model: Any) -> Any:
        row = row_of(prompt.rsplit("response", 1)[-1])
        self.log.append(("judge", row))
        if len(self.log) == self.hold or (self.hold_rows and row > 0):
            self.held.set()
            await self.go.wait()
        return await super().agenerate(prompt, response_model)


class LoggedEmbeddings(HashEmbeddings):
    """Logs ``("embed", row)`` per request; counts requests in flight (each waits one step)."""

    def __init__(self, log: list[tuple[str, int]]) -> None:
        super().__init__(32)
        self.log = log
        self.in_flight = self.peak = 0

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        self.log.append(("embed", row_of(texts[0])))
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(0)
            return [self.embed_text(t) for t in texts]
        finally:
            self.in_flight -= 1

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
        return (await self.aembed_texts([text]))[0]


# --- a waiting first call refused by a stop and cancelled in the same step ------------------


def test_a_refused_waiter_cancelled_in_the_same_step_frees_no_slot() -> None:
    in_flight = peak = 0

    async def call(slot: Any, release: asyncio.Event) -> None:
        nonlocal in_flight, peak
        async with slot:
            in_flight += 1
            peak = max(peak, in_flight)
            await release.wait()
            in_flight -= 1

    async def run() -> tuple[int, int]:
        scheduler = Scheduler(1)
        first = asyncio.Event()
        holder = asyncio.ensure_future(call(scheduler.row(), first))
        await steps()
        waiter = asyncio.ensure_future(call(scheduler.row(), asyncio.Event()))
        await steps()
        scheduler.stop_new_rows()  # the waiter is refused...
        waiter.cancel()  # ...and cancelled before it runs
        await steps()
        first.set()  # the holder leaves: one slot free, no more
        later = asyncio.Event()
        takers = [asyncio.ensure_future(call(scheduler.slot(), later)) for _ in range(3)]
        await steps()
        held = in_flight
        later.set()
        await asyncio.gather(holder, waiter, *takers, return_exceptions=True)
        return held, peak

    assert asyncio.run(run()) == (1, 1)


# --- closing the stream early ----------------------------------------------------------------


def test_closing_the_stream_leaves_no_task_and_sends_nothing_after() -> None:
    log: list[tuple[str, int]] = []
    metric = AnswerRelevancy(PretendJudge(), LoggedEmbeddings(log), max_concurrency=16)

    async def run() -> tuple[int, int]:
        async with contextlib.aclosing(metric.ascore_each(rows(300))) as each:
            await anext(each)
        left = len(live_tasks())  # straight after closing, before the loop runs anything
        sent = len(log)
        await steps(50)
        return left, len(log) - sent

    left, sent_after = asyncio.run(run())
    assert left == 0
    assert sent_after == 0


# --- a stop while a row's first call is under way --------------------------------------------


@pytest.mark.parametrize("mode", ["stock", "angles"])
def test_every_row_that_sent_a_request_is_yielded_after_a_stop(mode: str) -> None:
    log: list[tuple[str, int]] = []
    judge = LoggedJudge(log, hold=4)  # row 1's first call: row 0 made 3
    metric = AnswerRelevancy(
        judge, HashEmbeddings(), probe_prompt=mode, strictness=3, max_concurrency=1
    )

    async def run() -> list[int]:
        stop = asyncio.Event()

        async def consume() -> list[int]:
            return [i async for i, _ in metric.ascore_each(rows(10), stop=stop)]

        task = asyncio.ensure_future(consume())
        await judge.held.wait()
        stop.set()
        await steps()
        judge.go.set()
        return await task

    yielded = asyncio.run(run())
    asked = sorted({row for kind, row in log if kind == "judge"})
    assert sorted(yielded) == asked
    assert asked[0] == 0 and len(asked) < 10


# --- rows finish as they go with shared embedding requests ----------------------------------


class GatedJudge(PretendJudge):
    """Each request waits until the test lets one more through."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Semaphore(0)

    async def agenerate(self, prompt: str, response_model: Any) -> Any:
        await self.gate.acquire()
        return await super().agenerate(prompt, response_model)


def test_rows_finish_as_they_go_with_shared_embedding_requests() -> None:
    log: list[tuple[str, int]] = []
    judge = GatedJudge()
    metric = AnswerRelevancy(judge, LoggedEmbeddings(log), max_concurrency=16)
    released = 0
    backlog: list[int] = []  # rows judged but not yet yielded, at each yield

    async def consume() -> None:
        async for _ in metric.ascore_each(rows(200)):
            backlog.append(released - len(backlog) - 1)

    async def run() -> None:
        nonlocal released
        consumer = asyncio.ensure_future(consume())
        while not consumer.done():  # one judge reply at a time, the rest of the run settled
            judge.gate.release()
            released += 1
            await steps(40)
        await consumer

    asyncio.run(run())
    assert len(backlog) == 200
    assert backlog[0] < 32  # the first row did not wait for 64 rows' questions
    assert max(backlog) < 48
    # requests are still shared: about one pair per 21 rows, and when the input is done the
    # last rows (here answered one at a time, nothing in line behind them) may go alone
    assert len(log) <= 0.1 * 200 + 2 * 16


# --- embedding requests of rows under way, and OneTextPerCall's limit -----------------------


def test_unshared_embedding_requests_of_a_started_row_go_before_later_rows_judge_calls() -> None:
    log: list[tuple[str, int]] = []
    judge = LoggedJudge(log, hold_rows=True)
    metric = AnswerRelevancy(
        judge,
        LoggedEmbeddings(log),
        probe_prompt="stock",
        strictness=4,
        max_concurrency=2,
        batch_embeddings=False,
    )

    async def run() -> list[Any]:
        scoring = asyncio.ensure_future(metric.abatch_score(rows(2)))
        await steps(50)  # row 1's first two calls hold both slots; the rest wait in line
        judge.go.set()
        return await scoring

    results = asyncio.run(run())
    assert all(r.value > 0 for r in results)
    # row 0's embedding requests go ahead of row 1's calls still in line, behind the one that
    # was already waiting for a slot when they came (rows not begun wait one at a time)
    assert (
        log
        == [("judge", 0)] * 4
        + [("judge", 1)] * 3
        + [("embed", 0)] * 2
        + [("judge", 1)]
        + [("embed", 1)] * 2
    )


class GatedInner(HashEmbeddings):
    """Each text's call waits until the test opens the gate; counts calls in flight."""

    def __init__(self) -> None:
        super().__init__(32)
        self.gate = asyncio.Event()
        self.in_flight = self.peak = 0

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await self.gate.wait()
            return self.embed_text(text)
        finally:
            self.in_flight -= 1


def test_one_text_per_call_limits_the_object_across_calls() -> None:
    inner = GatedInner()
    wrapped = OneTextPerCall(inner, max_concurrency=2)
    texts = [f"text {i}" for i in range(6)]

    async def run() -> int:
        calls = [asyncio.ensure_future(wrapped.aembed_texts(texts)) for _ in range(3)]
        await steps()
        peak = inner.peak
        inner.gate.set()
        await asyncio.gather(*calls)
        return max(peak, inner.peak)

    assert asyncio.run(run()) == 2
