"""A provider key's rate limit (run/limits.py): pace, pauses, learning, patience, hostile headers,
sharing, and a run's requests waiting for it without holding a slot.

Time is a stand-in clock the limit reads and a stand-in sleep that moves it on (or, where the
order of two requests matters, a sleep the test releases), so each test reads the stand-in
times requests left at, never how long anything took.
"""

from __future__ import annotations

import asyncio
import logging
import math
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from common import FakeTime

from ragas_relevancy_ext import AnswerRelevancy, Cause, RateLimits, ResponseRelevancy, cause_of
from ragas_relevancy_ext.cli.setup import Settings
from ragas_relevancy_ext.errors import PatienceExhausted, UsageError
from ragas_relevancy_ext.run import limits as limits_module
from ragas_relevancy_ext.run.limits import (
    MAX_PAUSE,
    PAUSE,
    InProcess,
    KeyLimit,
    OnDisk,
    fingerprint,
    run_limits,
)
from ragas_relevancy_ext.run.scheduler import Scheduler
from ragas_relevancy_ext.run.streaming import EarlyStop
from ragas_relevancy_ext.scoring.usage import listening, note_limits
from ragas_relevancy_ext.testing.limits import TokenBucket
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge

URL = "http://127.0.0.1:9/v1/chat/completions"


def limit(time: FakeTime, rpm: float | None = None, tpm: float | None = None, **more: Any) -> Any:
    """A key's limit on the stand-in clock (its own in-process store unless ``backend``)."""
    more.setdefault("backend", InProcess(time.clock))
    return KeyLimit(URL, "key test", rpm, tpm, sleep=time.sleep, **more)


async def leave(key: KeyLimit, time: FakeTime, n: int, tokens: int = 0) -> list[float]:
    """The stand-in times ``n`` requests asked at once leave at, each answered at once."""
    sent: list[float] = []

    async def one() -> None:
        await key.wait(tokens)
        key.left()
        sent.append(time.now)
        key.succeeded()
        key.ended()

    await asyncio.gather(*(one() for _ in range(n)))
    return sent


def refused(times: list[float], rpm: int) -> int:
    """How many requests leaving at ``times`` a provider holding ``rpm`` in one-second slices
    (the loopback server's bucket) would refuse."""
    bucket = TokenBucket(rpm, 0.0, per_second=True)
    count = 0
    for t in times:
        if bucket.wait(1, t) > 1e-9:
            count += 1
        else:
            bucket.take(1, t)
    return count


def rate_limit_error(headers: dict[str, str], body: Any = None, path: str = "/chat") -> Exception:
    """openai's RateLimitError for a 429 carrying ``headers``."""
    request = httpx.Request("POST", f"http://127.0.0.1:9/v1{path}")
    answer = httpx.Response(429, headers=headers, request=request)
    return openai.RateLimitError("Rate limit reached", response=answer, body=body)


# --- pace ------------------------------------------------------------------------------------


def test_requests_leave_evenly_spaced_with_a_burst_of_at_most_a_seconds_worth() -> None:
    time = FakeTime()
    times = asyncio.run(leave(limit(time, rpm=1200), time, 300))
    assert refused(times, 1200) == 0
    rate = (len(times) - 1) / (times[-1] - times[0]) * 60
    assert 0.9 * 1200 <= rate <= 1200
    gaps = [b - a for a, b in zip(times, times[1:], strict=False) if b > a]
    assert max(gaps) - min(gaps) < 0.004  # evenly spaced, to the store's milliseconds


def test_tokens_per_minute_space_requests_by_their_tokens() -> None:
    time = FakeTime()
    key = limit(time, tpm=6000)  # 100 tokens a second
    times = asyncio.run(leave(key, time, 20, tokens=300))  # each more than a second's worth
    rate = 300 * (len(times) - 1) / (times[-1] - times[0]) * 60
    assert 0.9 * 6000 <= rate <= 6000


