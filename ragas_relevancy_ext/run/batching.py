"""Embedding requests of a run: samples' texts coalesced into shared requests, questions reused.

Embedding APIs limit requests per minute, and a local model embeds 64 texts in about the time it
takes for one, so two requests per sample waste both. A :class:`RunEmbedder` lives as long as a run
(``abatch_score``, one ``ragas.evaluate`` run) on the run's :class:`.Scheduler`: each sample hands
it its question and its probes, and it sends the texts of concurrent samples as one request of up to
``max_batch`` texts. A request leaves ahead of the judge calls of rows not yet judged when it is
full, or when no more texts are coming (every row under way is waiting on its vectors or done), once
enough rows have been given a slot since its first text came to fill one, or when a slot is free
with no call in line for it and at least as many rows wait on it as may still add texts. A row's
question waits from the row's start; when a probes request takes a row's probes, the questions
up to that row's leave, in full requests that carry the questions of rows still being judged,
so a question is never sent before some row needs it and rarely holds a row back. There is no
time window: rows finish as they go, a few dozen at most waiting on a request. The vectors are
checked once per request (one per text, one width, finite, non-zero), then split back per sample;
questions and probes go in separate requests, so each sample's two widths still come from two
answers. A coalesced request that fails is sent again per sample, so a sample whose texts are fine
never fails with a neighbour's. Embeddings that send a request per text (:class:`OneTextPerCall`)
are never coalesced; unshared requests take their row's place in line. A question seen before in the
run is not embedded again.

Usage: a shared request's requests and tokens are split over the samples in it in proportion
to the characters of each sample's texts (whole numbers, largest remainders), so each sample
carries a fair part and the parts add up to exactly what the provider reported: the sum over a
run's samples is the run's usage. A failed shared request is split the same way; each sample's
own retry is its own. A reused question costs the sample that first asked for it, and nothing
to the samples that reuse it.
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
    Usage,
    UsageMeter,
    current_meter,
    metering,
    split_usage,
)
from .scheduler import Row, Scheduler

__all__ = ["DEFAULT_MAX_BATCH", "MAX_REUSED_QUESTIONS", "RowEmbeddings", "RunEmbedder"]

DEFAULT_MAX_BATCH = 64
# Loop steps between a slot left free and the check of what waits: the row whose call freed it
# hands in its texts first (its reply goes up through a gather or two).
FREE_SLOT_STEPS = 4
# Question vectors kept for reuse in one run, the least recently used dropped first.
MAX_REUSED_QUESTIONS = 20_000


class _Share:
    """One sample's texts in a coalesced request, and where its vectors and usage go."""

    def __init__(self, texts: list[str], priority: float, needs: asyncio.Future[Any] | None):
        self.texts = texts
        self.priority = priority
        self.needs = needs  # the question vector its row waits for beside these
        self.future: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        # The submitting caller's meter, charged before the vectors arrive: a sample that
        # finds its vectors already there reads its usage at once, with no callback pending.
        self.meter = current_meter()
        self.trace = tracing.span_context()  # the request's span goes under the first sample's

    def charge(self, usage: Usage) -> None:
        """Add the share's part of a request that carried its texts to its caller's meter."""
        if self.meter is not None:
            self.meter.add(usage)

    def settle(self, vectors: np.ndarray | None = None, error: BaseException | None = None) -> None:
        if self.future.done():  # its sample was cancelled
            return
        if error is not None:
            self.future.set_exception(error)
        else:
            self.future.set_result(vectors)  # type: ignore[arg-type]


