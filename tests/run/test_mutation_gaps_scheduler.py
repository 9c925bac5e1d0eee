"""Scheduler's edges that mutation testing found unchecked, driven through its public methods
and module-level helpers with a stand-in clock and sleep (``tests/common.py``'s
``FakeTime``): how a provider's headers are read, how rate limits are kept to and learned, and
how slots are handed out, held back and refused. Nothing here reads the wall clock: each test
counts the waits asked for, the requests sent or the tasks left."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import httpx
import pytest
from common import calls_held_open, scheduler, send

from ragas_relevancy_ext.run import scheduler as scheduling
from ragas_relevancy_ext.run.scheduler import RateLimits, RowNotStarted, Scheduler
from ragas_relevancy_ext.scoring.usage import Usage, record


def test_rate_limits_share_divides_each_given_limit() -> None:
    """Each part's share is the limit divided by the parts, at least one; None stays None."""
    assert RateLimits(rpm=10, tpm=7).share(3) == RateLimits(rpm=3, tpm=2)
    assert RateLimits(embedding_rpm=2).share(5) == RateLimits(embedding_rpm=1)


@pytest.mark.parametrize("value", [0, -1, True, 1.5, "3"])
def test_rate_limits_refuse_what_is_not_a_whole_number_of_one_or_more(value: object) -> None:
    """A limit of 0, a bool, a float or text is refused at construction."""
    with pytest.raises(ValueError, match="rpm"):
        RateLimits(rpm=value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, None),
        ("", None),
        ("2", 2.0),
        ("0.5", 0.5),
        ("1.5s", 1.5),
        ("20ms", 0.02),
        ("6m0s", 360.0),
        ("2h", 7200.0),
        ("1m30s", 90.0),
        ("soon", None),
    ],
)
def test_durations_as_providers_write_them(text: str | None, expected: float | None) -> None:
    """``x-ratelimit-reset-*``/``retry-after`` durations: plain seconds or ``6m0s``-style."""
    parsed = scheduling._seconds(text)  # header text read as a duration, no clock
    assert parsed == (None if expected is None else pytest.approx(expected))


def test_a_header_that_is_missing_or_not_a_number_is_none() -> None:
    headers = {"a": "3", "b": "many"}
    assert scheduling._number(headers, "a") == 3.0
    assert scheduling._number(headers, "b") is None
    assert scheduling._number(headers, "c") is None
    assert scheduling._number({"a": None}, "a") is None  # type: ignore[dict-item]


def test_rate_limits_name_every_limit_given() -> None:
    limits = RateLimits(rpm=1, tpm=2_000, embedding_rpm=3, embedding_tpm=4_000)
    assert str(limits) == "rpm 1, tpm 2,000, embedding rpm 3, embedding tpm 4,000"
    assert limits.share(2) == RateLimits(rpm=1, tpm=1_000, embedding_rpm=1, embedding_tpm=2_000)


@pytest.mark.parametrize("limit", [0, -2, True, 2.0, "4"])
def test_a_scheduler_needs_a_whole_number_of_slots(limit: object) -> None:
    with pytest.raises(ValueError, match="limit must be a whole number >= 1"):
        Scheduler(limit)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("headers", "pause"),
    [
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),  # the finer one wins
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "1m"}, 60.0),
        ({}, 1.0),  # not said: one second
        ({"retry-after": "0"}, 1.0),
    ],
)
def test_a_429_pauses_its_kind_for_what_the_answer_says(
    headers: dict[str, str], pause: float
) -> None:
    run, time = scheduler(RateLimits(rpm=60_000))
    sent: list[float] = []
    run.observe("judge", 429, headers)
    asyncio.run(send(run, "judge", 1, sent, time))
    assert sent == [pytest.approx(pause)]


