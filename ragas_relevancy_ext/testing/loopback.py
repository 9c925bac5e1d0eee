"""A stand-in Gemini and OpenAI API on 127.0.0.1, so tests and benchmarks drive the real SDKs::

    with LoopbackServer(width=64) as server:
        client = genai.Client(api_key="test", http_options=HttpOptions(base_url=server.url))
        openai = AsyncOpenAI(base_url=server.openai_base_url, api_key="test")

Serves Gemini's ``embedContent`` and ``batchEmbedContents`` and OpenAI's ``/v1/embeddings``
(float or base64) and ``/v1/chat/completions``. Every text has one known vector,
``server.vector(text)``, so tests compute exact scores; latency, faults and rate limits (see
:mod:`.limits`) can be switched on; the log and ``server.usage()`` say what was asked and billed.
Each answer closes its connection (HTTP/1.0), so request counts stay exact.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import math
import random
import re
import socketserver
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, get_args

import numpy as np

from .limits import Admission, EndpointBuckets
from .offline import HashEmbeddings, count_tokens, pretend_reply_text

Endpoint = Literal["gemini", "embeddings", "chat"]
FaultKind = Literal[
    "rate_limit",
    "quota",
    "server_error",
    "hang",
    "malformed",
    "unauthorized",
    "wrong_count",
    "wrong_size",
    "mixed_size",
    "nan",
]
Reply = Callable[[list[dict[str, Any]]], str]

ENDPOINTS: tuple[str, ...] = get_args(Endpoint)
FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)
VECTOR_FAULTS = frozenset({"wrong_count", "wrong_size", "mixed_size", "nan"})
_FAULT_STATUS = {"rate_limit": 429, "quota": 429, "server_error": 500, "unauthorized": 401}
_OPENAI_PATHS = {"/v1/embeddings": "embeddings", "/v1/chat/completions": "chat"}
_GEMINI_PATH = re.compile(r"^/v1[a-z0-9]*/models/(?P<model>[^/:]+):(?P<method>\w+)$")
_ERRORS = {  # status: (default message, Gemini's status name, OpenAI's error type)
    400: ("Bad request", "INVALID_ARGUMENT", "invalid_request_error"),
    401: ("Incorrect API key provided (loopback fault)", "UNAUTHENTICATED", "invalid_api_key"),
    429: ("Rate limit reached (loopback fault)", "RESOURCE_EXHAUSTED", "rate_limit_exceeded"),
    500: ("Internal server error (loopback fault)", "INTERNAL", "server_error"),
}


@dataclass(frozen=True)
class Fault:
    """One injected fault, on the listed request numbers (``at``, 1-based, counted on
    ``endpoint`` when given) and/or a seeded ``fraction`` of requests; ``endpoint`` None: all.

    kind: ``rate_limit`` (429, Retry-After), ``quota`` (429 of an account out of credit),
        ``server_error`` (500), ``hang`` (no answer for ``hang_seconds``), ``malformed`` (broken
        JSON), ``unauthorized`` (401); embeddings only: ``wrong_count`` (a vector too many),
        ``wrong_size`` (every vector half as long), ``mixed_size`` (the last) and ``nan``.
    """

    kind: FaultKind
    at: tuple[int, ...] = ()
    fraction: float = 0.0
    endpoint: Endpoint | None = None

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"fault kind must be one of {FAULT_KINDS}, got {self.kind!r}")
        if self.endpoint is not None and self.endpoint not in ENDPOINTS:
            raise ValueError(f"endpoint must be one of {ENDPOINTS} or None, got {self.endpoint!r}")
        if not 0.0 <= self.fraction <= 1.0:
            raise ValueError(f"fraction must be within 0..1, got {self.fraction!r}")
        if self.kind in VECTOR_FAULTS and self.endpoint == "chat":
            raise ValueError(f"{self.kind} is a fault of embedding answers, not of chat")
        object.__setattr__(self, "at", tuple(int(n) for n in self.at))


@dataclass
class LoggedRequest:
    """One request the server received, and how it answered."""

    number: int
    endpoint: str
    number_on_endpoint: int
    path: str
    headers: dict[str, str]  # names in lower case: clients differ in how they write them
    body: Any
    query: str = ""  # the URL's query string, without the "?"
    texts: tuple[str, ...] = ()
    model: str | None = None
    fault: str | None = None
    status: int | None = None
    replies: tuple[str, ...] = ()
    prompt_tokens: int = 0
    completion_tokens: int = 0
    waited: float = 0.0  # seconds the server held the answer back (latency and writing)
    admission: Admission | None = None  # what the rate limits said (None: its endpoint has none)
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None  # when its answer began to go out (or it was given up)


def pretend_reply(messages: list[dict[str, Any]]) -> str:
    """The default chat reply: ``offline.PretendJudge``'s answer to the last user prompt."""
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        raise ValueError("no user message to reply to")
    return pretend_reply_text(_message_text(users[-1]))


