"""What the tests share besides fixtures: paths, the shared fixture cases, a forked command, a
local OTLP trace receiver, a stand-in clock.

Importable from every test folder (``pythonpath = ["tests"]`` in pyproject.toml).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragas_relevancy_ext.testing.offline import HashEmbeddings, PretendJudge

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
FIXTURES = ROOT / "tests" / "fixtures"
# Set to 1 (CI does) and a missing [local] extra fails the suite instead of skipping its tests.
REQUIRE_LOCAL = "RAGAS_RELEVANCY_REQUIRE_LOCAL"
# Set to 1 (CI does) and a run with any skipped test fails.
NO_SKIPS = "RAGAS_RELEVANCY_NO_SKIPS"


def where() -> tuple[str, bool]:
    """This thread's name, and whether an event loop is running in it."""
    import asyncio
    import threading

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return threading.current_thread().name, False
    return threading.current_thread().name, True


def load_cases() -> list[dict[str, Any]]:
    """Every shared fixture case (tests/fixtures/cases.json)."""
    return json.loads((FIXTURES / "cases.json").read_text(encoding="utf-8"))


def load_toy() -> dict[str, Any]:
    """Seed 004's toy vectors case, whose mean cosine is 0.7463."""
    return json.loads((FIXTURES / "toy_vectors.json").read_text(encoding="utf-8"))


class ForkedCommand:
    """``ragas-relevancy ARGS`` in a forked copy of this process: a real process to interrupt or
    kill, with RAGAS already imported (a new interpreter spends seconds importing it). Its
    stdout is discarded and its stderr kept in ``stderr_path``; the interface is Popen's."""

    def __init__(self, args: Sequence[str], env: Mapping[str, str], stderr_path: Path):
        import ragas  # noqa: F401  (once here, not once in each child)

        from ragas_relevancy_ext.cli import main

        self.stderr_path = stderr_path
        self.returncode: int | None = None
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns into pytest
            code = 1
            try:
                os.environ.clear()
                os.environ.update(env)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                err = open(stderr_path, "w", encoding="utf-8")  # noqa: SIM115
                out = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
                os.dup2(err.fileno(), 2)
                os.dup2(out.fileno(), 1)
                sys.stdout, sys.stderr = out, err
                sys.argv = ["ragas-relevancy", *args]
                try:
                    main()
                    code = 0
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
                except BaseException:
                    traceback.print_exc()
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)

    def poll(self) -> int | None:
        """The exit code (negative: killed by that signal), or None while it runs."""
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8") if self.stderr_path.exists() else ""

    def wait(self, timeout: float) -> int:
        """The exit code once it ends; killed after ``timeout`` seconds, then an error."""
        for _ in range(int(timeout / 0.01)):  # polls, not a timing check
            code = self.poll()
            if code is not None:
                return code
            time.sleep(0.01)
        self.send_signal(signal.SIGKILL)
        os.waitpid(self.pid, 0)
        raise TimeoutError(f"the forked command ran over {timeout} s: {self.stderr()}")

    def communicate(self, timeout: float) -> tuple[None, str]:
        """:meth:`wait`, then ``(None, stderr)``."""
        self.wait(timeout)
        return None, self.stderr()


class OtlpReceiver:
    """A tiny OTLP/HTTP trace receiver on 127.0.0.1 (a thread of this process): it answers
    every ``POST /v1/traces`` with 200 and keeps the spans, decoded from protobuf."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.spans: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                owner._receive(self.path, body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The base URL (``--otel`` takes it; the exporter posts to ``/v1/traces`` under it)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _receive(self, path: str, body: bytes) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        found = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append(
                        {
                            "name": span.name,
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_id": span.parent_span_id.hex() or None,
                            "attributes": {a.key: _value(a.value) for a in span.attributes},
                            "events": [
                                (e.name, {a.key: _value(a.value) for a in e.attributes})
                                for e in span.events
                            ],
                            "status": span.status.code,
                            "resource": resource,
                        }
                    )
        with self._lock:
            self.paths.append(path)
            self.spans.extend(found)

    def named(self, prefix: str) -> list[dict[str, Any]]:
        """The spans received whose name starts with ``prefix``."""
        with self._lock:
            return [s for s in self.spans if s["name"].startswith(prefix)]

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _value(value: Any) -> Any:
    """An OTLP ``AnyValue`` as Python."""
    kind = value.WhichOneof("value")
    return None if kind is None else getattr(value, kind)


class TranslationCounter(PretendJudge):
    """PretendJudge counting the translation requests of RAGAS's prompt adaptation."""

    def __init__(self) -> None:
        super().__init__()
        self.translations = 0

    def _reply(self, prompt: str, response_model: Any) -> Any:
        if "statements" in response_model.model_fields:
            self.translations += 1
        return super()._reply(prompt, response_model)


class FakeTime:
    """A stand-in clock a rate limit reads, moved on only by the stand-in sleep it is given, so
    a test counts the waits asked for, never how long anything took."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        import asyncio

        self.slept.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


class CountingEmbeddings(HashEmbeddings):
    """HashEmbeddings that record how many texts each request carried; texts marked BROKEN
    fail the request."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[int] = []

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        self.requests.append(len(texts))
        if any("BROKEN" in text for text in texts):
            raise RuntimeError("embeddings down")
        return [self.embed_text(text) for text in texts]

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
        return (await self.aembed_texts([text]))[0]

    def check_requests(self, rows: int, strictness: int, shared: bool) -> None:
        """Every question and probe embedded once; shared: fewer requests than two a row,
        else a request of the question and one of the probes for each row."""
        assert sum(self.requests) == (1 + strictness) * rows
        if shared:
            assert len(self.requests) < 2 * rows
        else:
            assert sorted(self.requests) == [1] * rows + [strictness] * rows
