"""Long runs offline: rows per second and peak memory of ``ragas-relevancy score`` by file size,
and how many rows a run interrupted with Ctrl-C has saved.

    python benchmarks/long_run.py                 # 1k, 10k and 100k rows, then the Ctrl-C run
    python benchmarks/long_run.py --sizes 1000 10000 --sigint-after 10
    python benchmarks/long_run.py --sizes 5000 --embeddings local --sigint-after 0

Each size is one ``score`` process (offline judge, hash embeddings unless ``--embeddings``,
``--out``, stdout to /dev/null), its peak RSS read from the operating system when it ends;
ms/row is its wall time, start-up included, over its rows. The Ctrl-C run scores
against the loopback server with a judge that answers in 0.5 s, sends SIGINT after
``--sigint-after`` seconds, and counts the lines saved and the judge calls paid.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOPICS = ["order A17", "a refund", "the warranty", "card payments", "delivery", "returns"]


def write_rows(path: Path, n: int) -> Path:
    """``n`` distinct support rows as JSONL."""
    with path.open("w", encoding="utf-8") as handle:
        for i in range(n):
            topic = TOPICS[i % len(TOPICS)]
            row = {
                "user_input": f"What is the policy on {topic}, case {i}?",
                "response": f"Case {i}: {topic} is handled within 14 days. Contact support.",
            }
            handle.write(json.dumps(row) + "\n")
    return path


def command(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "ragas_relevancy_ext", "score", *map(str, args)]


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env.update(RAGAS_DO_NOT_TRACK="true", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_size(
    folder: Path, n: int, embeddings: str = "hash"
) -> tuple[int, float, float, float, int]:
    """(rows, wall seconds, CPU seconds, peak RSS in MB, lines written) of one offline run.

    CPU seconds (user + system of the process) hardly change with the load of a shared
    machine, so the time ratios use them.
    """
    rows = write_rows(folder / f"rows-{n}.jsonl", n)
    out = folder / f"out-{n}.jsonl"
    args = command(rows, "--embeddings", embeddings, "--out", out, "--no-probes", "--no-progress")
    started = time.perf_counter()
    process = subprocess.Popen(
        args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=environment()
    )
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{n} rows: exit {process.returncode}: {process.stderr.read()[-500:]!r}")
    lines = sum(1 for _ in out.open("rb"))
    return n, seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, lines


def run_sigint(folder: Path, after: float, latency: float, rows: int) -> dict[str, float]:
    """Ctrl-C after ``after`` s against a ``latency``-second judge: lines saved, calls paid."""
    from ragas_relevancy_ext.testing.loopback import LoopbackServer

    path = write_rows(folder / "rows-sigint.jsonl", rows)
    out = folder / "out-sigint.jsonl"
    env = {**environment(), "OPENAI_API_KEY": "test"}
    with LoopbackServer(endpoint_latency={"chat": latency}) as server:
        args = command(path, *server.cli_options(), "--out", out, "--no-probes", "--timeout", "5")
        process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True
        )
        time.sleep(after)
        chat_at_sigint = server.count("chat")
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
        chat = server.count("chat")
    lines = sum(1 for _ in out.open("rb")) if out.exists() else 0
    said = [line for line in err.splitlines() if "rows saved" in line]
    return {
        "exit": process.returncode,
        "lines": lines,
        "chat_at_sigint": chat_at_sigint,
        "chat": chat,
        "message": said[-1] if said else "",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000, 10000, 100000])
    parser.add_argument("--sigint-after", type=float, default=10.0)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--sigint-rows", type=int, default=300)
    parser.add_argument("--embeddings", default="hash", help="--embeddings of the sized runs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="long-run-") as name:
        folder = Path(name)
        print(
            f"{'rows':>8}  {'wall s':>8}  {'CPU s':>8}  {'rows/s':>8}  {'ms/row':>7}  "
            f"{'rows/CPU s':>10}  {'peak RSS MB':>11}  {'lines':>8}  "
            f"(embeddings {args.embeddings}, load average {os.getloadavg()[0]:.1f} "
            f"on {os.cpu_count()} cores)"
        )
        results = []
        for n in args.sizes:
            n, seconds, cpu, rss, lines = run_size(folder, n, args.embeddings)
            results.append((n, cpu))
            print(
                f"{n:>8}  {seconds:>8.1f}  {cpu:>8.1f}  {n / seconds:>8.0f}  "
                f"{1000 * seconds / n:>7.1f}  {n / cpu:>10.0f}  {rss:>11.0f}  {lines:>8}  "
                f"(load average {os.getloadavg()[0]:.1f} at the end)",
                flush=True,
            )
        for (n1, s1), (n2, s2) in zip(results, results[1:], strict=False):
            print(f"CPU time {n2} / {n1} rows: {s2 / s1:.2f} (rows x{n2 / n1:g})")
        if args.sigint_after > 0:
            found = run_sigint(folder, args.sigint_after, args.latency, args.sigint_rows)
            print(
                f"Ctrl-C after {args.sigint_after:g} s, {args.sigint_rows} rows, judge "
                f"{args.latency:g} s per call: exit {found['exit']}, {found['lines']} line(s) "
                f"saved, {found['chat_at_sigint']} judge calls at the signal, {found['chat']} "
                f"in all; said: {found['message']!r}"
            )


if __name__ == "__main__":
    main()
