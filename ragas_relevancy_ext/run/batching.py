"""Embedding requests of a run: samples' texts coalesced into shared requests, questions reused.

Embedding APIs limit requests per minute, and a local model embeds 64 texts in about the time
of one. A :class:`RunEmbedder` lives as long as a run on its :class:`.Scheduler` and sends the
texts of concurrent samples in requests of up to ``max_batch`` texts. A probes request leaves
when full, when no more texts are coming, or ``window`` seconds after its first text came,
whatever the judge's queue holds, so an answered row never waits long on rows a rate limit
holds back. A row's question waits from the row's start and leaves with the first probes request
that takes the row's probes, beside the questions of rows still being judged. Vectors are checked
once per request, then split back per sample; questions and probes go apart, so each sample's two
widths come from two answers. A shared request that fails is sent again per sample, so a bad
text fails only its own sample. :class:`OneTextPerCall` is never coalesced. A question among the
last :data:`REUSED_QUESTIONS` asked is not embedded again.

Usage: a shared request's requests and tokens are split over its samples by their texts'
characters (whole numbers, largest remainders), so the parts add up to what the provider
reported; a reused question costs only the sample that first asked for it.
"""

from __future__ import annotations

import asyncio
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..scoring import tracing
from ..scoring.embeddings import (
    check_same_width,
    embed_question_and_probes,
    embed_texts,
    sends_one_request,
)
from ..scoring.usage import (
    UsageMeter,
    current_meter,
    metering,
    split_usage,
)
from .scheduler import Row, Scheduler

__all__ = ["DEFAULT_MAX_BATCH", "REUSED_QUESTIONS", "WINDOW", "RowEmbeddings", "RunEmbedder"]

DEFAULT_MAX_BATCH = 64
# Seconds a probes request that is not full waits for more texts after its first came.
WINDOW = 0.5
# Question vectors kept for reuse in one run, the least recently used dropped first: a fixed
# cap, so a run's memory does not grow with its file (26 KB a question at 3,072 dimensions).
REUSED_QUESTIONS = 256


class _Share:
    """One sample's texts in a coalesced request, and where its vectors and usage go."""

    def __init__(self, texts: list[str], needs: asyncio.Future[Any] | None):
        self.texts = texts
        self.needs = needs  # the question vector its row waits for beside these
        self.future: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        # The submitting caller's meter, charged before the vectors arrive: a sample that
        # finds its vectors already there reads its usage at once, with no callback pending.
        self.meter = current_meter()
        self.trace = tracing.span_context()  # the request's span goes under the first sample's

    def settle(self, vectors: np.ndarray | None = None, error: BaseException | None = None) -> None:
        if self.future.done():  # its sample was cancelled
            return
        if isinstance(error, asyncio.CancelledError):  # nothing to read: the run is ending
            self.future.cancel()
        elif error is not None:
            self.future.set_exception(error)
        else:
            self.future.set_result(vectors)  # type: ignore[arg-type]


