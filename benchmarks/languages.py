"""Good answers in six languages: stock's prompt (English probes) against ours (same-language).

Scripted, not measured on a real judge: the judge's replies come from
``tests/fixtures/multilingual.json`` (English probes where RAGAS's English prompt is sent, probes
in the response's language where ours is), and the embeddings are the offline character
n-grams, which share almost nothing across languages, as real embeddings share little. The
table shows the size of the effect that probes in the user's language remove, under those
assumptions; a real judge and a multilingual embedding model give other numbers. Usage::

    python benchmarks/languages.py             # good answers
    python benchmarks/languages.py --kind all  # every row
    python benchmarks/languages.py --langid    # language identification on the fixture texts
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

from ragas_relevancy_ext import AnswerRelevancy  # noqa: E402
from ragas_relevancy_ext.scoring.judges import JudgeWrapper  # noqa: E402
from ragas_relevancy_ext.scoring.languages import language_name  # noqa: E402
from ragas_relevancy_ext.testing.offline import NgramEmbeddings, ScriptedChatModel  # noqa: E402

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "multilingual.json"


def reports(rows: list[dict[str, Any]], which: str) -> list[Any]:
    """Score ``rows`` with the scripted replies ``which`` ("stock" or "ours")."""
    if which == "stock":  # one English probe per call, as RAGAS's prompt is sent N times
        replies = {row["response"]: [tuple(p) for p in row["stock"]] for row in rows}
    else:  # one call for all probes, in the response's language
        replies = {row["response"]: [[tuple(p) for p in row["ours"]]] for row in rows}
    metric = AnswerRelevancy(
        llm=JudgeWrapper(ScriptedChatModel(replies=replies)),
        embeddings=NgramEmbeddings(),
        probe_prompt="stock" if which == "stock" else "diverse",
    )
    inputs = [{"user_input": r["user_input"], "response": r["response"]} for r in rows]
    return [result.report for result in metric.batch_score(inputs)]


def flagged(found: list[Any]) -> int:
    """Probes whose language differs from their question's."""
    return sum(p.language not in (None, r.question_language) for r in found for p in r.probes)


def langid(rows: list[dict[str, Any]]) -> None:
    """py3langid on every fixture text: import and first-call seconds, accuracy, misses."""
    from ragas_relevancy_ext.scoring.languages import detect_language

    texts = [(r["language"], t) for r in rows for t in (r["user_input"], r["response"])]
    texts += [(r["language"], q) for r in rows for q, _ in r["ours"]]
    texts += [("en", q) for r in rows for q, _ in r["stock"]]
    started = time.perf_counter()
    import py3langid  # noqa: F401

    imported = time.perf_counter()
    detect_language("Where is my order?")  # loads the model
    loaded = time.perf_counter()
    wrong = [(code, detect_language(text), text) for code, text in texts]
    wrong = [w for w in wrong if w[0] != w[1]]
    done = time.perf_counter()
    print(
        f"py3langid: import {imported - started:.2f} s, first call {loaded - imported:.2f} s, "
        f"{len(texts) - len(wrong)}/{len(texts)} fixture texts right, "
        f"{1000 * (done - loaded) / len(texts):.2f} ms per text"
    )
    for code, got, text in wrong:
        print(f"  expected {code}, got {got}: {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", default="good", help="good, partial, off-topic, evasive or all")
    parser.add_argument("--langid", action="store_true", help="language identification only")
    args = parser.parse_args()
    rows = json.loads(FIXTURE.read_text(encoding="utf-8"))["rows"]
    if args.langid:
        langid(rows)
        return
    rows = [r for r in rows if args.kind in ("all", r["kind"])]
    print(
        f"{args.kind} rows of {FIXTURE.name}: SCRIPTED judge replies, offline character n-gram "
        "embeddings (not a real judge or embedding model)"
    )
    header = (
        f"{'language':<10} {'rows':>4} {'stock (English probes)':>23} "
        f"{'ours (same language)':>21} {'gap':>6} {'flagged stock/ours':>19}"
    )
    print(header)
    print("-" * len(header))
    for code in dict.fromkeys(r["language"] for r in rows):
        mine = [r for r in rows if r["language"] == code]
        stock, ours = reports(mine, "stock"), reports(mine, "ours")
        a = statistics.mean(r.score for r in stock)
        b = statistics.mean(r.score for r in ours)
        probes = sum(len(r.probes) for r in stock)
        print(
            f"{language_name(code):<10} {len(mine):>4} {a:>23.3f} {b:>21.3f} {b - a:>+6.3f} "
            f"{flagged(stock):>9}/{flagged(ours)} of {probes}"
        )


if __name__ == "__main__":
    main()
