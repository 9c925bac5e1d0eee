"""The pytest plugin: 40 relevancy checks in one process against pytest-xdist workers.

A generated suite of 40 tests, one check each, runs from this process (RAGAS imported once before
timing) against the loopback server in a child process, with a judge that takes 200 ms per
answer (``--chat-latency 0.2``) and instant embeddings. Both go through the real ``openai`` SDK,
as ``--relevancy-judge openai:gpt-4o-mini --relevancy-embeddings
openai:text-embedding-3-small`` would. Rows: one process (each check scored when it is made),
``-n 2`` (two pytest-xdist workers, each starting its own Python and RAGAS), and ``-n 2`` with
``--relevancy-cache`` cold, then warm (an unchanged re-run). Usage::

    python benchmarks/pytest_plugin.py [--checks 40] [--latency 0.2]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

import pytest  # noqa: E402

SUITE = """
import pytest
from ragas_relevancy_ext.pytest_plugin import assert_relevant

QUESTION = "How do I get a refund for a damaged blender?"
ANSWER = (
    "Refunds for damaged blenders are issued once we receive a photo of the damage. Reply "
    "with a picture and the refund goes back to your card within 5 business days."
)

@pytest.mark.relevancy(min_score=-1.0)
@pytest.mark.parametrize("n", range({checks}))
def test_answer(n):
    assert_relevant(f"{{QUESTION}} (ticket {{n}})", f"{{ANSWER}} (ticket {{n}})")
"""


@contextlib.contextmanager
def loopback(latency: float) -> Iterator[str]:
    """The loopback server in a child process; yields its OpenAI base URL."""
    command = [sys.executable, "-m", "ragas_relevancy_ext.testing.loopback"]
    child = subprocess.Popen(
        [*command, "--chat-latency", str(latency)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        found = re.search(r"OpenAI base URL (\S+)\)", line)
        if found is None:
            raise RuntimeError(f"the loopback server did not start: {line!r}")
        yield found.group(1)
    finally:
        child.terminate()
        child.wait(timeout=10)


@dataclass
class Run:
    """One session: seconds running the tests (their checks included), seconds in all."""

    tests: float
    session: float
    code: int
    cache: str


class LoopTimer:
    """Times pytest's test loop: what the checks cost, without start-up and clean-up."""

    seconds = 0.0

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> object:
        start = time.perf_counter()
        try:
            return (yield)
        finally:
            self.seconds = time.perf_counter() - start


def run(folder: Path, url: str, *options: str) -> Run:
    """One pytest session over the suite, in this process."""
    args = [
        str(folder),
        "-q",
        "-p",
        "no:cacheprovider",
        "--relevancy-judge",
        "openai:gpt-4o-mini",
        "--relevancy-embeddings",
        "openai:text-embedding-3-small",
        "--relevancy-base-url",
        url,
        *options,
    ]
    out, timer = io.StringIO(), LoopTimer()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out):
        code = pytest.main(args, plugins=[timer])
    session = time.perf_counter() - start
    cache = [line for line in out.getvalue().splitlines() if line.startswith("judge cache")]
    cache_line = cache[0].partition(": ")[2] if cache else "-"
    return Run(timer.seconds, session, int(code), cache_line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=40)
    parser.add_argument("--latency", type=float, default=0.2, help="judge seconds per answer")
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "unused")  # the loopback server ignores it
    import ragas_relevancy_ext.metric  # noqa: F401  (RAGAS imported before any timing)

    with tempfile.TemporaryDirectory() as tmp, loopback(args.latency) as url:
        folder = Path(tmp)
        (folder / "test_suite.py").write_text(SUITE.format(checks=args.checks))
        run(folder, url, "-k", "answer and 0]")  # warm up
        cache = str(folder / "replies")
        rows = [
            ("one process", run(folder, url), 1),
            ("-n 2", run(folder, url, "-n", "2"), 2),
            (
                "-n 2, --relevancy-cache cold",
                run(folder, url, "-n", "2", f"--relevancy-cache={cache}"),
                2,
            ),
            (
                "-n 2, --relevancy-cache warm",
                run(folder, url, "-n", "2", f"--relevancy-cache={cache}"),
                0,
            ),
        ]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"{args.checks} checks, judge latency {args.latency * 1000:.0f} ms, loopback server; "
        f"{os.cpu_count()} cores, load average {load}"
    )
    # the judge's waiting alone: one call per check, as many at once as workers, none from cache
    print(
        f"{'run':<30} {'tests s':>8} {'judge wait s':>12} {'vs one process':>14} {'session s':>9}"
    )
    baseline = rows[0][1].tests
    for name, result, workers in rows:
        if result.code != 0:
            raise SystemExit(f"{name}: pytest exit code {result.code}")
        wait = math.ceil(args.checks / workers) * args.latency if workers else 0.0
        ratio = f"x{baseline / result.tests:.1f}"
        print(
            f"{name:<30} {result.tests:>8.2f} {wait:>12.1f} {ratio:>14} {result.session:>9.2f}"
            f"  {result.cache}"
        )
    print(
        "tests s: pytest's test loop (with -n, the workers' start-up included); session s: "
        "start to end of pytest"
    )


if __name__ == "__main__":
    main()