def test_a_429_error_carries_its_headers_on_itself_or_on_what_caused_it() -> None:
    """``rate_limited`` reads ``retry-after`` off the error's response, its cause's or its
    context's (an SDK wraps the httpx error)."""
    response = httpx.Response(429, headers={"retry-after": "4"})

    class Wrapped(Exception):
        pass

    for attach in ("cause", "context", "self"):
        run, time = scheduler(RateLimits(embedding_rpm=60_000))
        error = Wrapped("refused")
        request = httpx.Request("GET", "https://api.example.com")
        inner = httpx.HTTPStatusError("429", request=request, response=response)
        if attach == "cause":
            error.__cause__ = inner
        elif attach == "context":
            error.__context__ = inner
        else:
            error = inner  # type: ignore[assignment]
        run.row(0).rate_limited("embeddings", error)
        sent: list[float] = []
        asyncio.run(send(run, "embeddings", 1, sent, time))
        assert sent == [pytest.approx(4.0)], attach
        assert run.rate("judge") == (None, None)  # the judge is not paused or slowed


def test_remaining_tokens_lower_the_bucket() -> None:
    run, time = scheduler(RateLimits(tpm=1_000))
    run.observe("judge", 200, {"x-ratelimit-remaining-tokens": "100"})
    sent: list[float] = []
    asyncio.run(send(run, "judge", 100, sent, time))
    assert sent == [pytest.approx(0.3)]  # 100 held, 105 needed: 5 more come in 0.3 s


def test_remaining_requests_lower_the_bucket() -> None:
    run, time = scheduler(RateLimits(rpm=600))
    run.observe("judge", 200, {"x-ratelimit-remaining-requests": "0.5"})
    sent: list[float] = []
    asyncio.run(send(run, "judge", 1, sent, time))
    assert sent == [pytest.approx(0.05)]  # half a request short: 60 / 600 / 2 s


def test_embedding_usage_corrects_the_embeddings_bucket_and_scale() -> None:
    run, time = scheduler(RateLimits(embedding_tpm=1_000))
    sent: list[float] = []

    async def go() -> None:
        async with run.row(0).call("embeddings", 100):  # estimated 100, the provider said 200
            record(Usage(embedding_requests=1, embedding_tokens=200))
        # counted 800 (twice its estimate); 800 held (900 less the 100 more used), 840 needed
        await send(run, "embeddings", 400, sent, time)

    asyncio.run(go())
    assert sent == [pytest.approx(2.4)]


def test_a_judge_answer_without_a_reply_count_leaves_the_bucket_as_charged() -> None:
    """A reply count not reported: what the request used is not known, so the bucket keeps
    the 500 it took (the prompt tokens, as estimated, leave the scale at one)."""
    run, time = scheduler(RateLimits(tpm=1_000))
    sent: list[float] = []

    async def go() -> None:
        async with run.row(0).call("judge", 500):
            record(Usage(judge_requests=1, judge_prompt_tokens=500, judge_completion_tokens=None))
        await send(run, "judge", 600, sent, time)  # 500 held, 630 needed: 130 in 7.8 s

    asyncio.run(go())
    assert sent == [pytest.approx(7.8)]


def test_listeners_hear_the_frontier_move_on_and_a_slot_left_free() -> None:
    """``on_frontier`` hears each later row given a slot (not an earlier one, nor a call of no
    row); ``on_free`` hears each slot left free with no call waiting for it."""

    async def go() -> tuple[list[float], int, list[tuple[int, bool, str]]]:
        run = Scheduler(2)
        moved: list[float] = []
        freed = 0

        def free() -> None:
            nonlocal freed
            freed += 1

        run.on_frontier.append(moved.append)
        run.on_free.append(free)
        seen = [(run.in_flight, run.saturated, repr(run))]
        async with run.row(3):
            async with run.row(1):
                seen.append((run.in_flight, run.saturated, repr(run)))
            async with run.slot():
                pass
        async with run.row(5), run.ahead():
            pass
        return moved, freed, seen

    moved, freed, seen = asyncio.run(go())
    assert moved == [3, 5]
    assert freed == 5
    assert seen == [
        (0, False, "Scheduler(limit=2, in_flight=0, tasks=0)"),
        (2, True, "Scheduler(limit=2, in_flight=2, tasks=0)"),
    ]


