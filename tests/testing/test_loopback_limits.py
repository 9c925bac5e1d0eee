"""The loopback server's per-minute rate limits: token buckets on a hand-moved clock, OpenAI's
``x-ratelimit-*`` headers and 429 bodies read by the real openai SDK (its own retry honouring
``retry-after-ms``), and Gemini's ``RESOURCE_EXHAUSTED`` read by google-genai.

No test sleeps: the server's buckets refill from a :class:`HandClock` the test moves, and the
openai SDK's retry wait moves that clock instead of sleeping.
"""

from __future__ import annotations

import asyncio
import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai
import pytest
from google.genai import errors as genai_errors

from ragas_relevancy_ext.testing.limits import Admission, EndpointBuckets, TokenBucket, duration
from ragas_relevancy_ext.testing.loopback import Fault, LoopbackServer, main
from ragas_relevancy_ext.testing.offline import count_tokens

PAGE = "https://platform.openai.com/account/rate-limits"
CHAT = [{"role": "user", "content": "Where is order A17 now?"}]  # 23 characters: 6 tokens


def short_reply(messages: list[dict[str, Any]]) -> str:
    """The chat endpoint's reply here: these tests look at limits, not at probes."""
    return "On its way."


class HandClock:
    """A clock that moves only when told to."""

    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def chat(client: Any, **kwargs: Any) -> Any:
    """One raw chat completion (headers readable), not retried."""
    create = client.with_options(max_retries=0).chat.completions.with_raw_response.create
    return create(model="loop-judge", messages=CHAT, **kwargs)


def embed(client: Any, texts: list[str]) -> Any:
    create = client.with_options(max_retries=0).embeddings.with_raw_response.create
    return create(model="loop-embed", input=texts)


def limit_headers(headers: Any) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.startswith(("x-ratelimit-", "retry-after"))}


# --- the buckets, durations and bodies, without a server -------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (0.12, "120ms"),
        (0.0091, "10ms"),  # rounded up to the millisecond
        (1, "1s"),
        (1.5, "1.5s"),
        (9.816, "9.816s"),
        (60, "1m0s"),
        (360, "6m0s"),
        (90.5, "1m30.5s"),
        (3600, "1h0m0s"),
    ],
)
def test_durations_read_as_openai_writes_them(seconds: float, text: str) -> None:
    assert duration(seconds) == text  # not a timing: formats a number as OpenAI's headers do


def test_a_bucket_refills_continuously_up_to_its_limit() -> None:
    bucket = TokenBucket(60, now=0.0)  # one unit a second
    bucket.take(60, now=0.0)
    assert bucket.remaining(0.0) == 0
    assert bucket.wait(1, 0.0) == pytest.approx(1.0)
    assert bucket.until_full(0.0) == pytest.approx(60.0)
    assert bucket.remaining(10.5) == 10
    assert bucket.remaining(600.0) == 60  # never above the limit
    assert bucket.wait(61, 600.0) == math.inf  # more than it can ever hold


def test_limits_admit_exactly_the_limit_then_refuse_until_refilled() -> None:
    clock = HandClock()
    limits = EndpointBuckets(rpm=3, tpm=None, now=clock())
    admitted = [limits.admit(tokens=10, now=clock()) for _ in range(3)]
    assert all(a.admitted for a in admitted)
    assert [a.headers["x-ratelimit-remaining-requests"] for a in admitted] == ["2", "1", "0"]

    refused = limits.admit(tokens=10, now=clock())
    assert not refused.admitted
    assert (refused.exceeded, refused.limit, refused.used, refused.requested) == (
        "requests",
        3,
        3,
        1,
    )
    assert refused.wait == pytest.approx(20.0)  # one request's refill at 3 a minute
    assert refused.headers["retry-after"] == "20"
    assert refused.headers["retry-after-ms"] == "20000"
    assert refused.headers["x-ratelimit-reset-requests"] == "1m0s"

    clock.advance(19.999)
    assert not limits.admit(tokens=10, now=clock()).admitted  # a refusal takes nothing
    clock.advance(0.001)
    assert limits.admit(tokens=10, now=clock()).admitted


