"""Probe languages: which language a text is in (``py3langid``, its model loaded in a thread of
its own on first use), and a prompt adapted to a named language once (``"auto"``: the prompt as
it is)."""

from __future__ import annotations

import asyncio
import os
import re
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from .aio import PerLoop

AUTO = "auto"
Classify = Callable[[str], tuple[str, float]]  # a text's language code and the model's score

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


# py3langid's classify once its model is loaded (None: not installed), per process: a forked
# child starts its own load rather than wait for a thread it does not have.
_DETECTORS: dict[int, Future[Classify | None]] = {}


def load_in_background() -> Future[Classify | None]:
    """This process's language model, loading in a daemon thread started on the first call
    (nothing waits for it at exit)."""
    pid = os.getpid()
    if pid not in _DETECTORS:
        loading: Future[Classify | None] = Future()
        if _DETECTORS.setdefault(pid, loading) is loading:  # one thread, whoever asks first
            name = "ragas-relevancy-languages"
            threading.Thread(target=_load, args=(loading,), name=name, daemon=True).start()
    return _DETECTORS[pid]


def _load(detector: Future[Classify | None]) -> None:
    try:
        import py3langid
    except ImportError:
        detector.set_result(None)
        return
    try:
        py3langid.classify("loads the model")
    except BaseException as exc:  # raised again where a language is read
        detector.set_exception(exc)
    else:
        detector.set_result(py3langid.classify)


async def detector_ready() -> None:
    """Wait, without blocking the event loop, until the language model is loaded."""
    detector = load_in_background()
    if not detector.done():
        await asyncio.wrap_future(detector)


def detect_language(text: str) -> str | None:
    """The ISO 639-1 code of ``text``'s language; None without py3langid or letters."""
    if not any(ch.isalpha() for ch in text):
        return None
    classify = load_in_background().result()
    return None if classify is None else str(classify(text)[0])


class AdaptedPrompts:
    """A metric's prompts adapted to a named language, translated once (concurrent samples
    wait for it) and reused until the prompt changes; a copy or pickle starts empty."""

    def __init__(self) -> None:
        self._done: dict[tuple[Any, ...], Any] = {}
        self._locks = PerLoop(asyncio.Lock)

    async def get(self, prompt: Any, language: str, llm: Any) -> Any:
        """``prompt`` adapted to ``language`` with ``llm``; ``"auto"`` gives it unchanged."""
        if language in (AUTO, getattr(prompt, "language", "english")):
            return prompt
        key = (type(prompt), prompt.instruction, repr(prompt.examples), language)
        if key in self._done:
            return self._done[key]
        async with self._locks.get():
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
