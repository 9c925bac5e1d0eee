"""Rate limits kept by a run's scheduler: given, or learned from the provider's headers and 429s.

Time is a stand-in clock the scheduler reads and a stand-in sleep that moves it on, so each
test counts the waits asked for, never how long anything took.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ragas_relevancy_ext import AnswerRelevancy, RateLimits, ResponseRelevancy
from ragas_relevancy_ext.cli.setup import Settings
from ragas_relevancy_ext.run.scheduler import Scheduler
from ragas_relevancy_ext.scoring.usage import (
    PROVIDER_REPORTS,
    Usage,
    UsageMeter,
    metering,
    record,
)
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


def scheduler(rates: RateLimits | None = None, limit: int = 16) -> tuple[Scheduler, FakeTime]:
    time = FakeTime()
    return Scheduler(limit, rates=rates, clock=time.clock, sleep=time.sleep), time


async def send(run: Scheduler, kind: str, tokens: int, sent: list[float], now: FakeTime) -> None:
    async with run.row(0).call(kind, tokens):  # type: ignore[arg-type]
        sent.append(now.now)


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
        await send(run, "judge", 500, sent, time)  # 200 left: 300 more come in 18 s

    asyncio.run(go())
    assert sent == [0.0, pytest.approx(18.0)]


def test_what_the_provider_reports_corrects_the_estimate() -> None:
    run, time = scheduler(RateLimits(tpm=1000))
    sent: list[float] = []
    outer = UsageMeter()

    async def go() -> None:
        with metering(outer):
            async with run.row(0).call("judge", 100):  # estimated 100, used 700
                record(
                    Usage(judge_requests=1, judge_prompt_tokens=600, judge_completion_tokens=100)
                )
        await send(run, "judge", 600, sent, time)  # 300 left: 300 more come in 18 s

    asyncio.run(go())
    assert sent == [pytest.approx(18.0)]
    assert outer.usage.judge_prompt_tokens == 600  # the row's meter still sees it


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


def test_a_429_halves_a_learned_rate_and_successes_raise_it_back() -> None:
    run, _ = scheduler()
    run.observe("judge", 200, {"x-ratelimit-limit-requests": "600"})
    run.observe("judge", 429, {"retry-after": "2"})
    assert run.rate("judge")[0] == 300.0
    for _ in range(50):
        run.observe("judge", 200, {"x-ratelimit-limit-requests": "600"})
    assert run.rate("judge")[0] == 350.0  # one more per answer without a 429


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
    assert run.rate("judge")[0] == 300.0  # 10 in under a second: 600 a minute, halved
    assert sent[10] == pytest.approx(1.0)  # after the pause; the rate holds from then on


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

    async def pace(self: Scheduler, kind: str, tokens: int) -> None:
        paced.append((kind, tokens))

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
