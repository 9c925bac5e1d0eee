"""No row is lost: many samples with a share of faulted requests, through three paths, tallied.

The loopback server (``ragas_relevancy_ext.testing.loopback``) fails ``--rate`` of the requests on
each endpoint, split evenly over the fault kinds that endpoint can have. Every sample goes through
``AnswerRelevancy.abatch_score``, through ``ragas.evaluate`` with ``ResponseRelevancy``
(``raise_exceptions=False``) and through the ``ragas-relevancy score`` command line, which is
killed part-way (SIGKILL) and started again on the same ``--out`` and ``--cache``. Each sample
is traced to the faults its requests met (by its question and response text in the server's
log), and the table shows, per fault, how many rows were scored and how many ended NaN, with
the NaN reasons. Usage::

    python benchmarks/faults.py                    # 1000 samples, 5% faults
    python benchmarks/faults.py --samples 200 --rate 0.2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

from openai import AsyncOpenAI  # noqa: E402
from ragas.embeddings import OpenAIEmbeddings  # noqa: E402
from ragas.llms import llm_factory  # noqa: E402

from ragas_relevancy_ext import AnswerRelevancy  # noqa: E402
from ragas_relevancy_ext.testing.faults import (  # noqa: E402
    OPENAI_FAULT_KINDS,
    RECOVERABLE,
    faults_by_row,
    outcome_problem,
    request_row,
    tag_response,
)
from ragas_relevancy_ext.testing.loopback import Fault, LoopbackServer  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "cases.json"
KINDS = OPENAI_FAULT_KINDS
MAX_RETRIES = 3
TIMEOUT = 1.0  # seconds before a hung request is abandoned and retried
RETRY_AFTER = 0.05
HANG_SECONDS = 3.0
CONCURRENCY = 16


def fault_mix(rate: float) -> list[Fault]:
    """``rate`` of each endpoint's requests faulted, split evenly over its kinds."""
    return [
        Fault(kind, fraction=rate / len(kinds), endpoint=endpoint)  # type: ignore[arg-type]
        for endpoint, kinds in KINDS.items()
        for kind in kinds
    ]


def make_rows(n: int) -> list[dict[str, str]]:
    """``n`` samples from the shared fixtures, each question and response made unique."""
    cases = json.loads(FIXTURES.read_text(encoding="utf-8"))
    return [
        {
            "user_input": f"{cases[i % len(cases)]['user_input']} (#{i})",
            "response": tag_response(i, cases[i % len(cases)]["response"]),
        }
        for i in range(n)
    ]


def new_server(rate: float, seed: int) -> LoopbackServer:
    return LoopbackServer(
        width=64,
        faults=fault_mix(rate),
        seed=seed,
        retry_after=RETRY_AFTER,
        hang_seconds=HANG_SECONDS,
    )


def openai_client(server: LoopbackServer) -> AsyncOpenAI:
    return AsyncOpenAI(
        base_url=server.openai_base_url, api_key="test", max_retries=MAX_RETRIES, timeout=TIMEOUT
    )


@dataclass
class Outcome:
    """One row's end: its score (NaN when not scored) and the reason when not scored."""

    score: float
    error: str | None = None


@dataclass
class PathResult:
    name: str
    outcomes: list[Outcome | None]
    faults: list[set[str]]
    seconds: float
    notes: list[str] = field(default_factory=list)


# -- the three paths ------------------------------------------------------------------------


def via_abatch_score(rows: list[dict[str, str]], rate: float, seed: int) -> PathResult:
    with new_server(rate, seed) as server:

        async def run() -> list[Any]:
            api = openai_client(server)
            metric = AnswerRelevancy(
                llm=llm_factory("loop-judge", provider="openai", client=api),
                embeddings=OpenAIEmbeddings(client=api, model="loop-embed"),
                max_concurrency=CONCURRENCY,
            )
            return await metric.abatch_score(rows)

        started = time.perf_counter()
        results = asyncio.run(run())
        seconds = time.perf_counter() - started
        outcomes = [Outcome(r.value, r.report.error) for r in results]
        return PathResult("abatch_score", outcomes, faults_by_row(server.log, rows), seconds)


