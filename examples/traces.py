"""A run's spans in a real tracing backend: Arize Phoenix on this machine, over OTLP/HTTP.

Phoenix installs from PyPI; give it a virtual environment of its own (it pins many packages),
and keep it on this machine (it listens on every interface unless told otherwise):

    python3 -m venv /tmp/phoenix-venv && /tmp/phoenix-venv/bin/pip install arize-phoenix
    export PHOENIX_HOST=127.0.0.1 PHOENIX_WORKING_DIR=/tmp/phoenix-data
    /tmp/phoenix-venv/bin/phoenix serve &

Then, from this package's environment (with the [otel] extra):

    python examples/traces.py                    # Phoenix at http://localhost:6006
    python examples/traces.py --texts            # questions, answers and probes recorded too
    python examples/traces.py --loopback         # an OpenAI-shaped judge on a local server

It scores the first rows of ``support_qa.jsonl`` with ``ragas-relevancy score --otel``
(offline judge and hash embeddings, or the loopback server: no key needed) into a Phoenix
project of its own, then reads the run's trace back from Phoenix's REST API and prints it as a
tree.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("support_qa.jsonl")
PROJECT = "ragas-relevancy-example"
RUN_SPAN = "ragas-relevancy score"


def get(url: str) -> Any:
    """GET ``url`` as JSON."""
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 (a local URL)
        return json.load(response)


def spans_of(phoenix: str, project: str, **query: str) -> list[dict[str, Any]]:
    """Every span of ``project`` matching ``query`` (Phoenix's REST API, page by page)."""
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        params = {"limit": "1000", **query, **({"cursor": cursor} if cursor else {})}
        page = get(f"{phoenix}/v1/projects/{project}/spans?{urllib.parse.urlencode(params)}")
        found.extend(page["data"])
        cursor = page.get("next_cursor")
        if not cursor:
            return found


def score(phoenix: str, rows: int, texts: bool, loopback: bool) -> tuple[list[str], str]:
    """Run ``ragas-relevancy score --otel`` on the first ``rows`` rows; the command and output.
    With ``loopback`` the judge and embeddings are OpenAI-shaped, on the package's loopback
    server (the real openai SDK; token usage as a provider reports it)."""
    lines = DATA.read_text(encoding="utf-8").splitlines()[:rows]
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stack:
        data = Path(folder, "rows.jsonl")
        data.write_text("\n".join(lines) + "\n", encoding="utf-8")
        providers = ["--judge", "offline", "--embeddings", "hash"]
        env = {
            **os.environ,
            "RAGAS_DO_NOT_TRACK": "true",
            # Phoenix files spans under the project their resource names
            "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={PROJECT}",
        }
        if loopback:
            from ragas_relevancy_ext.testing.loopback import LoopbackServer

            providers = stack.enter_context(LoopbackServer(width=64)).cli_options()
            env["OPENAI_API_KEY"] = "sk-loopback-not-a-real-key"
        command = ["ragas-relevancy", "score", data.name, *providers]
        command += ["--no-table", "--otel", phoenix]
        if texts:
            env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"
        run = [sys.executable, "-m", "ragas_relevancy_ext", *command[1:]]
        done = subprocess.run(run, cwd=folder, env=env, capture_output=True, text=True)
        if done.returncode not in (0, 3):
            sys.exit(f"score failed ({done.returncode}): {done.stderr}")
    return command, done.stdout


def read_back(phoenix: str, after: float) -> list[dict[str, Any]]:
    """The spans of the newest run started after ``after`` (seconds since the epoch), waiting
    for Phoenix to store them (it writes what it receives in the background)."""
    for _ in range(60):
        try:
            runs = spans_of(phoenix, PROJECT, name=RUN_SPAN)
        except urllib.error.HTTPError as exc:  # 404 until Phoenix has made the project
            if exc.code != 404:
                raise
            runs = []
        runs = [s for s in runs if _epoch(s["start_time"]) >= after]
        if runs:
            trace_id = max(runs, key=lambda s: s["start_time"])["context"]["trace_id"]
            spans = spans_of(phoenix, PROJECT, trace_id=trace_id)
            samples = [s for s in spans if s["name"] == "ragas_relevancy.sample"]
            if spans and all(_has_children(s, spans) for s in samples):
                return spans
        time.sleep(0.5)
    sys.exit(f"the run's spans did not reach Phoenix's project {PROJECT}")


def _epoch(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _has_children(span: dict[str, Any], spans: list[dict[str, Any]]) -> bool:
    return any(s.get("parent_id") == span["context"]["span_id"] for s in spans)


def show(spans: list[dict[str, Any]]) -> None:
    """The trace as a tree: each span's name, status and the attributes that matter."""
    children: dict[str | None, list[dict[str, Any]]] = {}
    for span in sorted(spans, key=lambda s: s["start_time"]):
        children.setdefault(span.get("parent_id"), []).append(span)
    keys = {
        "ragas_relevancy.score": "score",
        "ragas_relevancy.cause": "cause",
        "ragas_relevancy.probe_mode": "mode",
        "ragas_relevancy.probe_similarity": "probe_similarity",
        "ragas_relevancy.user_input": "question",
        "gen_ai.operation.name": "gen_ai.operation",
        "gen_ai.request.model": "model",
        "gen_ai.usage.input_tokens": "input_tokens",
        "gen_ai.usage.output_tokens": "output_tokens",
        "server.address": "server",
        "ragas_relevancy.vectors": "vectors",
        "ragas_relevancy.samples": "shared by samples",
    }

    def walk(span: dict[str, Any], depth: int) -> None:
        flat = _flatten(span["attributes"])
        shown = [f"{label}={_fmt(flat[key])}" for key, label in keys.items() if key in flat]
        probes = [e for e in span.get("events", []) if e["name"] == "ragas_relevancy.probe"]
        if probes:
            cosines = [
                _flatten(e["attributes"]).get("ragas_relevancy.probe.cosine") for e in probes
            ]
            shown.append("probe cosines=" + "/".join(_fmt(c) for c in cosines))
        print(f"{'  ' * depth}{span['name']}  [{span['status_code']}]  {'  '.join(shown)}")
        for child in children.get(span["context"]["span_id"], []):
            walk(child, depth + 1)

    for root in children.get(None, []):
        walk(root, 0)


def _flatten(attributes: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Phoenix nests dotted attribute names (``{"gen_ai": {"operation": ...}}``): flat again."""
    flat: dict[str, Any] = {}
    for key, value in attributes.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def _fmt(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phoenix", default="http://localhost:6006", help="Phoenix's URL")
    parser.add_argument("--rows", type=int, default=4, help="rows of support_qa.jsonl to score")
    parser.add_argument("--texts", action="store_true", help="record the texts in the spans")
    parser.add_argument(
        "--loopback",
        action="store_true",
        help="an OpenAI-shaped judge and embeddings on the package's loopback server",
    )
    args = parser.parse_args()
    phoenix = args.phoenix.rstrip("/")
    try:
        get(f"{phoenix}/v1/projects")
    except (urllib.error.URLError, OSError) as exc:
        print(
            f"no Phoenix answers at {phoenix} ({exc}); start it as this file's top says",
            file=sys.stderr,
        )
        sys.exit(2)
    started = time.time() - 1  # Phoenix's clock is this machine's
    command, output = score(phoenix, args.rows, args.texts, args.loopback)
    print("$ " + " ".join(command))
    print(output.rstrip())
    spans = read_back(phoenix, started)
    names = [s["name"].split(" ")[0] for s in spans]
    counts = ", ".join(f"{names.count(n)} {n}" for n in dict.fromkeys(names))
    print(f"\nread back from Phoenix ({phoenix}, project {PROJECT}): {len(spans)} spans: {counts}")
    show(spans)


if __name__ == "__main__":
    main()
