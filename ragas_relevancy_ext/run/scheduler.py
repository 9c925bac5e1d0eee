"""One run's scheduler: the tasks the run starts, its requests in flight and which goes next.

A :class:`Scheduler` is made per run (``ascore``, ``ascore_each``, one ``ragas.evaluate`` run)
and passed to what needs it. It is the run's only limiter: at most ``limit`` judge and embedding
requests in flight, a waiting request of an earlier row served before one of a later row, and
every task the run starts belongs to it and ends with it (closing cancels them and waits, and
nothing starts after). Python 3.10 has no ``asyncio.TaskGroup`` and an anyio task group cannot
be held across an async generator's ``yield``, so the scheduler keeps its own set of tasks with
the same rule: no task outlives the run.

A row's calls go through ``async with scheduler.row(p)`` (or ``row.call(kind, tokens)``, which
also keeps to the provider's rate limits). Once :meth:`Scheduler.stop_new_rows` is called, a row
that has sent nothing is refused (:class:`RowNotStarted`) and a row that has sent a request
keeps going, so it finishes and is counted.

Rate limits: requests and tokens per minute for the judge and for embeddings, given
(:class:`RateLimits`) or learned from the provider's ``x-ratelimit-*`` headers and 429 answers
(:meth:`Scheduler.observe`). Each is a bucket refilled continuously, as providers keep them, from
the provider's first answer on (it may only have begun counting then). A request's tokens are
estimated before it is sent: its text's (4 characters a token) scaled by the prompt tokens the
provider reported for earlier ones, plus the reply tokens it asks for. The estimate is held
back from the bucket while the request is on its way, and the bucket takes what the provider
reports it used once it is answered (nothing for a 429): a full provider bucket refills nothing
until a burst reaches it, so the run's must not either. A request waits until the bucket holds
5% more than its estimate beyond those held, and ``x-ratelimit-remaining-*`` headers lower it. So
that no burst goes on a guess, a kind's first request goes alone when tokens per minute are kept
to, and otherwise the first row's calls and at most ``FIRST_REQUESTS`` in all before its
answer. A 429 pauses every request of its
kind at once for ``retry-after``/``retry-after-ms`` (one second when not said); only when the
provider says no limits does it also halve the rate the run keeps to (once for the 429s of the
requests in flight together: those that come during the pause went before it), each success
then raising it back by one request a minute.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import heapq
import itertools
import math
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

__all__ = ["RateLimits", "Row", "RowNotStarted", "Scheduler"]

from ..errors import Cause, answer_headers, cause_of
from ..scoring.usage import PROVIDER_REPORTS, Usage, current_meter, metering

Kind = Literal["judge", "embeddings"]
# Requests of a kind sent before its first answer (see Scheduler.pace).
FIRST_REQUESTS = 8
# Share of a request's estimated tokens the bucket must hold beyond it before it goes.
MARGIN = 0.05

T = TypeVar("T")


class RowNotStarted(Exception):
    """A row's first call was refused: the run was told to start no more rows."""