# Seconds stop() waits for the requests it released to end.
STOP_SECONDS = 10.0


@dataclass(eq=False, kw_only=True)
class LoopbackServer:
    """Gemini- and OpenAI-shaped HTTP endpoints on 127.0.0.1 with deterministic answers; every
    knob but ``width`` (each vector's length) can be changed while it runs.

    gemini_one_vector: a ``batchEmbedContents`` of several texts gets ONE vector, as
        gemini-embedding-2 answers; False: one per text.
    reply: ``reply(messages) -> str`` writes the chat completion (:func:`pretend_reply`).
    latency, endpoint_latency: seconds before every answer, overall and per endpoint name.
    token_latency, endpoint_token_latency: seconds per completion token on top (the longest of
        a request's ``n`` choices counts).
    faults: the first :class:`Fault` that matches a request decides; ``seed`` seeds fractions.
    retry_after, hang_seconds: a 429 fault's Retry-After; how long a ``hang`` holds a request.
    port: 0 takes a free one; the bound one once started.
    echo_header: a request header whose value each chat answer adds to every probe question.
    rpm, tpm, embedding_rpm, embedding_tpm: per-minute limits of chat and of embeddings (None:
        none; :mod:`.limits`), a chat request's tokens counting its ``max_completion_tokens``
        (or ``max_tokens``) times ``n``; ``limit_headers`` False sends no ``x-ratelimit-*``;
        ``per_second`` enforces each limit in one-second slices.
    headers: sent with every answer, over the server's own (a hostile ``retry-after``).
    clock: what the buckets refill by; tests pass their own.
    ``in_flight`` and ``peak_in_flight`` count requests being answered now and at most at once.
    """

    width: int = 64
    gemini_one_vector: bool = True
    reply: Reply | None = None
    latency: float = 0.0
    endpoint_latency: dict[str, float] = field(default_factory=dict)
    token_latency: float = 0.0
    endpoint_token_latency: dict[str, float] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    seed: int = 0
    retry_after: float = 1.0
    hang_seconds: float = 60.0
    port: int = 0
    echo_header: str | None = None
    rpm: int | None = None
    tpm: int | None = None
    embedding_rpm: int | None = None
    embedding_tpm: int | None = None
    limit_headers: bool = True
    per_second: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        self.faults = list(self.faults)  # any iterable will do
        self._hasher = HashEmbeddings(width=self.width)
        self._limits: dict[str, EndpointBuckets] = {}
        self._random = random.Random(self.seed)
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # told when a request ends
        self._stopping = threading.Event()
        self._log: list[LoggedRequest] = []
        self._counts: Counter[str] = Counter()
        self.in_flight = self.peak_in_flight = 0  # requests being answered; most at once
        self._httpd: _HTTPServer | None = None

    # -- life cycle -------------------------------------------------------------------------

    def start(self) -> LoopbackServer:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread."""
        if self._httpd is not None:
            raise RuntimeError("LoopbackServer is already running")
        self._stopping.clear()
        self._httpd = _HTTPServer(("127.0.0.1", self.port), _Handler)
        self._httpd.owner = self
        self.port = int(self._httpd.server_address[1])
        serve = functools.partial(self._httpd.serve_forever, poll_interval=0.05)  # quick stop()
        threading.Thread(target=serve, name="loopback-server", daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop serving; requests held by a ``hang`` fault are released and closed, and their
        ends counted before it returns."""
        if self._httpd is None:
            return
        self._stopping.set()
        self._httpd.shutdown()  # returns once the serving thread has left its loop
        self._httpd.server_close()
        self._httpd = None
        with self._idle:  # released requests end at once; a bound, not a wait that matters
            self._idle.wait_for(lambda: self.in_flight == 0, timeout=STOP_SECONDS)

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses and clients --------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``: the base_url for google-genai's HttpOptions."""
        if self._httpd is None:
            raise RuntimeError("LoopbackServer is not running")
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: the base_url for the openai SDK."""
        return f"{self.url}/v1"

    def cli_options(self) -> list[str]:
        """``ragas-relevancy`` options that aim its OpenAI judge and embeddings at this server."""
        judge, embed = "openai:loop-judge", "openai:loop-embed"
        return ["--judge", judge, "--base-url", self.openai_base_url, "--embeddings", embed]

    def genai_client(self, api_key: str = "test", **http_options: Any) -> Any:
        """A ``google.genai.Client`` aimed at this server (``timeout`` in milliseconds)."""
        from google import genai
        from google.genai import types

        options = types.HttpOptions(base_url=self.url, **http_options)
        return genai.Client(api_key=api_key, http_options=options)

    def openai_client(self, *, is_async: bool = True, api_key: str = "test", **kwargs: Any) -> Any:
        """An ``AsyncOpenAI`` (or ``OpenAI``) aimed at this server, built as the package builds
        its clients (:func:`usage_http_client`: embeddings usage read) unless ``http_client``
        is given."""
        from openai import AsyncOpenAI, OpenAI

        from ..scoring.embeddings import usage_http_client

        kwargs.setdefault("http_client", usage_http_client(is_async))
        cls = AsyncOpenAI if is_async else OpenAI
        return cls(base_url=self.openai_base_url, api_key=api_key, **kwargs)

    # -- what was asked ---------------------------------------------------------------------

    def vector(self, text: str) -> list[float]:
        """The vector this server gives ``text``; float32-exact, so base64 answers match it."""
        return np.asarray(self._hasher.embed_text(text), dtype="<f4").tolist()

    @property
    def log(self) -> list[LoggedRequest]:
        """Every request received so far, in arrival order."""
        with self._lock:
            return list(self._log)

    def requests(self, endpoint: Endpoint | None = None) -> list[LoggedRequest]:
        """Requests received on ``endpoint`` (all when None)."""
        return [r for r in self.log if endpoint is None or r.endpoint == endpoint]

    def count(self, endpoint: Endpoint | None = None) -> int:
        """How many requests arrived on ``endpoint`` (all when None)."""
        return len(self.requests(endpoint))

    def usage(self, endpoint: Endpoint | None = None) -> dict[str, int]:
        """Requests and billed tokens on ``endpoint`` (all when None), as the answers' usage:
        only answered requests (status 200) bill tokens; faulted ones count as requests."""
        rows = self.requests(endpoint)
        prompt = sum(r.prompt_tokens for r in rows if r.status == 200)
        completion = sum(r.completion_tokens for r in rows if r.status == 200)
        return {
            "requests": len(rows),
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    @property
    def counts(self) -> dict[str, int]:
        """Requests per endpoint."""
        with self._lock:
            return dict(self._counts)

    def rate_limited(self, endpoint: Endpoint | None = None) -> int:
        """How many requests on ``endpoint`` (all when None) were answered 429: refused by the
        limits (``entry.admission.admitted`` is False) or hit by a ``rate_limit`` fault."""
        return sum(1 for r in self.requests(endpoint) if r.status == 429)

    def reset(self) -> None:
        """Forget the log, the counters and the peak, and fill the rate-limit buckets again;
        request numbers start again from 1."""
        with self._lock:
            self._log.clear()
            self._counts.clear()
            self._limits.clear()
            self.peak_in_flight = self.in_flight

    def writing_seconds(self, entry: LoggedRequest) -> float:
        """Seconds the answer to ``entry`` takes to write: per-token latency x its longest reply."""
        per_token = self.endpoint_token_latency.get(entry.endpoint, self.token_latency)
        return per_token * max((count_tokens(r) for r in entry.replies), default=0)

    # -- answering --------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        path, _, query = handler.path.partition("?")
        endpoint, model = _route(path)
        if endpoint is None:
            message = f"no such endpoint: {handler.path}"  # the query too, as servers echo it
            _send(handler, 404, json.dumps({"error": {"message": message}}))
            return
        raw = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            body = None
        if model is None and isinstance(body, dict):
            model = body.get("model")
        entry = self._admit(
            endpoint,
            path=path,
            query=query,
            headers={name.lower(): value for name, value in handler.headers.items()},
            body=body,
            model=model,
        )
        try:
            self._hold(entry, self.endpoint_latency.get(endpoint, self.latency))
            if entry.fault == "hang":  # no answer: the connection closes when released
                self._stopping.wait(self.hang_seconds)
                return
            status, payload, headers = self._answer(entry)
            text = json.dumps(payload)
            if status == 200 and entry.fault == "malformed":
                text = text[: len(text) // 2]  # cut mid-object
            # closed before the answer is written, so a client holding it never finds it in flight
            self._close(entry, status)
            _send(handler, status, text, headers)
        finally:
            self._close(entry)  # a hang, or an error before any answer

    def _hold(self, entry: LoggedRequest, seconds: float) -> None:
        """Hold the answer to ``entry`` back ``seconds`` (released at once by :meth:`stop`)."""
        if seconds > 0:
            entry.waited += seconds
            self._stopping.wait(seconds)

    def _close(self, entry: LoggedRequest, status: int | None = None) -> None:
        """``entry`` answered with ``status`` (None: given up), once."""
        with self._lock:
            if entry.finished is not None:
                return
            entry.status = status
            entry.finished = time.monotonic()
            self.in_flight -= 1
            self._idle.notify_all()

    def _admit(self, endpoint: str, **request: Any) -> LoggedRequest:
        """Log a request, check it against the rate limits and draw its fault."""
        with self._lock:
            self._counts[endpoint] += 1
            entry = LoggedRequest(
                number=len(self._log) + 1,
                endpoint=endpoint,
                number_on_endpoint=self._counts[endpoint],
                **request,
            )
            entry.admission = self._check_limits(endpoint, entry.path, entry.body)
            if entry.admission is None or entry.admission.admitted:  # refused: met no model
                entry.fault = self._draw_fault(entry)
            self._log.append(entry)
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        return entry

    def _check_limits(self, endpoint: str, path: str, body: Any) -> Admission | None:
        """Admit or refuse a request by its endpoint's buckets (built when first needed, and
        again when the limits were changed); None when the endpoint has no limits."""
        chat = endpoint == "chat"
        rpm, tpm = (self.rpm, self.tpm) if chat else (self.embedding_rpm, self.embedding_tpm)
        if rpm is None and tpm is None:
            return None
        now, wanted = self.clock(), (rpm, tpm, self.per_second)
        limits = self._limits.get(endpoint)
        if limits is None or (limits.rpm, limits.tpm, limits.per_second) != wanted:
            limits = self._limits[endpoint] = EndpointBuckets(rpm, tpm, now, self.per_second)
        return limits.admit(_request_tokens(endpoint, path, body), now)

    def _draw_fault(self, entry: LoggedRequest) -> str | None:
        for fault in self.faults:
            if fault.endpoint not in (None, entry.endpoint):
                continue
            if fault.kind in VECTOR_FAULTS and entry.endpoint == "chat":
                continue
            number = entry.number_on_endpoint if fault.endpoint else entry.number
            if number in fault.at or (fault.fraction and self._random.random() < fault.fraction):
                return fault.kind
        return None

    def _answer(self, entry: LoggedRequest) -> tuple[int, Any, dict[str, str]]:
        """The status, JSON payload and headers of the answer to ``entry``."""
        family = "gemini" if entry.endpoint == "gemini" else "openai"
        admission = entry.admission
        headers = admission.headers if admission and family == "openai" else {}
        if not self.limit_headers:
            headers = {k: v for k, v in headers.items() if not k.startswith("x-ratelimit-")}
        headers = {**headers, **self.headers}
        if admission is not None and not admission.admitted:
            refusal = admission.gemini_error if family == "gemini" else admission.openai_error
            return 429, refusal(entry.model or ""), headers
        if entry.fault == "quota":
            return 429, _QUOTA[family], headers
        if entry.fault in _FAULT_STATUS:
            status = _FAULT_STATUS[entry.fault]
            if status == 429:
                headers = {"retry-after": _number(self.retry_after), **headers}
            return status, _error(family, status), headers
        answer = getattr(self, f"_{entry.endpoint}")  # _chat, _embeddings or _gemini
        try:
            payload = answer(entry, _texts(entry.endpoint, entry.path, entry.body))
        except _BadRequest as exc:
            return 400, _error(family, 400, str(exc)), headers
        except Exception as exc:  # a reply function that fails answers 500 with its error
            message = f"loopback could not answer: {type(exc).__name__}: {exc}"
            return 500, _error(family, 500, message), headers
        self._hold(entry, self.writing_seconds(entry))
        return 200, payload, headers

    def _vectors(self, texts: Sequence[str], fault: str | None) -> list[list[float]]:
        """The vectors of ``texts`` (never none), spoilt as a vector ``fault`` says."""
        vectors = [self.vector(t) for t in texts]
        half = self.width // 2  # HashEmbeddings' width is at least 2
        if fault == "wrong_count":
            vectors.append(vectors[-1])
        elif fault == "wrong_size":
            vectors = [v[:half] for v in vectors]
        elif fault == "mixed_size":
            vectors[-1] = vectors[-1][:half]
        elif fault == "nan":
            vectors[0] = [math.nan, *vectors[0][1:]]
        return vectors

    def _gemini(self, entry: LoggedRequest, texts: list[str]) -> dict[str, Any]:
        entry.texts = tuple(texts)
        if entry.path.endswith(":embedContent"):
            vectors = self._vectors(["\n".join(texts)], entry.fault)
            answer: dict[str, Any] = {"embedding": {"values": vectors[0]}}
            if len(vectors) > 1:  # wrong_count: a single-content answer carrying a list
                answer["embeddings"] = [{"values": v} for v in vectors]
            return answer
        units = ["\n".join(texts)] if self.gemini_one_vector else texts
        return {"embeddings": [{"values": v} for v in self._vectors(units, entry.fault)]}

    def _embeddings(self, entry: LoggedRequest, texts: list[str]) -> dict[str, Any]:
        entry.texts = tuple(texts)
        as_base64 = entry.body.get("encoding_format") == "base64"
        data = [
            {"object": "embedding", "index": i, "embedding": _b64(v) if as_base64 else v}
            for i, v in enumerate(self._vectors(texts, entry.fault))
        ]
        entry.prompt_tokens = tokens = sum(count_tokens(t) for t in texts)
        return {
            "object": "list",
            "data": data,
            "model": str(entry.body.get("model", "")),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    def _chat(self, entry: LoggedRequest, texts: list[str]) -> dict[str, Any]:
        messages = entry.body["messages"]
        n = entry.body.get("n") or 1
        if not isinstance(n, int) or n < 1:
            raise _BadRequest(f"n must be a whole number >= 1, got {n!r}")
        contents = [(self.reply or pretend_reply)(messages) for _ in range(n)]
        if self.echo_header is not None:
            sent = entry.headers.get(self.echo_header.lower())
            contents = [_echoed(c, f"{self.echo_header}: {sent}") for c in contents]
        entry.replies = tuple(contents)
        prompt = entry.prompt_tokens = count_tokens(texts[0])
        completion = entry.completion_tokens = sum(count_tokens(c) for c in contents)
        return {
            "id": f"chatcmpl-loopback-{entry.number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(entry.body.get("model", "")),
            "choices": [
                {
                    "index": i,
                    "message": {"role": "assistant", "content": content},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
                for i, content in enumerate(contents)
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }


def _echoed(content: str, said: str) -> str:
    """``content`` with `` (said)`` after every probe question of its JSON."""

    def add(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: f"{v} ({said})" if k == "question" and isinstance(v, str) else add(v)
                for k, v in value.items()
            }
        return [add(v) for v in value] if isinstance(value, list) else value

    try:
        return json.dumps(add(json.loads(content)))
    except ValueError:
        return f"{content} ({said})"


class _BadRequest(ValueError):
    """The request is not one the real API would accept: answered with 400."""


class _HTTPServer(ThreadingHTTPServer):
    owner: LoopbackServer
    daemon_threads = True
    block_on_close = False  # a hung request must not hold up stop()
    # listen() backlog: the default 5 drops bursts of new connections (each answer closes its
    # own), and a dropped SYN costs the client a 1 s retransmit.
    request_queue_size = 128

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks up the host's FQDN, which can stall without DNS.
        socketserver.TCPServer.server_bind(self)
        self.server_name = "127.0.0.1"
        self.server_port = int(self.server_address[1])


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    server: _HTTPServer

    def do_POST(self) -> None:
        self.server.owner._handle(self)

    def do_GET(self) -> None:
        _send(self, 404, json.dumps({"error": {"message": "the loopback API answers POST only"}}))

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output clean: the request log is ``LoopbackServer.log``."""