class _Coalescer:
    """Texts of concurrent callers sent as shared requests of up to ``max_batch`` texts: a
    request takes the texts waiting when they fill it, when :meth:`flush` asks, or ``window``
    seconds after the first came (no ``window``: only when :meth:`send_for` asks), then waits
    for the key's limit and a slot as a task of the run. ``on_take`` hears what it takes."""

    def __init__(
        self,
        embeddings: Any,
        scheduler: Scheduler,
        max_batch: int,
        window: float | None,
        on_take: Callable[[list[_Share]], None] | None = None,
    ):
        self.embeddings, self.scheduler = embeddings, scheduler
        self.max_batch, self.window = max_batch, window
        self.on_take = on_take
        self._pending: list[_Share] = []
        self._pending_texts = 0
        self._timer: asyncio.TimerHandle | None = None

    def submit(
        self, texts: list[str], needs: asyncio.Future[Any] | None = None
    ) -> asyncio.Future[np.ndarray]:
        """A future of the checked (len(texts), d) array, from a request shared with other
        callers' texts; no task per caller. Cancelling it takes the texts out if not sent yet.
        The share's part of each request that carried its texts goes to the meter of the
        caller who submitted it, before its vectors are handed over."""
        share = _Share(texts, needs)
        self._pending.append(share)
        self._pending_texts += len(texts)
        while self.window is not None and self._pending_texts >= self.max_batch:
            self._start()
        if self._pending and self._timer is None and self.window is not None:
            self._timer = asyncio.get_running_loop().call_later(self.window, self.flush)
        return share.future

    def withdraw(self, future: asyncio.Future[np.ndarray]) -> bool:
        """Take a submitted share out (its future cancelled) if no request has taken it yet;
        once one has, its vectors and usage will come. True when it was taken out."""
        for share in self._pending:
            if share.future is future:
                future.cancel()
                return True
        return False

    def send_for(self, futures: Sequence[asyncio.Future[Any] | None]) -> None:
        """Send, in full requests from the oldest, what is waiting up to the last of
        ``futures`` still waiting."""
        wanted = {id(future) for future in futures}
        while any(id(share.future) in wanted for share in self._pending):
            self._start()

    def flush(self) -> None:
        """Send what is waiting now."""
        while self._pending:
            self._start()

    def _start(self) -> None:
        """Up to ``max_batch`` texts' worth of waiting shares (at least one) leave as a request."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        taken: list[_Share] = []
        size = 0
        while self._pending:
            share = self._pending[0]
            if taken and size + len(share.texts) > self.max_batch:
                break
            self._pending.pop(0)
            self._pending_texts -= len(share.texts)
            if not share.future.done():  # its sample was cancelled
                taken.append(share)
                size += len(share.texts)
        if self._pending and self.window is not None:
            self._timer = asyncio.get_running_loop().call_later(self.window, self.flush)
        if taken and not self.scheduler.closed:
            if self.on_take is not None:
                self.on_take(taken)
            self.scheduler.start(self._send(taken))

    async def _send(self, shares: list[_Share]) -> None:
        texts = [text for share in shares for text in share.texts]
        meter = UsageMeter()
        try:  # the key's rate limit, then a slot, as any request
            with metering(meter), tracing.shared_request([s.trace for s in shares]):
                vectors = await embed_texts(self.embeddings, texts, self.scheduler.slot())
        except asyncio.CancelledError as exc:
            _charge(shares, meter)
            for share in shares:
                share.settle(error=exc)
            raise
        except Exception as exc:
            _charge(shares, meter)
            if len(shares) == 1:
                shares[0].settle(error=exc)
            else:  # each caller's share alone: neighbours of a bad text are not failed
                await asyncio.gather(*(self._send([share]) for share in shares))
            return
        _charge(shares, meter)
        start = 0
        for share in shares:  # questions (no window) are kept for reuse: each its own copy
            part = vectors[start : start + len(share.texts)]
            share.settle(part.copy() if self.window is None else part)
            start += len(share.texts)


def _charge(shares: list[_Share], meter: UsageMeter) -> None:
    """Split a shared request's usage over its shares by their texts' characters."""
    weights = [sum(len(text) for text in share.texts) for share in shares]
    for share, part in zip(shares, split_usage(meter.usage, weights), strict=True):
        if share.meter is not None:
            share.meter.add(part)


class RunEmbedder:
    """The embedding requests of one run for one embeddings object, on the run's scheduler.

    Questions and probes travel apart, as stock sends them, so vectors of a wrong size show up
    as a length mismatch; that sample then asks again alone before it fails. ``coalesce`` False
    (or embeddings that send a request per text): two requests per sample, as stock. Each row
    takes a :meth:`row` view, which tells when the row's texts are in (or that none will come).
    """

    def __init__(
        self,
        embeddings: Any,
        scheduler: Scheduler,
        *,
        coalesce: bool = True,
        max_batch: int = DEFAULT_MAX_BATCH,
        window: float = WINDOW,
    ):
        self.embeddings, self.scheduler, self.max_batch = embeddings, scheduler, max_batch
        self.coalesce = coalesce and sends_one_request(embeddings)
        # questions wait from a row's start until a probes request takes that row's probes
        questions = _Coalescer(embeddings, scheduler, max_batch, None)
        probes = _Coalescer(
            embeddings,
            scheduler,
            max_batch,
            window,
            on_take=lambda shares: questions.send_for([share.needs for share in shares]),
        )
        self._streams = {"questions": questions, "probes": probes}
        self._questions: OrderedDict[str, asyncio.Future[np.ndarray]] = OrderedDict()
        self._expecting: Counter[str] = Counter()  # rows that expect a question, not yet done
        self._coming = 0  # rows under way that have not handed in their texts

    def rows_in_flight(self, max_concurrency: int) -> int:
        """Rows a run keeps in flight for ``max_concurrency`` requests: with shared requests,
        ``2 * max_batch`` more (waiting on their embeddings), so that requests leave full."""
        return max_concurrency + (2 * self.max_batch if self.coalesce else 0)

    def row(self, calls: Row) -> RowEmbeddings:
        """The embeddings of one row whose calls take ``calls``'s place in line."""
        self._coming += 1
        return RowEmbeddings(self, calls)

    def _arrived(self) -> None:
        """One row has handed in its texts, or will hand in none: with no row left to hand in
        any, what is waiting goes now."""
        self._coming -= 1
        if self.coalesce and self._coming <= 0:
            self._streams["probes"].flush()

    def _embed(
        self,
        stream: str,
        texts: list[str],
        calls: Row,
        needs: asyncio.Future[Any] | None = None,
    ) -> asyncio.Future[np.ndarray]:
        """The checked vectors of ``texts``, to come: a share of a coalesced request (a future,
        no task per sample), or a request of their own (a task of the run, in the caller's
        context, in the row's place in line)."""
        if not self.coalesce:
            return self.scheduler.start(embed_texts(self.embeddings, texts, calls))
        return self._streams[stream].submit(texts, needs)

    def _question(self, text: str, calls: Row) -> asyncio.Future[np.ndarray]:
        """``text``'s (1, d) vectors, embedded once per run however many samples ask."""
        held = self._questions.get(text)
        if held is None:
            held = self._embed("questions", [text], calls)
            self._questions[text] = held
            while len(self._questions) > REUSED_QUESTIONS:
                self._questions.popitem(last=False)
        else:
            self._questions.move_to_end(text)
        return held

    def __repr__(self) -> str:
        return (
            f"RunEmbedder({type(self.embeddings).__name__}, coalesce={self.coalesce}, "
            f"max_batch={self.max_batch})"
        )


