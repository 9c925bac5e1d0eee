"""The pytest plugin: 40 relevancy checks scored one by one against batched per module.

A generated suite of 40 tests, one check each, runs in this process (RAGAS imported once before
timing) against the loopback server in a child process, with a judge that takes 200 ms per
answer (``--chat-latency 0.2``) and instant embeddings. Both go through the real ``openai`` SDK,
as ``--relevancy-judge openai:gpt-4o-mini --relevancy-embeddings
openai:text-embedding-3-small`` would. Rows: ``--relevancy-batch off`` (each check scored when it
is made), ``module`` (the default: the module's checks in one ``abatch_score``), and ``module``
with ``--relevancy-cache`` cold, then warm (an unchanged re-run). Usage::

    python benchmarks/pytest_plugin.py [--checks 40] [--latency 0.2]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
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
    assert_relevant(f"{{QUESTION}} (ticket {{n}})", ANSWER)
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


def run(folder: Path, url: str, *options: str) -> tuple[float, int, str]:
    """One pytest session over the suite: wall seconds, exit code, the summary's last line."""
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
    out = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out):
        code = pytest.main(args)
    seconds = time.perf_counter() - start
    cache = [line for line in out.getvalue().splitlines() if line.startswith("judge cache")]
    return seconds, int(code), cache[0] if cache else ""


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
        run(folder, url, "--relevancy-batch", "off", "-k", "answer and 0]")  # warm up
        cache = str(folder / "replies")
        rows = [
            ("one by one (--relevancy-batch off)", run(folder, url, "--relevancy-batch", "off")),
            ("batched per module (default)", run(folder, url)),
            ("batched, --relevancy-cache cold", run(folder, url, "--relevancy-cache", cache)),
            ("batched, --relevancy-cache warm", run(folder, url, "--relevancy-cache", cache)),
        ]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"{args.checks} checks, judge latency {args.latency * 1000:.0f} ms, loopback server; "
        f"{os.cpu_count()} cores, load average {load}"
    )
    print(f"{'mode':<36} {'wall s':>7} {'checks/s':>9}  exit  cache")
    baseline = rows[0][1][0]
    for name, (seconds, code, cache_line) in rows:
        speed = args.checks / seconds
        print(
            f"{name:<36} {seconds:>7.2f} {speed:>9.1f}  {code:>4}  "
            f"{cache_line.partition(': ')[2] or '-'}  (x{baseline / seconds:.1f})"
        )


if __name__ == "__main__":
    main()
