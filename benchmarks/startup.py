"""How long the command line takes to answer: ``--help``, ``--version`` and the first line of
``score``, each in a fresh process. The test suite only checks that ``--help`` imports nothing
heavy; the seconds live here, because a shared machine's timings are not a test. Usage::

    python benchmarks/startup.py              # 5 runs of each
    python benchmarks/startup.py --runs 3 --quick
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per command")
    parser.add_argument("--quick", action="store_true", help="skip the full score run")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    names = [n for n in COMMANDS if not (args.quick and n == "score (all 36 rows)")]
    steps = Steps("startup", [(n, args.runs * GUESS_S.get(n, 1.0)) for n in names])
    print(f"{'command':<22} {'median s':>9} {'min s':>7} {'max s':>7}  first line")
    for name in names:
        steps.start(f"{name}, {args.runs} runs")
        runs = [first_line_and_end(COMMANDS[name]) for _ in range(args.runs)]
        seconds = [first if name.endswith("(first line)") else end for first, end, _ in runs]
        print(
            f"{name:<22} {statistics.median(seconds):>9.2f} {min(seconds):>7.2f} "
            f"{max(seconds):>7.2f}  {runs[0][2][:60]}"
        )
    steps.finish()
    print(f"({os.cpu_count()} CPU(s); load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
