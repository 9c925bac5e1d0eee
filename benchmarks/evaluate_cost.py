"""Stock legacy answer relevancy against ours inside ``ragas.evaluate``, on both judge kinds.

Stock legacy ``ragas.metrics.AnswerRelevancy`` asks an instructor judge (``llm_factory``) for one
probe per row whatever ``strictness`` says, and a LangChain chat model for ``n=strictness``
generations in ONE request (one prompt, N replies written side by side). Ours makes
``strictness`` probes with either kind: ``diverse`` in one request, ``angles`` in N concurrent
one-probe requests. This prints, per row, what each costs on the loopback server with a judge
that takes 100 ms per request + 10 ms per reply token (about gpt-4o-mini), rows one at a time
(``RunConfig(max_workers=1)``), so it shows where ours costs more than stock. Usage::

    python benchmarks/evaluate_cost.py                 # 10 rows, strictness 1 3 10
    python benchmarks/evaluate_cost.py --rows 20 --strictness 3 --token-latency 0.02
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import warnings
from pathlib import Path
from typing import Any

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

from bench import JUDGE_MODEL, timed_evaluate  # noqa: E402  (benchmarks/bench.py)
from langchain_openai import ChatOpenAI  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from ragas.llms import llm_factory  # noqa: E402
from ragas.metrics import AnswerRelevancy as StockLegacy  # noqa: E402

from ragas_relevancy_ext import ResponseRelevancy, reports_for  # noqa: E402
from ragas_relevancy_ext.scoring.probe_modes import normalise_question  # noqa: E402
from ragas_relevancy_ext.testing.loopback import LoopbackServer  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "cases.json"
KINDS = ("instructor", "langchain")
VARIANTS = ("stock legacy", "ours diverse", "ours angles")


def judge(kind: str, server: LoopbackServer) -> Any:
    """An instructor judge (llm_factory) or a LangChain chat model on the server."""
    if kind == "instructor":
        client = AsyncOpenAI(base_url=server.openai_base_url, api_key="bench")
        return llm_factory(JUDGE_MODEL, provider="openai", client=client)
    return ChatOpenAI(model=JUDGE_MODEL, base_url=server.openai_base_url, api_key="bench")


def stock_probes(server: LoopbackServer) -> tuple[float, float]:
    """Probes and distinct probes per stock request (stock keeps none; one request per row)."""
    chat = server.requests("chat")
    questions = [[json.loads(reply)["question"] for reply in r.replies] for r in chat]
    made = statistics.mean(len(q) for q in questions)
    distinct = statistics.mean(len({normalise_question(x) for x in q}) for q in questions)
    return made, distinct


def run(
    server: LoopbackServer,
    llm: Any,
    variant: str,
    rows: list[dict[str, str]],
    strictness: int,
) -> dict[str, float]:
    """Evaluate ``rows`` one at a time; per-row means from the server's counts and reports."""

    def once(part: list[dict[str, str]]) -> tuple[float, Any]:
        metric = (
            StockLegacy(strictness=strictness)
            if variant == "stock legacy"
            else ResponseRelevancy(strictness=strictness, probe_prompt=variant.split()[-1])
        )
        return timed_evaluate(part, metric, llm, server.openai_base_url, workers=1)

    once(rows[:1])  # warm-up: imports and first connection, not counted
    server.reset()
    seconds, result = once(rows)
    usage = server.usage("chat")
    if variant == "stock legacy":
        probes, distinct = stock_probes(server)
    else:
        reports = reports_for(result)
        probes = statistics.mean(len(r.probes) for r in reports)
        distinct = statistics.mean(r.distinct_probes for r in reports)
    counted = {k: usage[k] / len(rows) for k in ("requests", "prompt_tokens", "completion_tokens")}
    return {"wall": seconds / len(rows), "probes": probes, "distinct": distinct, **counted}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10, help="rows per cell (fixtures, cycled)")
    parser.add_argument("--strictness", type=int, nargs="+", default=[1, 3, 10])
    parser.add_argument("--request-latency", type=float, default=0.1, help="judge s/request")
    parser.add_argument("--token-latency", type=float, default=0.01, help="judge s/reply token")
    args = parser.parse_args()
    cases = json.loads(FIXTURES.read_text(encoding="utf-8"))
    picked = [cases[i % len(cases)] for i in range(args.rows)]
    rows = [{"user_input": c["user_input"], "response": c["response"]} for c in picked]

    print(
        f"ragas.evaluate, {len(rows)} rows one at a time; judge {args.request_latency:.2f} s per "
        f"request + {args.token_latency:.3f} s per reply token (the n choices of one request "
        "written side by side), embeddings 0 ms; tokens are characters / 4. x stock = ours / "
        "stock legacy with the same judge kind and strictness, same run."
    )
    header = (
        f"{'judge':<10} {'N':>3}  {'metric':<13} {'req/row':>7} {'prompt tok':>10} "
        f"{'x stock':>7} {'reply tok':>9} {'x stock':>7} {'probes':>6} {'distinct':>8} "
        f"{'wall s/row':>10} {'x stock':>7}"
    )
    print(header)
    print("-" * len(header))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.getLogger("ragas").setLevel(logging.ERROR)
        server = LoopbackServer(
            width=64,
            endpoint_latency={"chat": args.request_latency},
            endpoint_token_latency={"chat": args.token_latency},
        )
        with server:
            for kind in KINDS:
                llm = judge(kind, server)  # one client per kind, warmed up by the first cell
                for strictness in args.strictness:
                    base: dict[str, float] = {}
                    for variant in VARIANTS:
                        row = run(server, llm, variant, rows, strictness)
                        base = base or row
                        ratio = {k: row[k] / base[k] for k in row}
                        print(
                            f"{kind:<10} {strictness:>3}  {variant:<13} {row['requests']:>7.2f} "
                            f"{row['prompt_tokens']:>10.0f} {ratio['prompt_tokens']:>7.2f} "
                            f"{row['completion_tokens']:>9.0f} {ratio['completion_tokens']:>7.2f} "
                            f"{row['probes']:>6.2f} {row['distinct']:>8.2f} {row['wall']:>10.3f} "
                            f"{ratio['wall']:>7.2f}",
                            flush=True,
                        )


if __name__ == "__main__":
    main()