class _Coalescer:
    """Texts of concurrent callers sent as shared requests of up to ``max_batch`` texts.

    Each request is a task of the run that takes the texts waiting when it gets its slot (ahead
    of every row's judge calls), so texts that come meanwhile ride along. A request leaves when
    it is full, when :meth:`flush` asks (no more texts are coming), once as many more rows as
    fill one have been given a slot since its first text came (by then their texts are in), or
    when a slot is free with no call waiting for it: then no row is in line to add texts, and a
    row whose judge hangs holds none back. With no ``coming`` (the questions), requests leave
    only when :meth:`send_for` asks. ``on_take`` is told the shares a request takes.
    """

    def __init__(
        self,
        embeddings: Any,
        scheduler: Scheduler,
        max_batch: int,
        coming: Callable[[], int] | None,
        on_take: Callable[[list[_Share]], None] | None = None,
    ):
        self.embeddings, self.scheduler = embeddings, scheduler
        self.coming = coming  # rows under way that may still add texts; None: on demand only
        self.max_batch = max_batch
        self.on_take = on_take
        self._pending: list[_Share] = []
        self._pending_texts = 0
        self._ahead = 0  # requests started, waiting for a slot
        self._due: float | None = None  # what is waiting goes once the frontier reaches this
        self._checking = False  # a free slot's check is under way
        self._shares = self._texts = 0  # seen so far: how many rows fill a request
        scheduler.on_frontier.append(self._frontier_moved)
        scheduler.on_free.append(self._slot_free)

    def submit(
        self, texts: list[str], priority: float, needs: asyncio.Future[Any] | None = None
    ) -> asyncio.Future[np.ndarray]:
        """A future of the checked (len(texts), d) array, from a request shared with other
        callers' texts; no task per caller. Cancelling it takes the texts out if not sent yet.
        The share's part of each request that carried its texts goes to the meter of the
        caller who submitted it, before its vectors are handed over."""
        share = _Share(texts, priority, needs)
        self._pending.append(share)
        self._pending_texts += len(texts)
        self._shares += 1
        self._texts += len(texts)
        self._schedule()
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
        needed = size = 0
        for share in self._pending:
            size += len(share.texts)
            if id(share.future) in wanted:
                needed = size
        while self._ahead * self.max_batch < needed and not self.scheduler.closed:
            self._start()

    def flush(self) -> None:
        """Send what is waiting now."""
        self._due = None
        if self.scheduler.closed or not self._pending:
            return
        while self._ahead * self.max_batch < self._pending_texts:
            self._start()

    def _schedule(self) -> None:
        """A request per ``max_batch`` waiting texts; for what is left, a frontier to wait for."""
        if self.scheduler.closed or not self._pending or self.coming is None:
            return
        while self._ahead < self._pending_texts // self.max_batch:
            self._start()
        if self._due is None and self._ahead * self.max_batch < self._pending_texts:
            rows = self.max_batch * self._shares // max(1, self._texts)  # rows filling one
            # the rows given a slot by then, less those still in their calls, fill one
            self._due = self.scheduler.frontier + max(1, rows) + self.scheduler.limit
        self.check_free()

    def check_free(self) -> None:
        """With a slot free and nothing in line, what waits goes once at least as many rows
        wait on it as may still add texts: a row whose judge hangs holds back no more rows than
        there are such rows, and the last rows of a run leave in a few requests, not one each."""
        if (
            self._due is not None
            and self.coming is not None
            and not self.scheduler.saturated
            and len(self._pending) >= self.coming()
        ):
            self.flush()

    def _frontier_moved(self, frontier: float) -> None:
        if self._due is not None and frontier >= self._due:
            self.flush()

    def _slot_free(self) -> None:
        """A slot was left free: once the row that freed it has handed in its texts (a few
        loop steps on), what waits goes if nothing is in line."""
        if self._due is not None and not self._checking:
            self._checking = True
            asyncio.get_running_loop().call_soon(self._check_free, FREE_SLOT_STEPS)

    def _check_free(self, steps: int) -> None:
        if steps > 1:
            asyncio.get_running_loop().call_soon(self._check_free, steps - 1)
            return
        self._checking = False
        self.check_free()

    def _start(self) -> None:
        self._ahead += 1
        self.scheduler.start(self._send())

    def _take(self) -> list[_Share]:
        """Up to ``max_batch`` texts' worth of waiting shares (always at least one share)."""
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
        self._due = None  # what is left waits for rows from here on
        self._schedule()
        return taken

    async def _send(self) -> None:
        failed: Exception | None = None
        waiting = True
        try:
            async with self.scheduler.ahead():
                waiting = False
                self._ahead -= 1
                shares = self._take()
                if not shares:
                    return
                if self.on_take is not None:
                    self.on_take(shares)
                texts = [text for share in shares for text in share.texts]
                meter = UsageMeter()
                try:  # the slot held, the request keeps to the run's rate limits
                    with metering(meter), tracing.shared_request([s.trace for s in shares]):
                        vectors = await embed_texts(self.embeddings, texts, self.scheduler)
                except asyncio.CancelledError as exc:
                    _charge(shares, meter)
                    for share in shares:
                        share.settle(error=exc)
                    raise
                except Exception as exc:
                    failed = exc
                _charge(shares, meter)
        finally:
            if waiting:  # cancelled before a slot
                self._ahead -= 1
        if failed is not None:
            if len(shares) == 1:
                shares[0].settle(error=failed)
            else:  # each caller's share alone: neighbours of a bad text are not failed
                await asyncio.gather(*(self._send_alone(share) for share in shares))
            return
        start = 0
        for share in shares:
            share.settle(vectors[start : start + len(share.texts)])
            start += len(share.texts)

    async def _send_alone(self, share: _Share) -> None:
        meter = UsageMeter()
        try:
            with metering(meter), tracing.shared_request([share.trace]):
                vectors = await embed_texts(self.embeddings, share.texts, self.scheduler.ahead())
        except Exception as exc:
            share.charge(meter.usage)
            share.settle(error=exc)
            return
        share.charge(meter.usage)
        share.settle(vectors)