def via_evaluate(rows: list[dict[str, str]], rate: float, seed: int) -> PathResult:
    from ragas import EvaluationDataset, evaluate
    from ragas.run_config import RunConfig

    from ragas_relevancy_ext import ResponseRelevancy, reports_for

    with new_server(rate, seed) as server:
        api = openai_client(server)
        started = time.perf_counter()
        result = evaluate(
            EvaluationDataset.from_list(rows),
            metrics=[ResponseRelevancy()],
            llm=llm_factory("loop-judge", provider="openai", client=api),
            embeddings=OpenAIEmbeddings(client=api, model="loop-embed"),
            run_config=RunConfig(max_workers=CONCURRENCY),
            raise_exceptions=False,
            show_progress=False,
        )
        seconds = time.perf_counter() - started
        scores = list(result["answer_relevancy"])
        reports = reports_for(result)
        outcomes = [
            Outcome(score, report.error if report is not None else "no report left")
            for score, report in zip(scores, reports, strict=True)
        ]
        return PathResult("ragas.evaluate", outcomes, faults_by_row(server.log, rows), seconds)


def cli_command(data: Path, out: Path, cache: Path, server: LoopbackServer) -> list[str]:
    """``ragas-relevancy score`` on the loopback server, writing ``out`` and caching replies."""
    return [
        sys.executable,
        "-m",
        "ragas_relevancy_ext",
        "score",
        str(data),
        *server.cli_options(),
        "--max-retries",
        str(MAX_RETRIES),
        "--timeout",
        str(TIMEOUT),
        "--concurrency",
        str(CONCURRENCY),
        "--out",
        str(out),
        "--cache",
        str(cache),
        "--no-probes",
        "--no-progress",
    ]


def lines_in(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}  # local: no key
    env["RAGAS_DO_NOT_TRACK"] = "true"
    return env


def via_command_line(
    rows: list[dict[str, str]], rate: float, seed: int, kill_at: float, deadline: float
) -> PathResult:
    """Run the command line, SIGKILL it after ``kill_at`` of the rows are written, run again."""
    with tempfile.TemporaryDirectory() as tmp, new_server(rate, seed) as server:
        folder = Path(tmp)
        data, out, cache = folder / "rows.jsonl", folder / "out.jsonl", folder / "cache"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        command = cli_command(data, out, cache, server)
        started = time.perf_counter()

        first = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=cli_env()
        )
        want = max(1, int(len(rows) * kill_at))
        while first.poll() is None and lines_in(out) < want:
            if time.perf_counter() - started > deadline:
                break
            time.sleep(0.02)
        killed = first.poll() is None
        if killed:
            first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)

        written = _final_lines(out)
        done_before = {n for n, record in written.items() if record.get("error") is None}
        asked_before = server.count()
        second = subprocess.run(
            command, capture_output=True, text=True, timeout=deadline, env=cli_env()
        )
        seconds = time.perf_counter() - started

        log = server.log
        again = [r for r in log[asked_before:] if r.endpoint == "chat"]
        asked_again = {request_row(r, rows) for r in again}
        redone = sorted(i + 1 for i in asked_again if i is not None and i + 1 in done_before)
        final = _final_lines(out)
        outcomes: list[Outcome | None] = [None] * len(rows)
        for number, record in final.items():
            score = record.get("score")
            outcomes[number - 1] = Outcome(
                float("nan") if score is None else float(score), record.get("error")
            )
        notes = [
            f"first run {'SIGKILLed' if killed else 'ended (exit ' + str(first.returncode) + ')'} "
            f"with {len(written)} row(s) written, {len(done_before)} scored",
            f"second run (same --out and --cache): exit {second.returncode}, {len(again)} judge "
            f"request(s), {len(redone)} of them for rows already scored -> "
            f"{'OK' if not redone else 'ASKED AGAIN: rows ' + str(redone[:10])}",
            f"JSONL: {lines_in(out)} line(s), {len(final)} distinct row(s) of {len(rows)}",
        ]
        # a row's faults: those of the run that wrote its last line, plus faults recovered from
        # in the first run (e.g. a judge reply that came after retries, cached, reused)
        before = faults_by_row(log[:asked_before], rows)
        after = faults_by_row(log[asked_before:], rows)
        faults = [
            before[i] if i + 1 in done_before else after[i] | (before[i] & RECOVERABLE)
            for i in range(len(rows))
        ]
        return PathResult("command line", outcomes, faults, seconds, notes=notes)


def _final_lines(path: Path) -> dict[int, dict[str, Any]]:
    """The last JSONL record of each row number (a resumed run appends retried rows)."""
    records: dict[int, dict[str, Any]] = {}
    if not path.exists():
        return records
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut by the kill
        records[int(record["row"])] = record
    return records


# -- the tally ------------------------------------------------------------------------------


def category(faults: set[str]) -> str:
    """The fault(s) that decide a row: those not recovered from, else the recovered ones."""
    lasting = faults - RECOVERABLE
    return " + ".join(sorted(lasting or faults)) if faults else "no fault"


