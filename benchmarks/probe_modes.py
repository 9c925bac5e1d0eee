"""Judge calls, tokens, distinct probes and wall time per sample: stock RAGAS against each mode.

Runs the shared fixtures one sample at a time with an offline judge (PretendJudge: the same
prompt always gets the same question) under two latency models, side by side: a fixed time per
request (``--latency``), and a time per request plus a time per reply token
(``--request-latency`` + ``--token-latency``; 0.1 s + 0.01 s/token is about gpt-4o-mini), and
prints one table. Usage::

    python benchmarks/probe_modes.py                 # 20 fixtures, strictness 1 3 10
    python benchmarks/probe_modes.py --quick         # 5 fixtures, strictness 3 10, 1/4 latencies
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
from ragas_relevancy_ext.scoring.probe_modes import normalise_question  # noqa: E402
from ragas_relevancy_ext.testing.offline import (  # noqa: E402
    HashEmbeddings,
    PretendJudge,
    count_tokens,  # noqa: E402
)

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "cases.json"
MODES = ("stock RAGAS", "ours stock", "ours sequential", "ours diverse", "ours angles")


class CountingJudge(PretendJudge):
    """PretendJudge that keeps each reply, so questions and reply tokens can be counted."""

    def __init__(self, latency: float = 0.0, token_latency: float = 0.0):
        super().__init__(latency=latency, token_latency=token_latency)
        self.answers: list[Any] = []

    def _reply(self, prompt: str, response_model: Any) -> Any:
        answer = super()._reply(prompt, response_model)
        self.answers.append(answer)
        return answer

    def questions(self) -> list[str]:
        """Every question the judge wrote, in order."""
        items = [p for a in self.answers for p in getattr(a, "probes", [a])]
        return [item.question for item in items]


def build(mode: str, judge: PretendJudge, strictness: int) -> Any:
    embeddings = HashEmbeddings(64)
    if mode == "stock RAGAS":
        return StockAnswerRelevancy(llm=judge, embeddings=embeddings, strictness=strictness)
    return AnswerRelevancy(
        llm=judge, embeddings=embeddings, strictness=strictness, probe_prompt=mode.split()[-1]
    )


async def measure(
    mode: str, cases: list[dict], strictness: int, latency: float, token_latency: float = 0.0
) -> dict:
    """Score the cases one after another; per-sample means of calls, tokens, probes, seconds."""
    rows: dict[str, list[float]] = {k: [] for k in ("calls", "chars", "reply", "distinct", "wall")}
    for case in cases:
        judge = CountingJudge(latency=latency, token_latency=token_latency)
        metric = build(mode, judge, strictness)
        started = time.perf_counter()
        result = await metric.ascore(user_input=case["user_input"], response=case["response"])
        rows["wall"].append(time.perf_counter() - started)
        rows["calls"].append(judge.calls)
        rows["chars"].append(sum(len(p) for p in judge.prompts))
        rows["reply"].append(sum(count_tokens(a.model_dump_json()) for a in judge.answers))
        report = getattr(result, "report", None)  # stock RAGAS keeps every question it gets
        kept = [p.question for p in report.probes] if report else judge.questions()
        rows["distinct"].append(len({normalise_question(q) for q in kept}))
    return {key: statistics.mean(values) for key, values in rows.items()}


# Judge round trips per sample, one after another: stock RAGAS and the sequential prompt ask N
# times in turn; ours in stock and angles modes asks N times at once; diverse asks once (rarely
# up to 3), with N probes in its one reply.
ROUND_TRIPS = {
    "stock RAGAS": None,
    "ours stock": 1,
    "ours sequential": None,
    "ours diverse": 1.2,
    "ours angles": 1,
}
CPU_PER_SAMPLE = 0.01  # seconds of our own work per sample on these machines, roughly
REPLY_TOKENS = 27  # one probe's reply, roughly


def estimate(
    mode: str, strictness: int, samples: int, latency: float, request: float, token: float
) -> float:
    """Rough seconds for one table row: samples x (round trips x both latencies + CPU)."""
    trips = ROUND_TRIPS[mode] or strictness
    reply = REPLY_TOKENS * (strictness if mode == "ours diverse" else 1)
    waits = trips * (latency + request + token * reply)
    return samples * (waits + 2 * CPU_PER_SAMPLE * strictness)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, help="fixtures to run (from the top); 20")
    parser.add_argument("--strictness", type=int, nargs="+", help="probes per sample; 3 5 10")
    parser.add_argument("--latency", type=float, help="fixed model: judge s per call; 0.2")
    parser.add_argument("--request-latency", type=float, help="per-token model: s per call; 0.1")
    parser.add_argument("--token-latency", type=float, help="per-token model: s per token; 0.01")
    parser.add_argument(
        "--quick", action="store_true", help="5 fixtures, strictness 3 and 10, 1/4 latencies"
    )
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # table rows as they come, even into a pipe
    defaults = (5, [3, 10], 0.05, 0.025, 0.0025) if args.quick else (20, [1, 3, 10], 0.2, 0.1, 0.01)
    names = ("samples", "strictness", "latency", "request_latency", "token_latency")
    for name, default in zip(names, defaults, strict=True):
        if getattr(args, name) is None:  # what is given explicitly wins over --quick
            setattr(args, name, default)
    cases = json.loads(FIXTURES.read_text(encoding="utf-8"))[: args.samples]
    steps = Steps(
        "probe_modes",
        [
            (
                f"strictness {n}, {mode}",
                estimate(
                    mode, n, len(cases), args.latency, args.request_latency, args.token_latency
                ),
            )
            for n in args.strictness
            for mode in MODES
        ],
    )

    print(
        f"{len(cases)} fixtures, one sample at a time, offline judge and hash embeddings. "
        f"fixed: {args.latency:.2f} s per judge call; per-token: {args.request_latency:.3f} s "
        f"per call + {args.token_latency:.4f} s per reply token (chars / 4). "
        "x stock = mode / stock RAGAS, same run."
    )
    header = (
        f"{'N':>3}  {'mode':<16} {'calls':>6} {'prompt tok':>10} {'x stock':>7} "
        f"{'reply tok':>9} {'distinct':>8} {'fixed s':>8} {'x stock':>7} "
        f"{'per-token s':>11} {'x stock':>7}"
    )
    print(header)
    print("-" * len(header))
    for strictness in args.strictness:
        base: tuple[dict, dict] | None = None
        for mode in MODES:
            steps.start()
            fixed = await measure(mode, cases, strictness, args.latency)
            timed = await measure(mode, cases, strictness, args.request_latency, args.token_latency)
            base = base or (fixed, timed)
            print(
                f"{strictness:>3}  {mode:<16} {fixed['calls']:>6.2f} "
                f"{fixed['chars'] / 4:>10.0f} "
                f"{fixed['chars'] / base[0]['chars']:>7.2f} {fixed['reply']:>9.0f} "
                f"{fixed['distinct']:>8.2f} {fixed['wall']:>8.3f} "
                f"{fixed['wall'] / base[0]['wall']:>7.2f} {timed['wall']:>11.3f} "
                f"{timed['wall'] / base[1]['wall']:>7.2f}"
            )
    steps.finish()


if __name__ == "__main__":
    asyncio.run(main())