def _charge(shares: list[_Share], meter: UsageMeter) -> None:
    """Split a shared request's usage over its shares by their texts' characters."""
    weights = [sum(len(text) for text in share.texts) for share in shares]
    for share, part in zip(shares, split_usage(meter.usage, weights), strict=True):
        share.charge(part)


class RunEmbedder:
    """The embedding requests of one run for one embeddings object, on the run's scheduler.

    Questions and probes travel in separate requests, as stock sends them, so a request
    answered with vectors of a wrong size shows up as a question/probes length mismatch; that
    sample then asks again for its own two texts alone before it fails. ``coalesce`` False (or
    embeddings that send a request per text) sends each sample's question and probes in
    requests of their own, two per sample as stock does, in the row's place in line; question
    vectors are reused either way. Each row takes a :meth:`row` view, which tells the embedder
    when the row's texts are in (or that none will come).
    """

    def __init__(
        self,
        embeddings: Any,
        scheduler: Scheduler,
        *,
        coalesce: bool = True,
        max_batch: int = DEFAULT_MAX_BATCH,
    ):
        self.embeddings = embeddings
        self.scheduler = scheduler
        self.coalesce = coalesce and sends_one_request(embeddings)
        self.max_batch = max_batch
        # questions wait from a row's start until a probes request takes that row's probes
        questions = _Coalescer(embeddings, scheduler, max_batch, None)
        probes = _Coalescer(
            embeddings,
            scheduler,
            max_batch,
            self._rows_coming,
            on_take=lambda shares: questions.send_for([share.needs for share in shares]),
        )
        self._streams = {"questions": questions, "probes": probes}
        self._questions: OrderedDict[str, asyncio.Future[np.ndarray]] = OrderedDict()
        self._expecting: Counter[str] = Counter()  # rows that expect a question, not yet done
        self._coming = 0  # rows under way that have not handed in their texts

    def rows_in_flight(self, max_concurrency: int) -> int:
        """Rows a run keeps in flight for ``max_concurrency`` requests: with shared requests,
        ``2 * max_batch`` more, which wait on their embeddings while other rows' judge calls
        hold the slots, so that requests leave full. Requests in flight stay bounded by the
        scheduler; rows only cost their memory."""
        return max_concurrency + (2 * self.max_batch if self.coalesce else 0)

    def row(self, calls: Row) -> RowEmbeddings:
        """The embeddings of one row whose calls take ``calls``'s place in line."""
        self._coming += 1
        return RowEmbeddings(self, calls)

    def _arrived(self) -> None:
        """One row has handed in its texts, or will hand in none: with no row left to hand in
        any, what is waiting goes now."""
        self._coming -= 1
        if self.coalesce:
            probes = self._streams["probes"]
            probes.flush() if self._coming <= 0 else probes.check_free()

    def _rows_coming(self) -> int:
        return self._coming

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
        return self._streams[stream].submit(texts, calls.priority, needs)

    def _question(self, text: str, calls: Row) -> asyncio.Future[np.ndarray]:
        """``text``'s (1, d) vectors, embedded once per run however many samples ask."""
        held = self._questions.get(text)
        if held is None:
            held = self._embed("questions", [text], calls)
            self._questions[text] = held
            while len(self._questions) > MAX_REUSED_QUESTIONS:
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

    async def _vectors_of(self, held: asyncio.Future[np.ndarray]) -> np.ndarray:
        """``held``'s vectors; the row stops expecting its question once they (or its failure)
        came, and not before, so no other row takes it back meanwhile."""
        try:
            return await asyncio.shield(held)
        finally:
            self._unexpect()

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
            question_vector = (await self._vectors_of(held))[0]
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
