"""A stand-in Gemini and OpenAI API on 127.0.0.1, so tests and benchmarks drive the real SDKs.

Built on the standard library's ``ThreadingHTTPServer``, running in a background thread::

    with LoopbackServer(width=64) as server:
        client = genai.Client(api_key="test", http_options=HttpOptions(base_url=server.url))
        openai = AsyncOpenAI(base_url=server.openai_base_url, api_key="test")

Serves ``POST /{version}/models/{model}:embedContent`` and ``:batchEmbedContents`` (Gemini: by
default a list of texts gets ONE vector back, as gemini-embedding-2 does), ``POST
/v1/embeddings`` (OpenAI: one vector per input, float or base64) and ``POST /v1/chat/completions``
(OpenAI, as instructor reads it). Every text has one known vector, ``server.vector(text)``, so
tests can compute exact scores. Latency per request and per reply token (overall or per
endpoint) and faults (429, 500, 401, hangs, malformed bodies, wrong vectors) can be switched on,
faults by request number or by fraction, to test failure handling; ``server.usage()`` sums the
token usage the answers reported. Per-minute request and token limits (``rpm=``, ``tpm=``,
``embedding_rpm=``, ``embedding_tpm=``) make it answer as a provider at its rate limit: OpenAI's
``x-ratelimit-*`` headers and 429s with ``retry-after``, Gemini's ``RESOURCE_EXHAUSTED`` (see
:mod:`.limits`).

Each response closes its connection (HTTP/1.0), so an SDK client reused across event loops never
retries on a stale pooled connection and the request counts stay exact.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import random
import re
import socketserver
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, get_args

from .limits import Admission, RateLimits

Endpoint = Literal["gemini", "embeddings", "chat"]
FaultKind = Literal[
    "rate_limit",
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

_GEMINI_PATH = re.compile(r"^/v1[a-z0-9]*/models/(?P<model>[^/:]+):(?P<method>\w+)$")


@dataclass(frozen=True)
class Fault:
    """One injected fault: on the listed request numbers, and/or on a fraction of requests.

    kind: ``rate_limit`` (429 with Retry-After), ``server_error`` (500), ``hang`` (no answer
        until ``hang_seconds`` pass or the server stops), ``malformed`` (200 with a broken JSON
        body), ``unauthorized`` (401 as for a bad API key; the key is never echoed), and for
        embeddings only ``wrong_count`` (one vector too many), ``wrong_size`` (every vector
        half as long), ``mixed_size`` (the answer's last vector half as long, so one answer
        mixes sizes) and ``nan`` (a NaN in the first vector).
    at: 1-based request numbers, counted on ``endpoint`` when given, else over all requests.
    fraction: chance (0..1) that any other matching request gets the fault; seeded, so
        repeatable for the same order of requests.
    endpoint: ``"gemini"``, ``"embeddings"`` or ``"chat"``; None for every endpoint.
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

    def applies(self, endpoint: str) -> bool:
        """Whether this fault can hit a request to ``endpoint``."""
        if self.endpoint is not None and self.endpoint != endpoint:
            return False
        return not (self.kind in VECTOR_FAULTS and endpoint == "chat")


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
    """The default chat reply: ``offline.PretendJudge``'s answer to the last user prompt.

    Reads the ``input: {...}`` JSON that RAGAS prompts end with (see
    :func:`ragas_relevancy_ext.testing.offline.pretend_reply_text`).
    """
    from .offline import pretend_reply_text

    return pretend_reply_text(_message_text(_last_user_message(messages)))


