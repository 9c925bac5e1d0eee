"""``ragas-relevancy score`` at a provider's rate limit, as real providers enforce it.

Each row is a real run of the command (its own process) on rows of ``examples/support_qa.jsonl``
(repeated, each question numbered) against the loopback server on 127.0.0.1 (in this process),
whose chat endpoint admits ``--rpm`` requests a minute enforced in one-second slices (a bucket
of a second's worth, as OpenAI documents), answering each judge request after ``--latency``
seconds with OpenAI's ``x-ratelimit-*`` headers and 429 bodies (``retry-after-ms``). Variants:

- learned / given, concurrency 64 and 16: limits read from the headers, or ``--rpm`` given;
- no headers: the server sends only a 429's ``retry-after``;
- two processes: two runs on one key at once, given the same ``--cache`` and nothing else;
- Ray actors on one key: left to ``benchmarks/ray_bench.py`` (the Ray engine's own table);
- quota: every judge request answered 429 ``insufficient_quota``;
- hostile: one header no provider sends, on every answer (and one 429 at the 5th request).

Columns: wall seconds of the run from its first judge request to its last; the share of the
allowed rate (chat requests admitted over what the limit admits in that time: a second's worth,
plus the rate); the share of judge requests answered 429; rows lost (NaN or missing); judge
requests per row; the longest time the server saw no judge request; the warnings the run wrote;
the exit code. The command the rows ran is printed first.

Usage::

    python benchmarks/rate_limits.py                          # every variant (about 15 minutes)
    python benchmarks/rate_limits.py --variants "no headers;quota" --rows 200
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ragas_relevancy_ext.testing.loopback import Fault, LoopbackServer

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "support_qa.jsonl"
HOSTILE = {
    "retry-after: 86400": {"retry-after": "86400"},
    "retry-after: 1e9": {"retry-after": "1e9"},
    "retry-after: inf": {"retry-after": "inf"},
    "retry-after-ms: 1e12": {"retry-after-ms": "1e12"},
    "x-ratelimit-limit-requests: 0.001": {"x-ratelimit-limit-requests": "0.001"},
    "x-ratelimit-remaining-requests: -1e18": {"x-ratelimit-remaining-requests": "-1e18"},
    "x-ratelimit-limit-tokens: inf": {"x-ratelimit-limit-tokens": "inf"},
}
VARIANTS = (
    "learned, concurrency 64",
    "given, concurrency 64",
    "learned, concurrency 16",
    "given, concurrency 16",
    "no headers, concurrency 64",
    "no headers, concurrency 16",
    "two processes, one --cache",
    "4 Ray actors on one key",
    "quota",
    *(f"hostile {name}" for name in HOSTILE),
)


def write_rows(path: Path, n: int, tag: str = "") -> None:
    """``n`` rows cycling through the example file, each numbered (so no judge reply is
    another row's: each row is a judge request, with or without a cache)."""
    lines = [json.loads(line) for line in EXAMPLES.read_text(encoding="utf-8").splitlines()]
    cases = [c for c in lines if c.get("user_input") and c.get("response")]
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            case = cases[i % len(cases)]
            number = f"(#{tag}{i})"
            row = {key: f"{case[key]} {number}" for key in ("user_input", "response")}
            out.write(json.dumps(row) + "\n")


def command(server: LoopbackServer, data: Path, out: Path, options: list[str]) -> list[str]:
    """The ``score`` command a row runs."""
    args = ["score", str(data), *server.cli_options(), "--out", str(out)]
    return [*args, "--no-progress", "--no-table", "--timeout", "60", *options]


def run(variant: str, rows: int, rpm: int, latency: float, folder: Path) -> dict[str, Any] | None:
    """One variant's figures (None: not run here)."""
    if "Ray" in variant:
        return None
    server = LoopbackServer(rpm=rpm, per_second=True, endpoint_latency={"chat": latency})
    concurrency = "16" if variant.endswith("16") else "64"
    options = ["--concurrency", concurrency]
    processes = 1
    if variant.startswith("given"):
        options += ["--rpm", str(rpm)]
    elif variant.startswith("no headers"):
        server.limit_headers = False
    elif variant.startswith("two processes"):
        processes, options = 2, ["--concurrency", "32", "--cache", str(folder / "cache")]
    elif variant == "quota":
        server.faults = [Fault("quota", fraction=1.0, endpoint="chat")]
    elif variant.startswith("hostile"):
        server.headers = HOSTILE[variant.removeprefix("hostile ")]
        server.faults = [Fault("rate_limit", at=(5,), endpoint="chat")]
    env = {**os.environ, "OPENAI_API_KEY": "bench", "RAGAS_DO_NOT_TRACK": "true"}
    with server:
        children = []
        for n in range(processes):
            data, out = folder / f"rows{n}.jsonl", folder / f"out{n}.jsonl"
            write_rows(data, rows, f"{n}.")
            args = command(server, data, out, options)
            if n == 0:
                print(f"  $ ragas-relevancy {' '.join(args)}", flush=True)
            children.append(
                subprocess.Popen(  # noqa: S603 (our own command, on our own data)
                    [sys.executable, "-m", "ragas_relevancy_ext", *args],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        outputs = [child.communicate(timeout=3600) for child in children]
        codes = [child.returncode for child in children]
        chat = [r for r in server.requests("chat") if r.finished is not None]
    lost = 0
    for n in range(processes):
        out = folder / f"out{n}.jsonl"
        records = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
        good = sum(1 for r in records if r.get("score") == r.get("score") and not r.get("cause"))
        lost += rows - good
    times = sorted(r.started for r in chat)
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    admitted = sum(1 for r in chat if r.status != 429)
    limited = sum(1 for r in chat if r.status == 429)
    warned = sum(err.count("said once per run") for _, err in outputs)
    return {
        "wall": span,
        "share": admitted / (rpm / 60 * (1 + span)),
        "429": limited / max(1, len(chat)),
        "lost": lost,
        "per_row": len(chat) / (rows * processes),
        "gap": max((b - a for a, b in zip(times, times[1:], strict=False)), default=0.0),
        "warnings": warned,
        "exit": "/".join(str(code) for code in codes),
        "requests": len(chat),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=600)
    parser.add_argument("--hostile-rows", type=int, default=120)
    parser.add_argument("--rpm", type=int, default=1200)
    parser.add_argument("--latency", type=float, default=0.1, help="seconds per judge answer")
    parser.add_argument("--variants", default=";".join(VARIANTS), help="names, ';' between")
    args = parser.parse_args()
    print(
        f"loopback chat endpoint: {args.rpm:,} requests a minute enforced per second "
        f"({args.rpm // 60} a second at most), {args.latency:g} s per answer; rows of "
        f"{EXAMPLES.name}, {args.rows} a run ({args.hostile_rows} for the hostile headers)"
    )
    columns = ["variant", "wall s", "of allowed rate", "429s", "rows lost", "judge requests"]
    columns += ["judge req/row", "longest gap s", "warnings", "exit"]
    lines = ["| " + " | ".join(columns) + " |", "|---" * len(columns) + "|"]
    for variant in (v.strip() for v in args.variants.split(";")):
        rows = args.hostile_rows if variant.startswith("hostile") else args.rows
        with tempfile.TemporaryDirectory(prefix="rate-limits-") as folder:
            started = time.perf_counter()
            figures = run(variant, rows, args.rpm, args.latency, Path(folder))
        if figures is None:
            lines.append(f"| {variant} | (benchmarks/ray_bench.py) |" + " |" * (len(columns) - 2))
        else:
            f = figures
            lines.append(
                f"| {variant} | {f['wall']:.1f} | {f['share']:.0%} | {f['429']:.1%} | "
                f"{f['lost']} | {f['requests']} | {f['per_row']:.2f} | {f['gap']:.1f} | "
                f"{f['warnings']} | {f['exit']} |"
            )
        print(lines[-1], f"({time.perf_counter() - started:.0f} s)", flush=True)
    print("\n" + "\n".join(lines))


if __name__ == "__main__":
    main()
