"""Stock RAGAS answer relevancy against ours on a local OpenAI-compatible server, as ratios.

Every figure is measured in the same run as its stock counterpart and shown as a ratio to it
(these machines are small and noisy, so absolute seconds travel badly). Four parts:

1. wall time per sample, one sample at a time, under two latency models side by side (a fixed
   time per request, 50 and 200 ms; and 100 ms per request + 10 ms per reply token, about
   gpt-4o-mini) at two strictnesses, with judge requests and prompt and reply tokens per sample
   from the server's usage counts;
2. throughput over many samples, 16 at a time, through ``abatch_score`` and ``ragas.evaluate``;
3. CPU time of our metric per sample with in-process stand-ins (no server, no latency);
4. the targets, each marked met or missed.

The server (``ragas_relevancy_ext.testing.loopback``) runs in a child process, so its CPU does not
share the interpreter lock with the client; both metrics reach it through the real ``openai`` SDK
and ``ragas.llms.llm_factory``. Usage::

    python benchmarks/bench.py              # full sizes (a few minutes)
    python benchmarks/bench.py --quick      # small sizes, under a minute
    python benchmarks/bench.py --samples 10 --throughput-samples 500 --cpu-samples 1000
    python benchmarks/bench.py --quick --profile    # where our metric's CPU time goes
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import json
import logging
import multiprocessing
import os
import pstats
import statistics
import sys
import time
import warnings
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
print("bench: loading RAGAS (10-30 s on a busy machine)...", file=sys.stderr, flush=True)

from benchsteps import Steps  # noqa: E402  (benchmarks/benchsteps.py, beside this script)
from openai import AsyncOpenAI  # noqa: E402
from ragas.embeddings import OpenAIEmbeddings  # noqa: E402
from ragas.llms import llm_factory  # noqa: E402
from ragas.metrics.collections import AnswerRelevancy as StockAnswerRelevancy  # noqa: E402

from ragas_relevancy_ext import AnswerRelevancy  # noqa: E402
from ragas_relevancy_ext.scoring.prompts import (  # noqa: E402
    AnswerRelevanceInput,
    AnswerRelevanceOutput,
    AnswerRelevancePrompt,
    DiverseProbeInput,
    DiverseProbeOutput,
    DiverseProbePrompt,
)
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "cases.json"
JUDGE_MODEL = "gpt-4o-mini"
EMBED_MODEL = "text-embedding-3-small"
VARIANTS = ("stock", "ours diverse", "ours stock-mode")
# the variants timed per sample and in abatch_score (the CPU part keeps VARIANTS)
TIMED_VARIANTS = (*VARIANTS, "ours angles")
PROMPT_OF = {"ours stock-mode": "stock", "ours angles": "angles", "ours diverse": "diverse"}
TARGET_WALL = {3: 0.40, 10: 0.15}
TARGET_TOKENS = 0.45
TARGET_OVERHEAD_MS = 1.0


# -- the server, in a child process ---------------------------------------------------------


def _serve(conn: Any, width: int) -> None:
    """Child process: run a LoopbackServer and answer commands from ``conn`` until "stop"."""
    from ragas_relevancy_ext.testing.loopback import LoopbackServer

    with LoopbackServer(width=width) as server:
        conn.send(server.openai_base_url)
        while True:
            command, *args = conn.recv()
            if command == "stop":
                conn.send(None)
                return
            if command == "reset":
                server.reset()
                conn.send(None)
            elif command == "judge_latency":
                server.endpoint_latency["chat"] = float(args[0])
                server.endpoint_token_latency["chat"] = float(args[1]) if args[1:] else 0.0
                conn.send(None)
            elif command == "usage":
                conn.send({e: server.usage(e) for e in ("chat", "embeddings")})
            else:
                conn.send(ValueError(f"unknown command {command!r}"))


class RemoteServer:
    """A LoopbackServer in a child process, driven over a pipe."""

    def __init__(self, width: int = 64):
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, width), daemon=True)

    def __enter__(self) -> RemoteServer:
        self._process.start()
        if not self._conn.poll(120):
            raise RuntimeError("the loopback server did not start within 120 s")
        self.openai_base_url = self._conn.recv()
        return self

    def __exit__(self, *exc: object) -> None:
        self._call("stop")
        self._process.join(timeout=10)
        if self._process.is_alive():
            self._process.terminate()

    def _call(self, *command: Any) -> Any:
        self._conn.send(command)
        if not self._conn.poll(60):
            raise RuntimeError(f"the loopback server did not answer {command[0]!r}")
        answer = self._conn.recv()
        if isinstance(answer, Exception):
            raise answer
        return answer

    def reset(self) -> None:
        self._call("reset")

    def judge_latency(self, seconds: float, per_token: float = 0.0) -> None:
        """Chat answers wait ``seconds`` plus ``per_token`` per reply token."""
        self._call("judge_latency", seconds, per_token)

    def usage(self) -> dict[str, dict[str, int]]:
        return self._call("usage")


# -- what is measured -----------------------------------------------------------------------


def load_rows(n: int) -> list[dict[str, str]]:
    """``n`` rows cycling through the shared fixtures; questions made unique by a number."""
    cases = json.loads(FIXTURES.read_text(encoding="utf-8"))
    return [
        {
            "user_input": f"{cases[i % len(cases)]['user_input']} (#{i})",
            "response": cases[i % len(cases)]["response"],
        }
        for i in range(n)
    ]


def client(server: RemoteServer) -> AsyncOpenAI:
    """An AsyncOpenAI on the server (the SDK's own connection pool)."""
    return AsyncOpenAI(
        base_url=server.openai_base_url, api_key="bench", max_retries=2, timeout=60.0
    )


def modern_metric(variant: str, api: AsyncOpenAI, strictness: int, concurrency: int = 16) -> Any:
    """Stock collections ``AnswerRelevancy`` or ours, on the same judge and embeddings."""
    llm = llm_factory(JUDGE_MODEL, provider="openai", client=api)
    embeddings = OpenAIEmbeddings(client=api, model=EMBED_MODEL)
    if variant == "stock":
        return StockAnswerRelevancy(llm=llm, embeddings=embeddings, strictness=strictness)
    return AnswerRelevancy(
        llm=llm,
        embeddings=embeddings,
        strictness=strictness,
        probe_prompt=PROMPT_OF[variant],
        max_concurrency=concurrency,
    )


@dataclass
class WallRow:
    latency: str
    strictness: int
    variant: str
    wall: float
    requests: float
    prompt_tokens: float
    reply_tokens: float


async def wall_cell(
    server: RemoteServer, variant: str, rows: list[dict[str, str]], strictness: int
) -> tuple[float, float, float, float]:
    """Mean wall seconds, judge requests, prompt and reply tokens per sample, one at a time."""
    metric = modern_metric(variant, client(server), strictness)
    await metric.ascore(**rows[0])  # warm-up: imports and first connection, not timed
    server.reset()
    seconds = []
    for row in rows:
        started = time.perf_counter()
        await metric.ascore(**row)
        seconds.append(time.perf_counter() - started)
    chat = server.usage()["chat"]
    per_sample = [chat[k] / len(rows) for k in ("requests", "prompt_tokens", "completion_tokens")]
    return statistics.mean(seconds), *per_sample


# (label, seconds per judge request, seconds per reply token)
LATENCY_MODELS = (
    ("50 ms", 0.05, 0.0),
    ("200 ms", 0.2, 0.0),
    ("100ms+10ms/tok", 0.1, 0.01),
)
FIXED_MODELS = tuple(m for m in LATENCY_MODELS if not m[2])
PER_TOKEN_MODEL = next(m for m in LATENCY_MODELS if m[2])
REPLY_TOKENS = 25  # one probe's reply, roughly
WALL_STRICTNESS = (3, 10)
REQUEST_S = 0.02  # a loopback request's own cost (client and server), roughly
CPU_SAMPLE_S = 0.003  # one stand-in sample through a metric, roughly


def round_trips(variant: str, strictness: int) -> float:
    """Judge round trips per sample, one after another: stock asks N times in turn."""
    return strictness if variant == "stock" else 1.2


def wall_estimates(samples: int) -> list[tuple[str, float]]:
    steps = []
    for label, latency, per_token in LATENCY_MODELS:
        for strictness in WALL_STRICTNESS:
            for variant in TIMED_VARIANTS:
                probes = strictness if variant == "ours diverse" else 1  # in one reply
                trip = latency + per_token * REPLY_TOKENS * probes + REQUEST_S
                seconds = (samples + 1) * (round_trips(variant, strictness) * trip + REQUEST_S)
                steps.append((f"wall time, judge {label}, N={strictness}, {variant}", seconds))
    return steps


def throughput_estimates(samples: int, concurrency: int, latency: float) -> list[tuple[str, float]]:
    steps = []
    paths = (("abatch_score", TIMED_VARIANTS), ("ragas.evaluate", ("stock", "ours diverse")))
    for path, variants in paths:
        for variant in variants:
            requests = samples * (3 if variant != "ours diverse" else 1.2) + 2 * samples
            waiting = samples / concurrency * round_trips(variant, 3) * latency
            steps.append((f"throughput, {path}, {variant}", max(waiting, requests * REQUEST_S)))
    return steps


def cpu_estimates(samples: int, repeats: int) -> list[tuple[str, float]]:
    return [
        (f"CPU time, {variant}", (samples * (2 * repeats) + 50) * CPU_SAMPLE_S)
        for variant in VARIANTS
    ]


def run_wall(server: RemoteServer, samples: int, steps: Steps) -> list[WallRow]:
    rows = load_rows(samples + 1)
    results = []
    for label, latency, per_token in LATENCY_MODELS:
        server.judge_latency(latency, per_token)
        for strictness in WALL_STRICTNESS:
            for variant in TIMED_VARIANTS:
                steps.start()
                measured = asyncio.run(wall_cell(server, variant, rows[1:], strictness))
                results.append(WallRow(label, strictness, variant, *measured))
    server.judge_latency(0.0)
    return results


def print_wall(results: list[WallRow], samples: int) -> None:
    print(
        f"\n1. Wall time per sample: {samples} samples one at a time; judge latency as shown "
        "(per request, or per request + per reply token; the n choices of one request are "
        "written side by side), embeddings 0 ms; judge and embeddings are openai SDK clients "
        "(llm_factory, ragas OpenAIEmbeddings) on the loopback server. ratio = ours / stock, "
        "same run."
    )
    header = (
        f"{'judge latency':<14} {'N':>3}  {'metric':<16} {'wall s/sample':>13} {'ratio':>6} "
        f"{'judge req/sample':>16} {'prompt tok/sample':>17} {'ratio':>6} {'reply tok':>9}"
    )
    print(header)
    print("-" * len(header))
    for row in results:
        base = next(
            r
            for r in results
            if (r.latency, r.strictness, r.variant) == (row.latency, row.strictness, "stock")
        )
        print(
            f"{row.latency:<14} {row.strictness:>3}  {row.variant:<16} "
            f"{row.wall:>13.4f} {row.wall / base.wall:>6.3f} {row.requests:>16.2f} "
            f"{row.prompt_tokens:>17.0f} {row.prompt_tokens / base.prompt_tokens:>6.3f} "
            f"{row.reply_tokens:>9.0f}"
        )


@dataclass
class ThroughputRow:
    path: str
    variant: str
    samples: int
    seconds: float
    requests: int
    nan: int


async def batch_run(
    server: RemoteServer, variant: str, rows: list[dict[str, str]], concurrency: int
) -> tuple[float, int]:
    """Seconds for ``abatch_score`` over ``rows`` and the number of NaN scores.

    Stock's ``abatch_score`` starts every sample it is given at once, so it gets successive
    chunks of ``concurrency`` samples; ours gets all rows and ``max_concurrency``.
    """
    metric = modern_metric(variant, client(server), 3, concurrency)
    size = concurrency if variant == "stock" else len(rows)
    await metric.abatch_score(rows[:concurrency])  # warm-up
    server.reset()
    started = time.perf_counter()
    results = []
    for start in range(0, len(rows), size):
        results.extend(await metric.abatch_score(rows[start : start + size]))
    seconds = time.perf_counter() - started
    return seconds, sum(1 for r in results if r.value != r.value)


def timed_evaluate(
    rows: list[dict[str, str]], metric: Any, llm: Any, base_url: str, workers: int
) -> tuple[float, Any]:
    """Seconds for ``ragas.evaluate`` over ``rows`` with LangChain OpenAIEmbeddings on
    ``base_url`` (stock legacy needs ``embed_query``), and the result."""
    from langchain_openai import OpenAIEmbeddings as LangchainOpenAIEmbeddings
    from ragas import EvaluationDataset, evaluate
    from ragas.run_config import RunConfig

    embeddings = LangchainOpenAIEmbeddings(
        model=EMBED_MODEL, base_url=base_url, api_key="bench", check_embedding_ctx_length=False
    )
    started = time.perf_counter()
    result = evaluate(
        EvaluationDataset.from_list(rows),
        metrics=[metric],
        llm=llm,
        embeddings=embeddings,
        run_config=RunConfig(max_workers=workers),
        show_progress=False,
    )
    return time.perf_counter() - started, result


def evaluate_run(
    server: RemoteServer, variant: str, rows: list[dict[str, str]], concurrency: int
) -> tuple[float, int]:
    """Seconds for ``ragas.evaluate`` over ``rows`` (RunConfig(max_workers)) and NaN count."""
    from ragas.metrics import AnswerRelevancy as StockLegacy

    from ragas_relevancy_ext import ResponseRelevancy

    def once(part: list[dict[str, str]]) -> tuple[float, int]:
        llm = llm_factory(JUDGE_MODEL, provider="openai", client=client(server))
        metric = StockLegacy() if variant == "stock" else ResponseRelevancy()
        seconds, result = timed_evaluate(part, metric, llm, server.openai_base_url, concurrency)
        return seconds, int(result.to_pandas()["answer_relevancy"].isna().sum())

    once(rows[:concurrency])  # warm-up
    server.reset()
    return once(rows)


def run_throughput(
    server: RemoteServer, samples: int, concurrency: int, latency: float, steps: Steps
) -> list[ThroughputRow]:
    rows = load_rows(samples)
    server.judge_latency(latency)
    results = []
    for variant in TIMED_VARIANTS:
        steps.start()
        seconds, nan = asyncio.run(batch_run(server, variant, rows, concurrency))
        chat = server.usage()["chat"]["requests"]
        results.append(ThroughputRow("abatch_score", variant, samples, seconds, chat, nan))
    for variant in ("stock", "ours diverse"):
        steps.start()
        seconds, nan = evaluate_run(server, variant, rows, concurrency)
        chat = server.usage()["chat"]["requests"]
        results.append(ThroughputRow("ragas.evaluate", variant, samples, seconds, chat, nan))
    return results


def print_throughput(
    results: list[ThroughputRow], samples: int, concurrency: int, latency: float
) -> None:
    print(
        f"\n2. Throughput: {samples} samples, strictness 3, judge latency {latency * 1000:.0f} ms, "
        f"{concurrency} at a time. abatch_score: stock's starts every sample it is given at "
        f"once, so it gets successive chunks of {concurrency} samples; ours gets all samples "
        f"and max_concurrency={concurrency} (calls in flight). "
        f"ragas.evaluate: RunConfig(max_workers={concurrency}), "
        "stock = legacy ragas.metrics.AnswerRelevancy, ours = ResponseRelevancy, LangChain "
        "OpenAIEmbeddings for both. ratio = ours samples/s / stock samples/s (higher is better)."
    )
    header = (
        f"{'path':<15} {'metric':<16} {'seconds':>8} {'samples/s':>10} {'ratio':>6} "
        f"{'judge req/sample':>16} {'NaN':>4}"
    )
    print(header)
    print("-" * len(header))
    for row in results:
        base = next(r for r in results if r.path == row.path and r.variant == "stock")
        rate, base_rate = row.samples / row.seconds, base.samples / base.seconds
        print(
            f"{row.path:<15} {row.variant:<16} {row.seconds:>8.2f} {rate:>10.1f} "
            f"{rate / base_rate:>6.2f} {row.requests / row.samples:>16.2f} {row.nan:>4}"
        )
    print(
        "note: stock legacy AnswerRelevancy in ragas.evaluate makes ONE probe per row with an "
        "instructor judge (llm_factory ignores n=strictness; RAGAS logs 'LLM returned 1 "
        "generations instead of requested 3'), so its row is 1 judge request, not 3; ours makes "
        "all 3 probes (in one diverse request)."
    )


# -- CPU time of our metric -----------------------------------------------------------------


@dataclass
class CpuRow:
    variant: str
    metric_s: float
    bare_s: float
    samples: int

    @property
    def overhead_ms(self) -> float:
        return (self.metric_s - self.bare_s) / self.samples * 1000


def cpu_seconds(run: Callable[[], Awaitable[Any]], repeats: int) -> float:
    """Least process time of ``repeats`` runs of ``asyncio.run(run())`` (GC settled first)."""
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        started = time.process_time()
        asyncio.run(run())
        best = min(best, time.process_time() - started)
    return best


def stand_in_loop(variant: str, rows: list[dict[str, str]]) -> Callable[[], Awaitable[None]]:
    """A bare loop making the stand-in calls the metric makes, with prompts built beforehand."""
    judge, embeddings = PretendJudge(), HashEmbeddings(64)
    if variant == "ours diverse":
        prompt = DiverseProbePrompt()
        texts = [prompt.to_string(DiverseProbeInput(response=r["response"], n=3)) for r in rows]
    else:
        prompt = AnswerRelevancePrompt()
        texts = [prompt.to_string(AnswerRelevanceInput(response=r["response"])) for r in rows]

    async def loop() -> None:
        for row, text in zip(rows, texts, strict=True):
            if variant == "ours diverse":
                reply = await judge.agenerate(text, DiverseProbeOutput)
                questions = [p.question for p in reply.probes]
            else:
                replies = [await judge.agenerate(text, AnswerRelevanceOutput) for _ in range(3)]
                questions = [r.question for r in replies]
            if variant == "stock":
                await embeddings.aembed_text(row["user_input"])
                await embeddings.aembed_texts(questions)
            else:
                await embeddings.aembed_texts([row["user_input"], *questions])

    return loop


def metric_loop(variant: str, rows: list[dict[str, str]]) -> Callable[[], Awaitable[Any]]:
    """The metric over ``rows``: ours through abatch_score, stock one ascore after another."""
    judge, embeddings = PretendJudge(), HashEmbeddings(64)
    if variant == "stock":
        metric = StockAnswerRelevancy(llm=judge, embeddings=embeddings, strictness=3)

        async def one_by_one() -> None:
            for row in rows:
                await metric.ascore(**row)

        return one_by_one
    ours = AnswerRelevancy(
        llm=judge, embeddings=embeddings, strictness=3, probe_prompt=PROMPT_OF[variant]
    )
    return lambda: ours.abatch_score(rows)


def run_cpu(samples: int, repeats: int, steps: Steps) -> list[CpuRow]:
    rows = load_rows(samples)
    results = []
    for variant in VARIANTS:
        steps.start()
        asyncio.run(metric_loop(variant, rows[:50])())  # warm-up
        metric_s = cpu_seconds(metric_loop(variant, rows), repeats)
        bare_s = cpu_seconds(stand_in_loop(variant, rows), repeats)
        results.append(CpuRow(variant, metric_s, bare_s, samples))
    return results


def print_cpu(results: list[CpuRow], samples: int, repeats: int) -> None:
    print(
        f"\n3. CPU time per sample: {samples} samples, strictness 3, in-process PretendJudge "
        "(0 ms) and HashEmbeddings(64), no server. Method: time.process_time of the metric over "
        "all samples (ours: abatch_score; stock: ascore one by one) minus that of a bare loop "
        "making the same stand-in calls with prompts built beforehand; least of "
        f"{repeats} runs each. overhead = what the metric itself costs (prompt building, "
        "scheduling, checks, cosines, report). ratio = ours / stock overhead."
    )
    header = (
        f"{'metric':<16} {'metric ms/sample':>16} {'stand-ins ms/sample':>19} "
        f"{'overhead ms/sample':>18} {'ratio':>6}"
    )
    print(header)
    print("-" * len(header))
    base = next(r for r in results if r.variant == "stock")
    for row in results:
        print(
            f"{row.variant:<16} {row.metric_s / row.samples * 1000:>16.3f} "
            f"{row.bare_s / row.samples * 1000:>19.3f} {row.overhead_ms:>18.3f} "
            f"{row.overhead_ms / base.overhead_ms:>6.2f}"
        )


def print_profile(samples: int, top: int = 15) -> None:
    """cProfile of our default metric over ``samples`` stand-in samples: top functions."""
    run = metric_loop("ours diverse", load_rows(samples))
    profiler = cProfile.Profile()
    profiler.enable()
    asyncio.run(run())
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    print(f"\nProfile of ours diverse over {samples} samples (by own time):")
    print("\n".join(line for line in out.getvalue().splitlines() if line.strip()))


# -- targets --------------------------------------------------------------------------------


def print_targets(wall: list[WallRow], cpu: list[CpuRow]) -> None:
    def ratio(field: str, latency: str, strictness: int, variant: str = "ours diverse") -> float:
        mine = next(
            getattr(r, field)
            for r in wall
            if (r.latency, r.strictness, r.variant) == (latency, strictness, variant)
        )
        stock = next(
            getattr(r, field)
            for r in wall
            if (r.latency, r.strictness, r.variant) == (latency, strictness, "stock")
        )
        return mine / stock

    print("\n4. Targets (diverse: fixed latency and tokens; angles: per-token latency):")
    for strictness, limit in TARGET_WALL.items():
        worst = max(ratio("wall", label, strictness) for label, _, _ in FIXED_MODELS)
        mark = "met" if worst <= limit else "MISSED"
        print(
            f"  diverse wall ratio at strictness {strictness:>2} <= {limit:.2f}: worst of "
            f"50/200 ms = {worst:.3f} -> {mark}"
        )
    for strictness, limit in TARGET_WALL.items():
        angles = ratio("wall", PER_TOKEN_MODEL[0], strictness, "ours angles")
        diverse = ratio("wall", PER_TOKEN_MODEL[0], strictness)
        mark = "met" if angles <= limit else "MISSED"
        print(
            f"  angles wall ratio at strictness {strictness:>2} <= {limit:.2f} with "
            f"{PER_TOKEN_MODEL[0]}: {angles:.3f} -> {mark} (diverse: {diverse:.3f})"
        )
    tokens = max(ratio("prompt_tokens", FIXED_MODELS[0][0], n) for n in TARGET_WALL)
    mark = "met" if tokens <= TARGET_TOKENS else "MISSED"
    print(
        f"  prompt tokens <= {TARGET_TOKENS:.2f} x stock: worst of N=3/10 = {tokens:.3f} -> {mark}"
    )
    overhead = next(r.overhead_ms for r in cpu if r.variant == "ours diverse")
    mark = "met" if overhead <= TARGET_OVERHEAD_MS else "MISSED (run with --profile)"
    print(f"  metric overhead <= {TARGET_OVERHEAD_MS:.1f} ms/sample: {overhead:.3f} ms -> {mark}")


@contextmanager
def quiet_ragas() -> Iterator[None]:
    """Silence RAGAS's per-row warnings and deprecation notes while measuring."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        previous = logging.getLogger("ragas").level
        logging.getLogger("ragas").setLevel(logging.ERROR)
        try:
            yield
        finally:
            logging.getLogger("ragas").setLevel(previous)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20, help="samples per wall-time cell")
    parser.add_argument("--throughput-samples", type=int, default=1000)
    parser.add_argument("--cpu-samples", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.05, help="judge s/request, part 2")
    parser.add_argument("--repeats", type=int, default=3, help="CPU runs per measurement")
    parser.add_argument("--quick", action="store_true", help="small sizes: under a minute")
    parser.add_argument("--profile", action="store_true", help="cProfile our metric's CPU time")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # tables as they come, even into a pipe
    if args.quick:
        args.samples, args.throughput_samples, args.cpu_samples, args.repeats = 2, 64, 200, 1
    for name in ("samples", "throughput_samples", "cpu_samples", "concurrency", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")

    started = time.perf_counter()
    steps = Steps(
        "bench",
        wall_estimates(args.samples)
        + throughput_estimates(args.throughput_samples, args.concurrency, args.latency)
        + cpu_estimates(args.cpu_samples, args.repeats),
    )
    with quiet_ragas(), RemoteServer() as server:
        wall = run_wall(server, args.samples, steps)
        print_wall(wall, args.samples)
        throughput = run_throughput(
            server, args.throughput_samples, args.concurrency, args.latency, steps
        )
        print_throughput(throughput, args.throughput_samples, args.concurrency, args.latency)
    with quiet_ragas():
        cpu = run_cpu(args.cpu_samples, args.repeats, steps)
    print_cpu(cpu, args.cpu_samples, args.repeats)
    print_targets(wall, cpu)
    if args.profile:
        print_profile(args.cpu_samples)
    steps.finish()
    print(f"\n(total {time.perf_counter() - started:.0f} s, {os.cpu_count()} CPU(s))")


if __name__ == "__main__":
    main()