def test_a_cautious_scheduler_holds_its_other_slots_until_a_call_succeeds() -> None:
    async def go() -> list[tuple[int, bool]]:
        run = Scheduler(3, cautious=True)
        seen = [(run.in_flight, run.saturated)]
        async with run.row(0):
            seen.append((run.in_flight, run.saturated))
        seen.append((run.in_flight, run.saturated))  # freed: all three
        async with run.row(1), run.row(2):
            seen.append((run.in_flight, run.saturated))
        return seen

    assert asyncio.run(go()) == [(0, False), (1, True), (0, False), (2, False)]


def test_once_stopping_a_row_that_sent_nothing_is_refused_and_others_go() -> None:
    async def go() -> list[str]:
        run = Scheduler(2)
        row = run.row(0)
        async with row:
            pass
        run.stop_new_rows()
        got = []
        for call in (run.row(1), row, run.slot(), run.ahead()):
            try:
                async with call:
                    got.append("went")
            except RowNotStarted as exc:
                got.append(str(exc))
        run.cancel()
        try:
            async with row:
                got.append("went")
        except RowNotStarted as exc:
            got.append(str(exc))
        return got

    assert asyncio.run(go()) == [
        "the run is stopping",
        "went",
        "went",
        "went",
        "the run is stopping",
    ]


def test_closing_waits_for_a_task_that_starts_another_as_it_ends() -> None:
    """A task cancelled by the close that starts none (the run is closed) still ends, and the
    close returns only once no task is left."""

    async def go() -> tuple[int, int]:
        run = Scheduler(1)
        ended = 0

        async def task() -> None:
            nonlocal ended
            try:
                await asyncio.Event().wait()
            finally:
                ended += 1

        for _ in range(3):
            run.start(task())
        await asyncio.sleep(0)
        started = run.tasks
        await run.aclose()
        return started, run.tasks + ended * 10

    assert asyncio.run(go()) == (3, 30)


def test_a_limit_of_one_is_allowed() -> None:
    assert RateLimits(rpm=1, tpm=1, embedding_rpm=1, embedding_tpm=1).rpm == 1
    assert Scheduler(1).limit == 1


def test_a_request_over_the_whole_bucket_goes_when_it_is_full_and_empties_it() -> None:
    """A request estimated at more than tokens per minute is counted as a full bucket: it goes
    when the bucket is full, not never."""
    run, time = scheduler(RateLimits(tpm=1_000))
    sent: list[float] = []

    async def go() -> None:
        await send(run, "judge", 1_500, sent, time)
        await send(run, "judge", 1_500, sent, time)  # the bucket refills in a minute

    asyncio.run(go())
    assert sent == [0.0, pytest.approx(60.0)]


def test_the_margin_never_asks_for_more_than_the_bucket_holds() -> None:
    """990 tokens of a 1,000 bucket: the margin is the 10 left, not 5% (which never comes)."""
    run, time = scheduler(RateLimits(tpm=1_000))
    sent: list[float] = []

    async def go() -> None:
        await send(run, "judge", 990, sent, time)
        await send(run, "judge", 990, sent, time)  # 10 held: 990 more come in 59.4 s

    asyncio.run(go())
    assert sent == [0.0, pytest.approx(59.4)]


def test_a_second_429_with_a_shorter_retry_after_does_not_shorten_the_pause() -> None:
    run, time = scheduler(RateLimits(rpm=60_000))
    sent: list[float] = []
    run.observe("judge", 429, {"retry-after": "5"})
    run.observe("judge", 429, {"retry-after": "1"})
    asyncio.run(send(run, "judge", 1, sent, time))
    assert sent == [pytest.approx(5.0)]


def test_learned_limits_start_as_a_full_bucket_and_are_not_refilled_by_later_headers() -> None:
    run, time = scheduler()
    sent: list[float] = []
    limits = {"x-ratelimit-limit-requests": "60"}

    async def go() -> None:
        run.observe("judge", 200, limits)
        for _ in range(60):  # a full bucket: all at once
            await send(run, "judge", 1, sent, time)
        run.observe("judge", 200, limits)  # the same limit said again: still empty
        await send(run, "judge", 1, sent, time)

    asyncio.run(go())
    assert sent == [0.0] * 60 + [pytest.approx(1.0)]