def _route(path: str) -> tuple[str | None, str | None]:
    """The endpoint ``path`` names (None: none), and the model a Gemini path names."""
    gemini = _GEMINI_PATH.match(path)
    return ("gemini", gemini["model"]) if gemini else (_OPENAI_PATHS.get(path), None)


def _texts(endpoint: str, path: str, body: Any) -> list[str]:
    """A request's texts as its usage counts them (a chat request's messages as one text);
    ``_BadRequest`` when the real API would refuse the request."""
    if not isinstance(body, dict):
        raise _BadRequest("body is not JSON")
    if endpoint == "chat":
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise _BadRequest("messages must be a non-empty list")
        return ["".join(_message_text(m) for m in messages)]
    if endpoint == "embeddings":
        given = body.get("input")
        texts = [given] if isinstance(given, str) else given
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            raise _BadRequest("input must be a string or a non-empty list of strings")
        return texts
    method = path.rsplit(":", 1)[-1]
    if method == "embedContent":
        contents = [body.get("content")]
    elif method == "batchEmbedContents":
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            raise _BadRequest("batchEmbedContents needs a non-empty 'requests' list")
        contents = [r.get("content") if isinstance(r, dict) else None for r in requests]
    else:
        raise _BadRequest(f"unknown Gemini method {method!r}")
    return [text for content in contents for text in _content_texts(content)]


