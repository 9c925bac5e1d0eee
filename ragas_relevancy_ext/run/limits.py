"""A provider key's rate limit: one :class:`KeyLimit` per (endpoint, key), however many runs,
processes or actors send with the key.

Requests leave evenly spaced at the key's requests and tokens per minute (given, read from the
``x-ratelimit-limit-*`` headers, or found from 429s when there are none), a burst of half a
second's worth at most, so a limit enforced per second holds as well as one per minute. A 429
pauses the key for what it says (``retry-after-ms``, ``retry-after``, else the
``x-ratelimit-reset-*`` of a limit used up; 60 s at most), and the request is asked again until
no request to the endpoint has succeeded for the run's patience. A header no provider sends
(negative, not a number, infinite, a limit below one) is ignored with one warning.

The pace is pyrate-limiter's GCRA in one of its ``StateStore``\\ s, which a :class:`LimitBackend`
hands out per limit: :class:`InProcess` (the run's own, by default), :class:`OnDisk` (a SQLite
file that the processes of one machine share), or any other, such as a store that asks a Ray
actor, for a cluster. The pace and the pauses are shared; what a process learns from its
answers (limits, patience) stays its own.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import hashlib
import inspect
import logging
import math
import os
import re
import sqlite3
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pyrate_limiter import GCRA, Decision, InMemoryStateStore, Rate, StateAlgorithm, StateStore

from ..errors import PatienceExhausted, UsageError
from ..scoring.redaction import redact

__all__ = [
    "InProcess",
    "KeyLimit",
    "LimitBackend",
    "OnDisk",
    "RateLimits",
    "fingerprint",
    "run_limits",
]

log = logging.getLogger("ragas_relevancy_ext")

PACE = 0.97  # share of a known limit requests leave at: room for jitter on their way
BURST_SECONDS = 0.5  # the most that leaves at once: this many seconds' worth
MAX_PAUSE = 60.0  # seconds: a longer retry-after is cut to this (as the openai SDK ignores it)
PAUSE = 1.0  # seconds, for a 429 that says nothing
PATIENCE = 600.0  # seconds without a successful request before a run gives up
_SANE_LIMIT = 1e10  # per minute: a header above it (or below one) is no limit a provider sets
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class RateLimits:
    """``rpm``/``tpm`` (judge) and ``embedding_rpm``/``embedding_tpm`` per minute (None: learned);
    ``patience``, seconds without a success before an endpoint's requests give up; ``shared``,
    where the keys' limits live: a path (a SQLite file for one machine) or a LimitBackend."""

    rpm: int | None = None
    tpm: int | None = None
    embedding_rpm: int | None = None
    embedding_tpm: int | None = None
    patience: float = PATIENCE
    shared: Any = None

    def __post_init__(self) -> None:
        for name, value in self._limits().items():
            if value is not None and (type(value) is not int or value < 1):
                raise ValueError(f"{name} must be a whole number >= 1 or None, got {value!r}")
        if type(self.patience) not in (int, float) or not 0 < self.patience < math.inf:
            raise ValueError(f"patience must be a number of seconds > 0, got {self.patience!r}")
        if not (self.shared is None or isinstance(self.shared, (str, os.PathLike, LimitBackend))):
            raise ValueError(f"shared must be a path or a LimitBackend, got {self.shared!r}")

    def share(self, parts: int) -> RateLimits:
        """Each of ``parts`` runs' share (limit / parts, at least 1)."""
        split: dict[str, Any] = {n: v and max(1, v // parts) for n, v in self._limits().items()}
        return dataclasses.replace(self, **split)

    def _limits(self) -> dict[str, int | None]:
        return {n: getattr(self, n) for n in ("rpm", "tpm", "embedding_rpm", "embedding_tpm")}

    def __str__(self) -> str:
        names = ("rpm", "tpm", "embedding rpm", "embedding tpm")
        given = [f"{n} {v:,}" for n, v in zip(names, self._limits().values(), strict=True) if v]
        return ", ".join(given) or "learned"


@runtime_checkable
class LimitBackend(Protocol):
    """Where limits live: ``store(name)``, the pyrate-limiter ``StateStore`` of the limit
    ``name`` (``check`` may return an awaitable, as a store asking a Ray actor does), and
    ``now()``, the seconds every user of the stores reads."""

    def store(self, name: str) -> StateStore: ...

    def now(self) -> float: ...


class InProcess:
    """Limits in this process (by default one per run; one object given to several runs shares
    them); ``clock``: the seconds they read."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._stores: dict[str, StateStore] = {}
        self.now = clock

    def store(self, name: str) -> StateStore:
        return self._stores.setdefault(name, InMemoryStateStore())


class OnDisk:
    """Limits in a SQLite file the processes of one machine share (``clock``: wall time, the
    same in each); a link, or a file that is no such store, is refused."""

    def __init__(self, path: str | os.PathLike[str], clock: Callable[[], float] = time.time):
        self.path, self.now = Path(path), clock
        if self.path.is_symlink():
            raise UsageError(f"{self.path}: the rate-limit store is not written through a link")
        if self.path.exists() and self.path.stat().st_size:
            with open(self.path, "rb") as file:
                if file.read(16) != b"SQLite format 3\x00":
                    raise UsageError(f"{self.path} is not a rate-limit store; not written over")

    def store(self, name: str) -> StateStore:
        return _SqliteState(self.path, name)


class _SqliteState(StateStore):
    """One limit's state in a row, changed in a transaction per check in a worker thread, on a
    connection of its own (none crosses a thread or a fork)."""

    is_async = True

    def __init__(self, path: Path, name: str) -> None:
        self.path, self.name = path, name

    def _check(self, algorithm: StateAlgorithm, rates: list[Rate], now: int, weight: int) -> Any:
        with contextlib.closing(sqlite3.connect(self.path, timeout=10, isolation_level=None)) as db:
            db.execute("PRAGMA synchronous = OFF")  # a lost pace costs a 429, not data
            db.execute("CREATE TABLE IF NOT EXISTS limits (name TEXT PRIMARY KEY, state TEXT)")
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT state FROM limits WHERE name = ?", (self.name,)).fetchone()
            state = algorithm.decode(row[0].split()) if row else algorithm.initial(rates)
            new, decision = algorithm.step(rates, state, now, weight)
            text = " ".join(str(int(v)) for v in new)
            db.execute("INSERT OR REPLACE INTO limits VALUES (?, ?)", (self.name, text))
            db.execute("COMMIT")
        return decision

    async def check(  # type: ignore[override]
        self, algorithm: StateAlgorithm, rates: list[Rate], now: int, weight: int
    ) -> Any:
        return await asyncio.to_thread(self._check, algorithm, rates, now, weight)

    def read(self, algorithm: StateAlgorithm, rates: list[Rate]) -> Any:
        raise NotImplementedError("a key's state is only changed, never read alone")

    reset = read  # type: ignore[assignment]


_GCRA = GCRA()
_PAUSED = Rate(1, 1)  # the "rate" a paused key fails on


def _rate(per_minute: float | None, weight: int = 1) -> Rate | None:
    """The GCRA rate paced at: :data:`PACE` of the limit, bursts of :data:`BURST_SECONDS`' worth
    (or ``weight``, when one request is more: it then waits for an empty backlog)."""
    if not per_minute:
        return None
    limit = max(1, int(per_minute * PACE))
    return Rate(limit, 60_000, burst=max(1, weight, int(limit * BURST_SECONDS / 60)))


class _Step(StateAlgorithm):
    """One change of a key's state: (pause end, requests' and tokens' theoretical arrival
    times), in microseconds. Admit a request of ``tokens`` (once the pause is over, if both
    rates admit it), or pause the key until ``until_us`` (then one request per interval: the
    provider's bucket is empty)."""

    def __init__(self, rates: tuple[Rate | None, Rate | None], tokens: int = 0, until_us: int = 0):
        self.rates, self.tokens, self.until_us = rates, tokens, until_us

    def initial(self, rates: list[Rate]) -> tuple[int, int, int]:
        return (0, 0, 0)

    def decode(self, values: Sequence[str]) -> tuple[int, ...]:
        return tuple(int(v) for v in values)

    def step(self, rates: list[Rate], state: Any, now: int, weight: int) -> tuple[Any, Decision]:
        now_us = now * 1000
        pause, *tats = (int(v) for v in state)
        requests, tokens = self.rates
        if self.until_us:
            until = self.until_us
            tats = [
                tat if r is None else max(tat, until + (r.burst - 1) * 60_000_000 // r.limit)
                for r, tat in zip(self.rates, tats, strict=True)
            ]
            return (max(pause, until), *tats), Decision()
        if pause > now_us:
            wait_ms = -(-(pause - now_us) // 1000)
            return state, Decision(failing_rate=_PAUSED, retry_after_ms=wait_ms)
        for index, (rate, weight) in enumerate(((requests, 1), (tokens, self.tokens))):
            if rate is not None and weight > 0:
                new, decision = _GCRA.step([rate], (tats[index],), now, weight)
                if not decision.allowed:
                    return state, decision
                tats[index] = int(new[0])
        return (pause, *tats), Decision()


def _note(times: collections.deque[float], now: float) -> None:
    """Add ``now`` to ``times``, forgetting those over a minute old."""
    times.append(now)
    while times[0] < now - 60:
        times.popleft()


def fingerprint(api_key: str | None) -> str:
    """What a key is called in a shared store: a short hash of it, never the key."""
    return "key " + hashlib.sha256(api_key.encode()).hexdigest()[:16] if api_key else "no key"


class KeyLimit:
    """The limit of ``endpoint`` (a URL) with the key :func:`fingerprint` names, in ``backend``
    (a new :class:`InProcess` when None). ``rpm``/``tpm`` given are kept whatever the headers
    say; None: learned (with ``first_alone``, the first request goes alone until answered).
    ``warned``: the headers already warned of (a set the run's limits share). A request calls
    :meth:`wait`, sends inside :func:`.usage.listening` this limit, then
    :meth:`succeeded` if it did and :meth:`ended`; :meth:`rate_limited` on a 429."""

    def __init__(
        self,
        endpoint: str,
        key_fingerprint: str,
        rpm: float | None = None,
        tpm: float | None = None,
        *,
        backend: LimitBackend | None = None,
        patience: float = PATIENCE,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        first_alone: bool = True,
        warned: set[str] | None = None,
    ) -> None:
        self.name, self.endpoint = f"{endpoint} {key_fingerprint}", redact(endpoint)
        self.patience, self._sleep = patience, sleep
        self.given = {n for n, v in (("rpm", rpm), ("tpm", tpm)) if v}
        self.rpm, self.tpm = rpm, tpm
        self._alone = backend is None  # no one else reads its store: nothing to read unpaced
        backend = backend or InProcess()
        self.store, self.now = backend.store(self.name), backend.now
        self.last_success = self.estimated = self.now()
        self.told = False  # the provider's headers said its limits
        self.answered = bool(self.given) or not first_alone
        self._first: asyncio.Event | None = None
        self._turn = asyncio.Lock()  # one waiter reads the store at a time, in arrival order
        # without limits said: the last minute's requests sent, and answered
        self._sent: collections.deque[float] = collections.deque()
        self._successes: collections.deque[float] = collections.deque()
        self._pause = self._paused = 0.0  # the end of the last pause asked for; written
        self.gave_up: PatienceExhausted | None = None
        self.changes = 0  # pauses and limits found so far
        self._ceiling = math.inf  # without limits said: the pace the last 429 came at
        self._warned = set() if warned is None else warned  # headers warned of (the run's)

    def _rates(self, tokens: int = 0) -> tuple[Rate | None, Rate | None]:
        return _rate(self.rpm), _rate(self.tpm, tokens)

    async def _change(self, step: _Step) -> Decision:
        decision = self.store.check(step, [], int(self.now() * 1000), 1)
        return await decision if inspect.isawaitable(decision) else decision

    async def wait(self, tokens: int) -> int:
        """Wait until a request of about ``tokens`` may leave; :attr:`changes` then (a request
        that finds it moved on before it leaves, by a pause or a limit found, waits again)."""
        if self.gave_up is not None:
            raise PatienceExhausted(str(self.gave_up)) from self.gave_up.__cause__
        if not self.answered:
            if self._first is None:  # this one goes first, alone: its answer says the limits
                self._first = asyncio.Event()
            else:
                await self._first.wait()
        if self._alone and not (self.rpm or self.tpm):
            while (left := self._pause - self.now()) > 0:
                await self._sleep(left)
        else:
            await self._take(tokens)
        return self.changes

    def left(self) -> None:
        """A request it let go leaves now (counted to find the rate when no limits are said)."""
        if self._learning:
            if not self._sent:  # the first request sent: what the provider admits counts from now
                self.estimated = self.now()
            _note(self._sent, self.now())

    async def _take(self, tokens: int) -> None:
        async with self._turn:
            while True:
                if self._pause > self._paused:  # a pause this process heard of: for every sharer
                    self._paused = self._pause
                    await self._change(_Step(self._rates(), until_us=int(self._pause * 1e6)))
                decision = await self._change(_Step(self._rates(tokens), tokens))
                if decision.allowed:
                    return
                await self._sleep(max(1, decision.retry_after_ms or 0) / 1000)

    def ended(self) -> None:
        """A request that :meth:`wait` let go has ended (answered, failed or cancelled)."""
        self.answered = True
        if self._first is not None:
            self._first.set()

    def succeeded(self) -> None:
        """Patience starts again; without limits said the pace grows: 10% a second below the
        pace the last 429 came at, 2% above it (by a fixed step an answer: at any pace)."""
        now = self.last_success = self.now()
        if self._learning:
            _note(self._successes, now)
            if self.rpm:
                self.rpm += 6.0 if self.rpm < 0.95 * self._ceiling else 1.2

    @property
    def _learning(self) -> bool:
        """Requests per minute found from 429s: neither given nor said by headers."""
        return "rpm" not in self.given and not self.told

    def observe(self, status: int, headers: Mapping[str, str]) -> None:
        """Learn from one answer: the limits its headers say, and a 429's pause."""
        for name, attr in (("requests", "rpm"), ("tokens", "tpm")):
            limit = self._number(headers, f"x-ratelimit-limit-{name}", 1, _SANE_LIMIT)
            if limit is not None and attr not in self.given:
                self.changes += limit != getattr(self, attr)
                setattr(self, attr, limit)
                self.told = True
        if status == 429:
            self._pause = max(self._pause, self.now() + self._pause_of(headers))
            self.changes += 1
            if self._learning:
                self._slow_down()

    def _slow_down(self) -> None:
        """No limits said: keep to the rate admitted since the last change (1 to 60 s), or a
        quarter of the rate sent when more (a burst's answers still on their way); once a second
        at most, and not on a few requests, which say nothing of a rate."""
        now = self.now()
        if self.rpm and now - self.estimated < 1.0:
            return
        window = min(60.0, max(1.0, now - self.estimated))
        admitted = sum(1 for t in self._successes if t > now - window)
        sent = sum(1 for t in self._sent if t > now - window)
        if sent >= 4:  # fewer say nothing of a rate: the pause alone answers them
            self._ceiling = self.rpm or math.inf
            self.rpm, self.estimated = 60 * max(admitted, sent / 4) / window, now

    def rate_limited(self, exc: BaseException) -> bool:
        """A 429 (``exc``): the key pauses and True (ask again); PatienceExhausted once no
        request has succeeded for the run's patience."""
        from ..errors import answer_headers

        self.observe(429, answer_headers(exc))
        if self.now() - self.last_success > self.patience:
            self.gave_up = PatienceExhausted(
                f"no request to {self.endpoint} succeeded in {self.patience:g} s: the provider "
                "kept answering 429"
            )
            raise self.gave_up from exc
        return True

    def _pause_of(self, headers: Mapping[str, str]) -> float:
        """Seconds a 429 asks for: ``retry-after-ms``, ``retry-after``, the reset of a limit used
        up, else :data:`PAUSE`; at most :data:`MAX_PAUSE`."""
        said = [(n, 0.001 if n.endswith("-ms") else 1.0) for n in ("retry-after-ms", "retry-after")]
        for name in ("requests", "tokens"):
            if self._number(headers, f"x-ratelimit-remaining-{name}") == 0:
                said.append((f"x-ratelimit-reset-{name}", 1.0))
        for name, scale in said:
            value = self._number(headers, name, 0, math.inf)
            if value is not None and value * scale > MAX_PAUSE:
                self._warn(name, f"asks for {value:g}, over {MAX_PAUSE:g} s; waiting that long")
                return MAX_PAUSE
            if value is not None:
                return value * scale
        return PAUSE

    def _number(
        self, headers: Mapping[str, str], name: str, low: float = 0, high: float = _SANE_LIMIT
    ) -> float | None:
        """Header ``name`` as a number in ``low``..``high`` (``6m0s``: seconds); None when it is
        missing or (with one warning) no such number."""
        text = headers.get(name)
        if text is None:
            return None
        parts = _DURATION.findall(text) if name.startswith("x-ratelimit-reset") else []
        try:
            value = sum(float(n) * _UNITS[u] for n, u in parts) if parts else float(text)
        except ValueError:
            value = math.nan
        if math.isfinite(value) and low <= value <= high:
            return value
        self._warn(name, f"says {text[:40]!r}, not a value a provider sends; ignored")
        return None

    def _warn(self, header: str, what: str) -> None:
        if header not in self._warned:
            self._warned.add(header)
            log.warning("%s from %s %s (said once per run)", header, self.endpoint, what)


def _identity(client_holder: Any, depth: int = 0) -> tuple[str, str | None] | None:
    """(base URL, API key) of the OpenAI-style client inside a judge or embeddings, if any."""
    if depth > 3 or client_holder is None:
        return None
    url, key = getattr(client_holder, "base_url", None), getattr(client_holder, "api_key", None)
    if url is not None and (key is None or isinstance(key, str)):
        return str(url).rstrip("/"), key
    for name in ("client", "async_client", "root_async_client", "inner", "embeddings"):
        found = _identity(getattr(client_holder, name, None), depth + 1)
        if found is not None:
            return found
    return None


def run_limits(
    rates: RateLimits | None,
    judge: Any,
    embeddings: Any,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
) -> dict[str, KeyLimit]:
    """The judge's and the embeddings' :class:`KeyLimit` for a run, by the endpoint and key of
    their client; one not found (no headers to wait for) keeps its limit to the run."""
    rates = rates or RateLimits()
    backend = OnDisk(rates.shared) if isinstance(rates.shared, (str, os.PathLike)) else rates.shared
    limits, warned = {}, set[str]()  # a header no provider sends: said once a run
    for kind, obj, rpm, tpm, path in (
        ("judge", judge, rates.rpm, rates.tpm, "/chat/completions"),
        ("embeddings", embeddings, rates.embedding_rpm, rates.embedding_tpm, "/embeddings"),
    ):
        found = _identity(obj)
        where = backend if found is not None else None
        url, key = found or (type(obj).__name__, None)
        limits[kind] = KeyLimit(
            url + path,
            fingerprint(key),
            rpm,
            tpm,
            backend=where,
            patience=rates.patience,
            sleep=sleep,
            first_alone=found is not None,
            warned=warned,
        )
    return limits
