"""What a score cost: every report's usage equals what the loopback server itself counted.

The server bills characters / 4 per text and answers OpenAI-shaped usage; the Gemini
embeddings endpoint, like the real API, answers no token usage at all.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from html import escape as html_escape
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI
from ragas.embeddings import OpenAIEmbeddings
from ragas.llms import llm_factory

from ragas_relevancy_ext import AnswerRelevancy, OneTextPerCall, gemini_embeddings
from ragas_relevancy_ext.scoring.report import format_report
from ragas_relevancy_ext.scoring.usage import NOT_REPORTED, Usage, apportion, split_usage
from ragas_relevancy_ext.store.cache import CachedJudge
from ragas_relevancy_ext.testing.loopback import Fault, LoopbackServer
from ragas_relevancy_ext.testing.offline import HashEmbeddings

SAMPLES = [
    {"user_input": "Where is order A17 now?", "response": "Order A17 left Leeds on 3 March."},
    {"user_input": "How do I reset my password?", "response": "Open Settings, then Security."},
    {"user_input": "Can I return a blender?", "response": "Yes, within 30 days, unused."},
    {"user_input": "Do you ship to Norway?", "response": "We ship to Norway in 5 days."},
    {"user_input": "Where is order A17 now?", "response": "It is in the Oslo depot today."},
]


@pytest.fixture
def server() -> Any:
    with LoopbackServer(width=32) as running:
        yield running


class MemoryStore:
    """A reply store in a dict, as the disk store keeps JSON text."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}

    def get(self, key: str) -> Any:
        return self.data.get(key)

    def set(self, key: str, value: Any) -> None:
        self.data[key] = value


def chat_model(server: LoopbackServer) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model="loop-judge", base_url=server.openai_base_url, api_key="test")


def judge_of(kind: str, server: LoopbackServer) -> Any:
    if kind == "instructor":
        return llm_factory("loop-judge", provider="openai", client=server.openai_client())
    if kind == "langchain":
        return chat_model(server)
    from ragas.llms.base import LangchainLLMWrapper

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return LangchainLLMWrapper(chat_model(server))


def openai_embeddings(server: LoopbackServer) -> OpenAIEmbeddings:
    return OpenAIEmbeddings(client=server.openai_client(), model="loop-embed")


def run(metric: AnswerRelevancy, samples: list[dict[str, str]] = SAMPLES) -> list[Any]:
    return [r.report for r in asyncio.run(metric.abatch_score(samples))]


def run_any(kind: str, server: LoopbackServer, mode: str, embeddings: Any) -> list[Any]:
    """Every sample's report: instructor judges through ``abatch_score``, LangChain and RAGAS
    judges through ``ragas.evaluate`` (the collections metric takes instructor judges only)."""
    judge = judge_of(kind, server)
    if kind == "instructor":
        metric = AnswerRelevancy(llm=judge, embeddings=embeddings, strictness=3, probe_prompt=mode)
        return run(metric)
    from ragas import EvaluationDataset, evaluate

    from ragas_relevancy_ext import ResponseRelevancy, reports_for

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        metric = ResponseRelevancy(
            llm=judge, embeddings=embeddings, strictness=3, probe_prompt=mode
        )
        result = evaluate(
            EvaluationDataset.from_list(SAMPLES), metrics=[metric], show_progress=False
        )
    return reports_for(result)


def total(reports: list[Any]) -> Usage:
    summed = Usage.total(r.usage for r in reports)
    assert summed is not None
    return summed


def assert_judge_matches(usage: Usage, server: LoopbackServer) -> None:
    chat = server.usage("chat")
    assert chat["requests"] > 0
    assert usage.judge_requests == chat["requests"]
    assert usage.judge_prompt_tokens == chat["prompt_tokens"]
    assert usage.judge_completion_tokens == chat["completion_tokens"]


