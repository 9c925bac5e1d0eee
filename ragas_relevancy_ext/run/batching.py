"""Embedding requests of a run: samples' texts coalesced into shared requests, questions reused.

Embedding APIs limit requests per minute, and a local model embeds 64 texts in about the time
it takes for one, so two requests per sample waste both. A :class:`RunEmbedder` lives as long as
a run (``abatch_score``, one ``ragas.evaluate`` loop): each sample hands it its question and its
probes, and it sends the texts of concurrent samples as one request of up to ``max_batch``
texts, or what has come within ``window`` seconds. The vectors are checked once per request
(one per text, one width, finite, non-zero), then split back per sample; questions and probes
go in separate requests, so each sample's two widths still come from two answers. A coalesced
request that fails is sent again per sample, so a sample whose texts are fine never fails with a
neighbour's. Embeddings that send a request per text (:class:`OneTextPerCall`) are never
coalesced. A question seen before in the run is not embedded again.

Usage: a shared request's requests and tokens are split over the samples in it in proportion
to the characters of each sample's texts (whole numbers, largest remainders), so each sample
carries a fair part and the parts add up to exactly what the provider reported: the sum over a
run's samples is the run's usage. A failed shared request is split the same way; each sample's
own retry is its own. A reused question costs the sample that first asked for it, and nothing
to the samples that reuse it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import numpy as np

from ..scoring import tracing
from ..scoring.embeddings import (
    check_same_width,
    embed_question_and_probes,
    embed_texts,
    sends_one_request,
)
from ..scoring.usage import Usage, UsageMeter, current_meter, metering, split_usage
from .streaming import CallLimiter

__all__ = ["DEFAULT_MAX_BATCH", "DEFAULT_WINDOW", "MAX_REUSED_QUESTIONS", "RunEmbedder"]

DEFAULT_MAX_BATCH = 64
DEFAULT_WINDOW = 0.005
# Question vectors kept for reuse in one run, the least recently used dropped first.
MAX_REUSED_QUESTIONS = 20_000


class _Share:
    """One sample's texts in a coalesced request, and where its vectors and usage go."""

    def __init__(self, texts: list[str]):
        self.texts = texts
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
    """Texts of concurrent callers sent as one request of up to ``max_batch`` texts.

    A request is sent ``window`` seconds after its first text came (at once when ``max_batch``
    texts are waiting). It takes its texts when it gets a slot of ``limiter``, so texts that
    come while it waits for one (behind judge calls) ride along instead of queueing requests.
    A full request waits ahead of the judge calls of rows not yet judged (with a
    :class:`CallLimiter`): waiting longer could not fill it more, and it finishes rows.
    """

    def __init__(self, embeddings: Any, limiter: Any, max_batch: int, window: float):
        self.embeddings, self.limiter = embeddings, limiter
        self.max_batch, self.window = max_batch, window
        self._pending: list[_Share] = []
        self._pending_texts = 0
        self._timer: asyncio.TimerHandle | None = None
        self._sending: set[asyncio.Task[None]] = set()
        self._full_waiting = 0  # full requests waiting for a slot
        self._partial_waiting = False  # a request of what is left over, waiting for a slot

    def submit(self, texts: list[str]) -> asyncio.Future[np.ndarray]:
        """A future of the checked (len(texts), d) array, from a request shared with other
        callers' texts; no task per caller. Cancelling it takes the texts out if not sent yet.
        The share's part of each request that carried its texts goes to the meter of the
        caller who submitted it, before its vectors are handed over."""
        share = _Share(texts)
        self._pending.append(share)
        self._pending_texts += len(texts)
        self._schedule()
        return share.future

    def withdraw(self, future: asyncio.Future[np.ndarray]) -> None:
        """Take a submitted share out (its future cancelled) if no request has taken it yet;
        once one has, its vectors and usage will come."""
        for share in self._pending:
            if share.future is future:
                future.cancel()
                return

    def _schedule(self) -> None:
        """One waiting request per ``max_batch`` pending texts, each sent ahead of rows' judge
        calls; what is left over waits ``window`` seconds, then for a slot, in one request
        that takes whatever is pending when it gets one."""
        if not self._pending:
            return
        if self._pending_texts >= self.max_batch * (self._full_waiting + 1):
            self._flush(full=True)
        elif self._timer is None and not self._full_waiting and not self._partial_waiting:
            self._timer = asyncio.get_running_loop().call_later(self.window, self._flush)

    def _flush(self, full: bool = False) -> None:
        """Start a request for what is pending (it takes its texts once it has a slot)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending or (not full and self._partial_waiting):
            return
        if full:
            self._full_waiting += 1
        else:
            self._partial_waiting = True
        task = asyncio.ensure_future(self._send(full))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    def _stop_waiting(self, full: bool) -> None:
        if full:
            self._full_waiting -= 1
        else:
            self._partial_waiting = False

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
        self._schedule()
        return taken

    def _slot(self, full: bool) -> AbstractAsyncContextManager[Any]:
        if self.limiter is None:
            return contextlib.nullcontext()
        if full and isinstance(self.limiter, CallLimiter):
            return self.limiter.ahead()
        return self.limiter

    async def _send(self, full: bool) -> None:
        failed: Exception | None = None
        waiting = True
        try:
            async with self._slot(full):
                waiting = False
                self._stop_waiting(full)
                shares = self._take()
                if not shares:
                    return
                texts = [text for share in shares for text in share.texts]
                meter = UsageMeter()
                try:
                    with metering(meter), tracing.shared_request([s.trace for s in shares]):
                        vectors = await embed_texts(self.embeddings, texts)
                except asyncio.CancelledError as exc:
                    _charge(shares, meter)
                    for share in shares:
                        share.settle(error=exc)
                    raise
                except Exception as exc:
                    failed = exc
                _charge(shares, meter)
        finally:
            if waiting:  # cancelled before a slot: the next text schedules a request again
                self._stop_waiting(full)
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
                vectors = await embed_texts(self.embeddings, share.texts, self.limiter)
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
    """The embedding requests of one run (one event loop) for one embeddings object.

    Questions and probes travel in separate requests, as stock sends them, so a request
    answered with vectors of a wrong size shows up as a question/probes length mismatch; that
    sample then asks again for its own two texts alone before it fails. ``coalesce`` False (or
    embeddings that send a request per text) sends each sample's question and probes in
    requests of their own, two per sample as stock does; question vectors are reused either
    way. ``limiter`` bounds requests in flight, shared with the judge.
    """

    def __init__(
        self,
        embeddings: Any,
        limiter: AbstractAsyncContextManager[Any] | None = None,
        *,
        coalesce: bool = True,
        max_batch: int = DEFAULT_MAX_BATCH,
        window: float = DEFAULT_WINDOW,
    ):
        self.embeddings = embeddings
        self.limiter = limiter
        self.coalesce = coalesce and sends_one_request(embeddings)
        self.max_batch = max_batch
        self.window = window
        self._streams = {
            kind: _Coalescer(embeddings, limiter, max_batch, window)
            for kind in ("questions", "probes")
        }
        self._questions: OrderedDict[str, asyncio.Future[np.ndarray]] = OrderedDict()

    def rows_in_flight(self, max_concurrency: int) -> int:
        """Rows a run keeps in flight for ``max_concurrency`` requests: with shared requests,
        ``2 * max_batch`` more, which wait on their embeddings while other rows' judge calls
        hold the slots, so a request leaves full instead of with the few texts ready in its
        window. Requests in flight stay bounded by the limiter; rows only cost their memory."""
        return max_concurrency + (2 * self.max_batch if self.coalesce else 0)

    async def question_and_probes(
        self, question: str, probes: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The question's vector and the probes' (len(probes), d) array."""
        probe_share = self._embed("probes", list(probes))
        try:
            question_vector = await self.question(question)
        except Exception:
            # probes not sent yet are taken out; a request already under way is awaited, so
            # what it cost reaches this sample's usage before the sample fails
            if self.coalesce:
                self._streams["probes"].withdraw(probe_share)
            await asyncio.gather(probe_share, return_exceptions=True)
            raise
        except BaseException:
            probe_share.cancel()
            await asyncio.gather(probe_share, return_exceptions=True)
            raise
        probe_vectors = await probe_share
        name = type(self.embeddings).__name__
        if question_vector.shape[0] != probe_vectors.shape[1] and self.coalesce:
            # one of two shared requests answered another width: ask again, alone
            question_vector, probe_vectors = await embed_question_and_probes(
                self.embeddings, question, probes, self.limiter
            )
            self._questions[question] = _done(question_vector[None, :])
        check_same_width(name, question_vector[None, :], probe_vectors)
        return question_vector, probe_vectors

    async def question(self, text: str) -> np.ndarray:
        """``text``'s vector, embedded once per run however many samples ask."""
        held = self._questions.get(text)
        if held is None:
            held = self._embed("questions", [text])
            self._questions[text] = held
            while len(self._questions) > MAX_REUSED_QUESTIONS:
                self._questions.popitem(last=False)
        else:
            self._questions.move_to_end(text)
        try:
            vectors = await asyncio.shield(held)
        except Exception:
            if self._questions.get(text) is held:  # the next sample asks again
                del self._questions[text]
            raise
        return vectors[0]

    def _embed(self, stream: str, texts: list[str]) -> asyncio.Future[np.ndarray]:
        """The checked vectors of ``texts``, to come: a share of a coalesced request (a future,
        no task per sample), or a request of their own (a task, in the caller's context)."""
        if not self.coalesce:
            return asyncio.ensure_future(embed_texts(self.embeddings, texts, self.limiter))
        return self._streams[stream].submit(texts)

    def __repr__(self) -> str:
        return (
            f"RunEmbedder({type(self.embeddings).__name__}, coalesce={self.coalesce}, "
            f"max_batch={self.max_batch}, window={self.window})"
        )


def _done(value: np.ndarray) -> asyncio.Future[np.ndarray]:
    future: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
    future.set_result(value)
    return future
