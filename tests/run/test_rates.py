"""Rate limits kept by a run's scheduler: given, or learned from the provider's headers and 429s.

Time is a stand-in clock the scheduler reads and a stand-in sleep that moves it on, so each
test counts the waits asked for, never how long anything took.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from common import FakeTime, calls_held_open, scheduler, send

from ragas_relevancy_ext import AnswerRelevancy, RateLimits, ResponseRelevancy
from ragas_relevancy_ext.cli.setup import Settings
from ragas_relevancy_ext.run.scheduler import MARGIN, Scheduler
from ragas_relevancy_ext.scoring.usage import (
    PROVIDER_REPORTS,
    Usage,
    UsageMeter,
    metering,
    record,
)
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge


def test_requests_per_minute_given_space_the_requests_out() -> None:
    run, time = scheduler(RateLimits(rpm=2))
    sent: list[float] = []

    async def go() -> None:
        for _ in range(4):
            await send(run, "judge", 1, sent, time)

    asyncio.run(go())
    # a full bucket of 2, then one request per 30 s
    assert sent == [0.0, 0.0, 30.0, 60.0]


def test_tokens_per_minute_given_hold_a_request_until_its_tokens_are_there() -> None:
    run, time = scheduler(RateLimits(tpm=1000))
    sent: list[float] = []

    async def go() -> None:
        await send(run, "judge", 800, sent, time)
        await send(run, "judge", 500, sent, time)  # 200 left: 325 more come in 19.5 s

    asyncio.run(go())
    # it waits for its 500 tokens and a margin of 5% of them (estimates run a little under)
    assert MARGIN == 0.05
    assert sent == [0.0, pytest.approx(19.5)]


def test_what_the_provider_reports_corrects_the_bucket() -> None:
    run, time = scheduler(RateLimits(tpm=1000))
    sent: list[float] = []
    outer = UsageMeter()

    async def go() -> None:
        with metering(outer):  # estimated 100 + 500 asked for; 100 + 600 used
            async with run.row(0).call("judge", 600, budget=500):
                record(
                    Usage(judge_requests=1, judge_prompt_tokens=100, judge_completion_tokens=600)
                )
        await send(run, "judge", 600, sent, time)  # 300 left: 300 + 30 margin come in 19.8 s

    asyncio.run(go())
    assert sent == [pytest.approx(19.8)]
    assert outer.usage.judge_prompt_tokens == 100  # the row's meter still sees it


def test_reported_prompt_tokens_scale_later_estimates() -> None:
    run, time = scheduler(RateLimits(tpm=1000))
    sent: list[float] = []

    async def go() -> None:
        async with run.row(0).call("judge", 100):  # estimated 100, the provider counted 150
            record(Usage(judge_requests=1, judge_prompt_tokens=150, judge_completion_tokens=0))
        await send(run, "judge", 500, sent, time)  # counted as 750: 850 left, no wait
        await send(run, "judge", 200, sent, time)  # counted as 300: 100 left, 215 in 12.9 s

    asyncio.run(go())
    assert sent == [0.0, pytest.approx(12.9)]


def test_requests_on_their_way_hold_back_their_tokens_while_the_providers_bucket_is_full() -> None:
    """A provider's full bucket refills nothing until a burst reaches it; the run's does not
    refill for requests it has sent and not seen answered either, or later ones meet 429s."""
    run, time = scheduler(RateLimits(tpm=120))
    sent: list[float] = []
    answer = asyncio.Event()

    async def on_its_way(tokens: int) -> None:
        async with run.row(0).call("judge", tokens):
            sent.append(time.now)
            await answer.wait()

    async def go() -> None:
        await send(run, "judge", 10, sent, time)  # answered at once: 110 left
        flying = [asyncio.ensure_future(on_its_way(30)) for _ in range(3)]  # 90 held
        await asyncio.sleep(0)
        time.now += 30.0  # the three on their way: the provider's bucket stays full (120)
        late = asyncio.ensure_future(send(run, "judge", 30, sent, time))
        for _ in range(200):  # the late one waits, each wait moving the stand-in clock on
            if time.now >= 60.0:
                break
            await asyncio.sleep(0)
        time.now = max(time.now, 60.0)
        answer.set()  # the three reach the provider and are answered: 30 left of 120
        await asyncio.gather(*flying, late)

    asyncio.run(go())
    assert sent[:4] == [0.0] * 4
    assert sent[4] > 60.0  # not at 30 s, on the refill a full bucket never had


def test_judge_and_embedding_limits_are_kept_apart() -> None:
    run, time = scheduler(RateLimits(rpm=1, embedding_rpm=60))
    sent: list[float] = []

    async def go() -> None:
        await send(run, "judge", 1, sent, time)
        for _ in range(3):
            await send(run, "embeddings", 1, sent, time)

    asyncio.run(go())
    assert sent == [0.0, 0.0, 0.0, 0.0]


def test_a_429_pauses_every_request_of_its_kind_at_once() -> None:
    run, time = scheduler()
    sent: list[float] = []

    async def go() -> None:
        run.observe("judge", 429, {"retry-after-ms": "1500"})
        await asyncio.gather(*(send(run, "judge", 1, sent, time) for _ in range(5)))
        await send(run, "embeddings", 1, sent, time)

    asyncio.run(go())
    assert sent[:5] == [1.5] * 5  # all five waited for the one pause, none retried alone
    assert sent[5] == 1.5  # embeddings were not paused (the clock had moved on)


def test_limits_are_learned_from_the_providers_headers() -> None:
    run, time = scheduler()
    assert run.rate("judge") == (None, None)
    run.observe(
        "judge",
        200,
        {
            "x-ratelimit-limit-requests": "600",
            "x-ratelimit-limit-tokens": "150000",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "100ms",
        },
    )
    assert run.rate("judge") == (600.0, 150000.0)
    sent: list[float] = []
    asyncio.run(send(run, "judge", 10, sent, time))
    assert sent == [pytest.approx(0.1)]  # none left: the next comes after 60 / 600 s


def test_a_429_keeps_the_limits_the_headers_said_and_takes_what_remains() -> None:
    run, time = scheduler()
    sent: list[float] = []
    limits = {"x-ratelimit-limit-requests": "600", "x-ratelimit-limit-tokens": "150000"}
    run.observe("judge", 200, limits)
    run.observe("judge", 429, {**limits, "x-ratelimit-remaining-requests": "0", "retry-after": "2"})
    assert run.rate("judge") == (600.0, 150000.0)  # not halved: the provider said its limits
    asyncio.run(send(run, "judge", 10, sent, time))
    assert sent == [pytest.approx(2.0)]  # after the pause (by then 20 requests came back)


def test_without_headers_a_429_sets_half_the_rate_that_met_it() -> None:
    run, time = scheduler()
    sent: list[float] = []

    async def go() -> None:
        for _ in range(10):  # no limit known: all at once
            await send(run, "judge", 1, sent, time)
        run.observe("judge", 429, {"retry-after": "1"})
        await send(run, "judge", 1, sent, time)

    asyncio.run(go())
    assert sent[:10] == [0.0] * 10
    assert run.rate("judge")[0] == 30.0  # one per retry-after (more than the 10 sent), halved
    assert sent[10] == pytest.approx(2.0)  # the pause, then 60 / 30 s for the next request
    for _ in range(50):
        run.observe("judge", 200, {})
    assert run.rate("judge")[0] == 80.0  # one more per answer without a 429


def test_without_headers_a_burst_is_no_rate_the_requests_of_the_last_minute_are() -> None:
    run, time = scheduler()
    sent: list[float] = []

    async def go() -> None:
        for _ in range(150):  # a provider's full bucket lets a burst through at once
            await send(run, "judge", 1, sent, time)
        run.observe("judge", 429, {"retry-after-ms": "500"})

    asyncio.run(go())
    assert run.rate("judge")[0] == 75.0  # 150 in the last minute, halved (not 9,000 a minute)


def test_without_headers_the_429s_of_requests_in_flight_together_halve_the_rate_once() -> None:
    run, time = scheduler()
    sent: list[float] = []

    async def go() -> None:
        for _ in range(10):
            await send(run, "judge", 1, sent, time)
        for _ in range(10):  # the ten were in flight together: ten 429s, one after the other
            run.observe("judge", 429, {"retry-after": "1"})
        await send(run, "judge", 1, sent, time)  # after the pause, at the halved rate
        run.observe("judge", 429, {"retry-after": "1"})  # one sent at that rate: halved again

    asyncio.run(go())
    assert sent[10] == pytest.approx(2.0)  # the pause, then 60 / 30 s
    assert run.rate("judge")[0] == 15.0  # 60 (one per retry-after) halved twice, not eleven times


def test_without_headers_requests_refused_together_free_no_request_when_they_come_back() -> None:
    """The provider's bucket is empty at a 429: refused requests take nothing, yet give the
    run nothing back either; the next go at the halved rate, not in a burst after the pause."""
    run, time = scheduler()
    sent: list[float] = []

    async def refused() -> None:
        with contextlib.suppress(Exception):
            async with run.row(0).call("judge", 1):
                await asyncio.sleep(0)
                run.observe("judge", 429, {"retry-after": "1"})
                raise rate_limit_error("1000")

    async def go() -> None:
        await asyncio.gather(*(refused() for _ in range(4)))
        for _ in range(2):
            await send(run, "judge", 1, sent, time)

    asyncio.run(go())
    assert run.rate("judge")[0] == 30.0  # one per retry-after, halved
    assert sent == [pytest.approx(2.0), pytest.approx(4.0)]  # the pause, then 60 / 30 s each


def test_given_limits_are_kept_whatever_the_headers_say() -> None:
    run, _ = scheduler(RateLimits(rpm=100))
    run.observe("judge", 200, {"x-ratelimit-limit-requests": "600"})
    run.observe("judge", 429, {})
    assert run.rate("judge")[0] == 100.0


def test_a_run_listens_to_the_provider_while_it_lasts() -> None:
    async def go() -> tuple[bool, bool]:
        async with Scheduler(4) as run:
            listening = run in PROVIDER_REPORTS.listeners
        return listening, run in PROVIDER_REPORTS.listeners

    assert asyncio.run(go()) == (True, False)


def test_rate_limits_are_checked_and_split_over_actors() -> None:
    with pytest.raises(ValueError, match="rpm must be a whole number >= 1 or None, got 0"):
        RateLimits(rpm=0)
    limits = RateLimits(rpm=600, tpm=150_000)
    assert limits.share(4) == RateLimits(rpm=150, tpm=37_500)
    assert str(limits.share(4)) == "rpm 150, tpm 37,500"
    assert str(RateLimits()) == "learned"


def test_both_flavours_take_rate_limits_and_check_them() -> None:
    limits = RateLimits(rpm=60)
    metric = AnswerRelevancy(PretendJudge(), HashEmbeddings(), rate_limits=limits)
    assert metric.rate_limits is limits
    assert ResponseRelevancy(rate_limits=limits).rate_limits is limits
    with pytest.raises(ValueError, match="rate_limits must be a RateLimits or None"):
        metric.rate_limits = 60  # type: ignore[assignment]


def test_a_metric_keeps_to_its_rate_limits_through_the_public_api(monkeypatch: Any) -> None:
    """Every judge call of a run goes through the run's pace: counted by a stand-in bucket."""
    paced: list[tuple[str, int]] = []

    async def pace(
        self: Scheduler, kind: str, tokens: int, budget: int = 0, row: float | None = None
    ) -> int:
        paced.append((kind, tokens))
        return tokens

    monkeypatch.setattr(Scheduler, "pace", pace)
    metric = AnswerRelevancy(
        PretendJudge(), HashEmbeddings(), probe_prompt="stock", rate_limits=RateLimits(rpm=60)
    )
    rows = [{"user_input": f"Where is A{i}?", "response": f"A{i} shipped."} for i in range(4)]
    asyncio.run(metric.abatch_score(rows))
    assert [kind for kind, _ in paced].count("judge") == 4 * 3
    assert all(tokens > 50 for kind, tokens in paced if kind == "judge")  # the prompt's / 4
    assert 1 <= [kind for kind, _ in paced].count("embeddings") <= 8


