"""``--otel URL`` and the standard ``OTEL_EXPORTER_OTLP_*`` variables: a run's spans reach an
OTLP/HTTP receiver on 127.0.0.1 (tests/common.py), one trace per run under the command's span."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from common import ROOT, OtlpReceiver
from typer.testing import CliRunner

from ragas_relevancy_ext.cli import app, options
from ragas_relevancy_ext.scoring import otlp
from ragas_relevancy_ext.scoring.otlp import otlp_traces_url
from ragas_relevancy_ext.scoring.tracing import SAMPLE_SPAN

EXAMPLE = ROOT / "examples" / "support_qa.jsonl"
ROWS = 36  # in EXAMPLE
OFFLINE = ["--judge", "offline", "--embeddings", "hash"]
OTLP_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def invoke(*args: str | Path, env: dict[str, str | None] | None = None):
    unset: dict[str, str | None] = dict.fromkeys(OTLP_VARIABLES)
    return CliRunner().invoke(app, [str(a) for a in args], env={**unset, **(env or {})})


def check_run(received: OtlpReceiver) -> None:
    """One ``ragas-relevancy score`` span holding every row's sample span, in one trace."""
    (run,) = received.named("ragas-relevancy score")
    samples = received.named(SAMPLE_SPAN)
    assert len(samples) == ROWS
    assert {s["parent_id"] for s in samples} == {run["span_id"]}
    assert {s["trace_id"] for s in received.spans} == {run["trace_id"]}
    assert run["resource"]["service.name"] == "ragas-relevancy"
    assert set(received.paths) == {"/v1/traces"}
    sample_ids = {s["span_id"] for s in samples}
    chats = received.named("chat ")
    assert len(chats) == ROWS and {c["parent_id"] for c in chats} == sample_ids
    assert all(c["attributes"]["gen_ai.operation.name"] == "chat" for c in chats)
    scored = [s for s in samples if "ragas_relevancy.score" in s["attributes"]]
    assert len(scored) == ROWS
    assert all(len(s["events"]) == 3 for s in samples)  # a probe event each, strictness 3


def test_the_traces_url_is_the_option_s_or_the_standard_variables():
    base = "http://collector:4318"
    assert otlp_traces_url(base, {}) == f"{base}/v1/traces"
    assert otlp_traces_url(f"{base}/v1/traces/", {}) == f"{base}/v1/traces"
    assert otlp_traces_url(None, {}) is None
    assert otlp_traces_url(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": base}) == f"{base}/v1/traces"
    full = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{base}/t", "OTEL_EXPORTER_OTLP_ENDPOINT": "x"}
    assert otlp_traces_url(None, full) == f"{base}/t"  # as given, the more specific wins
    disabled = {"OTEL_EXPORTER_OTLP_ENDPOINT": base, "OTEL_SDK_DISABLED": "true"}
    assert otlp_traces_url(None, disabled) is None
    assert otlp_traces_url(base, disabled) == f"{base}/v1/traces"  # the option still counts


def test_a_traces_url_that_is_not_http_is_a_usage_error():
    result = invoke("score", EXAMPLE, *OFFLINE, "--otel", "localhost:4318")
    assert result.exit_code == 2
    assert "--otel: give an http(s) URL" in result.output


@pytest.mark.parametrize("port", ["99999", "0", "-1", "x"])
def test_an_otel_port_out_of_range_is_a_usage_error(port):
    result = invoke("score", EXAMPLE, *OFFLINE, "--otel", f"http://127.0.0.1:{port}")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"ragas-relevancy: error: --otel: give an http(s) URL such as http://localhost:4318, "
        f"got 'http://127.0.0.1:{port}'"
    ]


def test_otel_without_the_extra_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(otlp, "sdk_installed", lambda: False)
    result = invoke("score", EXAMPLE, *OFFLINE, "--otel", "http://127.0.0.1:9")
    assert result.exit_code == 2
    assert "pip install 'ragas-relevancy-ext[otel]'" in result.output


def test_the_standard_variables_without_the_extra_leave_a_note_and_score(monkeypatch):
    monkeypatch.setattr(options, "sdk_installed", lambda: False)
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    result = invoke("score", EXAMPLE, *OFFLINE, "--no-table", env=env)
    assert result.exit_code == 0, result.output
    assert "the [otel] extra is not installed, so no traces are sent" in result.output
    assert f"{ROWS} sample(s), {ROWS} scored" in result.output


@pytest.mark.slow
def test_a_run_with_otel_sends_its_spans_from_a_process_of_its_own(tmp_path):
    with OtlpReceiver() as received:
        command = [sys.executable, "-m", "ragas_relevancy_ext", "score", str(EXAMPLE)]
        done = subprocess.run(
            [*command, *OFFLINE, "--no-table", "--otel", received.url],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={k: v for k, v in os.environ.items() if k not in OTLP_VARIABLES},
            timeout=240,
        )
        assert done.returncode == 0, done.stderr
        check_run(received)  # flushed before the process ended


@pytest.mark.slow
def test_the_standard_variable_sends_the_spans_without_the_option():
    with OtlpReceiver() as received:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": received.url}
        result = invoke("score", EXAMPLE, *OFFLINE, "--no-table", env=env)
        assert result.exit_code == 0, result.output
        check_run(received)


@pytest.mark.slow
def test_the_traces_example_says_so_when_no_phoenix_answers():
    example = ROOT / "examples" / "traces.py"
    command = [sys.executable, str(example), "--phoenix", "http://127.0.0.1:9"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "no Phoenix answers at http://127.0.0.1:9" in done.stderr
    assert "Traceback" not in done.stderr
