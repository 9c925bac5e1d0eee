"""Rows/s and peak memory: ``ragas-relevancy score`` in one process against ``--engine ray``.

Every run is the real command line in a child process, on the same loopback OpenAI-compatible
server (its own process) whose judge answers after ``--latency`` seconds (embeddings at once).
Rows/s is rows over wall time, start-up included; "steady" is rows written between the first and
the last line of ``--out`` over that time, which leaves out Ray's start-up (and means little for
the one-process run, which writes most lines at its end). Peak memory is the
largest sum of resident memory over the command's whole process tree (driver, Ray's daemons
and actors), sampled from /proc. The figures project to a cluster at the end::

    python benchmarks/ray_bench.py                    # 10k rows; 1, 2 and 4 actors
    python benchmarks/ray_bench.py --rows 10000 100000 --save runs.jsonl
    python benchmarks/ray_bench.py --quick            # 200 rows; 1 and 2 actors

    python benchmarks/ray_bench.py --slow-rows        # one actor past slow rows, against local
    python benchmarks/ray_bench.py --one-key 600      # 4 actors on one key limited per second

``one_key(server, rows)`` is benchmarks/rate_limits.py's row for Ray actors on one key.

``--save FILE`` appends each finished run to FILE at once (one JSON line); a re-run with the
same FILE skips the runs already there and prints the table of all of them, so a long run
stopped half-way loses only the command it was in.

On a 2-core machine more actors cannot add CPU; what they add is judge calls in flight
(actors x --concurrency). The "one process" row with --concurrency raised to the same number
of calls in flight shows that, so the gain is not read as more compute.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchsteps import Steps  # benchmarks/benchsteps.py, beside this script

ROOT = Path(__file__).resolve().parent.parent
TOPICS = ["order A17", "a refund", "the warranty", "card payments", "delivery", "returns"]
PAGE = os.sysconf("SC_PAGE_SIZE")
START_SECONDS = {"one process": 10.0, "ray": 30.0}  # imports, and Ray's daemons and actors


@dataclass
class Run:
    """One command's figures."""

    label: str
    rows: int
    in_flight: int
    wall: float
    steady: float
    first_line: float
    peak_mb: float
    lines: int
    load: float = math.nan  # the machine's 1-minute load average, mean over the run


def write_rows(path: Path, n: int) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for i in range(n):
            topic = TOPICS[i % len(TOPICS)]
            row = {
                "user_input": f"What about {topic} for customer {i}?",
                "response": f"Customer {i}: {topic} is handled within five working days.",
            }
            handle.write(json.dumps(row) + "\n")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and every process below it."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            statm = Path(f"/proc/{entry}/statm").read_text().split()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        parents[int(entry)] = int(fields[1])
        rss[int(entry)] = int(statm[1]) * PAGE
    members, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in members:
                members.add(child)
                frontier.append(child)
    return sum(rss.get(pid, 0) for pid in members)


def count_lines(path: Path) -> int:
    try:
        with path.open("rb") as handle:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
    except FileNotFoundError:
        return 0


def run(label: str, args: list[str], out: Path, rows: int, in_flight: int) -> Run:
    """Run the command, sampling its memory and its output's growth every 0.25 s."""
    env = {**os.environ, "RAGAS_DO_NOT_TRACK": "true", "OPENAI_API_KEY": "unused"}
    command = [sys.executable, "-m", "ragas_relevancy_ext", *args, "--out", str(out)]
    started = time.perf_counter()
    child = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    peak, first, first_count, last, last_count = 0, None, 0, None, 0
    loads: list[float] = []
    try:
        while child.poll() is None:
            peak = max(peak, tree_rss(child.pid))
            loads.append(os.getloadavg()[0])
            lines = count_lines(out)
            now = time.perf_counter()
            if lines and first is None:
                first, first_count = now, lines
            if lines > last_count:
                last, last_count = now, lines
            time.sleep(0.25)
    finally:
        if child.poll() is None:
            child.terminate()
            child.wait()
    wall = time.perf_counter() - started
    stderr = child.stderr.read().decode(errors="replace") if child.stderr else ""
    if child.returncode != 0:
        raise SystemExit(f"{label} failed ({child.returncode}):\n{stderr[-2000:]}")
    lines = count_lines(out)
    if first is None or last is None or last <= first:
        steady = rows / wall
    else:
        steady = (last_count - first_count) / (last - first)
    load = sum(loads) / len(loads) if loads else os.getloadavg()[0]
    return Run(
        label,
        rows,
        in_flight,
        wall,
        steady,
        (first or started) - started,
        peak / 2**20,
        lines,
        load,
    )