def test_command_line_limits_reach_the_metric() -> None:
    from ragas_relevancy_ext.cli.ray_score import per_actor

    settings = Settings(rpm=600, tpm=150_000, embedding_rpm=3000)
    assert per_actor(settings, 4).rpm == 150 and per_actor(settings, 4).embedding_tpm is None


class RefusedOnce(PretendJudge):
    """Answers 429 (retry after 1 ms) to its first request, then as PretendJudge."""

    async def agenerate(self, prompt: str, response_model: Any) -> Any:
        import httpx
        import openai

        self.calls += 1
        if self.calls == 1:
            request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
            answer = httpx.Response(429, headers={"retry-after-ms": "1"}, request=request)
            raise openai.RateLimitError("Rate limit reached", response=answer, body=None)
        return await super().agenerate(prompt, response_model)


def test_a_call_answered_429_is_asked_again_after_the_runs_pause() -> None:
    judge = RefusedOnce()
    metric = AnswerRelevancy(judge, HashEmbeddings(), probe_prompt="diverse")
    result = asyncio.run(metric.ascore("Where is A1?", "A1 shipped on Monday."))
    assert result.value == result.value  # scored, not NaN
    assert judge.calls == 3  # the refused call, then it again (PretendJudge counts it too)


def rate_limit_error(retry_after_ms: str) -> Exception:
    """openai's RateLimitError for a 429 carrying ``retry-after-ms``."""
    import httpx
    import openai

    request = httpx.Request("POST", "http://127.0.0.1/v1/embeddings")
    answer = httpx.Response(429, headers={"retry-after-ms": retry_after_ms}, request=request)
    return openai.RateLimitError("Rate limit reached", response=answer, body=None)


