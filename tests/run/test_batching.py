"""Embedding requests shared across samples: counted at the loopback server, and (below) one
run's RunEmbedder driven through its rows' calls: how texts are grouped into requests, when a
request that is not full leaves, where vectors and usage go, what is asked again after a
failure, what a row whose judge failed takes back, and what a run keeps of its questions."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import math
import random
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import httpx
import numpy as np
import pytest
from google import genai
from google.genai import types
from openai import AsyncOpenAI
from ragas.embeddings import GoogleEmbeddings, OpenAIEmbeddings

from ragas_relevancy_ext import AnswerRelevancy, EmbeddingShapeError, OneTextPerCall
from ragas_relevancy_ext.run import batching
from ragas_relevancy_ext.run.batching import RowEmbeddings, RunEmbedder
from ragas_relevancy_ext.run.scheduler import Scheduler
from ragas_relevancy_ext.scoring.embeddings import usage_http_client
from ragas_relevancy_ext.scoring.usage import Usage, metering
from ragas_relevancy_ext.testing.loopback import Fault, LoopbackServer
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge


@pytest.fixture
def server() -> Any:
    with LoopbackServer(width=64) as running:
        yield running


def openai_embeddings(server: LoopbackServer) -> OpenAIEmbeddings:
    client = AsyncOpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
    return OpenAIEmbeddings(client=client, model="text-embedding-3-small")


def rows(n: int, questions: int | None = None) -> list[dict[str, str]]:
    return [
        {
            "user_input": f"Where is order A{i % (questions or n)}?",
            "response": f"Order A{i} shipped on day {i}. It arrives soon.",
        }
        for i in range(n)
    ]


def score_all(metric: AnswerRelevancy, inputs: list[dict[str, str]]) -> list[Any]:
    return [r.report for r in asyncio.run(metric.abatch_score(inputs))]


def expected(server: LoopbackServer, report: Any) -> float:
    q = np.asarray(server.vector(report.user_input))
    cosines = [
        float(q @ (p := np.asarray(server.vector(probe.question))))
        / (np.linalg.norm(q) * np.linalg.norm(p))
        for probe in report.probes
    ]
    return float(np.mean(cosines))


def test_vectors_go_back_to_the_samples_that_sent_them(server: LoopbackServer) -> None:
    shuffle = random.Random(19)
    shares = [
        [f"sample {i} text {j} {shuffle.random()}" for j in range(shuffle.randint(1, 9))]
        for i in range(40)
    ]

    async def run() -> list[np.ndarray]:
        scheduler = Scheduler(16)
        embedder = RunEmbedder(openai_embeddings(server), scheduler, max_batch=64)
        rows = [embedder.row(scheduler.row()) for _ in shares]

        async def one(index: int, texts: list[str]) -> np.ndarray:
            await asyncio.sleep(shuffle.random() * 0.02)  # arrive in a random order
            share = embedder._embed("probes", texts, rows[index].calls)
            rows[index].close()  # its texts are in
            return await share

        async with scheduler:
            return await asyncio.gather(*(one(i, texts) for i, texts in enumerate(shares)))

    results = asyncio.run(run())
    for texts, vectors in zip(shares, results, strict=True):
        np.testing.assert_allclose(vectors, [server.vector(t) for t in texts])
    total = sum(len(texts) for texts in shares)
    assert server.count("embeddings") < len(shares) / 2
    assert sum(len(r.texts) for r in server.requests("embeddings")) == total


def test_samples_share_requests_and_score_as_alone(server: LoopbackServer) -> None:
    inputs = rows(16)
    reports = score_all(AnswerRelevancy(PretendJudge(), openai_embeddings(server)), inputs)
    batched = server.count("embeddings")
    assert all(r.error is None for r in reports)
    for report in reports:
        assert report.score == pytest.approx(expected(server, report), rel=1e-12)
    assert batched <= len(inputs) / 2

    server.reset()
    off = AnswerRelevancy(PretendJudge(), openai_embeddings(server), batch_embeddings=False)
    alone = score_all(off, inputs)
    assert server.count("embeddings") == 2 * len(inputs)  # question and probes, as stock
    assert [r.score for r in alone] == [r.score for r in reports]


def test_a_question_met_again_is_embedded_once(server: LoopbackServer) -> None:
    inputs = rows(20, questions=2)
    metric = AnswerRelevancy(PretendJudge(), openai_embeddings(server), batch_embeddings=False)
    reports = score_all(metric, inputs)
    assert all(r.error is None for r in reports)
    texts = [t for r in server.requests("embeddings") for t in r.texts]
    assert sorted(t for t in texts if t.startswith("Where is")) == [
        "Where is order A0?",
        "Where is order A1?",
    ]
    assert server.count("embeddings") == 20 + 2


def test_a_collapsing_provider_is_caught_and_named_inside_a_batch(server: LoopbackServer) -> None:
    client = genai.Client(api_key="test", http_options=types.HttpOptions(base_url=server.url))
    embeddings = GoogleEmbeddings(client=client, model="gemini-embedding-2")
    reports = score_all(AnswerRelevancy(PretendJudge(), embeddings), rows(6))
    for report in reports:
        assert math.isnan(report.score)
        assert "GoogleEmbeddings returned 1 vector(s)" in report.error
        assert "for 3 text(s)" in report.error and "OneTextPerCall" in report.error


def test_one_faulted_request_does_not_fail_its_neighbours(server: LoopbackServer) -> None:
    inputs = rows(8)
    server.faults = [Fault("server_error", at=(1, 2), endpoint="embeddings")]
    faulted: list[set[int]] = []  # the rows whose texts each request answered 500 carried

    async def note(response: httpx.Response) -> None:
        if response.status_code == 500:
            texts = json.loads(response.request.content)["input"]
            faulted.append({int(n) for t in texts for n in re.findall(r"\bA(\d+)\b", t)})

    client = AsyncOpenAI(
        base_url=server.openai_base_url,
        api_key="test",
        max_retries=0,
        http_client=httpx.AsyncClient(event_hooks={"response": [note]}),
    )
    embeddings = OpenAIEmbeddings(client=client, model="text-embedding-3-small")
    reports = score_all(AnswerRelevancy(PretendJudge(latency=0.05), embeddings), inputs)
    assert len(faulted) == 2 and any(len(rows) > 1 for rows in faulted)
    # a sample that shared a faulted request is asked again alone and scored; one that went
    # alone fails with it (this client does not retry)
    alone = {i for rows in faulted if len(rows) == 1 for i in rows}
    assert [i for i, r in enumerate(reports) if r.error is not None] == sorted(alone)
    assert server.count("embeddings") >= 2 + len(inputs) - len(alone)


def test_one_bad_text_fails_only_its_own_sample() -> None:
    class OneBadText(HashEmbeddings):
        requests = 0

        async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
            type(self).requests += 1
            return [[math.nan] * 64 if "A3 " in t else self.embed_text(t) for t in texts]

    inputs = rows(8)
    reports = score_all(AnswerRelevancy(PretendJudge(), OneBadText(64)), inputs)
    failed = [i for i, r in enumerate(reports) if r.error]
    assert failed == [3]
    assert "OneBadText returned a vector with NaN or infinite values" in reports[3].error
    assert OneBadText.requests < 2 * len(inputs)


def test_one_text_per_call_is_never_coalesced(server: LoopbackServer) -> None:
    embeddings = OneTextPerCall(openai_embeddings(server))
    reports = score_all(AnswerRelevancy(PretendJudge(), embeddings), rows(5))
    assert all(r.error is None for r in reports)
    assert [len(r.texts) for r in server.requests("embeddings")] == [1] * (5 * 4)


def test_batch_embeddings_must_be_a_switch() -> None:
    with pytest.raises(ValueError, match="batch_embeddings must be True or False"):
        AnswerRelevancy(PretendJudge(), HashEmbeddings(), batch_embeddings="no")


def test_shared_requests_keep_within_max_concurrency(server: LoopbackServer) -> None:
    server.latency = 0.02
    client = AsyncOpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
    from ragas.llms import llm_factory

    metric = AnswerRelevancy(
        llm_factory("gpt-4o-mini", provider="openai", client=client),
        OpenAIEmbeddings(client=client, model="text-embedding-3-small"),
        max_concurrency=3,
    )
    reports = score_all(metric, rows(24))
    assert all(r.error is None for r in reports)
    # fewer than the 2 requests per row of unshared embedding (how many fewer depends on how
    # rows meet in time, which a loaded machine changes); the bound itself is exact
    assert server.count("embeddings") < 2 * 24
    assert server.peak_in_flight == 3


def test_rows_waiting_on_shared_requests_fill_them(server: LoopbackServer) -> None:
    # 16 requests in flight, distinct questions, a judge taking 10 ms: a shared request leaves
    # with the texts of every row waiting for it, and the run keeps more rows in flight than
    # request slots so that rows do wait for it
    judge = PretendJudge(latency=0.01)
    metric = AnswerRelevancy(judge, openai_embeddings(server), max_concurrency=16)
    inputs = rows(480)
    reports = score_all(metric, inputs)
    assert all(r.error is None for r in reports)
    # 1,440 probes fill 22.5 requests of 64 texts, 480 questions 7.5: about 0.07 requests per
    # row (0.2 if each probes request took only its own rows' questions; stock: 2)
    assert server.count("embeddings") <= 0.09 * len(inputs)
    requests = server.requests("embeddings")
    probes = [len(r.texts) for r in requests if "Where is" not in r.texts[0]]
    full = sum(size > 64 - 3 for size in probes)  # no room for another row's 3 probes
    assert full >= 0.5 * len(probes), probes
    # questions wait for rows still being judged to fill their requests
    questions = [len(r.texts) for r in requests if "Where is" in r.texts[0]]
    assert len(questions) <= 0.025 * len(inputs), questions
    assert judge.calls == len(inputs)
    assert judge.peak <= 16


def test_a_full_shared_request_goes_ahead_of_rows_not_yet_judged(server: LoopbackServer) -> None:
    # 4 requests in flight over 300 rows: the run keeps 4 + 128 rows in flight. A request full
    # of probes (21 rows' worth) takes the next free slot, and the questions up to those rows'
    # go with it, so the first row is done after about 21 + 4 judge calls (a few more while
    # its requests are at the server). Queued behind the judge calls, it would wait for every
    # row in flight to be judged: 132 or more
    judge = PretendJudge(latency=0.05)  # long beside a request to the server on 127.0.0.1
    metric = AnswerRelevancy(judge, openai_embeddings(server), max_concurrency=4)

    async def calls_when_the_first_row_is_done() -> int:
        async with contextlib.aclosing(metric.ascore_each(rows(300))) as each:
            async for _, result in each:
                assert result.report.error is None
                return judge.calls
        raise AssertionError("no row came back")

    assert asyncio.run(calls_when_the_first_row_is_done()) < 48


class RefusingJudge(PretendJudge):
    """A judge whose every call fails, as with a refused key."""

    def _reply(self, prompt: str, response_model: Any) -> Any:
        raise PermissionError("refused")


def test_rows_whose_judge_fails_send_no_question(server: LoopbackServer) -> None:
    # a row's question waits from its start for some row's probes to need it: a run whose
    # judge fails every row embeds nothing
    metric = AnswerRelevancy(RefusingJudge(), openai_embeddings(server), max_concurrency=4)
    reports = score_all(metric, rows(200))
    assert all("refused" in str(r.error) for r in reports)
    assert server.count("embeddings") == 0


class UnluckyJudge(PretendJudge):
    """Fails on every response that says "unlucky"."""

    def _reply(self, prompt: str, response_model: Any) -> Any:
        if "unlucky" in prompt:
            raise PermissionError("refused")
        return super()._reply(prompt, response_model)


def test_what_a_run_sent_is_in_its_rows_usage_when_some_judge_calls_fail(
    server: LoopbackServer,
) -> None:
    # questions of rows still being judged ride in shared requests; a row whose judge then
    # fails takes back its question if not yet sent, or waits for the request carrying it
    inputs = rows(300)
    for i in range(0, 300, 3):
        inputs[i]["response"] += " An unlucky day."
    metric = AnswerRelevancy(
        UnluckyJudge(latency=0.002), openai_embeddings(server), max_concurrency=8
    )
    reports = score_all(metric, inputs)
    assert sum(r.error is not None for r in reports) == 100
    billed = server.usage("embeddings")
    assert sum(r.usage.embedding_requests for r in reports) == billed["requests"]


class SlowProbes(HashEmbeddings):
    """Questions fail at once; probes take a few turns of the event loop and succeed."""

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        if any(text.startswith("Where is order") for text in texts):
            raise ValueError("the question's request failed")
        for _ in range(10):  # still under way when the question's request has failed
            await asyncio.sleep(0)
        return [self.embed_text(text) for text in texts]


@pytest.mark.parametrize("shared", [True, False], ids=["shared", "own requests"])
def test_a_failed_question_waits_for_its_probes_request_and_counts_it(shared: bool) -> None:
    # the probes' request is under way when the question's fails: the sample waits for it,
    # so its usage names both requests (cancelled, its cost would come after the report)
    metric = AnswerRelevancy(PretendJudge(), SlowProbes(), batch_embeddings=shared)
    (result,) = asyncio.run(metric.abatch_score(rows(1)))
    assert "the question's request failed" in str(result.report.error)
    assert result.report.usage.embedding_requests == 2


class NeverAnswers(HashEmbeddings):
    """Embeddings whose requests are taken and never answered; ``asked`` is set once the
    question's and the probes' requests are both under way."""

    def __init__(self) -> None:
        super().__init__()
        self.requests = 0
        self.asked = asyncio.Event()

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        self.requests += 1
        if self.requests == 2:
            self.asked.set()
        await asyncio.Event().wait()
        raise AssertionError("never answered")


@pytest.mark.parametrize("shared", [True, False], ids=["shared", "own requests"])
def test_a_run_cancelled_during_its_embedding_requests_leaves_no_error_unread(shared: bool) -> None:
    """A run cancelled (a caller's deadline) while its embedding requests are under way cancels
    what waits for them: no future is left holding an error nobody reads (asyncio logs those
    when they are collected)."""
    unread: list[str] = []

    async def cancelled() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: unread.append(context["message"]))
        embeddings = NeverAnswers()
        metric = AnswerRelevancy(PretendJudge(), embeddings, batch_embeddings=shared)
        run = asyncio.ensure_future(metric.abatch_score(rows(1)))
        await embeddings.asked.wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    asyncio.run(cancelled())
    gc.collect()  # what the run left is collected: an error nobody read is logged now
    assert unread == []


# -- one run's RunEmbedder, driven through its rows' calls with an in-process embeddings that
# records each request

_NOTE_USAGE, _ = usage_http_client(is_async=False).event_hooks["response"]


T = TypeVar("T")


class Recorder(HashEmbeddings):
    """HashEmbeddings that keeps each request's texts and reports one token per character
    (as an OpenAI answer's ``usage`` would); a request holding a ``bad`` text fails, and one
    that ``wide`` picks answers vectors twice as wide. With a ``scheduler``, it counts the
    requests sent while more requests were under way than the scheduler had slots taken."""

    def __init__(self, bad: Sequence[str] = (), wide: Callable[[list[str]], bool] | None = None):
        super().__init__(8)
        self.bad, self.wide = set(bad), wide
        self.requests: list[list[str]] = []
        self.scheduler: Scheduler | None = None
        self.active = self.unslotted = 0

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        self.requests.append(list(texts))
        self.active += 1
        if self.scheduler is not None and self.active > self.scheduler.in_flight:
            self.unslotted += 1
        try:
            await asyncio.sleep(0)
        finally:
            self.active -= 1
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


def in_run(
    embeddings: Any, body: Callable[[RunEmbedder], Awaitable[T]], limit: int = 4, **options: Any
) -> T:
    """``body`` on a RunEmbedder of ``embeddings`` on a fresh run's scheduler of ``limit``
    slots (which a Recorder watches), the run closed after it."""

    async def run() -> T:
        async with Scheduler(limit) as scheduler:
            if isinstance(embeddings, Recorder):
                embeddings.scheduler = scheduler
            return await body(RunEmbedder(embeddings, scheduler, **options))

    return asyncio.run(run())


def row(embedder: RunEmbedder, priority: float = 0) -> RowEmbeddings:
    """One row of the run (``priority``: which, for the reader)."""
    return embedder.row(embedder.scheduler.row())


async def _sample(calls: RowEmbeddings, question: str, probes: list[str]) -> Any:
    """One sample's embeddings, metered as a scoring call meters them: (vectors or error, usage)."""
    with metering() as meter:
        try:
            result: Any = await calls.question_and_probes(question, probes)
        except Exception as exc:
            result = exc
    return result, meter.usage


async def samples_of(embedder: RunEmbedder, samples: list[tuple[str, list[str]]]) -> list[Any]:
    """The samples as rows of one run, all under way before any hands in its texts."""
    rows = [row(embedder, i) for i in range(len(samples))]
    return await asyncio.gather(
        *(_sample(calls, q, p) for calls, (q, p) in zip(rows, samples, strict=True))
    )


def run_samples(
    embeddings: Any, samples: list[tuple[str, list[str]]], limit: int = 4, **options: Any
) -> list[Any]:
    return in_run(embeddings, lambda embedder: samples_of(embedder, samples), limit, **options)


async def question(embedder: RunEmbedder, text: str, priority: float = 0) -> np.ndarray:
    """``text``'s vector asked by a row of its own that hands in nothing else, and needed
    at once (as when a request takes the row's probes)."""
    calls = row(embedder, priority)
    held = embedder._question(text, calls.calls)
    if embedder.coalesce:
        embedder._streams["questions"].send_for([held])
    calls.close()
    return (await held)[0]


def probes(embedder: RunEmbedder, texts: list[str], calls: RowEmbeddings) -> Any:
    """A row's probes handed in to the run's shared requests (their future)."""
    return embedder._embed("probes", texts, calls.calls)


SAMPLES = [
    ("Where is order A1?", ["Has A1 shipped?", "When does A1 arrive?"]),
    ("How do refunds work?", ["How long do refunds take?"]),
    ("Is the shop open today?", ["When does the shop open?", "Is it open on Sunday?", "Hours?"]),
]


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


class Stop(BaseException):
    """Something that stops a run, beyond an error (as KeyboardInterrupt does)."""


class StopOnQuestion(Gated):
    """Probes wait for a gate that never opens; the question's request raises :class:`Stop`."""

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        if texts == ["Q stop?"]:
            raise Stop
        return await super().aembed_texts(texts, **kwargs)


class FailsOnce(Recorder):
    """Recorder whose first request holding a ``bad`` text fails; every later one succeeds."""

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        try:
            return await super().aembed_texts(texts, **kwargs)
        except ValueError:
            self.bad.clear()
            raise


# -- how texts are grouped into requests, and whose vectors and usage each share gets ----------


def test_each_sample_gets_its_own_vectors_from_shared_requests() -> None:
    embeddings = Recorder()
    results = run_samples(embeddings, SAMPLES)
    for (question, probes), ((question_vector, probe_vectors), _) in zip(
        SAMPLES, results, strict=True
    ):
        assert question_vector.tolist() == own([question])[0].tolist()
        assert probe_vectors.tolist() == own(probes).tolist()
    # one request of the questions and one of the probes
    assert sorted(map(len, embeddings.requests)) == [3, 6]


def test_each_sample_is_charged_its_own_characters_of_each_shared_request() -> None:
    results = run_samples(Recorder(), SAMPLES)
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
    results = run_samples(embeddings, SAMPLES, max_batch=3)
    assert all(not isinstance(result, Exception) for result, _ in results)
    probe_requests = [r for r in embeddings.requests if not set(r) & {q for q, _ in SAMPLES}]
    assert sorted(text for r in probe_requests for text in r) == sorted(
        p for _, probes in SAMPLES for p in probes
    )
    assert all(len(r) <= 3 for r in probe_requests)
    # samples in the order they came, as many as fit: 2 + 1 texts, then 3
    assert probe_requests == [SAMPLES[0][1] + SAMPLES[1][1], SAMPLES[2][1]]
    # each probes request takes the questions of its rows that are waiting when it leaves
    question_requests = [r for r in embeddings.requests if r not in probe_requests]
    assert question_requests == [[SAMPLES[0][0], SAMPLES[1][0]], [SAMPLES[2][0]]]


def test_a_request_takes_no_more_than_max_batch_texts_of_one_text_shares() -> None:
    embeddings = Recorder()

    async def body(embedder: RunEmbedder) -> None:
        rows = [row(embedder, i) for i in range(4)]
        held = [probes(embedder, [q], r) for q, r in zip("abcd", rows, strict=True)]
        for r in rows:
            r.close()
        await asyncio.gather(*held)

    in_run(embeddings, body, max_batch=3)
    assert embeddings.requests == [["a", "b", "c"], ["d"]]


def test_a_sample_larger_than_max_batch_is_sent_whole_in_a_request_of_its_own() -> None:
    embeddings = Recorder()
    probes = [f"probe {i}?" for i in range(5)]
    ((_, probe_vectors), _), ((_, few), _) = run_samples(
        embeddings, [("q one?", probes), ("q two?", ["p?"])], max_batch=2
    )
    assert probe_vectors.tolist() == own(probes).tolist()
    assert few.tolist() == own(["p?"]).tolist()
    assert probes in embeddings.requests


def test_without_coalescing_each_sample_sends_its_own_two_requests() -> None:
    embeddings = Recorder()
    results = run_samples(embeddings, SAMPLES, coalesce=False)
    assert sorted(map(len, embeddings.requests)) == [1, 1, 1, 1, 2, 3]
    for (question, probes), ((_, probe_vectors), usage) in zip(SAMPLES, results, strict=True):
        assert probe_vectors.tolist() == own(probes).tolist()
        assert usage.embedding_requests == 2
        assert usage.embedding_tokens == len(question) + sum(map(len, probes))


def test_what_a_run_embedder_says_it_is_and_how_many_rows_it_keeps_in_flight() -> None:
    scheduler = Scheduler(4)
    shared = RunEmbedder(HashEmbeddings(), scheduler, max_batch=5)
    assert repr(shared) == "RunEmbedder(HashEmbeddings, coalesce=True, max_batch=5)"
    assert shared.rows_in_flight(4) == 14
    alone = RunEmbedder(HashEmbeddings(), scheduler, coalesce=False)
    assert alone.rows_in_flight(4) == 4
    assert repr(alone) == (
        f"RunEmbedder(HashEmbeddings, coalesce=False, max_batch={batching.DEFAULT_MAX_BATCH})"
    )
    per_text = RunEmbedder(OneTextPerCall(HashEmbeddings()), scheduler)
    assert per_text.coalesce is False
    assert per_text.rows_in_flight(3) == 3


# -- when a request that is not full leaves ----------------------------------------------------


def test_a_full_request_leaves_at_once_while_rows_may_still_add_texts() -> None:
    embeddings = Recorder()

    async def body(embedder: RunEmbedder) -> list[list[str]]:
        later = [row(embedder, i) for i in range(2, 6)]  # rows still coming
        rows = [row(embedder, i) for i in range(2)]
        asked = [probes(embedder, [q], r) for q, r in zip(("a?", "b?"), rows, strict=True)]
        for r in rows:
            r.close()
        await asyncio.gather(*asked)
        sent = list(embeddings.requests)
        for calls in later:
            calls.close()
        return sent

    assert in_run(embeddings, body, max_batch=2) == [["a?", "b?"]]


def test_texts_short_of_a_full_request_wait_while_rows_may_add_texts_then_leave() -> None:
    embeddings = Recorder()

    async def body(embedder: RunEmbedder) -> tuple[list[list[str]], int, int]:
        first = [row(embedder, i) for i in range(3)]
        asked = [probes(embedder, [q], r) for q, r in zip(("a?", "b?", "c?"), first, strict=True)]
        for r in first:
            r.close()
        await asyncio.gather(*asked)
        later = [row(embedder, i) for i in range(5, 10)]  # rows still coming
        before = embedder.scheduler.tasks
        rows = [row(embedder, i) for i in (3, 4)]
        waiting = [probes(embedder, [q], r) for q, r in zip(("d?", "e?"), rows, strict=True)]
        for r in rows:
            r.close()
        kept = embedder.scheduler.tasks - before  # requests started for d? and e?: none
        sent = list(embeddings.requests)
        for calls in later:  # no more texts are coming: what waits leaves, not full
            calls.close()
        await asyncio.gather(*waiting)
        return sent, kept, len(embeddings.requests)

    sent, kept, total = in_run(embeddings, body, max_batch=3)
    assert sent == [["a?", "b?", "c?"]]
    assert kept == 0
    assert embeddings.requests == [["a?", "b?", "c?"], ["d?", "e?"]]
    assert total == 2


def test_texts_waiting_leave_each_time_a_slot_is_left_free_with_no_row_in_line() -> None:
    # the one slot is held by the judge call of the only row still coming, so the text handed
    # in waits; when that call ends, nothing is in line and the text leaves without waiting
    # for the row to end (twice in a run: each slot left free is checked)
    embeddings = Recorder()

    async def round_of(embedder: RunEmbedder, first: int, text: str) -> list[list[str]]:
        handing_in, judged = row(embedder, first), row(embedder, first + 1)
        holding, done = asyncio.Event(), asyncio.Event()

        async def judge() -> None:
            async with judged.calls:
                holding.set()
                await done.wait()

        call = asyncio.ensure_future(judge())
        await holding.wait()
        asked = probes(embedder, [text], handing_in)
        handing_in.close()
        sent = list(embeddings.requests)
        done.set()
        await call
        await asked  # before the judged row ends
        judged.close()
        return sent

    async def body(embedder: RunEmbedder) -> list[list[list[str]]]:
        return [await round_of(embedder, 0, "a?"), await round_of(embedder, 2, "b?")]

    assert in_run(embeddings, body, limit=1) == [[], [["a?"]]]
    assert embeddings.requests == [["a?"], ["b?"]]


def test_questions_wait_until_a_row_needs_one_even_when_they_would_fill_a_request() -> None:
    embeddings = Recorder()

    async def body(embedder: RunEmbedder) -> int:
        rows = [row(embedder, i) for i in range(3)]
        before = embedder.scheduler.tasks
        for i, calls in enumerate(rows):
            calls.expect(f"Q{i}?")
        started = embedder.scheduler.tasks - before
        for calls in rows:
            await calls.release()
            calls.close()
        return started

    assert in_run(embeddings, body, max_batch=2) == 0
    assert embeddings.requests == []


def test_a_question_behind_more_than_a_request_of_waiting_questions_is_sent() -> None:
    # five rows expect their questions; the last row's probes fill a request at once, which
    # sends the questions up to that row's, behind four others: three requests of two
    embeddings = Recorder()

    async def body(embedder: RunEmbedder) -> Any:
        rows = [row(embedder, i) for i in range(5)]
        for i, calls in enumerate(rows):
            calls.expect(f"Q{i}?")
        last = await _sample(rows[-1], "Q4?", ["pa?", "pb?"])
        for calls in rows[:-1]:
            await calls.release()
            calls.close()
        return last

    vectors, _ = in_run(embeddings, body, max_batch=2)
    np.testing.assert_allclose(vectors[0], own(["Q4?"])[0])
    assert sorted(embeddings.requests) == [["Q0?", "Q1?"], ["Q2?", "Q3?"], ["Q4?"], ["pa?", "pb?"]]


def test_nothing_is_sent_once_the_run_is_closed() -> None:
    # texts waiting when the run closes stay unsent when the last row arrives, and texts
    # handed in after it (a full request's worth) start no request either
    embeddings = Recorder()

    async def body(embedder: RunEmbedder) -> int:
        first = row(embedder, 0)
        coming = [row(embedder, i) for i in range(1, 4)]
        probes(embedder, ["a?"], first)
        first.close()  # one text waits for the three rows still coming
        embedder.scheduler.cancel()
        for calls in coming:
            calls.close()
        probes(embedder, ["b?", "c?", "d?", "e?"], row(embedder, 4))
        return embedder.scheduler.tasks

    assert in_run(embeddings, body, max_batch=4) == 0
    assert embeddings.requests == []


# -- each request takes a slot of the run ------------------------------------------------------


def test_each_retry_after_a_failed_shared_request_takes_a_slot_of_its_own() -> None:
    embeddings = Recorder(bad=["How long do refunds take?"])
    run_samples(embeddings, SAMPLES, limit=1)
    # the shared questions and probes requests, then each sample's probes alone
    assert len(embeddings.requests) == 5
    assert embeddings.unslotted == 0


def test_asking_again_after_differing_widths_takes_a_slot_per_request() -> None:
    embeddings = Recorder(wide=lambda texts: len(texts) >= 4)
    run_samples(embeddings, SAMPLES, limit=1)
    # the shared questions (3) and probes (6, wide) requests, then each sample's two alone
    assert len(embeddings.requests) == 2 + 2 * len(SAMPLES)
    assert embeddings.unslotted == 0


def test_without_coalescing_each_request_takes_a_slot() -> None:
    embeddings = Recorder()
    run_samples(embeddings, SAMPLES, limit=1, coalesce=False)
    assert len(embeddings.requests) == 2 * len(SAMPLES)
    assert embeddings.unslotted == 0


# -- what is asked again after a failure -------------------------------------------------------


def test_a_failed_shared_request_is_sent_again_per_sample() -> None:
    embeddings = Recorder(bad=["How long do refunds take?"])
    results = run_samples(embeddings, SAMPLES)
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
    ((error, usage),) = run_samples(embeddings, [SAMPLES[2]])
    assert str(error) == "refused ['Hours?']"
    assert sorted(len(r) for r in embeddings.requests) == [1, 3]
    assert usage.embedding_requests == 2


def test_widths_differing_between_shared_requests_are_asked_again_alone() -> None:
    # the probes' shared request (7 texts) answers vectors twice as wide; each sample asks
    # again for its own two requests, and only the one whose 4 probes come wide again fails
    embeddings = Recorder(wide=lambda texts: len(texts) >= 4)
    probes = ["When does the shop open?", "Is it open on Sunday?", "Hours?", "Today?"]
    results = run_samples(embeddings, [*SAMPLES[:2], (SAMPLES[2][0], probes)])
    assert isinstance(results[0][0], tuple) and isinstance(results[1][0], tuple)
    assert isinstance(results[2][0], EmbeddingShapeError)
    assert str(results[2][0]) == (
        "Recorder returned a vector of length 8 for the question but vectors of length 16 "
        "for the 4 probe(s)"
    )
    question_vector, probe_vectors = results[0][0]
    assert question_vector.tolist() == own([SAMPLES[0][0]])[0].tolist()
    assert probe_vectors.tolist() == own(SAMPLES[0][1]).tolist()


def test_differing_widths_in_a_sample_s_own_requests_name_the_embeddings() -> None:
    embeddings = Recorder(wide=lambda texts: len(texts) >= 2)
    ((error, _),) = run_samples(embeddings, [SAMPLES[0]], coalesce=False)
    assert isinstance(error, EmbeddingShapeError)
    assert str(error) == (
        "Recorder returned a vector of length 8 for the question but vectors of length 16 "
        "for the 2 probe(s)"
    )
    assert len(embeddings.requests) == 2  # not asked again: these were its own requests


def test_a_question_asked_again_after_a_retry_uses_the_retried_vector() -> None:
    # a shared request of questions only answers wide vectors; asked alone, each is right
    embeddings = Recorder(wide=lambda texts: len(texts) > 1 and all("Q" in t for t in texts))
    samples = [("Q one?", ["a?"]), ("Q two?", ["b?", "c?"])]

    async def body(embedder: RunEmbedder) -> tuple[list[Any], np.ndarray, int]:
        results = await samples_of(embedder, samples)
        before = len(embeddings.requests)
        again = await question(embedder, "Q one?", priority=len(samples))
        return results, again, len(embeddings.requests) - before

    results, again, sent = in_run(embeddings, body)
    assert [result[0].shape for result, _ in results] == [(8,), (8,)]
    assert again.tolist() == own(["Q one?"])[0].tolist()
    assert sent == 0


def test_a_question_whose_request_failed_is_asked_again() -> None:
    embeddings = Recorder(bad=["a?"])

    async def ask(embedder: RunEmbedder) -> list[str]:
        errors = []
        for i in range(2):
            result, _ = await _sample(row(embedder, i), "a?", ["p?"])
            errors.append(str(result))
        return errors

    assert in_run(embeddings, ask) == ["refused ['a?']"] * 2
    assert [r for r in embeddings.requests if "a?" in r] == [["a?"], ["a?"]]


def test_a_row_expecting_a_question_whose_request_failed_fails_with_it() -> None:
    # two rows expect one question; the first row's request of it fails, and the run forgets
    # it. The second row then uses the future it expected (failed) rather than asking again:
    # it fails with the same error, and the question was sent once
    embeddings = FailsOnce(bad=["Q?"])

    async def body(embedder: RunEmbedder) -> tuple[Any, Any]:
        first, second = row(embedder, 0), row(embedder, 1)
        first.expect("Q?")
        second.expect("Q?")
        failed, _ = await _sample(first, "Q?", ["pa?"])
        expected, _ = await _sample(second, "Q?", ["pb?"])
        return failed, expected

    failed, expected = in_run(embeddings, body)
    assert isinstance(failed, ValueError)
    assert expected is failed
    assert [text for request in embeddings.requests for text in request].count("Q?") == 1


def test_a_sample_whose_question_failed_takes_back_its_probes_not_yet_sent() -> None:
    # the question's request is already under way for another row when the sample comes,
    # and fails while the sample's probes still wait for the rows that may add texts: they
    # are never sent
    embeddings = Gated(held="Q bad?", bad=["Q bad?"])

    async def body(embedder: RunEmbedder) -> Any:
        first = asyncio.ensure_future(question(embedder, "Q bad?"))
        await embeddings.started.wait()
        sample_row, *later = (row(embedder, i) for i in range(1, 4))  # two rows still coming
        handed_in = asyncio.Event()

        async def sample() -> Any:
            handed_in.set()  # the waiter wakes once the sample waits on its vectors
            return await _sample(sample_row, "Q bad?", ["pa?", "pb?"])

        running = asyncio.ensure_future(sample())
        await handed_in.wait()
        embeddings.gate.set()
        result = await running
        with pytest.raises(ValueError):
            await first
        for calls in later:
            calls.close()
        return result

    failed, usage = in_run(embeddings, body)
    assert str(failed) == "refused ['Q bad?']"
    assert embeddings.requests == [["Q bad?"]]
    assert usage.embedding_requests == 0  # the question's request is its first caller's


def test_a_sample_whose_question_failed_waits_for_its_probes_request_under_way() -> None:
    # the probes' request is under way when the question's request fails: the sample waits
    # for it before it fails, so what the probes cost is in the sample's usage
    embeddings = Gated(held="probe?", bad=["Q?"])

    async def body(embedder: RunEmbedder) -> Any:
        sample = asyncio.ensure_future(_sample(row(embedder, 0), "Q?", ["probe?"]))
        await embeddings.started.wait()
        for _ in range(200):  # the question's request fails meanwhile
            if sample.done():
                break
            await asyncio.sleep(0)
        waited = not sample.done()
        embeddings.gate.set()
        return waited, await sample

    waited, (error, usage) = in_run(embeddings, body)
    assert isinstance(error, ValueError)
    assert waited
    # both requests counted, and the probes' tokens (the failed request reports none)
    assert (usage.embedding_requests, usage.embedding_tokens) == (2, len("probe?"))


# -- what a row whose judge failed takes back or waits for -------------------------------------


def test_rows_that_fail_before_their_probes_leave_a_shared_question_to_the_row_asking() -> None:
    # three rows share a question; two fail before handing in probes while the third waits on
    # its vectors: the question is not taken back, and no row waits on another for ever
    embeddings = Recorder()

    async def body(embedder: RunEmbedder) -> Any:
        asking, *failing = (row(embedder, i) for i in range(3))
        for r in failing:
            r.expect("Q shared?")
        result = asyncio.ensure_future(_sample(asking, "Q shared?", ["p?"]))
        await asyncio.gather(*(r.release() for r in failing))
        asking.close()
        return await result

    (question_vector, probe_vectors), _ = in_run(embeddings, body)
    assert question_vector.tolist() == own(["Q shared?"])[0].tolist()
    assert probe_vectors.tolist() == own(["p?"]).tolist()
    assert sorted(map(tuple, embeddings.requests)) == [("Q shared?",), ("p?",)]


def test_a_row_that_fails_alone_takes_its_unsent_question_back() -> None:
    embeddings = Recorder()

    async def body(embedder: RunEmbedder) -> None:
        failing = row(embedder, 0)
        failing.expect("Q alone?")
        await failing.release()

    in_run(embeddings, body)
    assert embeddings.requests == []


def test_a_question_taken_back_unsent_is_asked_afresh_by_a_later_row() -> None:
    # a row whose judge failed takes its question back before any request took it; a later
    # row with the same question gets it embedded, not the taken-back (cancelled) one
    embeddings = Recorder()

    async def body(embedder: RunEmbedder) -> Any:
        first = row(embedder, 0)
        first.expect("Q?")
        await first.release()
        first.close()
        return await _sample(row(embedder, 1), "Q?", ["p?"])

    (vectors, usage) = in_run(embeddings, body)
    np.testing.assert_allclose(vectors[0], own(["Q?"])[0])
    assert sorted(embeddings.requests) == [["Q?"], ["p?"]]
    assert usage.embedding_requests == 2


@pytest.mark.parametrize("bad", [[], ["Q1?"]])
def test_a_row_that_fails_after_its_question_left_waits_for_it(bad: list[str]) -> None:
    # the row's question left with another row's: the row waits for that request (a failed
    # one too, without raising its error), so its share of the cost is in its usage
    embeddings = Gated(held="Q1?", bad=bad)

    async def body(embedder: RunEmbedder) -> Any:
        failing = row(embedder, 0)
        with metering() as meter:
            failing.expect("Q1?")
        other = asyncio.ensure_future(_sample(row(embedder, 1), "Q2?", ["p2?"]))
        await embeddings.started.wait()
        released = asyncio.ensure_future(failing.release())
        embeddings.gate.set()
        await released
        usage = meter.usage
        failing.close()
        return usage, await other

    usage, (vectors, _) = in_run(embeddings, body)
    assert ["Q1?", "Q2?"] in embeddings.requests
    if bad:  # its part of the shared request, then its own retry
        assert usage.embedding_requests == 2
    else:
        assert usage.embedding_tokens == len("Q1?")
    np.testing.assert_allclose(vectors[0], own(["Q2?"])[0])


def test_a_question_two_rows_expect_stays_for_the_other_when_one_row_fails() -> None:
    embeddings = Recorder()

    async def body(embedder: RunEmbedder) -> Any:
        failing, scoring = row(embedder, 0), row(embedder, 1)
        failing.expect("Q?")
        scoring.expect("Q?")
        # the failing row waits for the question the other row's probes will send
        released = asyncio.ensure_future(failing.release())
        failing.close()
        result = await _sample(scoring, "Q?", ["p?"])
        await released
        return result

    vectors, _ = in_run(embeddings, body)
    np.testing.assert_allclose(vectors[0], own(["Q?"])[0])
    assert sorted(embeddings.requests) == [["Q?"], ["p?"]]


# -- a run stopped while its requests are under way --------------------------------------------


def test_a_sample_stopped_while_its_question_is_embedded_stops_with_the_same_signal() -> None:
    embeddings = StopOnQuestion(held="p?")

    async def body(embedder: RunEmbedder) -> None:
        with pytest.raises(Stop):
            await row(embedder, 0).question_and_probes("Q stop?", ["p?"])

    in_run(embeddings, body, coalesce=False)
    assert embeddings.requests == []  # the probes' request was cancelled while it waited


def test_a_shared_request_cut_off_when_its_run_ends_ends_quietly() -> None:
    embeddings = Gated(held="p?")
    reported: list[dict[str, Any]] = []

    async def run() -> None:
        asyncio.get_running_loop().set_exception_handler(
            lambda _, context: reported.append(context)
        )
        async with Scheduler(4) as scheduler:
            embedder = RunEmbedder(embeddings, scheduler)
            asyncio.ensure_future(row(embedder, 0).question_and_probes("q?", ["p?"]))
            await embeddings.started.wait()
            # the run ends here, its probes' request still under way: closing cancels it

    asyncio.run(run())
    assert embeddings.started.is_set()
    assert reported == []


# -- questions reused, and what a run keeps of them --------------------------------------------


def test_a_question_is_embedded_once_per_run_while_remembered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(batching, "REUSED_QUESTIONS", 2)
    embeddings = Recorder()

    async def ask(embedder: RunEmbedder) -> None:
        for i, text in enumerate(("a?", "b?", "a?", "c?", "a?", "b?")):
            assert (await question(embedder, text, i)).tolist() == own([text])[0].tolist()

    in_run(embeddings, ask, coalesce=False)
    # "a?" was used again before "c?" came, so "b?" was the one forgotten
    assert embeddings.requests == [["a?"], ["b?"], ["c?"], ["b?"]]


def held_rows(vectors: list[np.ndarray]) -> int:
    """Rows of every array ``vectors`` keep alive (a view keeps the whole array it is part of)."""
    roots = {}
    for vector in vectors:
        while isinstance(vector.base, np.ndarray):
            vector = vector.base
        roots[id(vector)] = vector
    return sum(len(root) for root in roots.values())


def test_what_a_run_keeps_of_its_questions_is_bounded_whatever_its_length() -> None:
    # four times as many rows as the questions a run keeps for reuse, in rounds of 32 that
    # share requests, each round asking one question again: the run keeps at most that many
    # vectors, each alone (not the shared answer it came in), and nothing of rows that ended
    embeddings = Recorder()
    cap = batching.REUSED_QUESTIONS

    async def body(embedder: RunEmbedder) -> tuple[list[np.ndarray], int]:
        for start in range(0, 4 * cap, 32):
            samples = [(f"Q {i}?", [f"p {i}?"]) for i in range(start, start + 31)]
            results = await samples_of(embedder, [*samples, ("Q again?", ["p again?"])])
            assert not any(isinstance(result, Exception) for result, _ in results)
        kept = [future.result() for future in embedder._questions.values()]
        return kept, len(embedder._expecting)

    kept, expecting = in_run(embeddings, body)
    assert len(kept) <= cap
    assert held_rows(kept) <= cap
    assert expecting == 0
    assert [text for request in embeddings.requests for text in request].count("Q again?") == 1
