"""The benchmark scripts tell a person what is going on: an estimate first, a line per step."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from benchsteps import Steps  # noqa: E402


def test_steps_estimate_first_then_one_line_per_step(capsys):
    steps = Steps("demo", [("load", 30.0), ("score", 90.0), ("write", 5.0)])
    for _ in range(3):
        steps.start()
    steps.finish()
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "demo: 3 steps, about 2 min 05 s (estimate)"
    assert [line.split(" (")[0] for line in lines[1:4]] == [
        "[1/3] load",
        "[2/3] score",
        "[3/3] write",
    ]
    assert lines[1].endswith("about 2 min 05 s left)") and lines[3].endswith("about 5 s left)")
    assert lines[4].startswith("demo: done in ") and lines[4].endswith("(estimated 2 min 05 s)")


def test_probe_modes_quick_prints_its_plan_and_progress():
    command = [
        sys.executable,
        str(ROOT / "benchmarks" / "probe_modes.py"),
        "--quick",
        "--samples",
        "1",
        "--latency",
        "0",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAGAS_DO_NOT_TRACK": "true"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    progress = [line for line in done.stderr.splitlines() if line.startswith(("probe", "["))]
    assert progress[0].startswith("probe_modes: loading RAGAS")
    assert progress[1].startswith("probe_modes: 8 steps, about ")
    assert [line.split(" (")[0] for line in progress[2:10]] == [
        f"[{i}/8] strictness {n}, {mode}"
        for i, (n, mode) in enumerate(
            (
                (n, m)
                for n in (3, 10)
                for m in ("stock RAGAS", "ours stock", "ours sequential", "ours diverse")
            ),
            1,
        )
    ]
    assert progress[10].startswith("probe_modes: done in ")
    table = done.stdout.splitlines()
    assert table[0].startswith("1 fixtures") and len(table) == 3 + 8