def assert_embeddings_match(usage: Usage, server: LoopbackServer) -> None:
    billed = server.usage("embeddings")
    assert billed["requests"] > 0
    assert usage.embedding_requests == billed["requests"]
    assert usage.embedding_tokens == billed["prompt_tokens"]


# --- the arithmetic ------------------------------------------------------------------------


def test_usages_add_field_by_field_and_not_reported_stays_not_reported() -> None:
    a = Usage(1, 10, 5, 2, 7, 0)
    b = Usage(2, 20, 6, 1, None, 3)
    assert a + b == Usage(3, 30, 11, 3, None, 3)
    assert Usage.total([a, a, a]) == Usage(3, 30, 15, 6, 21, 0)
    assert Usage.total([a, None]) is None
    assert (a + b).judge_tokens == 41
    assert Usage(judge_prompt_tokens=None).judge_tokens is None


@pytest.mark.parametrize(
    ("amount", "weights"),
    [(1, [3, 5, 2]), (10, [1, 1, 1]), (7, [0, 0]), (100, [13, 40, 1, 7]), (0, [4, 2])],
)
def test_a_shared_amount_splits_into_whole_parts_that_add_up(
    amount: int, weights: list[int]
) -> None:
    parts = apportion(amount, weights)
    assert sum(parts) == amount
    assert all(p >= 0 for p in parts)
    whole = sum(weights) or len(weights)
    for part, weight in zip(parts, weights or [1] * len(weights), strict=True):
        exact = amount * (weight if sum(weights) else 1) / whole
        assert abs(part - exact) < 1


def test_a_shared_request_splits_exactly_and_keeps_not_reported() -> None:
    shared = Usage(embedding_requests=1, embedding_tokens=37)
    parts = split_usage(shared, [10, 30, 5])
    assert Usage.total(parts) == shared
    assert [p.embedding_requests for p in parts] == [0, 1, 0]  # the request: the largest share
    unknown = split_usage(Usage(embedding_requests=1, embedding_tokens=None), [1, 1])
    assert [p.embedding_tokens for p in unknown] == [None, None]


def test_cost_needs_every_price_and_every_count() -> None:
    usage = Usage(2, 1_000_000, 500_000, 1, 2_000_000, 0)
    assert usage.cost(0.15, 0.6, 0.02) == pytest.approx(0.15 + 0.3 + 0.04)
    assert usage.cost(0.15, 0.6, None) is None  # embeddings were used, no price given
    assert Usage(1, 10, 10).cost(1.0, 1.0) == pytest.approx(20 / 1_000_000)
    assert Usage(1, None, 10).cost(1.0, 1.0) is None


# --- judge kinds and embeddings paths against the server's own count ------------------------


@pytest.mark.parametrize("kind", ["instructor", "langchain", "ragas"])
@pytest.mark.parametrize("mode", ["diverse", "stock"])
def test_report_tokens_equal_the_servers_count_for_each_judge_kind(
    server: LoopbackServer, kind: str, mode: str
) -> None:
    reports = run_any(kind, server, mode, openai_embeddings(server))

    usage = total(reports)
    assert_judge_matches(usage, server)
    assert_embeddings_match(usage, server)
    assert usage.cached == 0
    assert sum(r.judge_calls for r in reports) == usage.judge_requests
    assert all(r.usage.judge_prompt_tokens > 0 for r in reports)  # every sample paid its share


def test_one_sample_alone_carries_exactly_its_own_requests(server: LoopbackServer) -> None:
    metric = AnswerRelevancy(
        llm=judge_of("instructor", server), embeddings=openai_embeddings(server), strictness=3
    )
    report = asyncio.run(metric.ascore(**SAMPLES[0])).report
    assert_judge_matches(report.usage, server)
    assert_embeddings_match(report.usage, server)
    assert report.usage.embedding_requests == 2  # the question, then the probes


