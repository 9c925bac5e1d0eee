"""Probe modes: how the judge is asked for probe questions, one registry entry per mode.

stock: N independent calls with RAGAS's prompt, run concurrently, duplicates kept (as stock).
sequential: one call at a time, each shown the probes so far.
diverse: one call for N probes.
In sequential and diverse modes duplicates are dropped and missing probes asked for again, at
most ``MAX_EXTRA_CALLS`` more calls per sample. Malformed replies never crash a sample: they are
skipped and written into the notes.

A new mode is a prompt class in :mod:`.prompts` and one :func:`register` call here. This module
imports neither RAGAS nor numpy, so the command line reads :data:`MODE_NAMES` for ``--help``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import re
import string
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import is_reply_error
from .redaction import redact

if TYPE_CHECKING:
    from ragas.prompt.metrics.base_prompt import BasePrompt

__all__ = [
    "MAX_EXTRA_CALLS",
    "MODES",
    "MODE_NAMES",
    "ProbeMode",
    "ProbeSet",
    "PromptSpec",
    "collect_probes",
    "normalise_question",
    "prompt_label",
    "register",
    "resolve_probe_prompt",
]

MAX_EXTRA_CALLS = 2

# A probe prompt as users give it: a mode's name or a prompt object.
PromptSpec = "str | BasePrompt"

_APOSTROPHES = re.compile("['‘’]")
_PUNCTUATION = re.compile(f"[{re.escape(string.punctuation)}¿¡“”]")
_SPACES = re.compile(r"\s+")


def normalise_question(question: str) -> str:
    """Fold case, punctuation and white space, so near-identical probes compare equal."""
    folded = _APOSTROPHES.sub("", question.casefold())
    return _SPACES.sub(" ", _PUNCTUATION.sub(" ", folded)).strip()


@dataclass
class ProbeSet:
    """The probes kept for one sample, and what it took to get them."""

    questions: list[str] = field(default_factory=list)
    noncommittal: list[int] = field(default_factory=list)
    judge_calls: int = 0
    duplicates_dropped: int = 0
    notes: list[str] = field(default_factory=list)
    dedupe: bool = True
    _seen: set[str] = field(default_factory=set, repr=False)

    def offer(self, question: Any, flag: Any, where: str) -> bool:
        """Keep one candidate probe if it is usable (and new, when deduplicating)."""
        if not isinstance(question, str) or not question.strip():
            self.notes.append(f"{where}: dropped an empty question")
            return False
        if isinstance(flag, bool) or flag not in (0, 1):
            self.notes.append(f"{where}: dropped {question!r}: noncommittal={flag!r} is not 0 or 1")
            return False
        key = normalise_question(question)
        if self.dedupe and key in self._seen:
            self.duplicates_dropped += 1
            return False
        self._seen.add(key)
        self.questions.append(question.strip())
        self.noncommittal.append(int(flag))
        return True


# (prompt text) -> the judge's reply as the prompt's output model; counts the call.
Ask = Callable[[str], Awaitable[Any]]
# (ask, prompt, response, strictness, probes): fills ``probes``.
Collect = Callable[[Ask, "BasePrompt", str, int, ProbeSet], Awaitable[None]]


@dataclass(frozen=True)
class ProbeMode:
    """One way of asking for probes: its prompt class (by name in :mod:`.prompts`) and strategy."""

    name: str
    prompt: str
    collect: Collect
    dedupe: bool
    help: str

    def prompt_class(self) -> type[BasePrompt]:
        """The mode's prompt class (imports RAGAS)."""
        return getattr(importlib.import_module(".prompts", __package__), self.prompt)


MODES: dict[str, ProbeMode] = {}


def register(mode: ProbeMode) -> ProbeMode:
    """Add ``mode`` to :data:`MODES`; a prompt object is matched to the first mode it fits."""
    MODES[mode.name] = mode
    return mode


async def _collect_stock(
    ask: Ask, prompt: BasePrompt, response: str, strictness: int, probes: ProbeSet
) -> None:
    text = prompt.to_string(prompt.input_model(response=response))
    replies = await asyncio.gather(*(ask(text) for _ in range(strictness)), return_exceptions=True)
    for reply in replies:
        if isinstance(reply, BaseException) and not is_reply_error(reply):
            raise reply
    for number, reply in enumerate(replies, 1):
        where = f"call {number}"
        if isinstance(reply, BaseException):
            probes.notes.append(f"{where}: {_describe(reply)}")
        else:
            probes.offer(reply.question, reply.noncommittal, where)


async def _collect_sequential(
    ask: Ask, prompt: BasePrompt, response: str, strictness: int, probes: ProbeSet
) -> None:
    budget = strictness + MAX_EXTRA_CALLS
    while len(probes.questions) < strictness and probes.judge_calls < budget:
        previous = list(probes.questions) or None
        text = prompt.to_string(prompt.input_model(response=response, previous_questions=previous))
        where = f"call {probes.judge_calls + 1}"
        reply = await _reply_or_note(ask(text), probes, where)
        if reply is not None:
            probes.offer(reply.question, reply.noncommittal, where)
    _note_shortfall(probes, strictness)


