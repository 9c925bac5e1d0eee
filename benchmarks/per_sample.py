"""Per-sample cost, ours against stock in the same run: requests per sample, wall time, CPU.

Two parts:

1. Requests and wall time: samples on the loopback OpenAI-compatible server (a child process)
   at concurrency 16, through the real openai SDK, judge latency as given; stock collections
   ``AnswerRelevancy`` (strictness 3) against ours (diverse) with embedding requests shared
   across samples and without. Once with a distinct question per row, once with every row
   repeating one of 50 questions.
2. CPU per sample with in-process stand-ins (``PretendJudge``, ``HashEmbeddings`` of the width
   shown; no server, no latency) at vector widths 64, 1536 and 3072: each metric's process time
   less a bare loop making the same stand-in calls, i.e. the metric's own overhead.

Usage::

    python benchmarks/per_sample.py                 # 1,000 samples, 2,000 for CPU
    python benchmarks/per_sample.py --quick         # small sizes
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import (  # noqa: E402
    EMBED_MODEL,
    JUDGE_MODEL,
    RemoteServer,
    client,
    cpu_seconds,
    load_rows,
    quiet_ragas,
)
from ragas.embeddings import OpenAIEmbeddings  # noqa: E402
from ragas.llms import llm_factory  # noqa: E402
from ragas.metrics.collections import AnswerRelevancy as StockAnswerRelevancy  # noqa: E402

from ragas_relevancy_ext import AnswerRelevancy  # noqa: E402
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge  # noqa: E402

VARIANTS = ("stock", "ours, shared requests", "ours, 2 requests/sample")
WIDTHS = (64, 1536, 3072)
REPEATED_QUESTIONS = 50


def metric(variant: str, llm: Any, embeddings: Any, concurrency: int) -> Any:
    """Stock collections AnswerRelevancy, or ours (diverse) with or without shared requests."""
    if variant == "stock":
        return StockAnswerRelevancy(llm=llm, embeddings=embeddings, strictness=3)
    return AnswerRelevancy(
        llm=llm,
        embeddings=embeddings,
        strictness=3,
        max_concurrency=concurrency,
        batch_embeddings=variant == VARIANTS[1],
    )


def rows_for(samples: int, repeated: bool) -> list[dict[str, str]]:
    rows = load_rows(samples)
    if repeated:
        base = load_rows(REPEATED_QUESTIONS)
        for i, row in enumerate(rows):
            row["user_input"] = base[i % REPEATED_QUESTIONS]["user_input"]
    return rows


async def server_run(
    server: RemoteServer, variant: str, rows: list[dict[str, str]], concurrency: int
) -> tuple[float, int]:
    """Seconds for ``rows`` and NaN count; stock gets chunks of ``concurrency`` samples (its
    ``abatch_score`` starts every sample it is given at once), ours all rows."""
    api = client(server)
    llm = llm_factory(JUDGE_MODEL, provider="openai", client=api)
    scorer = metric(variant, llm, OpenAIEmbeddings(client=api, model=EMBED_MODEL), concurrency)
    await scorer.abatch_score(rows[:concurrency])  # warm-up: imports, first connections
    server.reset()
    size = concurrency if variant == "stock" else len(rows)
    started = time.perf_counter()
    results = []
    for start in range(0, len(rows), size):
        results.extend(await scorer.abatch_score(rows[start : start + size]))
    return time.perf_counter() - started, sum(1 for r in results if r.value != r.value)


def part_requests(samples: int, concurrency: int, latency: float) -> None:
    print(
        f"\n1. {samples} samples on the loopback server, concurrency {concurrency}, judge "
        f"{latency * 1000:.0f} ms/request, embeddings 0 ms; strictness 3, ours diverse."
    )
    header = (
        f"{'questions':<22} {'metric':<24} {'embed req/sample':>16} {'judge req/sample':>16} "
        f"{'wall s':>7} {'ratio':>6} {'NaN':>4}"
    )
    print(header)
    print("-" * len(header))
    with RemoteServer() as server:
        server.judge_latency(latency)
        for repeated in (False, True):
            rows = rows_for(samples, repeated)
            label = f"{REPEATED_QUESTIONS} repeated" if repeated else "distinct"
            base = None
            for variant in VARIANTS:
                seconds, nan = asyncio.run(server_run(server, variant, rows, concurrency))
                usage = server.usage()
                base = base or seconds
                print(
                    f"{label:<22} {variant:<24} "
                    f"{usage['embeddings']['requests'] / samples:>16.3f} "
                    f"{usage['chat']['requests'] / samples:>16.2f} {seconds:>7.2f} "
                    f"{seconds / base:>6.2f} {nan:>4}"
                )


def stand_in_loop(variant: str, rows: list[dict[str, str]], width: int) -> Any:
    """A bare loop making the stand-in calls the metric makes (prompts built beforehand)."""
    from ragas_relevancy_ext import prompts

    judge, embeddings = PretendJudge(), HashEmbeddings(width)
    if variant == "stock":
        prompt = prompts.AnswerRelevancePrompt()
        texts = [
            prompt.to_string(prompts.AnswerRelevanceInput(response=r["response"])) for r in rows
        ]
    else:
        diverse = prompts.DiverseProbePrompt()
        texts = [
            diverse.to_string(prompts.DiverseProbeInput(response=r["response"], n=3)) for r in rows
        ]

    async def loop() -> None:
        for row, text in zip(rows, texts, strict=True):
            if variant == "stock":
                replies = [
                    await judge.agenerate(text, prompts.AnswerRelevanceOutput) for _ in range(3)
                ]
                questions = [r.question for r in replies]
            else:
                reply = await judge.agenerate(text, prompts.DiverseProbeOutput)
                questions = [p.question for p in reply.probes]
            for question in [row["user_input"], *questions]:
                embeddings.embed_text(question)

    return loop


def metric_loop(variant: str, rows: list[dict[str, str]], width: int) -> Any:
    scorer = metric(variant, PretendJudge(), HashEmbeddings(width), 16)
    if variant == "stock":

        async def one_by_one() -> None:
            for row in rows:
                await scorer.ascore(**row)

        return one_by_one
    return lambda: scorer.abatch_score(rows)


def part_cpu(samples: int, repeats: int) -> None:
    print(
        f"\n2. CPU per sample, {samples} samples with in-process stand-ins (PretendJudge, "
        f"HashEmbeddings), least of {repeats} run(s): overhead = metric less a bare loop of the "
        "same stand-in calls; ratio = ours / stock, same run."
    )
    header = f"{'width':>5}  {'metric':<24} {'overhead ms/sample':>18} {'ratio':>6}"
    print(header)
    print("-" * len(header))
    rows = load_rows(samples)
    for width in WIDTHS:
        base = None
        for variant in VARIANTS:
            asyncio.run(metric_loop(variant, rows[:50], width)())  # warm-up
            metric_s = cpu_seconds(metric_loop(variant, rows, width), repeats)
            bare_s = cpu_seconds(stand_in_loop(variant, rows, width), repeats)
            overhead = (metric_s - bare_s) / samples * 1000
            base = base or overhead
            print(f"{width:>5}  {variant:<24} {overhead:>18.3f} {overhead / base:>6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag, default, text in (
        ("--samples", 1000, "samples on the server, per variant"),
        ("--cpu-samples", 2000, "samples per CPU measurement"),
        ("--concurrency", 16, "requests in flight (stock: samples at once)"),
        ("--latency", 0.05, "judge seconds per request"),
        ("--repeats", 3, "CPU runs per measurement (the least counts)"),
    ):
        parser.add_argument(flag, type=type(default), default=default, help=text)
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--skip-server", action="store_true", help="CPU part only")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    if args.quick:
        args.samples, args.cpu_samples, args.repeats = 200, 300, 1
    started = time.perf_counter()
    with quiet_ragas():
        if not args.skip_server:
            part_requests(args.samples, args.concurrency, args.latency)
        part_cpu(args.cpu_samples, args.repeats)
    print(f"\n(total {time.perf_counter() - started:.0f} s, {os.cpu_count()} CPU(s))")


if __name__ == "__main__":
    main()