def score_sharing(server: LoopbackServer, embeddings: Any) -> list[Any]:
    """Every sample scored at once on one embedder that sends every sample's probes in one
    request (15 texts) and the 4 distinct questions in another."""
    from ragas_relevancy_ext.run.batching import RunEmbedder
    from ragas_relevancy_ext.run.scheduler import Scheduler
    from ragas_relevancy_ext.scoring.sample import score_sample

    metric = AnswerRelevancy(
        llm=judge_of("instructor", server), embeddings=embeddings, strictness=3
    )
    run = Scheduler(1)  # one call at a time: every sample is in before a slot is left free
    embedder = RunEmbedder(embeddings, run, max_batch=3 * len(SAMPLES))

    async def one(index: int, sample: dict[str, Any], rows: list[Any]) -> Any:
        try:
            return await score_sample(
                sample["user_input"],
                sample["response"],
                llm=metric.llm,
                embeddings=embeddings,
                options=metric.probe_options(),
                limiter=rows[index].calls,
                adapted=metric.adapted,
                embedder=rows[index],
            )
        finally:
            rows[index].close()

    async def score_all() -> list[Any]:
        # every sample under way before any hands in its texts: the requests leave once all
        # five are in
        rows = [embedder.row(run.row()) for _ in SAMPLES]
        async with run:
            return list(await asyncio.gather(*(one(i, s, rows) for i, s in enumerate(SAMPLES))))

    return asyncio.run(score_all())


def test_shared_embedding_requests_add_up_to_the_servers_count(server: LoopbackServer) -> None:
    reports = score_sharing(server, openai_embeddings(server))
    assert sorted(len(r.texts) for r in server.requests("embeddings")) == [4, 15]
    usage = total(reports)
    assert_embeddings_match(usage, server)
    assert sum(r.usage.embedding_requests for r in reports) == 2
    assert all(r.usage.embedding_tokens > 0 for r in reports)  # a part for every sample
    assert reports[4].usage.embedding_tokens < reports[0].usage.embedding_tokens  # A17 reused


def test_a_failed_shared_request_is_counted_and_split(server: LoopbackServer) -> None:
    server.faults = [Fault("server_error", at=(1,), endpoint="embeddings")]
    client = server.openai_client(max_retries=0)
    reports = score_sharing(server, OpenAIEmbeddings(client=client, model="loop-embed"))

    assert all(r.error is None for r in reports)  # each sample's texts sent again, alone
    (failed,) = [r for r in server.requests("embeddings") if r.status == 500]
    alone = {15: len(SAMPLES), 4: 4}[len(failed.body["input"])]  # probes or questions
    usage = total(reports)
    assert_embeddings_match(usage, server)  # the failed request: counted, billed nothing
    assert usage.embedding_requests == 2 + alone  # two shared, then one per sample in the failed


def test_a_sample_that_fails_still_says_what_it_spent(server: LoopbackServer) -> None:
    server.faults = [Fault("nan", fraction=1.0, endpoint="embeddings")]  # after the probes
    metric = AnswerRelevancy(
        llm=judge_of("instructor", server), embeddings=openai_embeddings(server), strictness=3
    )
    (report,) = run(metric, SAMPLES[:1])
    assert report.error is not None and "NaN" in report.error
    assert_judge_matches(report.usage, server)
    assert_embeddings_match(report.usage, server)


def test_one_text_per_call_counts_each_request(server: LoopbackServer) -> None:
    metric = AnswerRelevancy(
        llm=judge_of("instructor", server),
        embeddings=OneTextPerCall(openai_embeddings(server)),
        strictness=3,
    )
    reports = run(metric)
    usage = total(reports)
    assert_embeddings_match(usage, server)
    assert usage.embedding_requests == sum(1 + len(r.probes) for r in reports) - 1  # A17 reused


