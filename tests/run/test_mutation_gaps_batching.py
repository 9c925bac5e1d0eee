"""RunEmbedder's edges that mutation testing found unchecked, driven through its public calls
with an in-process embeddings that records each request: how texts are grouped into requests,
where the vectors and each request's usage go, and what is asked again after a failure."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import numpy as np
import pytest

from ragas_relevancy_ext import EmbeddingShapeError, OneTextPerCall
from ragas_relevancy_ext.run import batching
from ragas_relevancy_ext.run.batching import RunEmbedder
from ragas_relevancy_ext.scoring.embeddings import usage_http_client
from ragas_relevancy_ext.scoring.usage import Usage, metering
from ragas_relevancy_ext.testing.offline import HashEmbeddings

(_NOTE_USAGE,) = usage_http_client(is_async=False).event_hooks["response"]


class Recorder(HashEmbeddings):
    """HashEmbeddings that keeps each request's texts and reports one token per character
    (as an OpenAI answer's ``usage`` would); a request holding a ``bad`` text fails, and one
    that ``wide`` picks answers vectors twice as wide."""

    def __init__(self, bad: Sequence[str] = (), wide: Callable[[list[str]], bool] | None = None):
        super().__init__(8)
        self.bad, self.wide = set(bad), wide
        self.requests: list[list[str]] = []

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        self.requests.append(list(texts))
        await asyncio.sleep(0)
        tokens = sum(len(text) for text in texts)
        request = httpx.Request("POST", "https://api.example.com/v1/embeddings")
        _NOTE_USAGE(httpx.Response(200, json={"usage": {"total_tokens": tokens}}, request=request))
        if self.bad & set(texts):
            raise ValueError(f"refused {sorted(self.bad & set(texts))}")
        vectors = [self.embed_text(text) for text in texts]
        if self.wide is not None and self.wide(texts):
            return [vector + vector for vector in vectors]
        return vectors


def own(texts: Sequence[str]) -> np.ndarray:
    """The vectors ``texts`` get when embedded alone."""
    return np.asarray([HashEmbeddings(8).embed_text(text) for text in texts])


async def _sample(embedder: RunEmbedder, question: str, probes: list[str]) -> Any:
    """One sample's embeddings, metered as a scoring call meters them: (vectors or error, usage)."""
    with metering() as meter:
        try:
            result: Any = await embedder.question_and_probes(question, probes)
        except Exception as exc:
            result = exc
    return result, meter.usage


def run_samples(embedder: RunEmbedder, samples: list[tuple[str, list[str]]]) -> list[Any]:
    async def run() -> list[Any]:
        return await asyncio.gather(*(_sample(embedder, q, p) for q, p in samples))

    return asyncio.run(run())


SAMPLES = [
    ("Where is order A1?", ["Has A1 shipped?", "When does A1 arrive?"]),
    ("How do refunds work?", ["How long do refunds take?"]),
    ("Is the shop open today?", ["When does the shop open?", "Is it open on Sunday?", "Hours?"]),
]


def test_each_sample_gets_its_own_vectors_from_shared_requests() -> None:
    embeddings = Recorder()
    results = run_samples(RunEmbedder(embeddings), SAMPLES)
    for (question, probes), ((question_vector, probe_vectors), _) in zip(
        SAMPLES, results, strict=True
    ):
        assert question_vector.tolist() == own([question])[0].tolist()
        assert probe_vectors.tolist() == own(probes).tolist()
    # one request of the questions and one of the probes
    assert sorted(map(len, embeddings.requests)) == [3, 6]


def test_each_sample_is_charged_its_own_characters_of_each_shared_request() -> None:
    results = run_samples(RunEmbedder(Recorder()), SAMPLES)
    usages = [usage for _, usage in results]
    for (question, probes), usage in zip(SAMPLES, usages, strict=True):
        assert usage.embedding_tokens == len(question) + sum(map(len, probes))
    total = Usage()
    for usage in usages:
        total = total + usage
    assert total.embedding_requests == 2
    # the one questions request goes to the longest question, the probes one to the most text
    assert [usage.embedding_requests for usage in usages] == [0, 0, 2]


def test_requests_hold_at_most_max_batch_texts_and_keep_samples_whole() -> None:
    embeddings = Recorder()
    results = run_samples(RunEmbedder(embeddings, max_batch=3), SAMPLES)
    assert all(not isinstance(result, Exception) for result, _ in results)
    probe_requests = [r for r in embeddings.requests if not set(r) & {q for q, _ in SAMPLES}]
    assert sorted(text for r in probe_requests for text in r) == sorted(
        p for _, probes in SAMPLES for p in probes
    )
    assert all(len(r) <= 3 for r in probe_requests)
    # samples in the order they came, as many as fit: 2 + 1 texts, then 3
    assert probe_requests == [SAMPLES[0][1] + SAMPLES[1][1], SAMPLES[2][1]]
    question_requests = [r for r in embeddings.requests if r not in probe_requests]
    assert [len(r) for r in question_requests] == [3]


def test_a_sample_larger_than_max_batch_is_sent_whole_in_a_request_of_its_own() -> None:
    embeddings = Recorder()
    probes = [f"probe {i}?" for i in range(5)]
    ((_, probe_vectors), _), ((_, few), _) = run_samples(
        RunEmbedder(embeddings, max_batch=2), [("q one?", probes), ("q two?", ["p?"])]
    )
    assert probe_vectors.tolist() == own(probes).tolist()
    assert few.tolist() == own(["p?"]).tolist()
    assert probes in embeddings.requests


def test_a_failed_shared_request_is_sent_again_per_sample() -> None:
    embeddings = Recorder(bad=["How long do refunds take?"])
    results = run_samples(RunEmbedder(embeddings), SAMPLES)
    errors = [result for result, _ in results if isinstance(result, Exception)]
    assert [str(e) for e in errors] == ["refused ['How long do refunds take?']"]
    assert isinstance(results[0][0], tuple) and isinstance(results[2][0], tuple)
    assert results[2][0][1].tolist() == own(SAMPLES[2][1]).tolist()
    # the shared probes request, then each sample's probes alone
    probe_requests = [r for r in embeddings.requests if "Has A1 shipped?" in r]
    assert [len(r) for r in probe_requests] == [6, 2]
    # each sample pays its part of the shared requests (the failed one reports no tokens)
    # and its own retry; the one-request parts go to the most characters
    tokens = [usage.embedding_tokens for _, usage in results]
    assert tokens == [len(SAMPLES[0][0]) + 35, len(SAMPLES[1][0]), len(SAMPLES[2][0]) + 51]
    assert [usage.embedding_requests for _, usage in results] == [1, 1, 3]


def test_a_failed_request_of_one_sample_fails_it_without_a_retry() -> None:
    embeddings = Recorder(bad=["Hours?"])
    ((error, usage),) = run_samples(RunEmbedder(embeddings), [SAMPLES[2]])
    assert str(error) == "refused ['Hours?']"
    assert sorted(len(r) for r in embeddings.requests) == [1, 3]
    assert usage.embedding_requests == 2


def test_widths_differing_between_shared_requests_are_asked_again_alone() -> None:
    # the probes' shared request (7 texts) answers vectors twice as wide; each sample asks
    # again for its own two requests, and only the one whose 4 probes come wide again fails
    embeddings = Recorder(wide=lambda texts: len(texts) >= 4)
    probes = ["When does the shop open?", "Is it open on Sunday?", "Hours?", "Today?"]
    results = run_samples(RunEmbedder(embeddings), [*SAMPLES[:2], (SAMPLES[2][0], probes)])
    assert isinstance(results[0][0], tuple) and isinstance(results[1][0], tuple)
    assert isinstance(results[2][0], EmbeddingShapeError)
    assert str(results[2][0]) == (
        "Recorder returned a vector of length 8 for the question but vectors of length 16 "
        "for the 4 probe(s)"
    )
    question_vector, probe_vectors = results[0][0]
    assert question_vector.tolist() == own([SAMPLES[0][0]])[0].tolist()
    assert probe_vectors.tolist() == own(SAMPLES[0][1]).tolist()


def test_a_question_asked_again_after_a_retry_uses_the_retried_vector() -> None:
    # a shared request of questions only answers wide vectors; asked alone, each is right
    embeddings = Recorder(wide=lambda texts: len(texts) > 1 and all("Q" in t for t in texts))
    embedder = RunEmbedder(embeddings)
    samples = [("Q one?", ["a?"]), ("Q two?", ["b?", "c?"])]
    results = run_samples(embedder, samples)
    assert [result[0].shape for result, _ in results] == [(8,), (8,)]
    before = len(embeddings.requests)

    async def again() -> Any:
        return await embedder.question("Q one?")

    assert asyncio.run(again()).tolist() == own(["Q one?"])[0].tolist()
    assert len(embeddings.requests) == before


def test_a_question_is_embedded_once_per_run_while_remembered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(batching, "MAX_REUSED_QUESTIONS", 2)
    embeddings = Recorder()
    embedder = RunEmbedder(embeddings, coalesce=False)

    async def ask(*questions: str) -> None:
        for question in questions:
            assert (await embedder.question(question)).tolist() == own([question])[0].tolist()

    asyncio.run(ask("a?", "b?", "a?", "c?", "a?", "b?"))
    # "a?" was used again before "c?" came, so "b?" was the one forgotten
    assert embeddings.requests == [["a?"], ["b?"], ["c?"], ["b?"]]


def test_a_question_whose_request_failed_is_asked_again() -> None:
    embeddings = Recorder(bad=["a?"])
    embedder = RunEmbedder(embeddings)

    async def ask() -> list[str]:
        errors = []
        for _ in range(2):
            try:
                await embedder.question("a?")
            except ValueError as exc:
                errors.append(str(exc))
        return errors

    assert asyncio.run(ask()) == ["refused ['a?']"] * 2
    assert embeddings.requests == [["a?"], ["a?"]]


def test_without_coalescing_each_sample_sends_its_own_two_requests() -> None:
    embeddings = Recorder()
    results = run_samples(RunEmbedder(embeddings, coalesce=False), SAMPLES)
    assert sorted(map(len, embeddings.requests)) == [1, 1, 1, 1, 2, 3]
    for (question, probes), ((_, probe_vectors), usage) in zip(SAMPLES, results, strict=True):
        assert probe_vectors.tolist() == own(probes).tolist()
        assert usage.embedding_requests == 2
        assert usage.embedding_tokens == len(question) + sum(map(len, probes))


def test_what_a_run_embedder_says_it_is_and_how_many_rows_it_keeps_in_flight() -> None:
    shared = RunEmbedder(HashEmbeddings(), max_batch=5, window=0.25)
    assert repr(shared) == "RunEmbedder(HashEmbeddings, coalesce=True, max_batch=5, window=0.25)"
    assert shared.rows_in_flight(4) == 14
    alone = RunEmbedder(HashEmbeddings(), coalesce=False)
    assert alone.rows_in_flight(4) == 4
    assert repr(alone) == (
        f"RunEmbedder(HashEmbeddings, coalesce=False, max_batch={batching.DEFAULT_MAX_BATCH}, "
        f"window={batching.DEFAULT_WINDOW})"
    )
    per_text = RunEmbedder(OneTextPerCall(HashEmbeddings()))
    assert per_text.coalesce is False
    assert per_text.rows_in_flight(3) == 3


class Slots:
    """A limiter that counts the slots taken."""

    def __init__(self) -> None:
        self.taken = 0

    async def __aenter__(self) -> None:
        self.taken += 1

    async def __aexit__(self, *exc: object) -> None:
        return None


def test_each_retry_after_a_failed_shared_request_takes_a_slot_of_its_own() -> None:
    slots = Slots()
    embeddings = Recorder(bad=["How long do refunds take?"])
    run_samples(RunEmbedder(embeddings, slots), SAMPLES)
    # the shared questions and probes requests, then each sample's probes alone
    assert len(embeddings.requests) == 5
    assert slots.taken == 5


class Gated(Recorder):
    """Recorder whose requests holding ``held`` note that they ``started``, then wait until
    ``gate`` opens."""

    def __init__(self, held: str, bad: Sequence[str] = ()):
        super().__init__(bad=bad)
        self.held, self.started, self.gate = held, asyncio.Event(), asyncio.Event()

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        if self.held in texts:
            self.started.set()
            await self.gate.wait()
        return await super().aembed_texts(texts, **kwargs)


def test_a_sample_whose_question_failed_takes_back_its_probes_not_yet_sent() -> None:
    # the question's request is already under way for another caller when the sample comes,
    # and fails while the sample's probes still wait for their window: they are never sent
    embeddings = Gated(held="Q bad?", bad=["Q bad?"])
    embedder = RunEmbedder(embeddings, window=0.5)

    async def run() -> Any:
        first = asyncio.ensure_future(embedder.question("Q bad?"))
        await embeddings.started.wait()
        sample = asyncio.ensure_future(_sample(embedder, "Q bad?", ["pa?", "pb?"]))
        for _ in range(3):
            await asyncio.sleep(0)
        embeddings.gate.set()
        result = await sample
        with pytest.raises(ValueError):
            await first
        return result

    failed, usage = asyncio.run(run())
    assert str(failed) == "refused ['Q bad?']"
    assert embeddings.requests == [["Q bad?"]]
    assert usage.embedding_requests == 0  # the question's request is its first caller's


def test_asking_again_after_differing_widths_takes_a_slot_per_request() -> None:
    slots = Slots()
    embeddings = Recorder(wide=lambda texts: len(texts) >= 4)
    run_samples(RunEmbedder(embeddings, slots), SAMPLES)
    # the shared questions (3) and probes (6, wide) requests, then each sample's two alone
    assert len(embeddings.requests) == 2 + 2 * len(SAMPLES)
    assert slots.taken == len(embeddings.requests)


def test_differing_widths_in_a_sample_s_own_requests_name_the_embeddings() -> None:
    embeddings = Recorder(wide=lambda texts: len(texts) >= 2)
    ((error, _),) = run_samples(RunEmbedder(embeddings, coalesce=False), [SAMPLES[0]])
    assert isinstance(error, EmbeddingShapeError)
    assert str(error) == (
        "Recorder returned a vector of length 8 for the question but vectors of length 16 "
        "for the 2 probe(s)"
    )
    assert len(embeddings.requests) == 2  # not asked again: these were its own requests


class Stop(BaseException):
    """Something that stops a run, beyond an error (as KeyboardInterrupt does)."""


class StopOnQuestion(Gated):
    """Probes wait for a gate that never opens; the question's request raises :class:`Stop`."""

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        if texts == ["Q stop?"]:
            raise Stop
        return await super().aembed_texts(texts, **kwargs)


def test_a_sample_stopped_while_its_question_is_embedded_stops_with_the_same_signal() -> None:
    embeddings = StopOnQuestion(held="p?")
    embedder = RunEmbedder(embeddings, coalesce=False)

    async def run() -> None:
        with pytest.raises(Stop):
            await embedder.question_and_probes("Q stop?", ["p?"])

    asyncio.run(run())
    assert embeddings.requests == []  # the probes' request was cancelled while it waited


def test_a_full_request_leaves_at_once_without_waiting_for_its_window() -> None:
    embeddings = Recorder()
    embedder = RunEmbedder(embeddings, max_batch=2, window=60.0)

    async def run() -> list[list[str]]:
        asked = [asyncio.ensure_future(embedder.question(q)) for q in ("a?", "b?")]
        for _ in range(20):
            await asyncio.sleep(0)
        sent = list(embeddings.requests)
        for task in asked:
            task.cancel()
        await asyncio.gather(*asked, return_exceptions=True)
        return sent

    assert asyncio.run(run()) == [["a?", "b?"]]


def test_a_shared_request_cut_off_when_its_run_ends_ends_quietly() -> None:
    embeddings = Gated(held="p?")
    reported: list[dict[str, Any]] = []

    async def run() -> None:
        asyncio.get_running_loop().set_exception_handler(
            lambda _, context: reported.append(context)
        )
        embedder = RunEmbedder(embeddings, window=0.0)
        asyncio.ensure_future(embedder.question_and_probes("q?", ["p?"]))
        await embeddings.started.wait()
        # the run ends here, its probes' request still under way: asyncio.run cancels it

    asyncio.run(run())
    assert embeddings.started.is_set()
    assert reported == []


def test_without_coalescing_each_request_takes_a_slot() -> None:
    slots = Slots()
    embeddings = Recorder()
    run_samples(RunEmbedder(embeddings, slots, coalesce=False), SAMPLES)
    assert len(embeddings.requests) == 2 * len(SAMPLES)
    assert slots.taken == len(embeddings.requests)


def test_texts_short_of_a_full_request_wait_for_their_window_after_a_full_one_left() -> None:
    embeddings = Recorder()
    embedder = RunEmbedder(embeddings, max_batch=3, window=60.0)

    async def run() -> list[list[str]]:
        await asyncio.gather(*(embedder.question(q) for q in ("a?", "b?", "c?")))
        waiting = [asyncio.ensure_future(embedder.question(q)) for q in ("d?", "e?")]
        for _ in range(20):
            await asyncio.sleep(0)
        sent = list(embeddings.requests)
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        return sent

    assert asyncio.run(run()) == [["a?", "b?", "c?"]]


def test_a_request_takes_no_more_than_max_batch_texts_of_one_text_shares() -> None:
    embeddings = Recorder()
    embedder = RunEmbedder(embeddings, max_batch=3)

    async def run() -> None:
        await asyncio.gather(*(embedder.question(q) for q in ("a?", "b?", "c?", "d?")))

    asyncio.run(run())
    assert embeddings.requests == [["a?", "b?", "c?"], ["d?"]]