def test_a_refusal_names_the_limit_with_the_longer_wait() -> None:
    limits = EndpointBuckets(rpm=60, tpm=600, now=0.0)  # 1 request and 10 tokens a second
    assert limits.admit(tokens=590, now=0.0).admitted
    refused = limits.admit(tokens=50, now=0.0)  # 10 tokens left: 4 s to 50
    assert (refused.exceeded, refused.used, refused.requested) == ("tokens", 590, 50)
    assert refused.wait == pytest.approx(4.0)
    assert refused.headers["x-ratelimit-remaining-requests"] == "59"
    assert refused.headers["x-ratelimit-remaining-tokens"] == "10"
    assert refused.headers["x-ratelimit-reset-tokens"] == "59s"


def test_the_openai_body_is_the_one_openai_sends() -> None:
    refused = Admission(
        admitted=False, exceeded="tokens", limit=60000, used=59000, requested=1500, wait=1.5
    )
    assert refused.openai_error("gpt-4o-mini") == {
        "error": {
            "message": "Rate limit reached for gpt-4o-mini in organization org-loopback on tokens"
            " per min (TPM): Limit 60000, Used 59000, Requested 1500. Please try again in 1.5s."
            f" Visit {PAGE} to learn more.",
            "type": "tokens",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    too_large = Admission(
        admitted=False, exceeded="tokens", limit=100, requested=150, wait=math.inf
    )
    message = too_large.openai_error("m")["error"]["message"]
    assert message.startswith("Request too large for m in organization org-loopback on tokens per")
    assert "Limit 100, Requested 150. The input or output tokens must be reduced" in message


def test_the_gemini_body_is_resource_exhausted_with_retry_info() -> None:
    refused = Admission(admitted=False, exceeded="requests", limit=5, used=5, requested=1, wait=2.4)
    error = refused.gemini_error("gemini-embedding-001")["error"]
    assert (error["code"], error["status"]) == (429, "RESOURCE_EXHAUSTED")
    assert error["message"].startswith("You exceeded your current quota")
    assert error["message"].endswith(
        "* Quota exceeded for metric: generativelanguage.googleapis.com/embed_content_requests,"
        " limit: 5, model: gemini-embedding-001\nPlease retry in 2.4s."
    )
    kinds = {d["@type"].rpartition(".")[2]: d for d in error["details"]}
    assert kinds["RetryInfo"]["retryDelay"] == "3s"
    violation = kinds["QuotaFailure"]["violations"][0]
    assert violation["quotaDimensions"]["model"] == "gemini-embedding-001"
    assert violation["quotaValue"] == "5"


def test_the_command_line_takes_the_limits(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    shown = capsys.readouterr().out
    for option in ("--rpm", "--tpm", "--embedding-rpm", "--embedding-tpm"):
        assert option in shown


# --- the server, through the real SDKs -------------------------------------------------------


@pytest.mark.slow
def test_chat_admits_the_limit_then_answers_openais_429() -> None:
    clock = HandClock()
    with LoopbackServer(rpm=2, tpm=1000, clock=clock, reply=short_reply) as server:
        client = server.openai_client(is_async=False)
        answers = [chat(client) for _ in range(2)]
        assert [a.headers["x-ratelimit-remaining-requests"] for a in answers] == ["1", "0"]
        assert [a.headers["x-ratelimit-remaining-tokens"] for a in answers] == ["994", "988"]

        with pytest.raises(openai.RateLimitError) as caught:
            chat(client)

        error = caught.value
        assert error.status_code == 429
        assert error.code == "rate_limit_exceeded"
        assert error.type == "requests"
        assert error.body == {
            "message": "Rate limit reached for loop-judge in organization org-loopback on requests"
            " per min (RPM): Limit 2, Used 2, Requested 1. Please try again in 30s."
            f" Visit {PAGE} to learn more.",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
        assert limit_headers(error.response.headers) == {
            "x-ratelimit-limit-requests": "2",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "1m0s",
            "x-ratelimit-limit-tokens": "1000",
            "x-ratelimit-remaining-tokens": "988",
            "x-ratelimit-reset-tokens": "720ms",  # 12 tokens back at 1000 a minute
            "retry-after": "30",
            "retry-after-ms": "30000",
        }
        assert server.rate_limited("chat") == 1
        refused = server.requests("chat")[-1]
        assert (refused.status, refused.fault, refused.replies) == (429, None, ())
        assert refused.admission is not None and refused.admission.exceeded == "requests"

        clock.advance(30)
        again = chat(client)
        assert again.http_response.status_code == 200
        assert again.headers["x-ratelimit-remaining-requests"] == "0"
        assert again.headers["x-ratelimit-reset-requests"] == "1m0s"


@pytest.mark.slow
def test_without_limit_headers_only_a_429_says_when_to_ask_again() -> None:
    # a provider that does not say its limits: no x-ratelimit-* headers, a 429's retry-after
    clock = HandClock()
    with LoopbackServer(rpm=1, clock=clock, reply=short_reply, limit_headers=False) as server:
        client = server.openai_client(is_async=False)
        assert limit_headers(chat(client).headers) == {}
        with pytest.raises(openai.RateLimitError) as caught:
            chat(client)
        assert limit_headers(caught.value.response.headers) == {
            "retry-after": "60",
            "retry-after-ms": "60000",
        }


@pytest.mark.slow
def test_a_burst_of_concurrent_clients_gets_exactly_the_limit_through() -> None:
    with LoopbackServer(rpm=5, reply=short_reply, clock=HandClock()) as server:
        client = server.openai_client(is_async=False)

        def attempt(_: int) -> int:
            try:
                return chat(client).http_response.status_code
            except openai.RateLimitError as exc:
                return exc.status_code

        with ThreadPoolExecutor(max_workers=12) as pool:
            statuses = list(pool.map(attempt, range(12)))

        assert sorted(statuses) == [200] * 5 + [429] * 7
        assert server.rate_limited("chat") == 7
        remaining = [r.admission.headers["x-ratelimit-remaining-requests"] for r in server.log]
        assert remaining == ["4", "3", "2", "1", "0"] + ["0"] * 7  # in arrival order
        assert {r.admission.exceeded for r in server.log[5:]} == {"requests"}


@pytest.mark.slow
def test_tokens_are_counted_as_usage_is_plus_the_completion_budget() -> None:
    clock = HandClock()
    with LoopbackServer(tpm=100, embedding_tpm=50, clock=clock, reply=short_reply) as server:
        client = server.openai_client(is_async=False)
        texts = ["first text to embed", "and a second, somewhat longer one"]
        answer = embed(client, texts)
        tokens = sum(count_tokens(t) for t in texts)
        assert answer.parse().usage.prompt_tokens == tokens == 14
        assert answer.headers["x-ratelimit-remaining-tokens"] == str(50 - tokens)
        assert "x-ratelimit-limit-requests" not in answer.headers  # no RPM set: none sent

        answer = chat(client, max_tokens=20, n=2)  # 6 prompt tokens + 2 x 20 asked for
        assert answer.headers["x-ratelimit-remaining-tokens"] == str(100 - 46)
        assert answer.headers["x-ratelimit-reset-tokens"] == "27.6s"  # 46 of 100 a minute

        with pytest.raises(openai.RateLimitError) as caught:
            chat(client, max_tokens=60)  # 66 asked, 54 held: 12 more in 7.2 s
        assert caught.value.type == "tokens"
        assert "Limit 100, Used 46, Requested 66. Please try again in 7.2s." in str(
            caught.value.body
        )
        assert caught.value.response.headers["retry-after-ms"] == "7200"
        assert caught.value.response.headers["retry-after"] == "8"

        with pytest.raises(openai.RateLimitError) as caught:
            chat(client, max_tokens=200)  # more than a minute holds
        assert "Request too large for loop-judge" in caught.value.body["message"]
        assert "retry-after" not in caught.value.response.headers
        assert server.rate_limited() == 2


@pytest.mark.slow
def test_every_openai_answer_carries_the_headers_and_faults_keep_theirs() -> None:
    faults = [Fault("server_error", at=(1,), endpoint="embeddings")]
    faults.append(Fault("rate_limit", at=(2,), endpoint="embeddings"))
    with LoopbackServer(embedding_rpm=10, faults=faults, clock=HandClock()) as server:
        client = server.openai_client(is_async=False)
        with pytest.raises(openai.InternalServerError) as failed:
            embed(client, ["x"])
        assert failed.value.response.headers["x-ratelimit-remaining-requests"] == "9"
        with pytest.raises(openai.RateLimitError) as limited:
            embed(client, ["x"])
        assert limited.value.response.headers["retry-after"] == "1"  # the fault's, as before
        assert limited.value.response.headers["x-ratelimit-remaining-requests"] == "8"
        assert [r.fault for r in server.requests()] == ["server_error", "rate_limit"]
        assert server.rate_limited() == 1  # a rate_limit fault is a 429 too
        assert embed(client, ["x"]).headers["x-ratelimit-remaining-requests"] == "7"


@pytest.mark.slow
def test_changed_limits_and_reset_start_full_buckets() -> None:
    clock = HandClock()
    with LoopbackServer(rpm=1, clock=clock, reply=short_reply) as server:
        client = server.openai_client(is_async=False)
        chat(client)
        with pytest.raises(openai.RateLimitError):
            chat(client)
        server.rpm = 5
        assert chat(client).headers["x-ratelimit-remaining-requests"] == "4"
        server.reset()
        assert chat(client).headers["x-ratelimit-remaining-requests"] == "4"
        assert server.count() == 1
        server.rpm = None
        assert "x-ratelimit-limit-requests" not in chat(client).headers


def retry_on_the_clock(
    monkeypatch: pytest.MonkeyPatch, client: Any, clock: HandClock
) -> list[float]:
    """Make ``client``'s retry wait move ``clock`` instead of sleeping; returns the waits the
    SDK chose, as it computes them from the 429's headers."""
    waits: list[float] = []
    chosen = client._calculate_retry_timeout

    def wait_on_clock(remaining: int, options: Any, headers: Any = None) -> float:
        waits.append(chosen(remaining, options, headers))
        clock.advance(waits[-1])
        return 0.0

    monkeypatch.setattr(client, "_calculate_retry_timeout", wait_on_clock)
    return waits


@pytest.mark.slow
def test_the_sync_sdk_retries_after_the_time_the_429_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = HandClock()
    with LoopbackServer(rpm=4, clock=clock, reply=short_reply) as server:
        client = server.openai_client(is_async=False, max_retries=2)
        waits = retry_on_the_clock(monkeypatch, client, clock)
        for _ in range(4):
            client.chat.completions.create(model="loop-judge", messages=CHAT)
        clock.advance(5.5)  # of the 15 s one request takes to refill

        answer = client.chat.completions.with_raw_response.create(model="loop-judge", messages=CHAT)

        assert answer.http_response.status_code == 200
        assert answer.retries_taken == 1
        assert waits == [9.5]  # retry-after-ms, not the SDK's own backoff
        assert [r.status for r in server.requests()] == [200] * 4 + [429, 200]
        assert server.rate_limited("chat") == 1


@pytest.mark.slow
def test_the_async_sdk_reads_the_429_and_retries_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = HandClock()
    with LoopbackServer(embedding_rpm=60, embedding_tpm=60, clock=clock) as server:
        client = server.openai_client(is_async=True, max_retries=2)
        waits = retry_on_the_clock(monkeypatch, client, clock)
        texts = ["a" * 200]  # 50 tokens of the 60 a minute

        async def run() -> tuple[Any, Any]:
            first = await client.embeddings.with_raw_response.create(model="e", input=texts)
            no_retry = client.with_options(max_retries=0)
            with pytest.raises(openai.RateLimitError) as caught:
                await no_retry.embeddings.create(model="e", input=texts)
            second = await client.embeddings.with_raw_response.create(model="e", input=texts)
            return first, caught.value, second

        first, error, second = asyncio.run(run())

        assert first.headers["x-ratelimit-remaining-tokens"] == "10"
        assert error.type == "tokens"
        assert error.response.headers["retry-after-ms"] == "40000"  # 40 more tokens at 1 a s
        assert second.retries_taken == 1
        assert waits == [40.0]
        assert second.headers["x-ratelimit-remaining-tokens"] == "0"
        assert [r.status for r in server.requests()] == [200, 429, 429, 200]


@pytest.mark.slow
def test_gemini_answers_resource_exhausted_to_google_genai() -> None:
    clock = HandClock()
    with LoopbackServer(embedding_rpm=1, clock=clock) as server:
        client = server.genai_client()
        model = "gemini-embedding-001"
        client.models.embed_content(model=model, contents=["hello"])

        with pytest.raises(genai_errors.ClientError) as caught:
            client.models.embed_content(model=model, contents=["hello"])

        error = caught.value
        assert (error.code, error.status) == (429, "RESOURCE_EXHAUSTED")
        metric = "generativelanguage.googleapis.com/embed_content_requests"
        assert f"{metric}, limit: 1, model: gemini-embedding-001" in (error.message or "")
        delays = [d.get("retryDelay") for d in error.details["error"]["details"]]
        assert "60s" in delays
        assert not any(h.startswith("x-ratelimit-") for h in error.response.headers)  # OpenAI's
        assert server.rate_limited("gemini") == 1

        clock.advance(60)
        assert len(client.models.embed_content(model=model, contents=["hello"]).embeddings) == 1