def test_embeddings_the_command_line_builds_report_the_servers_tokens(
    server: LoopbackServer,
) -> None:
    from ragas_relevancy_ext.cli.providers import build_embeddings

    built = build_embeddings(
        "openai:loop-embed", base_url=server.openai_base_url, environ={"OPENAI_API_KEY": "test"}
    )
    metric = AnswerRelevancy(llm=judge_of("instructor", server), embeddings=built.value)
    usage = total(run(metric))
    assert usage.embedding_tokens is not None and usage.embedding_tokens > 0
    assert_embeddings_match(usage, server)


def test_a_synchronous_client_reports_the_servers_tokens(server: LoopbackServer) -> None:
    embeddings = OpenAIEmbeddings(client=server.openai_client(is_async=False), model="loop-embed")
    metric = AnswerRelevancy(llm=judge_of("instructor", server), embeddings=embeddings)
    usage = total(run(metric))
    assert usage.embedding_tokens is not None and usage.embedding_tokens > 0
    assert_embeddings_match(usage, server)


def test_a_users_own_client_reports_requests_and_no_embedding_tokens(
    server: LoopbackServer,
) -> None:
    client = AsyncOpenAI(base_url=server.openai_base_url, api_key="test")  # not ours
    metric = AnswerRelevancy(
        llm=judge_of("instructor", server),
        embeddings=OpenAIEmbeddings(client=client, model="loop-embed"),
    )
    reports = run(metric)
    usage = total(reports)
    assert_judge_matches(usage, server)
    assert usage.embedding_requests == server.usage("embeddings")["requests"] > 0
    assert usage.embedding_tokens is None  # not reported, never 0
    assert "tokens not reported" in format_report(reports[0])


def test_gemini_embeddings_report_requests_and_no_tokens(server: LoopbackServer) -> None:
    metric = AnswerRelevancy(
        llm=judge_of("instructor", server),
        embeddings=gemini_embeddings(client=server.genai_client()),
        strictness=3,
    )
    reports = run(metric)
    usage = total(reports)
    assert_judge_matches(usage, server)
    assert usage.embedding_requests == server.count("gemini") > 0
    assert usage.embedding_tokens is None  # the Gemini API answers no token usage
    assert "embeddings 4 request(s), tokens not reported" in format_report(reports[1])
    assert "usage" not in server.requests("gemini")[0].body


def test_a_judge_that_reports_nothing_is_not_reported_never_zero() -> None:
    from ragas_relevancy_ext.testing.offline import PretendJudge

    metric = AnswerRelevancy(llm=PretendJudge(), embeddings=HashEmbeddings(), strictness=3)
    report = asyncio.run(metric.ascore(**SAMPLES[0])).report
    assert report.usage.judge_requests == 1
    assert report.usage.judge_prompt_tokens is None
    assert report.usage.embedding_tokens is None
    assert NOT_REPORTED in format_report(report)
    assert report.to_dict()["usage"]["judge_prompt_tokens"] is None


def test_ragas_repair_requests_are_counted_with_their_tokens(server: LoopbackServer) -> None:
    from ragas_relevancy_ext.testing.loopback import pretend_reply

    def reply(messages: list[dict[str, Any]]) -> str:
        text = str(messages[-1].get("content"))
        if "Fix the output string" in text:
            fixed = json.dumps({"question": "Where is order A17?", "noncommittal": 0})
            return json.dumps({"text": fixed})  # RAGAS's repair prompt answers a string
        return (
            "no JSON in this reply"
            if len(server.requests("chat")) == 1
            else pretend_reply(messages)
        )

    server.reply = reply
    reports = run_any("ragas", server, "stock", openai_embeddings(server))

    usage = total(reports)
    assert any("RAGAS repair request" in note for r in reports for note in r.notes)
    assert usage.judge_requests == server.usage("chat")["requests"] == 3 * len(SAMPLES) + 1
    assert_judge_matches(usage, server)