def _order(name: str) -> tuple[int, int, str]:
    if name == "no fault":
        return (0, 0, name)
    faults = set(name.split(" + "))
    return (1 if faults <= RECOVERABLE else 2, len(faults), name)


def short_reason(text: str) -> str:
    """A reason with numbers and quoted text blanked, so alike reasons count together."""
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", text)
    text = re.sub(r"\d+", "#", text)
    return text[:120] + ("…" if len(text) > 120 else "")


def tally(results: list[PathResult], n: int) -> tuple[str, list[str]]:
    """The table (fault -> rows scored / NaN per path), and the checks it passes or fails."""
    names = sorted({category(f) for r in results for f in r.faults}, key=_order)
    width = max(len(x) for x in [*names, "fault (kind@endpoint)"])
    head = f"{'fault (kind@endpoint)':<{width}}"
    head += "".join(f" | {r.name + ' rows/scored/NaN':>31}" for r in results)
    lines = [head, "-" * len(head)]
    reasons: dict[str, Counter[str]] = defaultdict(Counter)
    for name in [*names, "total"]:
        line = f"{name:<{width}}"
        for result in results:
            picked = [
                o
                for o, f in zip(result.outcomes, result.faults, strict=True)
                if name == "total" or category(f) == name
            ]
            present = [o for o in picked if o is not None]
            nan = [o for o in present if o.score != o.score]
            cell = f"{len(picked)}/{len(present) - len(nan)}/{len(nan)}"
            if len(present) < len(picked):
                cell += f" ({len(picked) - len(present)} MISSING)"
            line += f" | {cell:>31}"
            for o in nan:
                if name != "total":
                    reasons[name][short_reason(o.error or "no reason")] += 1
        lines.append(line)
    lines.append("\nNaN reasons (all paths together):")
    for name in names:
        for reason, count in reasons[name].most_common():
            lines.append(f"  {name}: {count} x {reason}")
    return "\n".join(lines), checks(results, n)


def checks(results: list[PathResult], n: int) -> list[str]:
    out = []
    for result in results:
        present = sum(1 for o in result.outcomes if o is not None)
        problems = [
            problem
            for outcome, faults in zip(result.outcomes, result.faults, strict=True)
            if outcome is not None
            and (problem := outcome_problem(faults, outcome.score, outcome.error))
        ]
        out.append(
            f"{result.name}: {present}/{n} rows returned; "
            f"rows that did not end as their faults require (recoverable: a score; lasting: "
            f"NaN naming the fault): {len(problems)}; {result.seconds:.1f} s"
        )
        out.extend(f"  {note}" for note in result.notes)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=0.05, help="faulted share of requests")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--kill-at", type=float, default=0.4, help="share written, then SIGKILL")
    parser.add_argument("--deadline", type=float, default=600.0, help="seconds per CLI run")
    args = parser.parse_args()
    if args.samples < 1 or not 0 <= args.rate <= 1 or not 0 < args.kill_at < 1:
        parser.error("--samples >= 1, --rate within 0..1 and --kill-at within (0, 1)")
    rows = make_rows(args.samples)

    warnings.simplefilter("ignore")
    logging.getLogger("ragas").setLevel(logging.CRITICAL)  # evaluate logs every failed row
    results = [
        via_abatch_score(rows, args.rate, args.seed),
        via_evaluate(rows, args.rate, args.seed),
        via_command_line(rows, args.rate, args.seed, args.kill_at, args.deadline),
    ]
    mix = ", ".join(f"{e}: {', '.join(k)}" for e, k in KINDS.items())
    print(
        f"{args.samples} samples, {args.rate:.0%} of requests on each endpoint faulted "
        f"(seed {args.seed}), split evenly over kinds ({mix}).\n"
        f"openai clients: max_retries={MAX_RETRIES}, timeout={TIMEOUT} s; 429 Retry-After "
        f"{RETRY_AFTER} s; a hang holds its request {HANG_SECONDS} s. Transient: rate_limit, "
        "server_error, hang. wrong_size halves every vector of one answer (the question and the "
        "probes are embedded in two calls, so it shows as a length mismatch); mixed_size "
        "halves one vector of an answer.\n"
        "Each cell: rows / scored / NaN. A row is listed under the fault(s) that decide it: "
        "those not recovered from, else the transient ones it met (retries included); "
        "malformed@chat replies are asked again and count as recovered.\n"
    )
    table, lines = tally(results, args.samples)
    print(table)
    print("\nChecks:")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
