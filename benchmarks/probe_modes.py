"""Judge calls, prompt characters and wall time per sample: stock RAGAS against each probe mode.

Runs the shared fixtures one sample at a time with an offline judge that waits ``--latency``
seconds per call, and prints one table. Usage::

    python benchmarks/probe_modes.py                 # 20 fixtures, strictness 3 5 10, 0.2 s judge
    python benchmarks/probe_modes.py --quick         # 5 fixtures, strictness 3 10, 0.05 s: < 60 s
    python benchmarks/probe_modes.py --samples 35 --strictness 3 --latency 0.05

It says up front how long it should take and prints a line per step on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
print("probe_modes: loading RAGAS (10-30 s on a busy machine)...", file=sys.stderr, flush=True)

from benchsteps import Steps  # noqa: E402  (benchmarks/benchsteps.py, beside this script)
from ragas.metrics.collections import AnswerRelevancy as StockAnswerRelevancy  # noqa: E402

from ragas_relevancy_ext import AnswerRelevancy  # noqa: E402
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "cases.json"
MODES = ("stock RAGAS", "ours stock", "ours sequential", "ours diverse")


def build(mode: str, judge: PretendJudge, strictness: int) -> Any:
    embeddings = HashEmbeddings(64)
    if mode == "stock RAGAS":
        return StockAnswerRelevancy(llm=judge, embeddings=embeddings, strictness=strictness)
    return AnswerRelevancy(
        llm=judge, embeddings=embeddings, strictness=strictness, probe_prompt=mode.split()[-1]
    )


async def measure(mode: str, cases: list[dict], strictness: int, latency: float) -> dict:
    """Score the cases one after another; per-sample means of calls, characters and seconds."""
    calls, chars, seconds = [], [], []
    for case in cases:
        judge = PretendJudge(latency=latency)
        metric = build(mode, judge, strictness)
        started = time.perf_counter()
        await metric.ascore(user_input=case["user_input"], response=case["response"])
        seconds.append(time.perf_counter() - started)
        calls.append(judge.calls)
        chars.append(sum(len(p) for p in judge.prompts))
    return {
        "calls": statistics.mean(calls),
        "chars": statistics.mean(chars),
        "wall": statistics.mean(seconds),
    }


# Judge round trips per sample, one after another: stock RAGAS and the sequential prompt ask N
# times in turn; ours in stock mode asks N times at once; diverse asks once (rarely up to 3).
ROUND_TRIPS = {"stock RAGAS": None, "ours stock": 1, "ours sequential": None, "ours diverse": 1.2}
CPU_PER_SAMPLE = 0.01  # seconds of our own work per sample on these machines, roughly


def estimate(mode: str, strictness: int, samples: int, latency: float) -> float:
    """Rough seconds for one table row: samples x (round trips x latency + CPU)."""
    trips = ROUND_TRIPS[mode] or strictness
    return samples * (trips * latency + CPU_PER_SAMPLE * strictness)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, help="fixtures to run (from the top); 20")
    parser.add_argument("--strictness", type=int, nargs="+", help="probes per sample; 3 5 10")
    parser.add_argument("--latency", type=float, help="judge seconds per call; 0.2")
    parser.add_argument(
        "--quick", action="store_true", help="5 fixtures, strictness 3 and 10, 0.05 s judge"
    )
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # table rows as they come, even into a pipe
    defaults = (5, [3, 10], 0.05) if args.quick else (20, [3, 5, 10], 0.2)
    for name, default in zip(("samples", "strictness", "latency"), defaults, strict=True):
        if getattr(args, name) is None:  # what is given explicitly wins over --quick
            setattr(args, name, default)
    cases = json.loads(FIXTURES.read_text(encoding="utf-8"))[: args.samples]
    steps = Steps(
        "probe_modes",
        [
            (f"strictness {n}, {mode}", estimate(mode, n, len(cases), args.latency))
            for n in args.strictness
            for mode in MODES
        ],
    )

    print(
        f"{len(cases)} fixtures, one sample at a time, judge latency {args.latency:.2f} s/call, "
        "offline judge and hash embeddings"
    )
    header = (
        f"{'N':>3}  {'mode':<16} {'calls/sample':>12} {'prompt chars':>13} "
        f"{'x stock':>8} {'wall s/sample':>14} {'x stock':>8}"
    )
    print(header)
    print("-" * len(header))
    for strictness in args.strictness:
        base: dict | None = None
        for mode in MODES:
            steps.start()
            row = await measure(mode, cases, strictness, args.latency)
            base = base or row
            print(
                f"{strictness:>3}  {mode:<16} {row['calls']:>12.2f} {row['chars']:>13.0f} "
                f"{row['chars'] / base['chars']:>8.2f} {row['wall']:>14.3f} "
                f"{row['wall'] / base['wall']:>8.2f}"
            )
    steps.finish()


if __name__ == "__main__":
    asyncio.run(main())