def test_translating_the_prompt_is_counted_once(server: LoopbackServer) -> None:
    metric = AnswerRelevancy(
        llm=judge_of("instructor", server),
        embeddings=openai_embeddings(server),
        strictness=3,
        language="japanese",
    )
    reports = run(metric)
    usage = total(reports)
    assert_judge_matches(usage, server)
    assert usage.judge_requests == len(SAMPLES) + 1  # one diverse call each, one translation
    assert sorted(r.usage.judge_requests for r in reports) == [1, 1, 1, 1, 2]


# --- the cache ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["instructor", "langchain", "ragas"])
def test_a_cached_rerun_costs_no_judge_tokens(server: LoopbackServer, kind: str) -> None:
    store = MemoryStore()

    def metric() -> AnswerRelevancy:
        judge = CachedJudge(judge_of(kind, server), store, "openai:loop-judge")
        return AnswerRelevancy(
            llm=judge, embeddings=openai_embeddings(server), strictness=3, probe_prompt="stock"
        )

    first = total(run(metric()))
    assert_judge_matches(first, server)
    assert first.cached == 0
    chat_before = server.usage("chat")
    server_embeddings = server.usage("embeddings")

    second_reports = run(metric())
    second = total(second_reports)
    assert server.usage("chat") == chat_before  # no judge request reached the server
    assert second.cached == first.judge_requests == 3 * len(SAMPLES)
    assert (second.judge_requests, second.judge_prompt_tokens) == (0, 0)
    assert second.judge_completion_tokens == 0
    assert second.embedding_tokens == (
        server.usage("embeddings")["prompt_tokens"] - server_embeddings["prompt_tokens"]
    )
    assert "cached 3" in format_report(second_reports[0])


# --- inside ragas.evaluate ------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_ragas_evaluate_cost_callbacks_see_every_judge_call_and_agree_with_reports(
    server: LoopbackServer,
) -> None:
    from ragas import EvaluationDataset, evaluate
    from ragas.cost import get_token_usage_for_openai

    from ragas_relevancy_ext import ResponseRelevancy, reports_for, usage_for

    result = evaluate(
        EvaluationDataset.from_list(SAMPLES),
        metrics=[ResponseRelevancy(strictness=3)],
        llm=judge_of("ragas", server),
        embeddings=openai_embeddings(server),
        token_usage_parser=get_token_usage_for_openai,
        show_progress=False,
    )
    reports = reports_for(result)
    usage = total(reports)  # type: ignore[arg-type]
    assert usage_for(result) == usage
    assert_judge_matches(usage, server)
    assert_embeddings_match(usage, server)
    tokens = result.total_tokens()
    assert tokens.input_tokens == usage.judge_prompt_tokens
    assert tokens.output_tokens == usage.judge_completion_tokens
    cost = result.total_cost(cost_per_input_token=2e-6, cost_per_output_token=8e-6)
    assert cost == pytest.approx(usage.cost(2.0, 8.0, 0.0))


# --- the command line ---------------------------------------------------------------------