def test_limits_are_learned_from_the_first_answers_headers() -> None:
    time = FakeTime()
    key = limit(time)

    async def go() -> tuple[list[float], list[float]]:
        first: list[float] = []

        async def one() -> None:
            await key.wait(0)
            first.append(time.now)
            key.observe(200, {"x-ratelimit-limit-requests": "60"})
            key.ended()

        waiting = asyncio.ensure_future(leave(key, time, 5))
        await one()  # the first request goes alone; the others wait for its answer
        return first, await waiting

    first, later = asyncio.run(go())
    assert first == [0.0] and len(later) == 5
    gaps = [b - a for a, b in zip(later, later[1:], strict=False)]
    assert min(gaps) >= 1.0  # 60 a minute


def test_until_the_first_answer_only_the_first_request_goes() -> None:
    time = FakeTime()
    key = limit(time)

    async def go() -> int:
        release = asyncio.Event()

        async def one() -> None:
            await key.wait(0)
            gone.append(1)
            await release.wait()
            key.ended()

        gone: list[int] = []
        tasks = [asyncio.ensure_future(one()) for _ in range(6)]
        for _ in range(20):
            await asyncio.sleep(0)
        early = len(gone)
        release.set()
        await asyncio.gather(*tasks)
        return early

    assert asyncio.run(go()) == 1


def test_given_limits_are_kept_whatever_the_headers_say() -> None:
    time = FakeTime()
    key = limit(time, rpm=100)
    key.observe(200, {"x-ratelimit-limit-requests": "6000"})
    times = asyncio.run(leave(key, time, 60))
    assert (len(times) - 1) / (times[-1] - times[0]) * 60 <= 100


# --- 429s: pauses, learning without headers, patience -----------------------------------------


@pytest.mark.parametrize(
    ("headers", "pause"),
    [
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after": "2"}, 2.0),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1.5s"}, 1.5),
        ({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "2m0s"}, MAX_PAUSE),
        ({}, PAUSE),
    ],
)
def test_a_429_pauses_the_key_for_what_it_says(headers: dict[str, str], pause: float) -> None:
    time = FakeTime()
    key = limit(time, rpm=6000)
    key.observe(429, headers)
    assert asyncio.run(leave(key, time, 1)) == [pytest.approx(pause, abs=0.002)]


def test_a_limit_alone_in_its_run_with_no_pace_keeps_the_pause_without_a_store() -> None:
    time = FakeTime()
    key = KeyLimit(URL, "k", sleep=time.sleep, first_alone=False)  # its own store, no sharer
    key.now = time.clock
    key.store = None  # read never: it has nothing to pace
    key.observe(429, {"retry-after": "3"})
    assert asyncio.run(leave(key, time, 4)) == [3.0] * 4


def test_after_a_pause_requests_leave_one_interval_apart_not_in_a_burst() -> None:
    time = FakeTime()
    key = limit(time, rpm=1200)
    key.observe(429, {"retry-after": "1"})
    times = asyncio.run(leave(key, time, 5))
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert times[0] == pytest.approx(1.0, abs=0.002) and min(gaps) > 0.04


HOSTILE = [
    {"retry-after": "86400"},
    {"retry-after": "1e9"},
    {"retry-after": "inf"},
    {"retry-after-ms": "-inf"},
    {"retry-after": "-5"},
    {"retry-after": "soon"},
    {"retry-after-ms": "1e12"},
    {"retry-after-ms": "nan"},
    {"x-ratelimit-limit-requests": "0.001"},
    {"x-ratelimit-limit-requests": "inf"},
    {"x-ratelimit-remaining-requests": "-1e18"},
    {"x-ratelimit-limit-tokens": "inf"},
]