def one_key(
    server: Any, rows: int, *, actors: int = 4, concurrency: int = 16, rpm: int | None = None
) -> dict[str, float]:
    """``score --engine ray --actors ACTORS`` on ``rows`` rows against ``server`` (a running
    LoopbackServer whose chat limit is the key's; ``rpm``: given as ``--rpm``, else learned):
    wall from the first judge request to the last answer, the answered judge requests' share of
    what the limit allows in that time, the share answered 429, rows lost (not scored) and judge
    requests per row."""
    server.reset()
    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "rows.jsonl", Path(tmp) / "out.jsonl"
        write_rows(data, rows)
        args = ["score", str(data), *server.cli_options(), "--engine", "ray", "--out", str(out)]
        args += ["--actors", str(actors), "--concurrency", str(concurrency), "--no-progress"]
        args += ["--rpm", str(rpm)] if rpm else []
        env = {**os.environ, "RAGAS_DO_NOT_TRACK": "true", "OPENAI_API_KEY": "unused"}
        command = [sys.executable, "-m", "ragas_relevancy_ext", *args]
        subprocess.run(command, cwd=ROOT, env=env, capture_output=True, check=False)
        lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    chats = server.requests("chat")
    refused = sum(r.status == 429 for r in chats)
    wall = max(r.finished or r.started for r in chats) - min(r.started for r in chats)
    return {
        "wall": wall,
        "rate": (len(chats) - refused) / (server.rpm / 60 * wall),
        "429s": refused / len(chats),
        "lost": rows - sum(line.get("score") is not None for line in lines),
        "judge per row": len(chats) / rows,
    }


def slow_rows() -> None:
    """32 rows, one in eight judged 3 s slower (3,000 more reply tokens at 1 ms each), local
    engine against one actor given batches of 4: seconds from the first request to the last
    answer on the server, and the wall time with Ray's start."""
    import asyncio

    import ray

    from ragas_relevancy_ext.cli.ray_score import SettingsMetric
    from ragas_relevancy_ext.cli.setup import Settings, prepare
    from ragas_relevancy_ext.ray import score_dataset
    from ragas_relevancy_ext.testing.loopback import LoopbackServer, pretend_reply

    def reply(messages: Any) -> str:
        slow = "(slowly)" in json.dumps(messages)
        return pretend_reply(messages) + (" " * 12_000 if slow else "")

    items = [
        {"user_input": f"What about {i}?", "response": f"It is {i}" + " (slowly)" * (i % 8 == 7)}
        for i in range(32)
    ]
    steps = Steps("ray_bench --slow-rows", [("local engine", 15.0), ("one actor", 40.0)])
    print("| engine | first request to last answer (s) | wall (s) |\n|---|---:|---:|")
    with LoopbackServer(width=32, reply=reply, endpoint_token_latency={"chat": 0.001}) as server:
        settings = Settings(
            judge="openai:loop-judge", base_url=server.openai_base_url,
            embeddings="openai:loop-embed", max_retries=0, concurrency=8,
        )  # fmt: skip

        def span() -> float:
            return max(r.finished or r.started for r in server.log) - server.log[0].started

        steps.start()
        started = time.perf_counter()
        asyncio.run(prepare(settings).metric().abatch_score(items))
        print(f"| local | {span():.2f} | {time.perf_counter() - started:.1f} |")
        server.reset()
        steps.start()
        started = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            one = ray.data.from_items(items, override_num_blocks=1)
            metric = SettingsMetric(settings)
            score_dataset(one, metric, concurrency=1, batch_size=4, max_concurrency=8).take_all()
        finally:
            ray.shutdown()
        print(f"| one actor | {span():.2f} | {time.perf_counter() - started:.1f} |")
    steps.finish()