def write_rows(path: Path, rows: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def cli(*args: Any) -> Any:
    from typer.testing import CliRunner

    from ragas_relevancy_ext.cli import app

    result = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result


def test_score_gives_totals_means_and_cost_in_every_output(
    server: LoopbackServer, tmp_path: Path
) -> None:
    data = write_rows(tmp_path / "rows.jsonl", SAMPLES)
    out, page = tmp_path / "out.jsonl", tmp_path / "page.html"
    prices = ["--price-in", "0.5", "--price-out", "2", "--price-embeddings", "0.1"]
    result = cli("score", data, *server.cli_options(), "--out", out, "--html", page, *prices)

    chat, embed = server.usage("chat"), server.usage("embeddings")
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    saved = Usage.total(Usage.from_dict(r["usage"]) for r in rows)
    assert saved is not None
    assert_judge_matches(saved, server)
    assert_embeddings_match(saved, server)
    totals = (
        f"usage (5 row(s)): judge {chat['requests']} request(s), {chat['prompt_tokens']:,} "
        f"prompt + {chat['completion_tokens']:,} completion tokens | embeddings "
        f"{embed['requests']} request(s), {embed['prompt_tokens']:,} tokens | cached 0"
    )
    assert totals in result.stdout
    mean = f"per row: judge {chat['requests'] / 5:.2f} request(s), {chat['prompt_tokens'] / 5:,.2f}"
    assert mean in result.stdout
    usd = (
        chat["prompt_tokens"] * 0.5 + chat["completion_tokens"] * 2 + embed["prompt_tokens"] * 0.1
    ) / 1e6
    assert f"cost: ${usd:.4g} (" in result.stdout
    html = page.read_text(encoding="utf-8")
    assert "What it cost" in html and html_escape(totals) in html


def test_score_without_prices_or_usage_says_so_never_zero(tmp_path: Path) -> None:
    data = write_rows(tmp_path / "rows.jsonl", SAMPLES[:2])
    result = cli("score", data, "--embeddings", "hash", "--price-in", "1", "--price-out", "1")
    assert "judge 2 request(s), tokens not reported" in result.stdout
    assert "cost: judge not known: tokens not reported" in result.stdout
    assert "$0" not in result.stdout


def test_score_asks_for_prices_it_was_not_given(server: LoopbackServer, tmp_path: Path) -> None:
    data = write_rows(tmp_path / "rows.jsonl", SAMPLES[:2])
    result = cli("score", data, *server.cli_options(), "--price-in", "1")
    assert "judge not known: give --price-in and --price-out" in result.stdout
    assert "embeddings not known: give --price-embeddings" in result.stdout


@pytest.mark.parametrize("strictness", [3, 10])
def test_compare_sets_stock_cost_against_ours_counted_alike(
    server: LoopbackServer, tmp_path: Path, strictness: int
) -> None:
    data = write_rows(tmp_path / "rows.jsonl", SAMPLES[:3])
    result = cli("compare", data, *server.cli_options(), "--strictness", strictness)

    out = result.stdout
    chat = server.usage("chat")
    stock_line = next(line for line in out.splitlines() if line.startswith("stock usage"))
    ours_line = next(line for line in out.splitlines() if line.startswith("ours (diverse) usage"))
    stock_requests = int(stock_line.split("judge ")[1].split(" request")[0])
    ours_requests = int(ours_line.split("judge ")[1].split(" request")[0])
    assert stock_requests == 3 * strictness  # one request per probe
    assert ours_requests == 3  # one per row
    assert stock_requests + ours_requests == chat["requests"]  # the replay sends nothing

    def prompt(line: str) -> int:
        return int(line.split("request(s), ")[1].split(" prompt")[0].replace(",", ""))

    assert prompt(stock_line) + prompt(ours_line) == chat["prompt_tokens"]
    total_row = next(line for line in out.splitlines() if line.split()[:2] == ["all", "diverse"])
    assert f"{prompt(ours_line) / prompt(stock_line):.2f}" in total_row.split()
    assert prompt(ours_line) < prompt(stock_line)


# --- stock, counted the same way ------------------------------------------------------------


def test_stock_is_counted_as_ours_and_sends_exactly_what_it_sends_unwrapped(
    server: LoopbackServer,
) -> None:
    from ragas.metrics.collections import AnswerRelevancy as Stock

    from ragas_relevancy_ext import compare_with_stock

    sample = SAMPLES[1]
    result = asyncio.run(
        compare_with_stock(
            judge_of("instructor", server),
            openai_embeddings(server),
            sample["user_input"],
            sample["response"],
            cost_mode="diverse",
        )
    )
    chat = server.requests("chat")
    stock_chat, ours_chat = chat[:3], chat[3:]  # the replay in between sends nothing
    stock_embed = server.requests("embeddings")[:2]
    usage = result.stock_usage
    assert usage is not None and result.cost_report is not None
    assert usage.judge_requests == len(stock_chat) == 3
    assert usage.judge_prompt_tokens == sum(r.prompt_tokens for r in stock_chat)
    assert usage.judge_completion_tokens == sum(r.completion_tokens for r in stock_chat)
    assert usage.embedding_requests == 2
    assert usage.embedding_tokens == sum(r.prompt_tokens for r in stock_embed)
    ours = result.cost_report.usage
    assert ours.judge_requests == len(ours_chat) == 1
    assert ours.judge_prompt_tokens == ours_chat[0].prompt_tokens

    with LoopbackServer(width=32) as plain:
        stock = Stock(
            llm=judge_of("instructor", plain), embeddings=openai_embeddings(plain), strictness=3
        )
        asyncio.run(stock.ascore(user_input=sample["user_input"], response=sample["response"]))
        unwrapped = [(r.endpoint, r.body) for r in plain.log]
    assert [(r.endpoint, r.body) for r in [*stock_chat, *stock_embed]] == sorted(
        unwrapped, key=lambda item: item[0]
    )


# --- each place a provider puts its usage -------------------------------------------------


def test_judge_usage_is_read_where_each_provider_puts_it() -> None:
    from types import SimpleNamespace

    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, LLMResult

    from ragas_relevancy_ext.scoring.usage import (
        judge_request_usage,
        judge_usage_from_result,
        judge_usage_of_reply,
    )

    def counted(prompt: int | None, completion: int | None) -> Usage:
        return Usage(
            judge_requests=1, judge_prompt_tokens=prompt, judge_completion_tokens=completion
        )

    openai_style = SimpleNamespace(prompt_tokens=11, completion_tokens=3)
    assert judge_request_usage(openai_style) == counted(11, 3)
    assert judge_request_usage({"input_tokens": 12, "output_tokens": 4}) == counted(12, 4)
    assert judge_request_usage(None) == counted(None, None)
    reply = SimpleNamespace(_raw_response=SimpleNamespace(usage=openai_style))
    assert judge_usage_of_reply(reply) == counted(11, 3)
    assert judge_usage_of_reply(SimpleNamespace()) == counted(None, None)

    def generations(*metas: dict[str, int] | None) -> list[list[ChatGeneration]]:
        return [[ChatGeneration(message=AIMessage("q", usage_metadata=m)) for m in metas]]

    meta = {"input_tokens": 20, "output_tokens": 5, "total_tokens": 25}
    token_usage = {"prompt_tokens": 7, "completion_tokens": 2}
    both = LLMResult(generations=generations(meta), llm_output={"token_usage": token_usage})
    assert judge_usage_from_result(both) == counted(7, 2)  # llm_output first, as RAGAS reads it
    two = LLMResult(generations=generations(meta, meta), llm_output={})
    assert judge_usage_from_result(two) == counted(40, 10)  # every generation's metadata
    assert judge_usage_from_result(LLMResult(generations=generations(None))) == counted(None, None)


@pytest.mark.parametrize(
    ("answers", "tokens"),
    [
        ([{"prompt_tokens": 5, "total_tokens": 9}], 5),
        ([{"total_tokens": 9}], 9),  # a provider that sends only the total
        ([{"prompt_tokens": 5}, {"prompt_tokens": 6}], 11),  # one call split in two answers
        ([{"prompt_tokens": 5}, None], None),  # one answer without usage: not reported
        ([], None),  # a client that reads no usage
    ],
)
def test_embedding_tokens_are_read_from_each_answers_usage(answers: list[Any], tokens: Any) -> None:
    from ragas_relevancy_ext.scoring import embeddings as module
    from ragas_relevancy_ext.scoring.usage import metering

    async def call() -> list[list[float]]:
        module._SDK_USAGE.get().extend(answers)  # as the HTTP client's hook notes them
        return [[1.0, 0.0]]

    async def measure() -> Usage:
        with metering(None) as meter:
            await module.metered(object(), call())
        return meter.usage

    usage = asyncio.run(measure())
    assert usage.embedding_tokens == tokens
    assert usage.embedding_requests == max(1, len(answers))
