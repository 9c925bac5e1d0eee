"""The benchmark scripts tell a person what is going on: an estimate first, a line per step."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

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


@pytest.mark.slow
def test_probe_modes_quick_prints_its_plan_and_progress(monkeypatch, capsys):
    script = ROOT / "benchmarks" / "probe_modes.py"
    no_wait = ["--latency", "0", "--request-latency", "0", "--token-latency", "0"]
    monkeypatch.setattr(sys, "argv", [str(script), "--quick", "--samples", "1", *no_wait])
    runpy.run_path(str(script), run_name="__main__")  # in this process: RAGAS is loaded once
    out, err = capsys.readouterr()
    progress = [line for line in err.splitlines() if line.startswith(("probe", "["))]
    assert progress[0].startswith("probe_modes: loading RAGAS")
    assert progress[1].startswith("probe_modes: 10 steps, about ")
    modes = ("stock RAGAS", "ours stock", "ours sequential", "ours diverse", "ours angles")
    expected = [(n, mode) for n in (3, 10) for mode in modes]
    assert [line.split(" (")[0] for line in progress[2:12]] == [
        f"[{i}/10] strictness {n}, {mode}" for i, (n, mode) in enumerate(expected, 1)
    ]
    assert progress[12].startswith("probe_modes: done in ")
    table = out.splitlines()
    assert table[0].startswith("1 fixtures") and len(table) == 3 + 10


def test_per_sample_cpu_stand_ins_answer_as_the_originals_and_the_replay_repeats_each_call():
    import asyncio

    import per_sample
    from bench import load_rows

    from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge

    rows = load_rows(12)
    for variant in per_sample.CPU_VARIANTS:
        judge, embeddings = per_sample.FreeJudge(), per_sample.FreeEmbeddings(64)
        log: list = []
        judge.log = embeddings.log = log
        run = per_sample.metric_loop(variant, rows, judge, embeddings)
        asyncio.run(run())
        asked = [entry for entry in log if entry[0] == "agenerate"]
        assert len(asked) == (3 * len(rows) if variant == "stock" else len(rows))
        embedded = [text for entry in log if entry[0] != "agenerate" for text in entry[1:]]
        assert embedded  # every text the metric embedded went through the log
        # the same answers as the stand-ins they stand for, each a fresh list
        _, prompt, model = asked[0]
        assert judge._reply(prompt, model) == PretendJudge()._reply(prompt, model)
        text = rows[0]["user_input"]
        first, again = embeddings.embed_text(text), embeddings.embed_text(text)
        assert first == again == HashEmbeddings(64).embed_text(text) and first is not again
        # the replay makes exactly the recorded calls, in order
        judge.log = embeddings.log = replayed = []
        asyncio.run(per_sample.replay(log, judge, embeddings)())
        assert replayed == log
        # and the stand-ins change no score
        pairs = ((PretendJudge(), HashEmbeddings(64)), (judge, embeddings))
        scores = [
            [r.value for r in asyncio.run(per_sample.metric(variant, *pair, 16).abatch_score(rows))]
            for pair in pairs
        ]
        assert scores[0] == scores[1] and len(scores[0]) == len(rows)
        if variant == per_sample.TRACED:  # a sample, its judge call, its share of 2 requests
            assert run.spans >= 2 * len(rows)