@dataclass(frozen=True)
class RateLimits:
    """Requests and tokens per minute a run keeps to: ``rpm``/``tpm`` for the judge,
    ``embedding_rpm``/``embedding_tpm`` for embeddings; None: not given (learned from the
    provider's headers and 429s when its clients are built by the package)."""

    rpm: int | None = None
    tpm: int | None = None
    embedding_rpm: int | None = None
    embedding_tpm: int | None = None

    def __post_init__(self) -> None:
        for name in ("rpm", "tpm", "embedding_rpm", "embedding_tpm"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ValueError(f"{name} must be a whole number >= 1 or None, got {value!r}")

    def share(self, parts: int) -> RateLimits:
        """Each of ``parts`` runs' share (limit / parts, at least 1): Ray actors."""
        return RateLimits(
            *(None if v is None else max(1, v // parts) for v in self._values())  # type: ignore[arg-type]
        )

    def _values(self) -> tuple[int | None, ...]:
        return (self.rpm, self.tpm, self.embedding_rpm, self.embedding_tpm)

    def __str__(self) -> str:
        names = ("rpm", "tpm", "embedding rpm", "embedding tpm")
        given = [f"{n} {v:,}" for n, v in zip(names, self._values(), strict=True) if v]
        return ", ".join(given) or "learned"


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def _seconds(text: str | None) -> float | None:
    """``6m0s``, ``1.5s``, ``20ms`` or plain seconds as seconds; None when unreadable."""
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if not parts:
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[unit] for n, unit in parts)


def _number(headers: Mapping[str, str], name: str) -> float | None:
    try:
        return float(headers[name])
    except (KeyError, TypeError, ValueError):
        return None


class _Pace:
    """One kind's requests and tokens per minute: buckets refilled continuously, a pause that
    holds every request, the estimate's scale, and (when not given) limits learned from the
    provider."""

    def __init__(
        self, rpm: int | None, tpm: int | None, clock: Callable[[], float], learn: bool
    ) -> None:
        self.clock = clock
        self.rpm, self.tpm = (float(rpm) if rpm else None), (float(tpm) if tpm else None)
        self.learn = learn  # limits not given: taken from headers, else slowed by 429s
        self.told = False  # the provider's headers said its limits
        # the provider's buckets as the run sees them: a request takes from them when its answer
        # comes (it may reach the provider only then), and is held back from them until then
        self.requests = self.rpm or 0.0
        self.tokens = self.tpm or 0.0
        self.held_requests = 0
        self.held_tokens = 0.0
        self.updated = clock()
        self.paused_until = 0.0
        self.scale: float | None = None  # the provider's prompt tokens per estimated one
        self.answered = False  # a first request ended: estimate and limits are known
        self.heard = False  # the provider has answered: its buckets have begun to count
        self.early = 0  # requests sent before it
        self.opener: float | None = None  # the row that sent first: its calls all go at once
        self.first: asyncio.Event | None = None  # set when it comes
        self.ceiling: float | None = None  # a learned rpm that 429s set, raised back slowly
        self.sent: collections.deque[float] = collections.deque()  # the last minute's, learning

    def _refill(self, now: float) -> None:
        # none before the first answer: the provider may have begun counting only then
        elapsed, self.updated = (max(0.0, now - self.updated) if self.heard else 0.0), now
        if self.rpm:
            self.requests = min(self.rpm, self.requests + elapsed * self.rpm / 60)
        if self.tpm:
            self.tokens = min(self.tpm, self.tokens + elapsed * self.tpm / 60)

    def charge(self, tokens: int, budget: int) -> int:
        """The tokens a request of ``tokens`` estimated (``budget`` of them reply tokens asked
        for) is counted as: its text's estimate scaled by what the provider reported."""
        return budget + math.ceil(max(0, tokens - budget) * (self.scale or 1.0))

    def wait(self, tokens: int) -> float:
        """Seconds until a request counted as ``tokens`` may go; 0: it is taken from the
        buckets now."""
        now = self.clock()
        self._refill(now)
        wait = self.paused_until - now
        if self.rpm:
            wait = max(wait, (1 - self.requests + self.held_requests) * 60 / self.rpm)
        need = min(float(tokens), self.tpm) if self.tpm else 0.0
        if self.tpm:
            # a request's count is known only once answered: wait for MARGIN more than the
            # estimate, so one counted a few tokens over it is not refused for milliseconds
            ahead = min(need * MARGIN, self.tpm - need)
            wait = max(wait, (need + ahead - self.tokens + self.held_tokens) * 60 / self.tpm)
        if wait > 0:
            return wait
        self.held_requests += 1
        self.held_tokens += need
        if self.learn:
            self.sent.append(now)
            while self.sent[0] < now - 60:
                self.sent.popleft()
        return 0.0

    def done(self) -> None:
        """A request ended, its usage known (or never to be): requests held for the first
        answer go."""
        self.answered = self.heard = True
        if self.first is not None:
            self.first.set()

    def correct(
        self, charged: int, used: int, prompt: int | None, estimated: int, taken: bool = True
    ) -> None:
        """A request held as ``charged`` tokens was answered, having used ``used`` (as providers
        count it: the reply tokens asked for included; 0: not reported, then ``charged``): the
        buckets take it now, unless not ``taken`` (answered 429: the provider took nothing);
        ``prompt`` tokens reported for a text estimated at ``estimated`` scale later estimates
        (set by the first answer, then raised at once and lowered slowly)."""
        if prompt and estimated > 0:
            ratio = prompt / estimated
            if self.scale is None or ratio > self.scale:
                self.scale = ratio
            else:
                self.scale += (ratio - self.scale) / 10
        self._refill(self.clock())
        self.held_requests -= 1
        self.held_tokens -= charged
        if self.rpm and taken:
            self.requests -= 1
        if self.tpm and taken:
            self.tokens -= used or charged
        self.done()

    def observe(self, status: int, headers: Mapping[str, str]) -> None:
        """Learn from one answer: limits and what remains (headers), or a 429."""
        now = self.clock()
        self._refill(now)
        self.heard = True
        if self.learn:
            for name, attr in (("requests", "rpm"), ("tokens", "tpm")):
                limit = _number(headers, f"x-ratelimit-limit-{name}")
                if limit and limit > 0:
                    if getattr(self, attr) is None:
                        setattr(self, name, limit)  # a full bucket, as the provider's starts
                    setattr(self, attr, limit)
                    self.told = True
        # what remains after the requests the run holds is at most what the provider says
        remaining = _number(headers, "x-ratelimit-remaining-requests")
        if remaining is not None and self.rpm:
            self.requests = min(self.requests, remaining + self.held_requests)
        remaining = _number(headers, "x-ratelimit-remaining-tokens")
        if remaining is not None and self.tpm:
            self.tokens = min(self.tokens, remaining + self.held_tokens)
        if status == 429:
            # paused already: the request went before the pause, with the others in flight
            in_flight = now < self.paused_until
            after = _seconds(headers.get("retry-after-ms"))
            after = after / 1000 if after is not None else _seconds(headers.get("retry-after"))
            after = after or 1.0
            self.paused_until = max(self.paused_until, now + after)
            if self.learn and not self.told and not in_flight and (self.rpm or self.sent):
                # no limits said: half the rate that met the 429, once for the requests in
                # flight together: the rate kept to, else the requests sent in the last minute
                # (a provider's bucket holds a minute's worth: an early burst is no rate), or
                # one per retry-after when more (what the provider invites)
                sent = self.rpm or max(len(self.sent), 60 / after)
                self.ceiling = self.rpm = max(1.0, sent / 2)
                # the provider's bucket is empty: none free until it refills, and requests
                # in flight that it still admits take theirs
                self.requests = min(self.requests, 0.0)
        elif self.ceiling is not None and not self.told and self.rpm and status < 400:
            self.rpm = self.rpm + 1  # additive increase once 429s stop


class _Waiter:
    """One call waiting for a slot; ``granted`` once a slot is handed to it (it then owns it)."""

    __slots__ = ("future", "granted", "row")

    def __init__(self, row: Row) -> None:
        self.row = row
        self.future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.granted = False


class Scheduler:
    """At most ``limit`` requests in flight, earlier rows first; owns the run's tasks.

    With ``cautious``, one request goes at a time until one succeeds (its ``async with`` block
    raises nothing): a judge that refuses every request is found out after one, not ``limit``.
    """

    def __init__(
        self,
        limit: int,
        *,
        cautious: bool = False,
        rates: RateLimits | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a whole number >= 1, got {limit!r}")
        self.limit = limit
        self.rates = rates or RateLimits()
        self._sleep = sleep
        given = self.rates
        self._paces: dict[str, _Pace] = {
            "judge": _Pace(given.rpm, given.tpm, clock, learn=given.rpm is None),
            "embeddings": _Pace(
                given.embedding_rpm, given.embedding_tpm, clock, learn=given.embedding_rpm is None
            ),
        }
        PROVIDER_REPORTS.listeners.add(self)  # held weakly; left at close
        self._free = 1 if cautious else limit
        self._held_back = limit - 1 if cautious else 0  # given out at the first success
        self._waiting: list[tuple[float, int, _Waiter]] = []
        self._arrivals = itertools.count()
        self._tasks: set[asyncio.Task[Any]] = set()
        self.stopping = False
        self.closed = False
        self.frontier = 0.0  # the latest row whose call has been given a slot
        self.on_frontier: list[Callable[[float], None]] = []  # told when it moves on
        self.on_free: list[Callable[[], None]] = []  # told when a slot is left free

    # -- rate limits --------------------------------------------------------------------------

    async def pace(self, kind: Kind, tokens: int, budget: int = 0, row: float | None = None) -> int:
        """Wait until a ``kind`` request of about ``tokens`` (``budget`` of them reply tokens
        asked for) of ``row`` keeps to the run's rate limits; the tokens taken for it. Until
        the kind's first answer, which scales the estimate and may say the provider's limits,
        only the first row's calls and ``FIRST_REQUESTS`` in all go (not a burst the provider
        may refuse), or with tokens per minute to keep to only one, so no estimate goes
        unscaled."""
        pace = self._paces[kind]
        if pace.opener is None and not pace.answered and not pace.early:
            pace.opener = row
        while (
            not pace.answered
            and pace.early >= (1 if pace.tpm else FIRST_REQUESTS)
            and (row is None or row != pace.opener or pace.tpm)
        ):
            pace.first = pace.first or asyncio.Event()
            await pace.first.wait()
        charged = pace.charge(tokens, budget)
        while (wait := pace.wait(charged)) > 0:
            await self._sleep(wait)
        pace.early += not pace.answered
        return min(charged, int(pace.tpm)) if pace.tpm else 0  # what the bucket took

    def observe(self, kind: Kind, status: int, headers: Mapping[str, str]) -> None:
        """What one provider answer says about ``kind``'s limits (see the module's note)."""
        self._paces[kind].observe(status, headers)

    def correct(
        self,
        kind: Kind,
        tokens: int,
        charged: int,
        usage: Usage,
        budget: int = 0,
        taken: bool = True,
    ) -> None:
        """A ``kind`` request estimated at ``tokens`` and held as ``charged`` was answered:
        its buckets take what the provider reported it used (a judge request counts at least
        the ``budget`` reply tokens it asked for), nothing when not ``taken`` (a 429), and its
        prompt tokens scale later estimates."""
        if kind == "judge":
            prompt, reply = usage.judge_prompt_tokens, usage.judge_completion_tokens
            used = None if prompt is None or reply is None else prompt + max(reply, budget)
        else:
            prompt = used = usage.embedding_tokens
        self._paces[kind].correct(charged, used or 0, prompt, tokens - budget, taken)

    @contextlib.asynccontextmanager
    async def call(
        self, kind: Kind, tokens: int, budget: int = 0, row: float | None = None
    ) -> AsyncIterator[None]:
        """One ``kind`` request of about ``tokens`` (for ``row``) within the run's rate limits,
        holding no slot (its caller holds one); what the provider reports it used corrects the
        estimate (and still reaches the caller's meter)."""
        charged = await self.pace(kind, tokens, budget, row)
        outer = current_meter()
        refused = False
        with metering() as meter:
            try:
                yield
            except Exception as exc:
                refused = cause_of(exc) is Cause.RATE_LIMITED  # the provider took nothing
                raise
            finally:
                if outer is not None:
                    outer.add(meter.usage)
                self.correct(kind, tokens, charged, meter.usage, budget, taken=not refused)

    def rate_limited(self, kind: Kind, exc: BaseException) -> None:
        """A ``kind`` request was answered 429: the run pauses ``kind`` for the answer's
        ``retry-after`` (found on the error's response, when it has one)."""
        self.observe(kind, 429, answer_headers(exc))

    def rate(self, kind: Kind) -> tuple[float | None, float | None]:
        """(requests, tokens) per minute the run keeps to now for ``kind`` (None: no limit)."""
        pace = self._paces[kind]
        return pace.rpm, pace.tpm

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
        """Start nothing more, refuse every waiting call and cancel the run's tasks, at once."""
        self.closed = True
        PROVIDER_REPORTS.listeners.discard(self)
        self.stop_new_rows()
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
            # ended; from Python 3.12 awaiting ended tasks yields nothing, so their done
            # callbacks (which drop them from the set) have not run yet
            self._tasks.difference_update(tasks)

    async def __aenter__(self) -> Scheduler:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- rows and their calls -----------------------------------------------------------------

    def row(self, priority: float) -> Row:
        """The calls of one row, started ``priority``-th (lower goes first)."""
        return Row(self, priority)

    def ahead(self) -> Row:
        """Calls that finish rows already under way (a shared embedding request): ahead of
        every row's waiting call, never refused."""
        return Row(self, float("-inf"), sent=True)

    def slot(self, priority: float = float("inf")) -> Row:
        """Calls of no row in particular, at ``priority`` (by default behind every row's
        waiting call); never refused."""
        return Row(self, priority, sent=True)

    def stop_new_rows(self) -> None:
        """Refuse the calls of every row that has sent nothing, those waiting included."""
        self.stopping = True
        kept = []
        for entry in self._waiting:
            waiter = entry[2]
            if waiter.future.done():
                continue
            if self.closed or not waiter.row.sent:
                waiter.future.set_exception(RowNotStarted("the run is stopping"))
            else:
                kept.append(entry)
        heapq.heapify(kept)
        self._waiting = kept

    @property
    def saturated(self) -> bool:
        """Whether every slot is taken (a call asked now would wait)."""
        return self._free == 0 or bool(self._waiting)

    @property
    def in_flight(self) -> int:
        """Slots held now."""
        return self.limit - self._held_back - self._free

    async def _acquire(self, row: Row) -> None:
        if self.closed or (self.stopping and not row.sent):
            raise RowNotStarted("the run is stopping")
        if self._free > 0 and not self._waiting:
            self._free -= 1
            self._note(row)
            return
        waiter = _Waiter(row)
        heapq.heappush(self._waiting, (row.priority, next(self._arrivals), waiter))
        try:
            await waiter.future
        except BaseException:
            if waiter.granted:  # handed a slot just as it was cancelled: give it on
                self._release()
            raise
        if self.stopping and not row.sent:  # handed a slot just before the run began to stop
            self._release()
            raise RowNotStarted("the run is stopping")
        self._note(row)

    def _note(self, row: Row) -> None:
        if row.priority != float("inf") and row.priority > self.frontier:
            self.frontier = row.priority
            for listener in self.on_frontier:
                listener(row.priority)

    def _release(self, succeeded: bool = False) -> None:
        """Hand the slot to the first live waiter, or free it; the first call that
        ``succeeded`` also frees the slots a cautious start held back."""
        if succeeded and self._held_back:
            held, self._held_back = self._held_back, 0
            for _ in range(held):
                self._hand_over()
        self._hand_over()

    def _hand_over(self) -> None:
        while self._waiting:
            _, _, waiter = heapq.heappop(self._waiting)
            if not waiter.future.done():
                waiter.granted = True
                waiter.future.set_result(None)
                return
        self._free += 1
        for listener in self.on_free:
            listener()

    def __repr__(self) -> str:
        return f"Scheduler(limit={self.limit}, in_flight={self.in_flight}, tasks={self.tasks})"


class Row:
    """``async with row``: one call of a row, holding one of the run's slots while it runs.

    A row has ``sent`` once one of its calls has begun; from then on none of its calls is
    refused by a stop.
    """

    __slots__ = ("priority", "scheduler", "sent")

    def __init__(self, scheduler: Scheduler, priority: float, sent: bool = False) -> None:
        self.scheduler = scheduler
        self.priority = priority
        self.sent = sent

    async def __aenter__(self) -> None:
        await self.scheduler._acquire(self)
        self.sent = True

    async def __aexit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        self.scheduler._release(succeeded=kind is None)

    def rate_limited(self, kind: Kind, exc: BaseException) -> None:
        """A call of this row was answered 429: the run pauses ``kind`` (see
        :meth:`Scheduler.rate_limited`)."""
        self.scheduler.rate_limited(kind, exc)

    @contextlib.asynccontextmanager
    async def call(self, kind: Kind, tokens: int, budget: int = 0) -> AsyncIterator[None]:
        """One ``kind`` request of about ``tokens``: a slot, then the run's rate limits
        (:meth:`Scheduler.call`)."""
        async with self, self.scheduler.call(kind, tokens, budget, self.priority):
            yield