def test_a_learned_limit_of_one_request_a_minute_is_kept() -> None:
    run, time = scheduler()
    sent: list[float] = []
    run.observe("embeddings", 200, {"x-ratelimit-limit-requests": "1"})
    assert run.rate("embeddings") == (1.0, None)

    async def go() -> None:
        for _ in range(2):
            await send(run, "embeddings", 1, sent, time)

    asyncio.run(go())
    assert sent == [0.0, pytest.approx(60.0)]


def test_given_embedding_limits_are_kept_whatever_the_headers_say() -> None:
    run, _ = scheduler(RateLimits(embedding_rpm=100))
    run.observe("embeddings", 200, {"x-ratelimit-limit-requests": "600"})
    run.observe("embeddings", 429, {})
    run.observe("embeddings", 200, {})
    assert run.rate("embeddings") == (100.0, None)


@pytest.mark.parametrize(("at", "rate"), [(60.0, 2.5), (61.0, 1.5)])
def test_without_headers_a_429_counts_the_requests_of_the_last_minute(
    at: float, rate: float
) -> None:
    """Two requests at 0 s, three at ``at``: those a full minute old or less count."""
    run, time = scheduler()
    sent: list[float] = []

    async def go() -> None:
        for _ in range(2):
            await send(run, "judge", 1, sent, time)
        time.now = at
        for _ in range(3):
            await send(run, "judge", 1, sent, time)
        run.observe("judge", 429, {"retry-after": "60"})  # one a minute invited: fewer

    asyncio.run(go())
    assert run.rate("judge")[0] == rate


def test_without_headers_the_rate_is_halved_to_no_less_than_one_a_minute() -> None:
    run, time = scheduler()
    sent: list[float] = []
    asyncio.run(send(run, "judge", 1, sent, time))
    run.observe("judge", 429, {"retry-after": "600"})
    assert run.rate("judge")[0] == 1.0


def test_a_429_once_its_pause_is_over_halves_the_rate_again() -> None:
    """A 429 that comes when the pause ends (not during it) met the halved rate."""
    run, time = scheduler()
    sent: list[float] = []
    asyncio.run(send(run, "judge", 1, sent, time))
    run.observe("judge", 429, {"retry-after": "1"})
    assert run.rate("judge")[0] == 30.0
    time.now = 1.0
    run.observe("judge", 429, {"retry-after": "1"})
    assert run.rate("judge")[0] == 15.0


def test_a_halved_rate_starts_from_an_empty_bucket() -> None:
    run, time = scheduler()
    sent: list[float] = []

    async def go() -> None:
        await send(run, "judge", 1, sent, time)
        run.observe("judge", 429, {"retry-after": "1"})  # 30 a minute
        time.now = 120.0  # the bucket refills: 30 held
        run.observe("judge", 429, {"retry-after": "1"})  # 15 a minute, none held
        await send(run, "judge", 1, sent, time)

    asyncio.run(go())
    assert sent == [0.0, pytest.approx(124.0)]  # a request's worth at 15 a minute: 4 s


def test_an_error_answer_does_not_raise_a_halved_rate() -> None:
    run, time = scheduler()
    asyncio.run(send(run, "judge", 1, [], time))
    run.observe("judge", 429, {"retry-after": "1"})
    run.observe("judge", 400, {})
    run.observe("judge", 500, {})
    assert run.rate("judge")[0] == 30.0
    run.observe("judge", 399, {})
    assert run.rate("judge")[0] == 31.0


def test_the_errors_own_response_is_read_before_its_causes() -> None:
    def failure(seconds: str) -> httpx.HTTPStatusError:
        request = httpx.Request("GET", "https://api.example.com")
        response = httpx.Response(429, headers={"retry-after": seconds}, request=request)
        return httpx.HTTPStatusError("429", request=request, response=response)

    run, time = scheduler(RateLimits(rpm=60_000))
    error = failure("4")
    error.__cause__ = failure("9")
    run.rate_limited("judge", error)
    sent: list[float] = []
    asyncio.run(send(run, "judge", 1, sent, time))
    assert sent == [pytest.approx(4.0)]