def _content_texts(content: Any) -> list[str]:
    """The text parts of a Gemini content."""
    parts = content.get("parts") if isinstance(content, dict) else None
    if not isinstance(parts, list):
        raise _BadRequest("each content needs a 'parts' list")
    texts = [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
    if not texts:
        raise _BadRequest("a content holds no text part")
    return texts


def _request_tokens(endpoint: str, path: str, body: Any) -> int:
    """The tokens a request takes from its tokens-per-minute bucket when admitted: its texts
    counted as its usage will be, plus a chat request's asked-for completion budget (nothing
    for a request the API would refuse)."""
    try:
        tokens = sum(count_tokens(t) for t in _texts(endpoint, path, body))
    except _BadRequest:
        return 0
    budget = body.get("max_completion_tokens") or body.get("max_tokens") or 0
    n = body.get("n") or 1
    if endpoint == "chat" and isinstance(budget, int) and isinstance(n, int):
        tokens += max(0, budget * n)
    return tokens


def _b64(vector: list[float]) -> str:
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def _message_text(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _error(family: str, status: int, message: str | None = None) -> dict[str, Any]:
    default, name, kind = _ERRORS[status]
    if family == "gemini":
        return {"error": {"code": status, "message": message or default, "status": name}}
    return {"error": {"message": message or default, "type": kind, "param": None, "code": kind}}


_QUOTA = {  # an account out of credit, as each API answers it
    "openai": {
        "error": {
            "message": "You exceeded your current quota, please check your plan and billing "
            "details. (loopback fault)",
            "type": "insufficient_quota",
            "param": None,
            "code": "insufficient_quota",
        }
    },
    "gemini": {
        "error": {
            "code": 429,
            "message": "You exceeded your current quota, please check your plan and billing "
            "details.\n* Quota exceeded for metric: generativelanguage.googleapis.com/"
            "generate_content_requests, limit: 0 (loopback fault)",
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                    "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel"}],
                }
            ],
        }
    },
}


