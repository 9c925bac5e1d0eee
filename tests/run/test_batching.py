"""Embedding requests shared across samples, counted at the loopback server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random
import re
from typing import Any

import httpx
import numpy as np
import pytest
from google import genai
from google.genai import types
from openai import AsyncOpenAI
from ragas.embeddings import GoogleEmbeddings, OpenAIEmbeddings

from ragas_relevancy_ext import AnswerRelevancy, OneTextPerCall
from ragas_relevancy_ext.run.batching import RunEmbedder
from ragas_relevancy_ext.run.scheduler import Scheduler
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
    """Questions fail at once; probes take 50 ms and succeed."""

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        if any(text.startswith("Where is order") for text in texts):
            raise ValueError("the question's request failed")
        await asyncio.sleep(0.05)
        return [self.embed_text(text) for text in texts]


@pytest.mark.parametrize("shared", [True, False], ids=["shared", "own requests"])
def test_a_failed_question_waits_for_its_probes_request_and_counts_it(shared: bool) -> None:
    # the probes' request is under way when the question's fails: the sample waits for it,
    # so its usage names both requests (cancelled, its cost would come after the report)
    metric = AnswerRelevancy(PretendJudge(), SlowProbes(), batch_embeddings=shared)
    (result,) = asyncio.run(metric.abatch_score(rows(1)))
    assert "the question's request failed" in str(result.report.error)
    assert result.report.usage.embedding_requests == 2