def test_prompt_tokens_scale_the_text_not_the_reply_tokens_asked_for() -> None:
    """The scale is the provider's prompt tokens over the text's estimate (its tokens less the
    reply tokens asked for); a lower one later moves it a tenth of the way down."""
    run, time = scheduler(RateLimits(tpm=100_000))
    sent: list[float] = []

    async def go() -> None:
        async with run.row(0).call("judge", 600, budget=500):  # text of 100: 300 counted
            record(Usage(judge_requests=1, judge_prompt_tokens=300, judge_completion_tokens=500))
        async with run.row(0).call("judge", 100):  # counted 300; 200 reported: 3 -> 2.9
            record(Usage(judge_requests=1, judge_prompt_tokens=200, judge_completion_tokens=0))
        time.now = 60.0  # a full bucket again
        await send(run, "judge", 32_000, sent, time)  # counted 92,800: goes at once
        await send(run, "judge", 2_500, sent, time)  # counted 7,250: 7,200 held, 7,612.5 needed

    asyncio.run(go())
    assert sent == [60.0, pytest.approx(60.2475)]
    assert run.rate("judge") == (None, 100_000.0)


def test_a_reply_shorter_than_asked_is_counted_as_asked() -> None:
    run, time = scheduler(RateLimits(tpm=1_000))
    sent: list[float] = []

    async def go() -> None:
        async with run.row(0).call("judge", 600, budget=500):  # 100 + 500 taken
            record(Usage(judge_requests=1, judge_prompt_tokens=100, judge_completion_tokens=50))
        await send(run, "judge", 380, sent, time)  # 400 held: 380 + 19 fits

    asyncio.run(go())
    assert sent == [0.0]


def test_a_text_of_no_tokens_beyond_the_reply_asked_for_scales_nothing() -> None:
    run, time = scheduler(RateLimits(tpm=10_000))
    sent: list[float] = []

    async def go() -> None:
        async with run.row(0).call("judge", 500, budget=500):
            record(Usage(judge_requests=1, judge_prompt_tokens=40, judge_completion_tokens=500))
        async with run.row(0).call("judge", 1):  # a one-token text reported as 3
            record(Usage(judge_requests=1, judge_prompt_tokens=3, judge_completion_tokens=0))
        time.now = 60.0
        await send(run, "judge", 3_000, sent, time)  # counted 9,000: goes
        await send(run, "judge", 400, sent, time)  # counted 1,200: 1,000 held, 1,260 needed

    asyncio.run(go())
    assert sent == [60.0, pytest.approx(61.56)]


def test_with_tokens_per_minute_the_first_request_goes_alone_even_of_the_first_row() -> None:
    run, _ = scheduler(RateLimits(tpm=100_000))
    early, started = asyncio.run(calls_held_open(run, [0, 0, 0]))
    assert early == [0]
    assert started == [0, 0, 0]


def test_before_the_first_answer_other_rows_send_up_to_first_requests_in_all() -> None:
    run, _ = scheduler()
    early, started = asyncio.run(calls_held_open(run, range(12)))
    assert len(early) == scheduling.FIRST_REQUESTS == 8
    assert len(started) == 12


def test_a_refused_task_is_closed_not_left_unawaited() -> None:
    async def go() -> str:
        run = Scheduler(1)
        await run.aclose()
        coro = asyncio.sleep(0)
        with pytest.raises(RuntimeError) as refused:
            run.start(coro)
        assert str(refused.value) == "the run is closed: it starts no more tasks"
        return inspect.getcoroutinestate(coro)

    assert asyncio.run(go()) == inspect.CORO_CLOSED


async def _outcome(call: Any, outcomes: list[str]) -> None:
    """Enter ``call`` and note how it ended: "went", the refusal's text, or "cancelled"."""
    try:
        async with call:
            outcomes.append("went")
    except RowNotStarted as exc:
        outcomes.append(str(exc))
    except asyncio.CancelledError:
        outcomes.append("cancelled")


def test_cancelling_refuses_every_waiting_call_sent_or_not() -> None:
    async def go() -> list[str]:
        run = Scheduler(1)
        sent_row = run.row(1)
        async with sent_row:
            pass
        holder = run.slot()
        await holder.__aenter__()
        outcomes: list[str] = []

        waiting = [
            asyncio.ensure_future(_outcome(c, outcomes)) for c in (sent_row, run.row(2), run.slot())
        ]
        await asyncio.sleep(0)
        run.cancel()
        await asyncio.gather(*waiting)
        return outcomes

    assert asyncio.run(go()) == ["the run is stopping"] * 3


