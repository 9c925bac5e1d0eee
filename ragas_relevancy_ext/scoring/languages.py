"""Probe languages: which language a text is in (``py3langid``, loaded off the event loop on
first use), and a prompt adapted to a named language once (``"auto"``: the prompt as it is)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import threading
import weakref
from concurrent.futures import Future
from typing import Any

AUTO = "auto"

_NAMES = {
    "ar": "Arabic", "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek",
    "en": "English", "es": "Spanish", "fa": "Persian", "fi": "Finnish", "fr": "French",
    "he": "Hebrew", "hi": "Hindi", "hu": "Hungarian", "id": "Indonesian", "it": "Italian",
    "ja": "Japanese", "ko": "Korean", "nl": "Dutch", "no": "Norwegian", "pl": "Polish",
    "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sv": "Swedish", "th": "Thai",
    "tr": "Turkish", "uk": "Ukrainian", "vi": "Vietnamese", "zh": "Chinese",
}  # fmt: skip
_LANGUAGE = re.compile(r"^[^\W\d_]+(?:[ _-][^\W\d_]+)*$")


def check_language(language: Any) -> str:
    """``"auto"`` or a language's name (letters, as RAGAS's ``adapt`` takes), lower-cased."""
    if not isinstance(language, str) or not _LANGUAGE.match(language.strip()):
        raise ValueError(
            f'language must be "auto" or a language\'s name such as "japanese", got {language!r}'
        )
    return language.strip().lower()


def language_name(code: str | None) -> str:
    """``"Japanese"`` for ``"ja"``; an unknown code as itself, None as ``"unknown"``."""
    return "unknown" if code is None else _NAMES.get(code, code)


_DETECTOR: Future[Any] = Future()  # py3langid's classify, model loaded (None: not installed)
_LOADING = threading.Lock()
_STARTING = threading.Lock()


def _after_fork() -> None:
    """A forked child has none of its parent's threads: their load restarts, their locks free."""
    global _DETECTOR, _LOADING, _STARTING
    _LOADING, _STARTING = threading.Lock(), threading.Lock()
    if not _DETECTOR.done():
        _DETECTOR = Future()


os.register_at_fork(after_in_child=_after_fork)


def _load_detector() -> Any:
    """py3langid's ``classify`` with its model loaded once per process; None when py3langid is
    not installed."""
    with _LOADING:
        if not _DETECTOR.done():
            try:
                import py3langid
            except ImportError:
                _DETECTOR.set_result(None)
            else:
                try:
                    py3langid.classify("loads the model")
                except BaseException as exc:
                    _DETECTOR.set_exception(exc)
                    raise
                _DETECTOR.set_result(py3langid.classify)
    return _DETECTOR.result()


def load_in_background() -> Future[Any]:
    """Start loading the language model in a daemon thread (once; nothing waits for it at
    exit); its future."""
    detector = _DETECTOR
    with _STARTING:  # the future's RUNNING state says a thread was started for it
        if detector.running() or detector.done():
            return detector
        detector.set_running_or_notify_cancel()
    name = "ragas-relevancy-languages"
    threading.Thread(target=_quietly_load, name=name, daemon=True).start()
    return detector


def _quietly_load() -> None:
    with contextlib.suppress(Exception):  # said again where a language is first read
        _load_detector()


async def detector_ready() -> None:
    """Wait, without blocking the event loop, until the language model is loaded."""
    if not _DETECTOR.done():
        await asyncio.wrap_future(load_in_background())


def detect_language(text: str) -> str | None:
    """The ISO 639-1 code of ``text``'s language; None without py3langid or letters."""
    detector = _load_detector() if any(ch.isalpha() for ch in text) else None
    return None if detector is None else str(detector(text)[0])


class AdaptedPrompts:
    """A metric's prompts adapted to a named language, translated once (concurrent samples
    wait for it) and reused until the prompt changes; a copy or pickle starts empty."""

    def __init__(self) -> None:
        self._done: dict[tuple[Any, ...], Any] = {}
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    async def get(self, prompt: Any, language: str, llm: Any) -> Any:
        """``prompt`` adapted to ``language`` with ``llm``; ``"auto"`` gives it unchanged."""
        if language in (AUTO, getattr(prompt, "language", "english")):
            return prompt
        key = (type(prompt), prompt.instruction, repr(prompt.examples), language)
        if key in self._done:
            return self._done[key]
        loop = asyncio.get_running_loop()
        lock = self._locks.setdefault(loop, asyncio.Lock())
        async with lock:
            if key not in self._done:
                self._done[key] = await prompt.adapt(language, llm=_adapt_llm(llm))
        return self._done[key]

    def __len__(self) -> int:
        return len(self._done)

    def __reduce__(self) -> tuple[type[AdaptedPrompts], tuple[()]]:
        return (AdaptedPrompts, ())

    def __repr__(self) -> str:
        return f"AdaptedPrompts({len(self)} adapted)"


def _adapt_llm(llm: Any) -> Any:
    """The judge instructor-shaped, as RAGAS ``adapt`` takes it, so its requests are counted."""
    from .judges import JudgeWrapper, judge_kind

    judge_kind(llm)  # TypeError for what is no judge
    return llm if isinstance(llm, JudgeWrapper) else JudgeWrapper(llm)
