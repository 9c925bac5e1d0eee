"""Scoring at a provider's rate limit: stock against ours, fixed concurrency, limits given, learned.

Rows of ``examples/support_qa.jsonl`` (repeated, each question numbered) are scored on the
loopback server (in this process) answering as a provider at ``--rpm`` requests and ``--tpm``
tokens per minute on its chat endpoint: OpenAI's ``x-ratelimit-*`` headers and 429 bodies. Each
variant starts with full buckets on a fresh server. Variants:

- stock: RAGAS's collections ``AnswerRelevancy`` (strictness 3), 16 samples at a time;
- ours, fixed 16 / fixed 64: ``max_concurrency`` 16 or 64 on a client that reports nothing to
  the run (a plain ``AsyncOpenAI``): no headers, so the run knows only the 429s that outlast
  the SDK's own retries (it pauses, takes the limits from the 429's headers and asks again);
- ours, --rpm/--tpm given: ``rate_limits=RateLimits(rpm, tpm)``, 64 in flight;
- ours, learning: 64 in flight on a client built as the package builds its own (its response
  hook hands the headers and 429s to the run);
- ours, learning from 429s: the same against a server that sends no ``x-ratelimit-*`` headers,
  only a 429's ``retry-after`` (the run halves its rate at a 429 and climbs back).

Columns: wall time; rows per minute; "of limit", the share of what the binding limit could have
admitted in the wall time (a full bucket at the start plus a minute's worth per minute) that it
did admit: requests, or tokens as the server counts them (the prompt's plus ``max_tokens``, as
OpenAI counts them; 1.00 is the limit); chat answers 429; rows lost or NaN. The SDK retries a
429 twice (``max_retries=2``) before a row fails.

Usage::

    python benchmarks/rate_limits.py                      # 2,000 rows, 600 RPM, 150,000 TPM
    python benchmarks/rate_limits.py --rows 300 --rpm 120 --tpm 30000   # a few minutes
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

from openai import AsyncOpenAI  # noqa: E402
from ragas.embeddings import OpenAIEmbeddings  # noqa: E402
from ragas.llms import llm_factory  # noqa: E402
from ragas.metrics.collections import AnswerRelevancy as StockAnswerRelevancy  # noqa: E402

from ragas_relevancy_ext import AnswerRelevancy, RateLimits  # noqa: E402
from ragas_relevancy_ext.testing.loopback import LoopbackServer  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "support_qa.jsonl"
VARIANTS = (
    "stock",
    "ours, fixed 16",
    "ours, fixed 64",
    "ours, --rpm/--tpm given",
    "ours, learning",
    "ours, learning from 429s",
)


def load_rows(n: int) -> list[dict[str, str]]:
    """``n`` rows cycling through the example file, each question numbered."""
    lines = [json.loads(line) for line in EXAMPLES.read_text(encoding="utf-8").splitlines()]
    cases = [c for c in lines if c.get("user_input") and c.get("response")]
    return [
        {
            "user_input": f"{cases[i % len(cases)]['user_input']} (#{i})",
            "response": cases[i % len(cases)]["response"],
        }
        for i in range(n)
    ]


def build(variant: str, server: LoopbackServer, rpm: int, tpm: int) -> tuple[Any, int]:
    """The metric of ``variant`` and how many rows each ``abatch_score`` call gets (0: all)."""
    if variant not in VARIANTS:
        raise SystemExit(f"unknown variant {variant!r}; one of {VARIANTS}")
    if variant.startswith("ours, learning"):
        api = server.openai_client(max_retries=2, timeout=120.0)
    else:
        api = AsyncOpenAI(
            base_url=server.openai_base_url, api_key="bench", max_retries=2, timeout=120.0
        )
    llm = llm_factory("loop-judge", provider="openai", client=api)
    embeddings = OpenAIEmbeddings(client=api, model="loop-embed")
    if variant == "stock":
        return StockAnswerRelevancy(llm=llm, embeddings=embeddings, strictness=3), 16
    limits = RateLimits(rpm=rpm, tpm=tpm) if "given" in variant else None
    concurrency = 16 if variant == "ours, fixed 16" else 64
    metric = AnswerRelevancy(
        llm=llm,
        embeddings=embeddings,
        strictness=3,
        max_concurrency=concurrency,
        rate_limits=limits,
    )
    return metric, 0


async def score(metric: Any, rows: list[dict[str, str]], chunk: int) -> tuple[float, int]:
    """Seconds for ``rows`` and how many were lost (an exception) or NaN."""
    started = time.perf_counter()
    size = chunk or len(rows)
    bad = 0
    for start in range(0, len(rows), size):
        part = rows[start : start + size]
        try:
            results = await metric.abatch_score(part)
        except Exception:  # stock raises for the chunk when a call fails for good
            bad += len(part)
            continue
        bad += sum(1 for r in results if r.value != r.value)
    return time.perf_counter() - started, bad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--rpm", type=int, default=600)
    parser.add_argument("--tpm", type=int, default=150_000)
    parser.add_argument("--variants", default=";".join(VARIANTS), help="names, ';' between")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # RAGAS and instructor log every 429 they meet
    rows = load_rows(args.rows)
    print(
        f"{args.rows} rows of {EXAMPLES.name}, loopback chat endpoint at {args.rpm:,} requests "
        f"and {args.tpm:,} tokens per minute (buckets full at the start); strictness 3."
    )
    header = (
        f"{'metric':<26} {'wall s':>8} {'rows/min':>9} {'of limit':>9} {'429s':>6} "
        f"{'429 %':>6} {'lost/NaN':>9}"
    )
    print(header)
    print("-" * len(header))
    for variant in args.variants.split(";"):
        variant = variant.strip()
        headers = variant != "ours, learning from 429s"  # a provider that does not say its limits
        with LoopbackServer(width=64, rpm=args.rpm, tpm=args.tpm, limit_headers=headers) as server:
            metric, chunk = build(variant, server, args.rpm, args.tpm)
            seconds, bad = asyncio.run(score(metric, rows, chunk))
            requests = server.requests("chat")
            limited = server.rate_limited("chat")
            admitted = [r.admission for r in requests if r.admission and r.admission.admitted]
        minutes = seconds / 60
        # the binding limit's share: what it admitted (requests, or tokens as it counts them:
        # prompt plus max_tokens) over the most it could in the wall time (full bucket + refill)
        counted = sum(a.tokens for a in admitted)
        share = max(len(admitted) / args.rpm, counted / args.tpm) / (1 + minutes)
        print(
            f"{variant:<26} {seconds:>8.1f} {args.rows / minutes:>9.0f} {share:>9.2f} "
            f"{limited:>6} {100 * limited / max(1, len(requests)):>5.1f}% {bad:>9}",
            flush=True,
        )


if __name__ == "__main__":
    sys.exit(main())