class EmbeddingsRefusedOnce(HashEmbeddings):
    """Answers 429 (retry after ``retry_after_ms``) to its first request, then as HashEmbeddings;
    ``sent`` holds the stand-in time of each request, when given a clock."""

    def __init__(self, retry_after_ms: str = "1", time: FakeTime | None = None) -> None:
        super().__init__(32)
        self.retry_after_ms = retry_after_ms
        self.time = time
        self.sent: list[float] = []

    def _request(self) -> None:
        self.sent.append(self.time.now if self.time else 0.0)
        if len(self.sent) == 1:
            raise rate_limit_error(self.retry_after_ms)

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
        self._request()
        return self.embed_text(text)

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        self._request()
        return [self.embed_text(t) for t in texts]


@pytest.mark.parametrize("shared", [True, False])
def test_an_embeddings_request_answered_429_is_asked_again_not_a_nan_row(shared: bool) -> None:
    embeddings = EmbeddingsRefusedOnce()
    limits = RateLimits(embedding_rpm=6000)  # given: a 429 pauses, and slows nothing after
    metric = AnswerRelevancy(
        PretendJudge(), embeddings, batch_embeddings=shared, rate_limits=limits
    )
    rows = [{"user_input": f"Where is A{i}?", "response": f"A{i} shipped."} for i in range(6)]
    results = asyncio.run(metric.abatch_score(rows))
    assert all(r.value == r.value for r in results)  # every row scored, none NaN
    assert embeddings.sent.count(0.0) >= 2  # the refused request, then it again


