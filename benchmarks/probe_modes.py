"""Judge calls, prompt characters and wall time per sample: stock RAGAS against each probe mode.

Runs the shared fixtures one sample at a time with an offline judge that waits ``--latency``
seconds per call, and prints one table. Usage::

    python benchmarks/probe_modes.py                 # 20 fixtures, strictness 3 5 10, 0.2 s judge
    python benchmarks/probe_modes.py --samples 35 --strictness 3 --latency 0.05
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

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


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20, help="fixtures to run (from the top)")
    parser.add_argument("--strictness", type=int, nargs="+", default=[3, 5, 10])
    parser.add_argument("--latency", type=float, default=0.2, help="judge seconds per call")
    args = parser.parse_args()
    cases = json.loads(FIXTURES.read_text(encoding="utf-8"))[: args.samples]

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
            row = await measure(mode, cases, strictness, args.latency)
            base = base or row
            print(
                f"{strictness:>3}  {mode:<16} {row['calls']:>12.2f} {row['chars']:>13.0f} "
                f"{row['chars'] / base['chars']:>8.2f} {row['wall']:>14.3f} "
                f"{row['wall'] / base['wall']:>8.2f}"
            )


if __name__ == "__main__":
    asyncio.run(main())