async def _collect_diverse(
    ask: Ask, prompt: BasePrompt, response: str, strictness: int, probes: ProbeSet
) -> None:
    # one call for all probes, then at most MAX_EXTRA_CALLS for the missing ones
    while len(probes.questions) < strictness and probes.judge_calls < 1 + MAX_EXTRA_CALLS:
        missing = strictness - len(probes.questions)
        avoid = list(probes.questions) or None
        text = prompt.to_string(prompt.input_model(response=response, n=missing, avoid=avoid))
        where = f"call {probes.judge_calls + 1}"
        reply = await _reply_or_note(ask(text), probes, where)
        if reply is None:
            continue
        items = list(reply.probes)
        if len(items) != missing:
            probes.notes.append(f"{where}: asked for {missing} probe(s), got {len(items)}")
        used = 0
        for item in items:
            if len(probes.questions) >= strictness:
                break
            used += 1
            probes.offer(item.question, item.noncommittal, where)
        if used < len(items):
            extra = len(items) - used
            probes.notes.append(f"{where}: ignored {extra} probe(s) beyond {strictness}")
    _note_shortfall(probes, strictness)


register(
    ProbeMode(
        "diverse",
        "DiverseProbePrompt",
        _collect_diverse,
        dedupe=True,
        help="one judge call returns N distinct probes",
    )
)
register(
    ProbeMode(
        "sequential",
        "SequentialProbePrompt",
        _collect_sequential,
        dedupe=True,
        help="N calls, each shown the probes so far",
    )
)
register(
    ProbeMode(
        "stock",
        "AnswerRelevancePrompt",
        _collect_stock,
        dedupe=False,
        help="RAGAS's own prompt, one call per probe",
    )
)

MODE_NAMES: tuple[str, ...] = tuple(MODES)


def resolve_probe_prompt(spec: Any) -> tuple[ProbeMode, BasePrompt]:
    """Turn a mode's name or a prompt object into (mode, prompt).

    A prompt object's mode follows its input and output models, so a subclass of any mode's
    prompt (new instruction, new examples) works as its parent does.
    """
    from ragas.prompt.metrics.base_prompt import BasePrompt

    if isinstance(spec, str):
        if spec not in MODES:
            raise ValueError(
                f"probe_prompt must be one of {sorted(MODES)} or a prompt object, got {spec!r}"
            )
        return MODES[spec], MODES[spec].prompt_class()()
    if not isinstance(spec, BasePrompt):
        raise TypeError(
            f"probe_prompt must be a name or a ragas BasePrompt instance, got {type(spec).__name__}"
        )
    input_model = getattr(spec, "input_model", None)
    output_model = getattr(spec, "output_model", None)
    for mode in MODES.values():
        cls = mode.prompt_class()
        if _is_sub(input_model, cls.input_model) and _is_sub(output_model, cls.output_model):
            return mode, spec
    names = ", ".join(mode.prompt for mode in MODES.values())
    raise TypeError(
        f"{type(spec).__name__} has input/output models "
        f"{getattr(input_model, '__name__', input_model)}/"
        f"{getattr(output_model, '__name__', output_model)}; a probe prompt needs those of "
        f"one of {names}"
    )


def prompt_label(spec: Any) -> str:
    """The name a report shows for a probe prompt: its name, or its class name."""
    return spec if isinstance(spec, str) else type(spec).__name__


async def collect_probes(
    llm: Any,
    mode: ProbeMode,
    prompt: BasePrompt,
    response: str,
    strictness: int,
    limiter: asyncio.Semaphore | None = None,
    callbacks: Any = None,
) -> ProbeSet:
    """Ask ``llm`` for ``strictness`` probes of ``response`` with ``prompt`` in ``mode``."""
    from .judges import ask_judge

    probes = ProbeSet(dedupe=mode.dedupe)

    async def ask(prompt_text: str) -> Any:
        probes.judge_calls += 1
        async with limiter if limiter is not None else contextlib.nullcontext():
            return await ask_judge(llm, prompt_text, prompt.output_model, callbacks)

    await mode.collect(ask, prompt, response, strictness, probes)
    return probes


async def _reply_or_note(pending: Awaitable[Any], probes: ProbeSet, where: str) -> Any:
    try:
        return await pending
    except Exception as exc:
        if not is_reply_error(exc):
            raise
        probes.notes.append(f"{where}: {_describe(exc)}")
        return None


def _describe(exc: BaseException) -> str:
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return redact(f"reply did not parse ({type(exc).__name__}: {first_line[:160]})")


def _note_shortfall(probes: ProbeSet, strictness: int) -> None:
    if len(probes.questions) < strictness:
        probes.notes.append(
            f"kept {len(probes.questions)} of {strictness} probes after "
            f"{probes.judge_calls} judge call(s)"
        )


def _is_sub(model: object, base: type) -> bool:
    return isinstance(model, type) and issubclass(model, base)