def test_a_stop_skips_a_cancelled_waiter_and_still_refuses_those_behind_it() -> None:
    async def go() -> list[str]:
        run = Scheduler(1)
        holder = run.slot()
        await holder.__aenter__()
        outcomes: list[str] = []

        first = asyncio.ensure_future(_outcome(run.row(0), outcomes))
        later = [asyncio.ensure_future(_outcome(run.row(p), outcomes)) for p in (1, 2, 3)]
        await asyncio.sleep(0)
        first.cancel()
        await asyncio.sleep(0)
        run.stop_new_rows()
        await holder.__aexit__(None, None, None)
        await asyncio.gather(first, *later, return_exceptions=True)
        return outcomes

    assert asyncio.run(go()) == ["cancelled"] + ["the run is stopping"] * 3


def test_the_frontier_moves_only_to_a_later_row() -> None:
    async def go() -> list[float]:
        run = Scheduler(2)
        moved: list[float] = []
        run.on_frontier.append(moved.append)
        for priority in (0.5, 3, 1, 3, 5):
            async with run.row(priority):
                pass
        return moved

    assert asyncio.run(go()) == [0.5, 3, 5]


def test_a_429_error_without_a_response_pauses_its_kind_one_second() -> None:
    run, time = scheduler(RateLimits(rpm=60_000))
    run.rate_limited("judge", RuntimeError("rate limited"))
    sent: list[float] = []
    asyncio.run(send(run, "judge", 1, sent, time))
    assert sent == [pytest.approx(1.0)]


def test_a_request_all_reply_tokens_is_counted_as_its_reply_alone() -> None:
    """500 tokens, all 500 of them the reply asked for, take 500 from the bucket (no text
    token added)."""
    run, time = scheduler(RateLimits(tpm=1_000))
    sent: list[float] = []

    async def go() -> None:
        async with run.row(0).call("judge", 600, budget=500):  # 500 counted once answered
            pass
        async with run.row(0).call("judge", 500, budget=500):  # 500 held, 525 needed
            sent.append(time.now)

    asyncio.run(go())
    assert sent == [pytest.approx(1.5)]


def test_a_request_in_flight_holds_its_text_and_the_reply_tokens_it_asks_for() -> None:
    """Until answered, 600 tokens with 500 of them the reply asked for hold 600 of the
    bucket, not the reply counted twice."""
    run, time = scheduler(RateLimits(tpm=10_000))
    sent: list[float] = []

    async def go() -> None:
        async with run.row(0).call("judge", 5_000):  # answered, usage not reported: 5,000 left
            pass
        held = asyncio.Event()

        async def in_flight() -> None:
            async with run.row(0).call("judge", 600, budget=500):
                await held.wait()

        task = asyncio.ensure_future(in_flight())
        await asyncio.sleep(0)  # it holds 600: 4,400 free
        await send(run, "judge", 4_500, sent, time)  # 4,725 needed: 325 come in 1.95 s
        held.set()
        await task

    asyncio.run(go())
    assert sent == [pytest.approx(1.95)]


def test_before_the_first_answer_only_the_row_that_sent_first_goes_unlimited() -> None:
    """Row 0 sent first: row 1's ten calls are held to FIRST_REQUESTS in all."""
    run, _ = scheduler()
    early, _ = asyncio.run(calls_held_open(run, [0], [1] * 10))
    assert len(early) == 8


def test_the_row_that_sent_first_is_the_first_to_ask_even_while_paused() -> None:
    """During a pause, rows 0 and 1 wait to send; row 0 asked first, so its later calls all
    go before an answer, not row 1's."""
    run, _ = scheduler()
    run.observe("judge", 429, {"retry-after": "5"})
    early, _ = asyncio.run(calls_held_open(run, [0, 1], [0] * 10))
    assert len(early) == 12