def print_one_key(rows: int) -> None:
    """:func:`one_key` against a provider of 1,200 requests a minute enforced per second."""
    from ragas_relevancy_ext.testing.loopback import LoopbackServer

    variants = (("learned", None), ("--rpm 1200", 1200))
    steps = Steps("ray_bench --one-key", [(v, 30.0 + rows / 19) for v, _ in variants])
    print("| 4 actors on one key | wall (s) | of the allowed rate | 429s | lost | judge/row |")
    print("|---|---:|---:|---:|---:|---:|")
    with LoopbackServer(width=64, rpm=1200, per_second=True) as server:
        for label, rpm in variants:
            steps.start()
            f = one_key(server, rows, rpm=rpm)
            print(
                f"| {label} | {f['wall']:.1f} | {f['rate']:.1%} | {f['429s']:.1%} "
                f"| {f['lost']:.0f} | {f['judge per row']:.2f} |"
            )
    steps.finish()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000])
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--latency", type=float, default=0.1, help="judge latency, seconds")
    parser.add_argument("--concurrency", type=int, default=8, help="calls in flight per process")
    parser.add_argument("--rate-limit", type=float, default=10_000, help="provider RPM, judge")
    parser.add_argument("--quick", action="store_true", help="200 rows; 1 and 2 actors")
    parser.add_argument("--save", type=Path, help="append each finished run here; resume")
    parser.add_argument(
        "--fastest-first", action="store_true", help="run the most calls in flight first"
    )
    parser.add_argument(
        "--saved-only", action="store_true", help="print the table of the --save runs; run none"
    )
    parser.add_argument("--slow-rows", action="store_true", help="one actor past slow rows")
    parser.add_argument("--one-key", type=int, metavar="ROWS", help="4 actors on one key")
    args = parser.parse_args()
    if args.slow_rows:
        return slow_rows()
    if args.one_key:
        return print_one_key(args.one_key)
    if args.quick:
        args.rows, args.actors = [200], [1, 2]
    # a terminated benchmark stops its server and its running command too (the finally blocks)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "ragas_relevancy_ext.testing.loopback", "--port", str(port)]
        + ["--chat-latency", str(args.latency)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    server.stdout.readline()  # "serving on ..."
    base = f"http://127.0.0.1:{port}/v1"
    common = ["--judge", "openai:loop-judge", "--base-url", base]
    common += ["--embeddings", "openai:loop-embed", "--no-progress"]
    plans: list[tuple[int, str, list[str], int]] = []
    for n in args.rows:
        score = ["score", "ROWS", *common, "--no-probes"]
        c = args.concurrency
        most = max(args.actors) * c
        plans.append((n, "one process", [*score, "--concurrency", str(c)], c))
        plans.append(
            (n, f"one process, {most} in flight", [*score, "--concurrency", str(most)], most)
        )
        for k in args.actors:
            ray = [*score, "--concurrency", str(c), "--engine", "ray", "--actors", str(k)]
            plans.append((n, f"ray, {k} actor(s)", ray, k * c))
    planned = [(n, label) for n, label, _, _ in plans]
    if args.fastest_first:  # most calls in flight first, so a run cut short has the most rows
        plans.sort(key=lambda plan: (plan[0], -plan[3], plan[1].startswith("one process")))
    saved = load(args.save, args.latency)
    runs: list[Run] = [saved[(n, label)] for n, label, _, _ in plans if (n, label) in saved]
    plans = [plan for plan in plans if (plan[0], plan[1]) not in saved and not args.saved_only]
    if runs:
        print(f"{len(runs)} run(s) already in {args.save}, not run again", file=sys.stderr)
    steps = Steps(
        "ray_bench",
        [
            (f"{n} rows, {label}", START_SECONDS[label.split(",")[0]] + n * args.latency / flight)
            for n, label, _, flight in plans
        ],
    )
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for n, label, command, flight in plans:
                data = Path(tmp) / f"rows-{n}.jsonl"
                if not data.exists():
                    write_rows(data, n)
                steps.start()
                out = Path(tmp) / f"out-{len(runs)}.jsonl"
                argv = [str(data) if part == "ROWS" else part for part in command]
                result = run(label, argv, out, n, flight)
                runs.append(result)
                save(args.save, result, args.latency)
                print(
                    f"    {result.rows / result.wall:.1f} rows/s, {result.peak_mb:.0f} MB, "
                    f"{result.lines} rows out",
                    file=sys.stderr,
                    flush=True,
                )
                out.unlink()
    finally:
        server.terminate()
        server.wait()
    steps.finish()
    order = {(n, label): i for i, (n, label) in enumerate(planned)}
    report(sorted(runs, key=lambda r: order[(r.rows, r.label)]), args)


def load(path: Path | None, latency: float) -> dict[tuple[int, str], Run]:
    """Runs saved in ``path`` at this judge latency, by (rows, label)."""
    if path is None or not path.exists():
        return {}
    runs: dict[tuple[int, str], Run] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut off by a crash
        if record.pop("latency", None) == latency:
            run = Run(**record)
            runs[(run.rows, run.label)] = run
    return runs


def save(path: Path | None, result: Run, latency: float) -> None:
    """Append one finished run to ``path`` and flush it to disk."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({**asdict(result), "latency": latency}) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def report(runs: list[Run], args: argparse.Namespace) -> None:
    print(f"judge latency {args.latency * 1000:.0f} ms; {os.cpu_count()} CPU(s) on this machine")
    print(
        "| rows | run | calls in flight | rows/s | rows/s steady | first line after (s) "
        "| wall (s) | peak memory (MB) | rows out | load |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        print(
            f"| {r.rows} | {r.label} | {r.in_flight} | {r.rows / r.wall:.1f} | {r.steady:.1f} "
            f"| {r.first_line:.1f} | {r.wall:.1f} | {r.peak_mb:.0f} | {r.lines} | {r.load:.1f} |"
        )
    one_actor = [r for r in runs if r.label == "ray, 1 actor(s)"]
    if not one_actor:
        return
    per_actor = one_actor[-1].steady
    limit = args.rate_limit / 60  # judge calls/s; diverse mode asks once per row
    print()
    print(
        f"On {os.cpu_count()} core(s) more actors add calls in flight (actors x --concurrency), "
        "not CPU: compare each Ray row with the one process at the same calls in flight."
    )
    print(
        f"Projection to a cluster (diverse mode: one judge call per row; assumed provider "
        f"limit {args.rate_limit:.0f} requests/min on the judge, --rate-limit):"
    )
    print(
        f"  measured: {per_actor:.1f} rows/s per actor (steady) at {args.concurrency} calls "
        "in flight; ideal at this latency: "
        f"{args.concurrency / args.latency:.0f} judge calls/s"
    )
    for k in (8, 32, 128):
        raw = per_actor * k
        bound = min(raw, limit)
        print(
            f"  {k} actors: {per_actor:.1f} x {k} = {raw:.0f} rows/s; provider limit "
            f"{args.rate_limit:.0f} RPM = {limit:.0f} rows/s -> {bound:.0f} rows/s, "
            f"1M rows in {1e6 / bound / 60:.0f} min"
        )


if __name__ == "__main__":
    main()
