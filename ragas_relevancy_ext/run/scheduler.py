"""One run's scheduler: the tasks the run starts, its requests in flight and when rows stop.

A :class:`Scheduler` is made per run (``ascore``, ``ascore_each``, one ``ragas.evaluate`` run)
and passed to what needs it: at most ``limit`` judge and embedding requests in flight, each
request waiting first for its key's rate limit (:mod:`.limits`: holding nothing, so a pause of
the judge never delays embeddings) and only then for a slot, where the calls of rows under way
(a shared embedding request, a row's next judge call) go ahead of rows not begun, which wait in
line behind one another, in the order they came; and every task the run starts
belongs to it and ends with it (closing cancels them and waits, and nothing starts after).
Python 3.10 has no ``asyncio.TaskGroup`` and an anyio task group cannot be held across an async
generator's ``yield``, so the scheduler keeps its own set of tasks with the same rule.

A row's calls go through ``row.call(kind, tokens)``. Once :meth:`Scheduler.stop_new_rows` is
called, a row that has sent nothing is refused (:class:`RowNotStarted`) when its first request
would leave, and a row that has sent a request keeps going, so it finishes and is counted.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine, Mapping
from typing import Any, Literal, TypeVar

from ..errors import PatienceExhausted
from ..scoring.usage import Usage, UsageMeter, current_meter, listening, metering
from .limits import KeyLimit, RateLimits

__all__ = ["RateLimits", "Row", "RowNotStarted", "Scheduler"]

Kind = Literal["judge", "embeddings"]
T = TypeVar("T")


class RowNotStarted(Exception):
    """A row's first call was refused: the run was told to start no more rows."""


class Scheduler:
    """At most ``limit`` requests in flight, each after its key's limit (``limits``, by kind);
    owns the run's tasks.

    With ``cautious``, one request goes at a time until one succeeds (its ``async with`` block
    raises nothing): a judge that refuses every request is found out after one, not ``limit``.
    """

    def __init__(
        self, limit: int, *, cautious: bool = False, limits: Mapping[str, KeyLimit] | None = None
    ) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a whole number >= 1, got {limit!r}")
        self.limit = limit
        self.limits = dict(limits or {})
        self._slots = asyncio.Semaphore(1 if cautious else limit)
        self._held_back = limit - 1 if cautious else 0  # given out at the first success
        self._entry = asyncio.Lock()  # the line of rows not begun
        self.in_flight = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self.stopping = False
        self.closed = False
        self.gave_up: PatienceExhausted | None = None  # a key's patience ran out

    # -- the run's tasks ----------------------------------------------------------------------

    def start(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run ``coro`` as a task of this run; RuntimeError once the run is closed."""
        if self.closed:
            coro.close()
            raise RuntimeError("the run is closed: it starts no more tasks")
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    @property
    def tasks(self) -> int:
        """Tasks of the run still running."""
        return len(self._tasks)

    def cancel(self) -> None:
        """Start nothing more, refuse every row that has sent nothing and cancel the run's
        tasks, at once."""
        self.closed = self.stopping = True
        for task in self._tasks:
            task.cancel()

    async def aclose(self) -> None:
        """:meth:`cancel`, then wait for the run's tasks to end."""
        self.cancel()
        while self._tasks:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def __aenter__(self) -> Scheduler:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- rows and their calls -----------------------------------------------------------------

    def row(self) -> Row:
        """The calls of one row."""
        return Row(self)

    def slot(self) -> Row:
        """Calls of no row in particular (a shared embedding request): never refused."""
        return Row(self, sent=True)

    def stop_new_rows(self) -> None:
        """Refuse the calls of every row that has sent nothing, from now on."""
        self.stopping = True

    def _refuse(self, row: Row) -> None:
        if self.closed or (self.stopping and not row.sent):
            raise RowNotStarted("the run is stopping")

    async def _acquire(self, row: Row) -> None:
        self._refuse(row)
        if row.sent:
            await self._slots.acquire()
        else:  # one row not begun waits for a slot at a time: calls of rows under way go first
            async with self._entry:
                self._refuse(row)
                await self._slots.acquire()
        try:
            self._refuse(row)  # handed a slot as the run began to stop
        except RowNotStarted:
            self._slots.release()
            raise
        self.in_flight += 1

    def _release(self, succeeded: bool = False) -> None:
        """Free the slot; the first call that ``succeeded`` also frees the slots a cautious
        start held back."""
        self.in_flight -= 1
        held, self._held_back = (self._held_back, 0) if succeeded else (0, self._held_back)
        for _ in range(held + 1):
            self._slots.release()

    def rate_limited(self, kind: str, exc: BaseException) -> bool:
        """A ``kind`` request was answered 429: its key pauses, and True (ask again); False when
        the run keeps no limit for ``kind``. Once the key's patience ran out, the run notes it
        (:attr:`gave_up`) and :class:`PatienceExhausted` is raised."""
        limit = self.limits.get(kind)
        if limit is None:
            return False
        try:
            return limit.rate_limited(exc)
        except PatienceExhausted as gave_up:
            self.gave_up = self.gave_up or gave_up
            raise

    def __repr__(self) -> str:
        return f"Scheduler(limit={self.limit}, in_flight={self.in_flight}, tasks={self.tasks})"


class Row:
    """``async with row``: one call of a row, holding one of the run's slots while it runs.

    A row has ``sent`` once one of its calls has begun; from then on none of its calls is
    refused by a stop.
    """

    __slots__ = ("scheduler", "sent")

    def __init__(self, scheduler: Scheduler, sent: bool = False) -> None:
        self.scheduler = scheduler
        self.sent = sent

    async def __aenter__(self) -> None:
        await self.scheduler._acquire(self)
        self.sent = True

    async def __aexit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        self.scheduler._release(succeeded=kind is None)

    def rate_limited(self, kind: str, exc: BaseException) -> bool:
        """A call of this row was answered 429 (see :meth:`Scheduler.rate_limited`)."""
        return self.scheduler.rate_limited(kind, exc)

    @contextlib.asynccontextmanager
    async def call(self, kind: Kind, tokens: int, budget: int = 0) -> AsyncIterator[None]:
        """One ``kind`` request of about ``tokens`` (``budget`` of them reply tokens asked for):
        its key's limit, then a slot; the provider's answers reach the key's limit, and what it
        reports the request used corrects the key's tokens (and still reaches the caller's
        meter)."""
        limit = self.scheduler.limits.get(kind)
        if limit is None:
            async with self:
                yield
            return
        self.scheduler._refuse(self)
        charged = await limit.wait(tokens)
        meter = UsageMeter() if limit.tpm else None  # what the request used corrects the key's
        outer = current_meter()
        try:
            async with self:
                with listening(limit), metering(meter) if meter else contextlib.nullcontext():
                    yield
            limit.succeeded()
        finally:
            limit.ended()
            if meter is not None and outer is not None:
                outer.add(meter.usage)
        if meter is not None:
            await limit.correct(charged, _used(kind, meter.usage, budget))


def _used(kind: str, usage: Usage, budget: int) -> int | None:
    """Tokens a provider counts for a request (a judge request's reply at least its budget)."""
    if kind == "embeddings":
        return usage.embedding_tokens
    prompt, reply = usage.judge_prompt_tokens, usage.judge_completion_tokens
    return None if prompt is None or reply is None else prompt + max(reply, budget)