def test_tokens_learned_during_a_request_are_corrected_by_what_it_used() -> None:
    """The first request went with no token limit known (it took none); the provider's
    headers said 1,000 a minute while it ran, and it used 100: 900 are left."""
    run, time = scheduler()
    sent: list[float] = []

    async def go() -> None:
        async with run.row(0).call("judge", 100):
            run.observe("judge", 200, {"x-ratelimit-limit-tokens": "1000"})
            record(Usage(judge_requests=1, judge_prompt_tokens=100, judge_completion_tokens=0))
        await send(run, "judge", 858, sent, time)  # 900.9 needed: 0.9 come in 0.054 s

    asyncio.run(go())
    assert sent == [pytest.approx(0.054)]


def test_tokens_come_back_at_the_rate_per_minute() -> None:
    run, time = scheduler(RateLimits(tpm=1_000))
    sent: list[float] = []

    async def go() -> None:
        await send(run, "judge", 1_000, sent, time)  # the bucket emptied
        time.now = 30.0  # 500 back
        await send(run, "judge", 600, sent, time)  # 630 needed: 130 more in 7.8 s

    asyncio.run(go())
    assert sent == [0.0, pytest.approx(37.8)]


def test_before_the_first_answer_the_buckets_do_not_refill() -> None:
    """The provider may begin counting at its first answer: a request waiting on an empty
    bucket goes a minute (at one a minute) after that answer, however long it waited."""
    run, time = scheduler(RateLimits(rpm=1))
    sent: list[float] = []
    answer = asyncio.Event()

    answered: list[float] = []

    async def first() -> None:
        async with run.row(0).call("judge", 1):
            await answer.wait()
            answered.append(time.now)  # the answer, as the run takes it

    async def go() -> None:
        held = asyncio.ensure_future(first())
        waiting = asyncio.ensure_future(send(run, "judge", 1, sent, time))
        for _ in range(10):  # the second request's waits move the clock on
            await asyncio.sleep(0)
        answer.set()
        await asyncio.gather(held, waiting)

    asyncio.run(go())
    answered_at = answered[0]
    assert answered_at > 60.0
    assert sent == [pytest.approx(answered_at + 60.0)]


def test_a_row_handed_a_slot_as_the_run_stops_is_refused_and_gives_the_slot_on() -> None:
    """The slot left by a failed call goes to a waiting row that has sent nothing; the run
    stops before that row resumes: it is refused, and the slot goes to the next in line."""

    async def go() -> tuple[list[str], int]:
        run = Scheduler(1)
        outcomes: list[str] = []
        holder = run.slot()
        await holder.__aenter__()

        waiting = [asyncio.ensure_future(_outcome(c, outcomes)) for c in (run.row(1), run.slot())]
        await asyncio.sleep(0)
        await holder.__aexit__(RuntimeError, None, None)  # the slot goes to row 1...
        run.stop_new_rows()  # ...which has not resumed yet
        await asyncio.gather(*waiting)
        return outcomes, run.in_flight

    assert asyncio.run(go()) == (["the run is stopping", "went"], 0)


def test_a_slot_given_back_unused_does_not_end_a_cautious_start() -> None:
    """A cautious run's one slot, left by a failed call, goes to a waiting call that is
    cancelled before it runs: the slot is given back, and still one call goes at a time."""

    async def go() -> int:
        run = Scheduler(3, cautious=True)
        holder = run.row(0)
        await holder.__aenter__()
        waiter = asyncio.ensure_future(run.row(1).__aenter__())
        await asyncio.sleep(0)
        await holder.__aexit__(RuntimeError, None, None)  # the slot goes to the waiter...
        waiter.cancel()  # ...cancelled before it runs
        await asyncio.gather(waiter, return_exceptions=True)
        entered = 0
        release = asyncio.Event()

        async def call(row: int) -> None:
            nonlocal entered
            async with run.row(row):
                entered += 1
                await release.wait()

        calls = [asyncio.ensure_future(call(row)) for row in (2, 3, 4)]
        for _ in range(5):
            await asyncio.sleep(0)
        going = entered
        release.set()
        await asyncio.gather(*calls)
        return going

    assert asyncio.run(go()) == 1
