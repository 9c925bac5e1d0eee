"""``bounded_map`` and ``Scheduler`` on their own: the window, the order of what is yielded,
what closing leaves behind, and slots handed to waiters that are cancelled.

Each test steps the event loop by hand (``asyncio.sleep(0)``) and counts; none waits on time.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from ragas_relevancy_ext.run.scheduler import Scheduler
from ragas_relevancy_ext.run.streaming import bounded_map


async def _steps(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_bounded_map_keeps_exactly_window_items_in_flight():
    in_flight = peak = pulled = 0

    def items():
        nonlocal pulled
        for i in range(10):
            pulled += 1
            yield i

    async def work(index: int, item: int) -> int:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await _steps(item % 3 + 1)  # items finish out of order
        in_flight -= 1
        return item * 10

    async def run() -> list[tuple[int, int, int]]:
        return [
            (index, value, pulled)
            async for index, value in bounded_map(items(), work, 3, Scheduler(3))
        ]

    seen = asyncio.run(run())
    assert sorted((index, value) for index, value, _ in seen) == [(i, i * 10) for i in range(10)]
    assert peak == 3
    assert seen[0][2] == 3  # the first result came after 3 items were read, not 4 or 10


def test_a_result_comes_out_while_slower_items_are_still_running():
    running = 0

    async def work(index: int, item: int) -> int:
        nonlocal running
        running += 1
        await _steps(1 if item == 0 else 50)
        running -= 1
        return item

    async def run() -> list[tuple[int, int]]:
        return [(index, running) async for index, _ in bounded_map(range(3), work, 3, Scheduler(3))]

    seen = asyncio.run(run())
    assert seen[0] == (0, 2)  # item 0 came out while items 1 and 2 were still running
    assert sorted(index for index, _ in seen) == [0, 1, 2]


def test_items_done_together_come_out_in_input_order():
    async def work(index: int, item: str) -> str:
        return item.upper()  # done at its first step: all 50 finish before the first yield

    async def run() -> list[int]:
        return [
            index
            async for index, _ in bounded_map([f"t{i}" for i in range(50)], work, 50, Scheduler(1))
        ]

    assert asyncio.run(run()) == list(range(50))


def test_results_come_out_while_an_async_source_waits_for_its_next_item():
    """A source that gives its next item only once the last one's result is out (rows fed in
    as earlier ones finish, as a Ray actor's batches are) is not left waiting on itself."""
    seen: list[int] = []

    async def run() -> None:
        out: asyncio.Queue[int] = asyncio.Queue()

        async def items() -> Any:
            for i in range(3):
                yield i
                await out.get()  # the next item comes once this one's result is out

        async def work(index: int, item: int) -> int:
            return item

        async with contextlib.aclosing(bounded_map(items(), work, 4, Scheduler(4))) as each:
            async for index, _ in each:
                seen.append(index)
                out.put_nowait(index)

    asyncio.run(asyncio.wait_for(run(), 20))  # the timeout ends a run that would wait forever
    assert seen == [0, 1, 2]


def test_closing_while_an_async_source_waits_stops_the_wait():
    closed: list[str] = []

    async def items() -> Any:
        try:
            yield 0
            await asyncio.Event().wait()  # never a second item
            yield 1
        finally:
            closed.append("source")

    async def work(index: int, item: int) -> int:
        return item

    async def run() -> tuple[int, int]:
        async with contextlib.aclosing(bounded_map(items(), work, 4, Scheduler(4))) as each:
            first, _ = await anext(each)
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        return first, len(left)

    assert asyncio.run(run()) == (0, 0)
    assert closed == ["source"]


def test_closing_returns_once_the_work_in_flight_has_stopped():
    started, stopped = [], []

    async def work(index: int, item: int) -> int:
        if item == 0:
            return 0
        started.append(index)
        try:
            await asyncio.Event().wait()
        finally:
            stopped.append(index)
        return item

    async def run() -> tuple[list[int], list[int], int]:
        async with contextlib.aclosing(bounded_map(range(4), work, 4, Scheduler(4))) as each:
            first, _ = await anext(each)
        # straight after closing, before the loop runs anything else
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        return [first], sorted(stopped), len(left)

    first, stopped_then, left = asyncio.run(run())
    assert first == [0]
    assert sorted(started) == [1, 2, 3]
    assert stopped_then == [1, 2, 3]
    assert left == 0


class Holder:
    """A call that holds its slot until released, recording when it got it."""

    def __init__(self, slot: Any, got: list[Any], name: Any) -> None:
        self.release = asyncio.Event()
        self.task = asyncio.ensure_future(self._run(slot, got, name))

    async def _run(self, slot: Any, got: list[Any], name: Any) -> None:
        async with slot:
            got.append(name)
            await self.release.wait()