def _number(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else str(seconds)


def _send(
    handler: BaseHTTPRequestHandler, status: int, text: str, headers: dict[str, str] | None = None
) -> None:
    data = text.encode("utf-8")
    headers = {
        "Content-Type": "application/json",
        "Content-Length": str(len(data)),
        **(headers or {}),
    }
    try:
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
        pass


def main(argv: Sequence[str] | None = None) -> None:
    """Serve until interrupted: ``python -m ragas_relevancy_ext.testing.loopback --port P``."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m ragas_relevancy_ext.testing.loopback",
        description="OpenAI- and Gemini-shaped endpoints on 127.0.0.1 with offline answers.",
    )
    for flag, kind, default, help in (
        ("--port", int, 0, "port on 127.0.0.1 (0: a free one)"),
        ("--latency", float, 0.0, "seconds before every answer"),
        ("--chat-latency", float, None, "seconds, chat only"),
        ("--token-latency", float, 0.0, "seconds per completion token"),
        ("--chat-token-latency", float, None, "seconds per token, chat only"),
        ("--width", int, 64, "length of every embedding vector"),
        ("--fault-rate", float, 0.0, "fraction of faulted requests"),
    ):
        parser.add_argument(flag, type=kind, default=default, help=help)
    parser.add_argument("--fault", choices=FAULT_KINDS, default="server_error")
    parser.add_argument("--seed", type=int, default=0)
    limits = parser.add_argument_group(
        "rate limits", "per minute, refilled continuously; a request over them gets a 429"
    )
    for flag, help in (
        ("--rpm", "chat requests per minute"),
        ("--tpm", "chat tokens per minute"),
        ("--embedding-rpm", "embedding requests per minute"),
        ("--embedding-tpm", "embedding tokens per minute"),
    ):
        limits.add_argument(flag, type=int, help=help)
    limits.add_argument(
        "--per-second", action="store_true", help="enforce each limit in one-second slices"
    )
    args = vars(parser.parse_args(argv))
    chat_latency, chat_token_latency = args.pop("chat_latency"), args.pop("chat_token_latency")
    fault, fault_rate = args.pop("fault"), args.pop("fault_rate")
    server = LoopbackServer(
        **args,  # the other options are its keywords of the same names
        endpoint_latency={} if chat_latency is None else {"chat": chat_latency},
        endpoint_token_latency={} if chat_token_latency is None else {"chat": chat_token_latency},
        faults=[Fault(fault, fraction=fault_rate)] if fault_rate else [],
    )
    with server:
        print(f"serving on {server.url} (OpenAI base URL {server.openai_base_url})", flush=True)
        print("ragas-relevancy options: " + " ".join(server.cli_options()), flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