def test_an_embeddings_429_pauses_every_embeddings_request_for_its_retry_after() -> None:
    from ragas_relevancy_ext.scoring.embeddings import embed_texts

    run, time = scheduler(RateLimits(embedding_rpm=6000))
    embeddings = EmbeddingsRefusedOnce("1500", time)

    async def go() -> None:
        first = asyncio.ensure_future(embed_texts(embeddings, ["a question"], run.row(0)))
        await asyncio.sleep(0)  # the first is refused (and the run paused) before the second
        await asyncio.gather(first, embed_texts(embeddings, ["probe one", "probe two"], run))

    asyncio.run(go())
    # the refused request at 0, then both after the one pause, neither waiting on its own
    assert embeddings.sent == [0.0, 1.5, 1.5]


def test_before_the_first_answer_the_first_rows_calls_all_go_but_other_rows_wait() -> None:
    """No burst on a guess, yet one row's N calls (angles mode) go out together."""
    run, _ = scheduler()
    early, started = asyncio.run(calls_held_open(run, [0] * 10 + [1] * 3))
    assert early.count(0) == 10 and 1 not in early
    assert started.count(1) == 3


@pytest.mark.slow
@pytest.mark.parametrize("within_run", [True, False])
def test_on_the_packages_client_a_run_asks_a_429_again_after_its_pause_not_the_sdk(
    monkeypatch: pytest.MonkeyPatch, within_run: bool
) -> None:
    """The SDK asking again on its own would go around the run's pause (a retry storm): on a
    client the package built, a 429 reaches the run at once; outside a run the SDK retries."""
    from ragas.embeddings import OpenAIEmbeddings

    from ragas_relevancy_ext.scoring.embeddings import embed_texts
    from ragas_relevancy_ext.testing.loopback import LoopbackServer

    run, time = scheduler()
    with LoopbackServer(embedding_rpm=1, clock=time.clock, limit_headers=False) as server:
        client = server.openai_client(max_retries=2)
        sdk_waits: list[Any] = []

        def sdk_wait(*args: Any) -> float:
            sdk_waits.append(args)
            time.now += 60.0  # the SDK's wait, on the stand-in clock
            return 0.0

        monkeypatch.setattr(client, "_calculate_retry_timeout", sdk_wait)
        embeddings = OpenAIEmbeddings(client=client, model="loop-embed")

        async def go() -> None:
            for i, text in enumerate(["one", "two"]):
                limiter = run.row(i) if within_run else None
                await embed_texts(embeddings, [text], limiter)

        asyncio.run(go())
        statuses = [r.status for r in server.requests()]
    assert statuses == [200, 429, 200]
    if within_run:
        assert sdk_waits == [] and time.slept and time.slept[0] == 60.0  # the run's pause
    else:
        assert len(sdk_waits) == 1 and time.slept == []