def test_a_cancelled_waiter_does_not_take_the_freed_slot():
    async def run() -> tuple[bool, list[Any]]:
        scheduler = Scheduler(1)
        got: list[Any] = []
        first = Holder(scheduler.row(), got, 0)
        await _steps()
        gone = Holder(scheduler.row(), got, 1)
        served = Holder(scheduler.row(), got, 2)
        await _steps()
        gone.task.cancel()
        await _steps()
        first.release.set()  # the first waiter in line was cancelled: the next one gets the slot
        await _steps()
        served.release.set()
        await _steps()
        return gone.task.cancelled(), got

    assert asyncio.run(run()) == (True, [0, 2])


def test_a_slot_handed_to_a_waiter_cancelled_at_that_moment_is_given_back():
    async def run() -> tuple[bool, list[Any]]:
        scheduler = Scheduler(1)
        got: list[Any] = []
        first = Holder(scheduler.row(), got, 0)
        await _steps()
        waiter = Holder(scheduler.row(), got, 1)
        await _steps()
        first.release.set()
        await _steps(1)  # the holder leaves: the slot goes to the waiter...
        waiter.task.cancel()  # ...which is cancelled before it runs
        await _steps()
        later = Holder(scheduler.slot(), got, "later")
        await _steps()
        later.release.set()
        await _steps()
        return waiter.task.cancelled(), got

    assert asyncio.run(run()) == (True, [0, "later"])


def test_calls_of_rows_under_way_go_ahead_of_rows_not_begun_which_keep_their_order():
    async def run() -> list[Any]:
        scheduler = Scheduler(1)
        got: list[Any] = []
        first = Holder(scheduler.slot(), got, "first")
        await _steps()
        holders = [Holder(scheduler.row(), got, p) for p in (7, 3, 9)]
        await _steps()
        holders.append(Holder(scheduler.slot(), got, "under way"))  # a shared request, say
        await _steps()
        first.release.set()
        for holder in holders:
            holder.release.set()
        await asyncio.gather(first.task, *(h.task for h in holders))
        return got

    assert asyncio.run(run()) == ["first", 7, "under way", 3, 9]


def test_a_cautious_scheduler_sends_one_call_until_one_succeeds_then_all():
    scheduler = Scheduler(4, cautious=True)
    in_flight = peak = 0
    outcomes = iter([False, False, True] + [True] * 10)  # two failures, then successes

    async def call(row: int) -> None:
        nonlocal in_flight, peak
        with contextlib.suppress(RuntimeError):
            async with scheduler.row():
                in_flight += 1
                peak = max(peak, in_flight)
                await _steps(2)
                in_flight -= 1
                if not next(outcomes):
                    raise RuntimeError("refused")

    peaks = []

    async def run() -> None:
        nonlocal peak
        first = [asyncio.ensure_future(call(row)) for row in range(3)]
        await asyncio.gather(*first)  # two failed, the third succeeded
        peaks.append(peak)
        await asyncio.gather(*(call(row) for row in range(3, 11)))
        peaks.append(peak)

    asyncio.run(run())
    assert peaks == [1, 4]  # one at a time while nothing had succeeded; the limit after


def test_a_row_handed_a_slot_just_before_the_stop_is_not_started():
    scheduler = Scheduler(1, cautious=True)
    started: list[int] = []

    async def call(row: int) -> None:
        try:
            async with scheduler.row():
                started.append(row)
                await _steps(1)
                if row == 0:
                    raise RuntimeError("refused")
        except RuntimeError:
            # its slot went to row 1 on the way out; the run stops before row 1 resumes
            scheduler.stop_new_rows()
            raise

    async def run() -> list[Any]:
        rows = [asyncio.ensure_future(call(row)) for row in range(3)]
        return await asyncio.gather(*rows, return_exceptions=True)

    results = asyncio.run(run())
    assert started == [0]
    assert [type(r).__name__ for r in results] == ["RuntimeError", "RowNotStarted", "RowNotStarted"]


def test_a_row_that_sent_a_call_is_not_refused_by_a_stop():
    async def run() -> list[Any]:
        scheduler = Scheduler(1)
        row = scheduler.row()
        got: list[Any] = []
        first = Holder(row, got, "first")
        await _steps()
        second = Holder(row, got, "second")  # the same row's next call, waiting
        other = Holder(scheduler.row(), got, "other")  # a row that has sent nothing
        await _steps()
        scheduler.stop_new_rows()
        first.release.set()
        second.release.set()
        await asyncio.gather(first.task, second.task, other.task, return_exceptions=True)
        return [got, type(other.task.exception()).__name__]

    assert asyncio.run(run()) == [["first", "second"], "RowNotStarted"]


def test_closing_cancels_the_runs_tasks_and_starts_none_after():
    async def run() -> tuple[int, bool, str]:
        scheduler = Scheduler(2)
        tasks = [scheduler.start(asyncio.Event().wait()) for _ in range(3)]
        await _steps()
        await scheduler.aclose()
        coro = asyncio.sleep(0)
        try:
            scheduler.start(coro)
        except RuntimeError as exc:
            refused = str(exc)
        return scheduler.tasks, all(t.cancelled() for t in tasks), refused

    tasks, cancelled, refused = asyncio.run(run())
    assert (tasks, cancelled) == (0, True)
    assert "closed" in refused