class RowEmbeddings:
    """One row's view of the run's :class:`RunEmbedder`: its requests in the row's place in
    line; :meth:`close` when the row ends (it may never have asked)."""

    def __init__(self, run: RunEmbedder, calls: Row):
        self.run = run
        self.calls = calls
        self._coming = True
        self._expected: tuple[str, asyncio.Future[np.ndarray]] | None = None

    def expect(self, question: str) -> None:
        """The row will ask for ``question``'s vector: with shared requests it waits from now,
        and goes when a request takes this or an earlier row's probes, so the questions of
        rows still being judged fill it."""
        if self.run.coalesce:
            self._expected = (question, self.run._question(question, self.calls))
            self.run._expecting[question] += 1

    def _unexpect(self) -> tuple[str, asyncio.Future[np.ndarray], bool] | None:
        """(question, its future, whether no other row expects it) of the row's expectation,
        which ends here; None when there was none."""
        if self._expected is None:
            return None
        question, held = self._expected
        self._expected = None
        expecting = self.run._expecting
        expecting[question] -= 1
        alone = expecting[question] <= 0
        if alone:
            del expecting[question]
        return question, held, alone

    async def release(self) -> None:
        """The row ends without its vectors (its judge failed, or wrote no probe): its question,
        if no other row expects it, is taken back unsent; one already sent is waited for, so
        what it cost is in the row's usage before the row reports."""
        self.close()  # it hands in no texts: requests waiting on rows need not wait for it
        expected = self._unexpect()
        if expected is None:
            return
        question, held, alone = expected
        run = self.run
        if alone and run._streams["questions"].withdraw(held):
            if run._questions.get(question) is held:
                del run._questions[question]
            return
        await asyncio.gather(asyncio.shield(held), return_exceptions=True)

    def close(self) -> None:
        """The row ends: it hands in no (more) texts."""
        if self._coming:
            self._coming = False
            self.run._arrived()

    async def question_and_probes(
        self, question: str, probes: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The question's vector and the probes' (len(probes), d) array."""
        run = self.run
        if self._expected is None or self._expected[0] != question:
            self._unexpect()
            self.expect(question)  # so that no row failing meanwhile takes it back
        held = self._expected[1] if self._expected else run._question(question, self.calls)
        probe_share = run._embed("probes", list(probes), self.calls, held)
        self.close()  # its texts are in
        try:
            try:  # expected until its vectors (or its failure) came: no row takes it back
                question_vector = (await asyncio.shield(held))[0]
            finally:
                self._unexpect()
        except Exception:
            if run._questions.get(question) is held:  # the next sample asks again
                del run._questions[question]
            # probes not sent yet are taken out; a request already under way is awaited, so
            # what it cost reaches this sample's usage before the sample fails
            if run.coalesce:
                run._streams["probes"].withdraw(probe_share)
            await asyncio.gather(probe_share, return_exceptions=True)
            raise
        except BaseException:
            probe_share.cancel()
            await asyncio.gather(probe_share, return_exceptions=True)
            raise
        probe_vectors = await probe_share
        name = type(run.embeddings).__name__
        if question_vector.shape[0] != probe_vectors.shape[1] and run.coalesce:
            # one of two shared requests answered another width: ask again, alone
            question_vector, probe_vectors = await embed_question_and_probes(
                run.embeddings, question, probes, self.calls
            )
            run._questions[question] = _done(question_vector[None, :])
        check_same_width(name, question_vector[None, :], probe_vectors)
        return question_vector, probe_vectors


def _done(value: np.ndarray) -> asyncio.Future[np.ndarray]:
    future: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
    future.set_result(value)
    return future