class LoopbackServer:
    """Gemini- and OpenAI-shaped HTTP endpoints on 127.0.0.1 with deterministic answers.

    width: length of every embedding vector.
    gemini_one_vector: answer a ``batchEmbedContents`` holding several texts with ONE vector
        (of all its texts together), as gemini-embedding-2 does; False answers one per text.
    reply: ``reply(messages) -> str`` gives the chat completion's content; default
        :func:`pretend_reply`.
    latency: seconds to wait before every answer.
    endpoint_latency: seconds per endpoint (``{"chat": 0.2}``), overriding ``latency`` there,
        so a slow judge can sit beside fast embeddings.
    token_latency: seconds per completion token of the answer, on top of ``latency``, as a
        real model takes time per token it writes (0.01 is about gpt-4o-mini). The ``n``
        choices of one chat request are written side by side: the longest one counts.
    endpoint_token_latency: seconds per completion token per endpoint, overriding
        ``token_latency`` there.
    faults: :class:`Fault` items; the first that matches a request decides its fault.
    seed: seeds the draw for fractional faults.
    retry_after: the Retry-After header (seconds) of a 429.
    hang_seconds: how long a ``hang`` fault holds a request before closing it unanswered.
    port: the port to bind on 127.0.0.1; 0 takes a free one.
    echo_header: a request header (say ``Authorization``) whose value every chat answer adds to
        each probe question it writes, as a server that echoes what it was sent, so tests can
        see what of a request could reach a report.
    rpm, tpm: requests and tokens per minute the chat endpoint admits (None: no limit).
    embedding_rpm, embedding_tpm: the same for each embeddings endpoint (OpenAI's and Gemini's
        keep separate buckets, as two providers would). A request's tokens are counted as its
        usage is: chat, the prompt's plus ``max_completion_tokens`` (or ``max_tokens``) times
        ``n`` when the request sets one; embeddings, its texts'. Limited answers carry
        ``x-ratelimit-*`` headers; a refused request gets a 429 and ``LoggedRequest.admission``
        says why (see :mod:`.limits`).
    clock: the seconds the buckets refill by (``time.monotonic``); tests pass their own.

    Every knob but ``width`` is a plain attribute and can be changed while the server runs.
    """

    def __init__(
        self,
        *,
        width: int = 64,
        gemini_one_vector: bool = True,
        reply: Reply | None = None,
        latency: float = 0.0,
        endpoint_latency: dict[str, float] | None = None,
        token_latency: float = 0.0,
        endpoint_token_latency: dict[str, float] | None = None,
        faults: Iterable[Fault] = (),
        seed: int = 0,
        retry_after: float = 1.0,
        hang_seconds: float = 60.0,
        port: int = 0,
        echo_header: str | None = None,
        rpm: int | None = None,
        tpm: int | None = None,
        embedding_rpm: int | None = None,
        embedding_tpm: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        from .offline import HashEmbeddings

        self.requested_port = port
        self._hasher = HashEmbeddings(width=width)
        self.gemini_one_vector = gemini_one_vector
        self.reply = reply
        self.latency = latency
        self.endpoint_latency: dict[str, float] = dict(endpoint_latency or {})
        self.token_latency = token_latency
        self.endpoint_token_latency: dict[str, float] = dict(endpoint_token_latency or {})
        self.faults: list[Fault] = list(faults)
        self.retry_after = retry_after
        self.hang_seconds = hang_seconds
        self.echo_header = echo_header
        self.rpm, self.tpm = rpm, tpm
        self.embedding_rpm, self.embedding_tpm = embedding_rpm, embedding_tpm
        self.clock = clock
        self._limits: dict[str, RateLimits] = {}
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._log: list[LoggedRequest] = []
        self._counts: Counter[str] = Counter()
        self._in_flight = 0
        self._peak_in_flight = 0
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- life cycle -------------------------------------------------------------------------

    def start(self) -> LoopbackServer:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread."""
        if self._httpd is not None:
            raise RuntimeError("LoopbackServer is already running")
        self._stopping.clear()
        self._httpd = _HTTPServer(("127.0.0.1", self.requested_port), _Handler, self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},  # so stop() returns at once
            name="loopback-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; requests held by a ``hang`` fault are released and closed."""
        if self._httpd is None:
            return
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses and clients --------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("LoopbackServer is not running")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``: the base_url for google-genai's HttpOptions."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: the base_url for the openai SDK."""
        return f"{self.url}/v1"

    def cli_options(self) -> list[str]:
        """``ragas-relevancy`` options that aim its OpenAI judge and embeddings at this server."""
        base = self.openai_base_url
        judge, embed = "openai:loop-judge", "openai:loop-embed"
        return ["--judge", judge, "--base-url", base, "--embeddings", embed]

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

        cls = AsyncOpenAI if is_async else OpenAI
        kwargs.setdefault("http_client", usage_http_client(is_async))
        return cls(base_url=self.openai_base_url, api_key=api_key, **kwargs)

    # -- what was asked ---------------------------------------------------------------------

    @property
    def width(self) -> int:
        """Length of every embedding vector this server gives."""
        return self._hasher.width

    def vector(self, text: str) -> list[float]:
        """The vector this server gives ``text``; float32-exact, so base64 answers match it."""
        values = self._hasher.embed_text(text)
        return list(struct.unpack(f"<{len(values)}f", struct.pack(f"<{len(values)}f", *values)))

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
        with self._lock:
            return len(self._log) if endpoint is None else self._counts[endpoint]

    def usage(self, endpoint: Endpoint | None = None) -> dict[str, int]:
        """Requests and billed tokens on ``endpoint`` (all when None), as the answers' usage.

        Only answered requests (status 200) bill tokens; faulted ones count as requests.
        """
        rows = self.requests(endpoint)
        billed = [r for r in rows if r.status == 200]
        prompt = sum(r.prompt_tokens for r in billed)
        completion = sum(r.completion_tokens for r in billed)
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

    @property
    def in_flight(self) -> int:
        """Requests being answered right now."""
        with self._lock:
            return self._in_flight

    @property
    def peak_in_flight(self) -> int:
        """Most requests answered at once since start (or :meth:`reset`)."""
        with self._lock:
            return self._peak_in_flight

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
            self._peak_in_flight = self._in_flight

    def writing_seconds(self, entry: LoggedRequest) -> float:
        """Seconds the answer to ``entry`` takes to write: per-token latency x its longest reply."""
        from .offline import count_tokens

        per_token = self.endpoint_token_latency.get(entry.endpoint, self.token_latency)
        return per_token * max((count_tokens(r) for r in entry.replies), default=0)

    # -- answering --------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        path, _, query = handler.path.partition("?")
        endpoint, model = _route(path)
        if endpoint is None:
            _send_json(handler, 404, {"error": {"message": f"no such endpoint: {path}"}})
            return
        raw = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            body = None
        headers = {name.lower(): value for name, value in handler.headers.items()}
        entry = self._admit(endpoint, path, headers, body, model)
        entry.query = query
        try:
            latency = self.endpoint_latency.get(endpoint, self.latency)
            if latency > 0:
                entry.waited += latency
                self._stopping.wait(latency)
            self._answer(handler, entry)
        finally:
            self._close(entry)  # a hang, or an error before any answer

    def _close(self, entry: LoggedRequest, status: int | None = None) -> None:
        """``entry`` answered with ``status`` (None: given up), once. Called before the answer
        is written, so a client holding its answer never finds it still in flight."""
        with self._lock:
            if entry.finished is not None:
                return
            entry.status = status
            entry.finished = time.monotonic()
            self._in_flight -= 1

    def _admit(
        self, endpoint: str, path: str, headers: dict[str, str], body: Any, model: str | None
    ) -> LoggedRequest:
        with self._lock:
            self._counts[endpoint] += 1
            entry = LoggedRequest(
                number=len(self._log) + 1,
                endpoint=endpoint,
                number_on_endpoint=self._counts[endpoint],
                path=path,
                headers=headers,
                body=body,
                model=model or (body.get("model") if isinstance(body, dict) else None),
            )
            entry.admission = admission = self._check_limits(endpoint, body)
            if admission is None or admission.admitted:  # a refused request met no model
                entry.fault = self._draw_fault(entry)
            self._log.append(entry)
            self._in_flight += 1
            self._peak_in_flight = max(self._peak_in_flight, self._in_flight)
        return entry

    def _check_limits(self, endpoint: str, body: Any) -> Admission | None:
        """Admit or refuse a request by its endpoint's buckets (built when first needed, and
        again when the limits were changed); None when the endpoint has no limits."""
        rpm, tpm = (
            (self.rpm, self.tpm) if endpoint == "chat" else (self.embedding_rpm, self.embedding_tpm)
        )
        if rpm is None and tpm is None:
            return None
        now = self.clock()
        limits = self._limits.get(endpoint)
        if limits is None or (limits.rpm, limits.tpm) != (rpm, tpm):
            limits = self._limits[endpoint] = RateLimits(rpm, tpm, now)
        return limits.admit(_request_tokens(endpoint, body), now)

    def _draw_fault(self, entry: LoggedRequest) -> str | None:
        for fault in self.faults:
            if not fault.applies(entry.endpoint):
                continue
            number = entry.number_on_endpoint if fault.endpoint else entry.number
            if number in fault.at or (fault.fraction and self._random.random() < fault.fraction):
                return fault.kind
        return None

    def _answer(self, handler: BaseHTTPRequestHandler, entry: LoggedRequest) -> None:
        family = "gemini" if entry.endpoint == "gemini" else "openai"
        admission = entry.admission
        limited = admission.headers if admission and family == "openai" else {}
        answered = functools.partial(self._close, entry)
        send = functools.partial(_send_json, handler, headers=limited, answered=answered)
        if entry.fault == "hang":
            self._stopping.wait(self.hang_seconds)
            handler.close_connection = True
            return
        if admission is not None and not admission.admitted:
            refusal = admission.gemini_error if family == "gemini" else admission.openai_error
            send(429, refusal(entry.model or ""))
            return
        if entry.fault == "rate_limit":
            retry = {"Retry-After": _number(self.retry_after)}
            send(429, _error(family, 429), headers={**limited, **retry})
            return
        if entry.fault == "server_error":
            send(500, _error(family, 500))
            return
        if entry.fault == "unauthorized":
            send(401, _error(family, 401))
            return
        if not isinstance(entry.body, dict):
            send(400, _error(family, 400, "body is not JSON"))
            return
        try:
            if entry.endpoint == "chat":
                payload = self._chat(entry)
            elif entry.endpoint == "embeddings":
                payload = self._openai_embeddings(entry)
            else:
                payload = self._gemini(entry)
        except _BadRequest as exc:
            send(400, _error(family, 400, str(exc)))
            return
        except Exception as exc:  # a reply function that fails answers 500 with its error
            message = f"loopback could not answer: {type(exc).__name__}: {exc}"
            send(500, _error(family, 500, message))
            return
        writing = self.writing_seconds(entry)
        if writing > 0:
            entry.waited += writing
            self._stopping.wait(writing)
        if entry.fault == "malformed":
            text = json.dumps(payload)
            cut = text[: len(text) // 2]  # mid-object
            _send_raw(handler, 200, cut, limited, answered=answered)
            return
        send(200, payload)

    def _vectors(self, texts: Sequence[str], fault: str | None) -> list[list[float]]:
        vectors = [self.vector(t) for t in texts]
        if fault == "wrong_count":
            vectors.append(list(vectors[-1]) if vectors else self.vector("extra"))
        elif fault == "wrong_size":
            vectors = [v[: max(1, self.width // 2)] for v in vectors]
        elif fault == "mixed_size" and vectors:
            vectors[-1] = vectors[-1][: max(1, self.width // 2)]
        elif fault == "nan" and vectors:
            vectors[0] = [math.nan, *vectors[0][1:]]
        return vectors

    def _gemini(self, entry: LoggedRequest) -> dict[str, Any]:
        body = entry.body
        method = entry.path.rsplit(":", 1)[-1]
        if method == "embedContent":
            texts = _content_texts(body.get("content"))
            entry.texts = tuple(texts)
            vectors = self._vectors(["\n".join(texts)], entry.fault)
            answer: dict[str, Any] = {"embedding": {"values": vectors[0]}}
            if len(vectors) > 1:  # wrong_count: a single-content answer carrying a list
                answer["embeddings"] = _gemini_list(vectors)
            return answer
        if method != "batchEmbedContents":
            raise _BadRequest(f"unknown Gemini method {method!r}")
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            raise _BadRequest("batchEmbedContents needs a non-empty 'requests' list")
        texts = [t for r in requests for t in _content_texts(r.get("content"))]
        entry.texts = tuple(texts)
        units = ["\n".join(texts)] if self.gemini_one_vector else texts
        return {"embeddings": _gemini_list(self._vectors(units, entry.fault))}

    def _openai_embeddings(self, entry: LoggedRequest) -> dict[str, Any]:
        from .offline import count_tokens

        body = entry.body
        given = body.get("input")
        texts = [given] if isinstance(given, str) else given
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            raise _BadRequest("input must be a string or a non-empty list of strings")
        entry.texts = tuple(texts)
        as_base64 = body.get("encoding_format") == "base64"
        data = [
            {"object": "embedding", "index": i, "embedding": _b64(v) if as_base64 else v}
            for i, v in enumerate(self._vectors(texts, entry.fault))
        ]
        tokens = sum(count_tokens(t) for t in texts)
        entry.prompt_tokens = tokens
        return {
            "object": "list",
            "data": data,
            "model": str(body.get("model", "")),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    def _chat(self, entry: LoggedRequest) -> dict[str, Any]:
        from .offline import count_tokens

        messages = entry.body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise _BadRequest("messages must be a non-empty list")
        n = entry.body.get("n") or 1
        if not isinstance(n, int) or n < 1:
            raise _BadRequest(f"n must be a whole number >= 1, got {n!r}")
        contents = [(self.reply or pretend_reply)(messages) for _ in range(n)]
        if self.echo_header is not None:
            sent = {k.lower(): v for k, v in entry.headers.items()}.get(self.echo_header.lower())
            contents = [_echoed(c, f"{self.echo_header}: {sent}") for c in contents]
        entry.replies = tuple(contents)
        prompt_tokens = count_tokens("".join(_message_text(m) for m in messages))
        completion_tokens = sum(count_tokens(c) for c in contents)
        entry.prompt_tokens, entry.completion_tokens = prompt_tokens, completion_tokens
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
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
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
    daemon_threads = True
    block_on_close = False  # a hung request must not hold up stop()
    # listen() backlog: the default 5 drops bursts of new connections (each answer closes its
    # own), and a dropped SYN costs the client a 1 s retransmit.
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], handler: type, owner: LoopbackServer):
        self.owner = owner
        super().__init__(address, handler)

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
        _send_json(self, 404, {"error": {"message": "the loopback API answers POST only"}})

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output clean: the request log is ``LoopbackServer.log``."""


def _route(path: str) -> tuple[str | None, str | None]:
    if path == "/v1/embeddings":
        return "embeddings", None
    if path == "/v1/chat/completions":
        return "chat", None
    match = _GEMINI_PATH.match(path)
    if match:
        return "gemini", match["model"]
    return None, None


def _request_tokens(endpoint: str, body: Any) -> int:
    """The tokens a request takes from its tokens-per-minute bucket when admitted: its texts
    counted as its usage will be, plus a chat request's asked-for completion budget."""
    from .offline import count_tokens

    if not isinstance(body, dict):
        return 0
    if endpoint == "chat":
        messages = body.get("messages")
        messages = messages if isinstance(messages, list) else []
        budget = body.get("max_completion_tokens") or body.get("max_tokens") or 0
        n = body.get("n") or 1
        budget = budget * n if isinstance(budget, int) and isinstance(n, int) else 0
        return count_tokens("".join(_message_text(m) for m in messages)) + max(0, budget)
    if endpoint == "embeddings":
        given = body.get("input")
        texts = [given] if isinstance(given, str) else given if isinstance(given, list) else []
    else:  # Gemini: embedContent's one content, or batchEmbedContents' requests
        requests = body.get("requests")
        requests = requests if isinstance(requests, list) else [body]
        texts = [t for r in requests if isinstance(r, dict) for t in _part_texts(r.get("content"))]
    return sum(count_tokens(t) for t in texts if isinstance(t, str))


def _content_texts(content: Any) -> list[str]:
    if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
        raise _BadRequest("each content needs a 'parts' list")
    texts = [p["text"] for p in content["parts"] if isinstance(p, dict) and "text" in p]
    if not texts:
        raise _BadRequest("a content holds no text part")
    return texts


def _part_texts(content: Any) -> list[str]:
    """The text parts of a Gemini content, or none when it is not one (never raises)."""
    parts = content.get("parts") if isinstance(content, dict) else None
    return [
        p["text"] for p in parts or [] if isinstance(p, dict) and isinstance(p.get("text"), str)
    ]


def _gemini_list(vectors: list[list[float]]) -> list[dict[str, Any]]:
    return [{"values": v} for v in vectors]


def _b64(vector: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


def _last_user_message(messages: list[dict[str, Any]]) -> dict[str, Any]:
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        raise ValueError("no user message to reply to")
    return users[-1]


def _message_text(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _error(family: str, status: int, message: str | None = None) -> dict[str, Any]:
    text = message or {
        401: "Incorrect API key provided (loopback fault)",
        429: "Rate limit reached (loopback fault)",
        500: "Internal server error (loopback fault)",
    }.get(status, "Bad request")
    if family == "gemini":
        names = {
            400: "INVALID_ARGUMENT",
            401: "UNAUTHENTICATED",
            429: "RESOURCE_EXHAUSTED",
            500: "INTERNAL",
        }
        return {"error": {"code": status, "message": text, "status": names.get(status, "UNKNOWN")}}
    types = {
        400: "invalid_request_error",
        401: "invalid_api_key",
        429: "rate_limit_exceeded",
        500: "server_error",
    }
    kind = types.get(status, "error")
    return {"error": {"message": text, "type": kind, "param": None, "code": kind}}


def _number(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else str(seconds)


def _send_json(
    handler: BaseHTTPRequestHandler,
    status: int,
    payload: Any,
    headers: dict[str, str] | None = None,
    *,
    answered: Callable[[int], None] | None = None,
) -> int:
    return _send_raw(handler, status, json.dumps(payload), headers, answered=answered)


def _send_raw(
    handler: BaseHTTPRequestHandler,
    status: int,
    text: str,
    headers: dict[str, str] | None = None,
    *,
    answered: Callable[[int], None] | None = None,
) -> int:
    """Write one answer; ``answered(status)`` is called first (see ``LoopbackServer._close``)."""
    data = text.encode("utf-8")
    if answered is not None:
        answered(status)
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
        pass
    return status


def main(argv: Sequence[str] | None = None) -> None:
    """Serve until interrupted: ``python -m ragas_relevancy_ext.testing.loopback --port P``."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m ragas_relevancy_ext.testing.loopback",
        description="OpenAI- and Gemini-shaped endpoints on 127.0.0.1 with offline answers.",
    )
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before every answer")
    parser.add_argument("--chat-latency", type=float, default=None, help="seconds, chat only")
    parser.add_argument(
        "--token-latency", type=float, default=0.0, help="seconds per completion token"
    )
    parser.add_argument(
        "--chat-token-latency", type=float, default=None, help="seconds per token, chat only"
    )
    parser.add_argument("--width", type=int, default=64, help="length of every embedding vector")
    parser.add_argument(
        "--fault-rate", type=float, default=0.0, help="fraction of faulted requests"
    )
    parser.add_argument("--fault", choices=FAULT_KINDS, default="server_error")
    parser.add_argument("--seed", type=int, default=0)
    limits = parser.add_argument_group(
        "rate limits", "per minute, refilled continuously; a request over them gets a 429"
    )
    limits.add_argument("--rpm", type=int, default=None, help="chat requests per minute")
    limits.add_argument("--tpm", type=int, default=None, help="chat tokens per minute")
    limits.add_argument(
        "--embedding-rpm", type=int, default=None, help="embedding requests per minute"
    )
    limits.add_argument(
        "--embedding-tpm", type=int, default=None, help="embedding tokens per minute"
    )
    args = parser.parse_args(argv)
    faults = [Fault(args.fault, fraction=args.fault_rate)] if args.fault_rate else []
    latencies = {} if args.chat_latency is None else {"chat": args.chat_latency}
    token_latencies = {} if args.chat_token_latency is None else {"chat": args.chat_token_latency}
    server = LoopbackServer(
        width=args.width,
        latency=args.latency,
        endpoint_latency=latencies,
        token_latency=args.token_latency,
        endpoint_token_latency=token_latencies,
        faults=faults,
        seed=args.seed,
        port=args.port,
        rpm=args.rpm,
        tpm=args.tpm,
        embedding_rpm=args.embedding_rpm,
        embedding_tpm=args.embedding_tpm,
    )
    with server:
        print(f"serving on {server.url} (OpenAI base URL {server.openai_base_url})", flush=True)
        print("ragas-relevancy options: " + " ".join(server.cli_options()), flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
