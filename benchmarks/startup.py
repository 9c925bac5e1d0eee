"""How long things take to start: ``--help``, ``--version`` and the first line of ``score``,
each in a fresh process; then the first ``score()`` of a new metric, stock's and ours, in a
process with RAGAS already imported (offline stand-ins, and an OpenAI-compatible judge and
embeddings on the loopback server); then when the first row of a 1,000-row offline ``score``
run finishes, as a share of the rows done by then. The test suite only checks where slow work
runs (off the event loop); the seconds live here, because a shared machine's timings are not a
test. Usage::

    python benchmarks/startup.py              # 5 runs of each
    python benchmarks/startup.py --runs 3 --quick
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchsteps import Steps

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "support_qa.jsonl"
COMMANDS = {
    "--help": ["--help"],
    "score --help": ["score", "--help"],
    "--version": ["--version"],
    "score (first line)": ["score", str(EXAMPLE), "--embeddings", "hash"],
    "score (all 36 rows)": ["score", str(EXAMPLE), "--embeddings", "hash"],
}
GUESS_S = {"score (first line)": 8.0, "score (all 36 rows)": 15.0}
FIRST_ROW_ROWS = 1_000

# Run in a fresh process per figure, so neither metric finds the other's imports done: RAGAS
# and both metrics' modules are imported first, then one new metric's first score() is timed.
FIRST_SCORE = """
import json, sys, time
from ragas.embeddings import OpenAIEmbeddings
from ragas.llms import llm_factory
from ragas.metrics.collections import AnswerRelevancy as Stock
from ragas_relevancy_ext import AnswerRelevancy as Ours
from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge
which, base_url = sys.argv[1], sys.argv[2]
if base_url:
    from openai import AsyncOpenAI
    client = AsyncOpenAI(base_url=base_url, api_key="unused")
    llm = llm_factory("loop-judge", provider="openai", client=client)
    embeddings = OpenAIEmbeddings(client=client, model="loop-embed")
else:
    llm, embeddings = PretendJudge(), HashEmbeddings()
metric = (Stock if which == "stock" else Ours)(llm=llm, embeddings=embeddings)
started = time.perf_counter()
result = metric.score(
    user_input="Where is my order #48213?",
    response="Order #48213 left our warehouse on Monday and reaches you tomorrow.",
)
print(json.dumps({"seconds": time.perf_counter() - started, "value": result.value}))
"""


def first_line_and_end(args: list[str]) -> tuple[float, float, str]:
    """Seconds to the first line on stdout and to the exit, and that first line."""
    env = {**os.environ, "RAGAS_DO_NOT_TRACK": "true", "COLUMNS": "100"}
    command = [sys.executable, "-m", "ragas_relevancy_ext", *args]
    started = time.perf_counter()
    with subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    ) as process:
        assert process.stdout is not None
        first = process.stdout.readline()
        first_at = time.perf_counter() - started
        process.stdout.read()
        process.wait()
    return first_at, time.perf_counter() - started, first.rstrip()


def first_score(which: str, base_url: str) -> float:
    """Seconds of the first ``score()`` of a new ``which`` metric, RAGAS imported beforehand."""
    env = {**os.environ, "RAGAS_DO_NOT_TRACK": "true"}
    out = subprocess.run(
        [sys.executable, "-c", FIRST_SCORE, which, base_url],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(json.loads(out.stdout.strip().splitlines()[-1])["seconds"])


def first_row_share(rows: int = FIRST_ROW_ROWS) -> tuple[int, int, float]:
    """Run an offline ``score`` of ``rows`` rows with ``--out`` and watch the file grow: how
    many rows were done when input row 1 was written, of ``rows``, and the seconds to it."""
    with tempfile.TemporaryDirectory() as folder:
        data, out = Path(folder) / "rows.jsonl", Path(folder) / "out.jsonl"
        with data.open("w") as file:
            for n in range(rows):
                record = {
                    "user_input": f"Where is order #{n}? It was due yesterday.",
                    "response": f"Order #{n} left the warehouse on Monday; it arrives tomorrow.",
                }
                file.write(json.dumps(record) + "\n")
        env = {**os.environ, "RAGAS_DO_NOT_TRACK": "true"}
        command = [sys.executable, "-m", "ragas_relevancy_ext", "score", str(data)]
        command += ["--embeddings", "hash", "--out", str(out)]
        started = time.perf_counter()
        with subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        ) as process:
            while process.poll() is None:
                lines = out.read_text().splitlines() if out.exists() else []
                for position, line in enumerate(lines, 1):
                    if line.endswith("}") and json.loads(line).get("row") == 1:
                        process.terminate()  # row 1's place in the file is what we came for
                        return position, rows, time.perf_counter() - started
                time.sleep(0.01)
    raise RuntimeError("the score run ended before row 1 was seen in its --out file")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per command")
    parser.add_argument("--quick", action="store_true", help="skip the full score run")
    parser.add_argument(
        "--only", choices=["cli", "first-score", "first-row"], help="run one part only"
    )
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    names = [n for n in COMMANDS if not (args.quick and n == "score (all 36 rows)")]
    names = names if args.only in (None, "cli") else []
    pairs = [(k, w) for k in ("offline", "loopback") for w in ("stock", "ours")]
    pairs = pairs if args.only in (None, "first-score") else []
    estimates = [(n, args.runs * GUESS_S.get(n, 1.0)) for n in names]
    estimates += [(f"first score(), {k}, {w}", args.runs * 12.0) for k, w in pairs]
    estimates += [("first row", 20.0)] if args.only in (None, "first-row") else []
    steps = Steps("startup", estimates)
    if names:
        print(f"{'command':<22} {'median s':>9} {'min s':>7} {'max s':>7}  first line")
    for name in names:
        steps.start(f"{name}, {args.runs} runs")
        runs = [first_line_and_end(COMMANDS[name]) for _ in range(args.runs)]
        seconds = [first if name.endswith("(first line)") else end for first, end, _ in runs]
        print(
            f"{name:<22} {statistics.median(seconds):>9.2f} {min(seconds):>7.2f} "
            f"{max(seconds):>7.2f}  {runs[0][2][:60]}"
        )
    if pairs:
        from ragas_relevancy_ext.testing.loopback import LoopbackServer

        print(f"\n{'first score(), RAGAS imported':<34} {'median s':>9} {'min s':>7} {'max s':>7}")
        with LoopbackServer() as server:
            for kind, which in pairs:
                steps.start(f"first score(), {kind}, {which}, {args.runs} processes")
                url = server.openai_base_url if kind == "loopback" else ""
                seconds = [first_score(which, url) for _ in range(args.runs)]
                print(
                    f"{kind + ', ' + which:<34} {statistics.median(seconds):>9.3f} "
                    f"{min(seconds):>7.3f} {max(seconds):>7.3f}"
                )
    if args.only in (None, "first-row"):
        steps.start(f"first row of a {FIRST_ROW_ROWS:,}-row offline score run")
        done, rows, seconds = first_row_share()
        print(
            f"\nfirst row of {rows:,} (offline score --out): written as row {done} of the file, "
            f"{done / rows:.1%} of the rows, {seconds:.1f} s after the start"
        )
    steps.finish()
    print(f"({os.cpu_count()} CPU(s); load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