@pytest.mark.parametrize("headers", HOSTILE, ids=lambda h: "=".join(*h.items()))
def test_a_hostile_header_pauses_no_longer_than_a_minute_and_warns_once(
    headers: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    time = FakeTime()
    key = limit(time)
    with caplog.at_level(logging.WARNING, logger="ragas_relevancy_ext"):
        for status in (200, 429, 429, 200):
            key.observe(status, headers)
        times = asyncio.run(leave(key, time, 3))
    (header,) = headers
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and header in said[0] and "127.0.0.1:9" in said[0]
    assert max(time.slept, default=0) <= MAX_PAUSE and times[-1] <= MAX_PAUSE + 1
    assert key.rpm is None or key.rpm >= 1  # no limit taken from it
    assert key.tpm is None


@pytest.mark.parametrize(
    ("said", "pause"), [("86400", MAX_PAUSE), ("1e9", MAX_PAUSE), ("inf", PAUSE), ("-3", PAUSE)]
)
def test_a_long_retry_after_is_cut_to_a_minute_and_one_no_provider_sends_is_ignored(
    said: str, pause: float
) -> None:
    time = FakeTime()
    key = limit(time)
    key.observe(429, {"retry-after": said})
    assert asyncio.run(leave(key, time, 1)) == [pytest.approx(pause, abs=0.002)]


def test_a_header_no_provider_sends_is_warned_of_once_a_run_for_every_endpoint(
    caplog: pytest.LogCaptureFixture,
) -> None:
    judge, embeddings = PretendJudge(), HashEmbeddings()
    limits = run_limits(None, judge, embeddings)
    with caplog.at_level(logging.WARNING, logger="ragas_relevancy_ext"):
        for kind in ("judge", "embeddings", "judge"):
            limits[kind].observe(200, {"x-ratelimit-limit-tokens": "inf"})
    assert len(caplog.records) == 1


def test_without_headers_a_429_keeps_to_the_rate_the_provider_admitted_before_it() -> None:
    time = FakeTime()
    key = limit(time, first_alone=False)
    for _ in range(30):  # 30 sent and answered in the first second
        asyncio.run(key.wait(0))
        key.left()
        key.succeeded()
        time.now += 1 / 30
    key.observe(429, {"retry-after-ms": "10"})
    learned = key.rpm
    key.observe(429, {"retry-after-ms": "10"})  # a request sent with it: the same burst
    assert learned == key.rpm and 0.9 * 1800 <= learned <= 1800
    times = asyncio.run(leave(key, time, 20))
    assert (len(times) - 1) / (times[-1] - times[0]) * 60 <= 1.1 * learned
    assert key.rpm > learned  # answered requests look for room again


def test_without_headers_a_429_after_a_few_requests_only_pauses() -> None:
    time = FakeTime()
    key = limit(time, first_alone=False)
    asyncio.run(leave(key, time, 2))
    key.observe(429, {"retry-after-ms": "100"})
    assert key.rpm is None  # two requests say nothing of a rate
    times = asyncio.run(leave(key, time, 20))
    assert times[0] == times[-1] == pytest.approx(0.1)


def test_a_key_gives_up_once_no_request_succeeded_for_its_patience() -> None:
    time = FakeTime()
    key = limit(time, patience=600)
    error = rate_limit_error({"retry-after": "30"})
    assert key.rate_limited(error) is True
    time.now = 500.0
    key.succeeded()  # patience starts again
    time.now = 1000.0
    assert key.rate_limited(error) is True
    time.now = 1100.5
    with pytest.raises(PatienceExhausted, match=r"127\.0\.0\.1:9.* 600 s") as gave_up:
        key.rate_limited(error)
    assert cause_of(gave_up.value) is Cause.RATE_LIMITED
    with pytest.raises(PatienceExhausted):  # what asks after it is refused at once
        asyncio.run(key.wait(10))


def test_a_runs_patience_ends_its_run_early_naming_the_cause() -> None:
    class Refusing(PretendJudge):
        async def agenerate(self, prompt: str, response_model: Any) -> Any:
            self.calls += 1
            raise rate_limit_error({"retry-after-ms": "1"})

    judge = Refusing()
    limits = RateLimits(patience=0.001)
    metric = AnswerRelevancy(judge, HashEmbeddings(), rate_limits=limits)
    early = EarlyStop()
    rows = [{"user_input": f"Where is A{i}?", "response": f"A{i} shipped."} for i in range(20)]

    async def go() -> list[Any]:
        return [result async for _, result in metric.ascore_each(rows, early_stop=early)]

    results = asyncio.run(go())
    assert early.stopped and "429" in early.why() and "--patience" in early.why()
    assert len(results) < 5 and all(r.report.cause == "rate_limited" for r in results)


def test_an_account_out_of_quota_stops_the_run_after_a_few_requests() -> None:
    class OutOfQuota(PretendJudge):
        async def agenerate(self, prompt: str, response_model: Any) -> Any:
            self.calls += 1
            raise rate_limit_error({}, body={"code": "insufficient_quota"})

    judge = OutOfQuota()
    metric = AnswerRelevancy(judge, HashEmbeddings())
    early = EarlyStop()
    rows = [{"user_input": f"Where is A{i}?", "response": f"A{i} shipped."} for i in range(30)]

    async def go() -> list[Any]:
        return [result async for _, result in metric.ascore_each(rows, early_stop=early)]

    results = asyncio.run(go())
    assert early.stopped and early.cause is Cause.QUOTA
    assert judge.calls <= 10 and all(r.report.cause == "quota" for r in results)


# --- waiting holds nothing; each run hears its own answers ------------------------------------


class Gated:
    """A stand-in clock whose sleeps end only when the test moves time on."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        future = asyncio.get_running_loop().create_future()
        self.sleepers.append((self.now + seconds, future))
        await future

    async def move_to(self, when: float) -> None:
        self.now = when
        for due, future in self.sleepers:
            if due <= when and not future.done():
                future.set_result(None)
        for _ in range(20):
            await asyncio.sleep(0)


def test_a_paused_judge_holds_no_slot_and_delays_no_embeddings_request() -> None:
    time = Gated()
    judge = KeyLimit(URL, "k", backend=InProcess(time.clock), sleep=time.sleep, first_alone=False)
    embeddings = KeyLimit(
        URL.replace("chat/completions", "embeddings"),
        "k",
        rpm=60,
        backend=InProcess(time.clock),
        sleep=time.sleep,
    )
    run = Scheduler(1, limits={"judge": judge, "embeddings": embeddings})
    sent: list[tuple[str, float]] = []

    async def call(kind: Any) -> None:
        async with run.row().call(kind, 10):
            sent.append((kind, time.now))

    async def go() -> None:
        judge.observe(429, {"retry-after": "30"})
        waiting = asyncio.ensure_future(call("judge"))
        await time.move_to(0.0)
        await call("embeddings")  # the only slot is free: the judge waits without it
        await time.move_to(30.0)
        await waiting

    asyncio.run(go())
    assert sent == [("embeddings", 0.0), ("judge", 30.0)]


def test_a_request_waiting_for_a_slot_when_its_key_pauses_waits_for_the_pause_again() -> None:
    time = Gated()
    judge = KeyLimit(URL, "k", backend=InProcess(time.clock), sleep=time.sleep, first_alone=False)
    run = Scheduler(1, limits={"judge": judge})
    sent: list[tuple[str, float]] = []
    release = asyncio.Event()

    async def call(name: str, hold: bool = False) -> None:
        async with run.row().call("judge", 10):
            sent.append((name, time.now))
            if hold:
                await release.wait()

    async def go() -> None:
        holder = asyncio.ensure_future(call("holder", hold=True))
        await time.move_to(0.0)
        queued = asyncio.ensure_future(call("queued"))  # past the key, waiting for the slot
        await time.move_to(0.0)
        judge.observe(429, {"retry-after": "5"})  # the holder's neighbour was answered 429
        release.set()
        await time.move_to(0.0)
        await time.move_to(5.0)
        await asyncio.gather(holder, queued)

    asyncio.run(go())
    assert sent == [("holder", 0.0), ("queued", 5.0)]


def test_a_429_heard_in_one_run_pauses_no_other_run() -> None:
    time = FakeTime()
    first, second = limit(time), limit(time)
    request = httpx.Request("POST", URL)
    with listening(first):
        note_limits(httpx.Response(429, headers={"retry-after": "20"}, request=request))
    note_limits(httpx.Response(429, headers={"retry-after": "20"}, request=request))  # no run
    assert asyncio.run(leave(second, time, 1)) == [0.0]
    assert asyncio.run(leave(first, time, 1)) == [pytest.approx(20.0)]


def test_a_429_on_the_packages_client_is_left_to_the_run() -> None:
    time = FakeTime()
    request = httpx.Request("POST", URL)
    answer = httpx.Response(429, request=request)
    with listening(limit(time)):
        note_limits(answer)
    assert answer.headers["x-should-retry"] == "false"  # the openai SDK does not ask again


# --- shared limits ----------------------------------------------------------------------------


def test_limits_on_one_store_on_disk_pace_as_one(tmp_path: Path) -> None:
    time = FakeTime()
    store = tmp_path / "limits.sqlite3"

    def shared() -> KeyLimit:  # as a process of its own builds it
        return limit(time, rpm=600, backend=OnDisk(store, clock=time.clock))

    async def go() -> list[float]:
        one, other = shared(), shared()
        times = []
        for _ in range(30):  # turn about, as two processes' requests come
            times += await leave(one, time, 1) + await leave(other, time, 1)
        return times

    times = asyncio.run(go())
    assert refused(times, 600) == 0
    assert times[-1] >= (60 - 600 / 60) / (600 / 60)  # paced as one key, not one each


def test_a_pause_heard_by_one_sharer_holds_the_other() -> None:
    time = FakeTime()
    backend = InProcess(time.clock)  # one object handed to two runs of one process
    one, other = limit(time, rpm=600, backend=backend), limit(time, rpm=600, backend=backend)
    one.observe(429, {"retry-after": "5"})
    asyncio.run(leave(one, time, 1))  # the next request of the one who heard writes the pause
    time.now = 0.0
    (left,) = asyncio.run(leave(other, time, 1))
    assert 5.0 <= left < 5.2  # after the pause, and one interval after the other's request


def test_a_store_on_disk_is_never_written_through_a_link_or_over_another_file(
    tmp_path: Path,
) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("mine")
    with pytest.raises(UsageError, match="not a rate-limit store"):
        OnDisk(other)
    link = tmp_path / "limits.sqlite3"
    link.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UsageError, match="link"):
        OnDisk(link)
    assert other.read_text() == "mine" and not (tmp_path / "elsewhere").exists()


def test_a_key_goes_by_a_fingerprint_never_by_itself() -> None:
    secret = "sk-live-0123456789"
    assert secret not in fingerprint(secret) and fingerprint(secret) == fingerprint(secret)
    assert fingerprint(secret) != fingerprint(secret + "x")
    judge = PretendJudge()
    judge.client = openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key=secret)  # type: ignore[attr-defined]
    limits = run_limits(None, judge, HashEmbeddings())
    assert limits["judge"].name == f"{URL} {fingerprint(secret)}"
    assert secret not in limits["judge"].name and limits["embeddings"].name.endswith("no key")


def test_limits_named_by_one_key_share_a_store_and_others_keep_their_own(tmp_path: Path) -> None:
    store = tmp_path / "limits.sqlite3"
    judge = PretendJudge()
    judge.client = openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="k")  # type: ignore[attr-defined]
    limits = run_limits(RateLimits(shared=store), judge, HashEmbeddings())
    assert isinstance(limits["judge"].store, type(OnDisk(store).store("x")))
    assert not isinstance(limits["embeddings"].store, type(OnDisk(store).store("x")))


# --- RateLimits, and every way a run is given them ----------------------------------------------


def test_rate_limits_are_checked_and_say_what_was_given() -> None:
    with pytest.raises(ValueError, match="rpm must be a whole number >= 1 or None, got 0"):
        RateLimits(rpm=0)
    for patience in (0, -1, math.inf, True):
        with pytest.raises(ValueError, match="patience"):
            RateLimits(patience=patience)
    with pytest.raises(ValueError, match="shared"):
        RateLimits(shared=3)
    limits = RateLimits(rpm=600, tpm=150_000, patience=30)
    assert str(limits) == "rpm 600, tpm 150,000"
    assert str(RateLimits(embedding_rpm=5)) == "embedding rpm 5"
    assert str(RateLimits()) == "learned"


def test_both_flavours_take_rate_limits_and_check_them() -> None:
    limits = RateLimits(rpm=60)
    metric = AnswerRelevancy(PretendJudge(), HashEmbeddings(), rate_limits=limits)
    assert metric.rate_limits is limits
    assert ResponseRelevancy(rate_limits=limits).rate_limits is limits
    with pytest.raises(ValueError, match="rate_limits must be a RateLimits or None"):
        metric.rate_limits = 60  # type: ignore[assignment]


def test_every_request_of_a_metric_waits_for_its_keys_limit(monkeypatch: Any) -> None:
    waited: list[tuple[float | None, int]] = []
    wait = KeyLimit.wait

    async def counted(self: KeyLimit, tokens: int) -> int:
        waited.append((self.rpm, tokens))
        return await wait(self, tokens)

    monkeypatch.setattr(KeyLimit, "wait", counted)
    metric = AnswerRelevancy(
        PretendJudge(), HashEmbeddings(), probe_prompt="stock", rate_limits=RateLimits(rpm=6000)
    )
    rows = [{"user_input": f"Where is A{i}?", "response": f"A{i} shipped."} for i in range(4)]
    asyncio.run(metric.abatch_score(rows))
    judge = [tokens for rpm, tokens in waited if rpm == 6000]
    assert len(judge) == 4 * 3 and all(tokens > 50 for tokens in judge)  # the prompt's / 4
    assert 1 <= len(waited) - len(judge) <= 8  # embedding requests


def test_command_line_limits_reach_each_ray_actor_s_metric_whole(tmp_path: Path) -> None:
    from ragas_relevancy_ext.cli.ray_score import SettingsMetric

    given = {"rpm": 600, "tpm": 150_000, "embedding_rpm": 3000}
    settings = Settings(embeddings="hash", cache=tmp_path, **given)  # type: ignore[arg-type]
    rates = SettingsMetric(settings)().rate_limits
    assert {name: getattr(rates, name) for name in given} == given  # the key's, not a share
    assert rates.embedding_tpm is None
    assert rates.shared is None  # kept by the run's actors together, not in --cache's file


class RefusedOnce(PretendJudge):
    """Answers 429 (retry after 1 ms) to its first request, then as PretendJudge."""

    async def agenerate(self, prompt: str, response_model: Any) -> Any:
        self.calls += 1
        if self.calls == 1:
            raise rate_limit_error({"retry-after-ms": "1"})
        return await super().agenerate(prompt, response_model)


def test_a_call_answered_429_is_asked_again_after_the_keys_pause() -> None:
    judge = RefusedOnce()
    metric = AnswerRelevancy(judge, HashEmbeddings(), probe_prompt="diverse")
    result = asyncio.run(metric.ascore("Where is A1?", "A1 shipped on Monday."))
    assert result.value == result.value  # scored, not NaN
    assert judge.calls == 3  # the refused call, then it again (PretendJudge counts it too)


class EmbeddingsRefusedOnce(HashEmbeddings):
    """Answers 429 (retry after 1 ms) to its first request, then as HashEmbeddings."""

    def __init__(self) -> None:
        super().__init__(32)
        self.requests = 0

    def _request(self) -> None:
        self.requests += 1
        if self.requests == 1:
            raise rate_limit_error({"retry-after-ms": "1"}, path="/embeddings")

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
        self._request()
        return self.embed_text(text)

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        self._request()
        return [self.embed_text(t) for t in texts]


@pytest.mark.parametrize("shared", [True, False])
def test_an_embeddings_request_answered_429_is_asked_again_not_a_nan_row(shared: bool) -> None:
    embeddings = EmbeddingsRefusedOnce()
    metric = AnswerRelevancy(PretendJudge(), embeddings, batch_embeddings=shared)
    rows = [{"user_input": f"Where is A{i}?", "response": f"A{i} shipped."} for i in range(6)]
    results = asyncio.run(metric.abatch_score(rows))
    assert all(r.value == r.value for r in results)  # every row scored, none NaN
    assert embeddings.requests >= 2  # the refused request, then it again


def test_the_burst_and_the_pace_come_from_the_limit_not_a_count(monkeypatch: Any) -> None:
    """Halving the share of a limit paced at halves the rate: the pace is read, not fixed."""
    time = FakeTime()
    fast = asyncio.run(leave(limit(time, rpm=1200), time, 100))
    monkeypatch.setattr(limits_module, "PACE", limits_module.PACE / 2)
    time = FakeTime()
    slow = asyncio.run(leave(limit(time, rpm=1200), time, 100))
    assert (slow[-1] - slow[0]) > 1.8 * (fast[-1] - fast[0])
