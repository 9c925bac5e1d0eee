"""Probe modes: how the judge is asked for probe questions, one registry entry per mode (a prompt
class in :mod:`.prompts` and one :func:`register` call); RAGAS is loaded only when asked."""

from __future__ import annotations

import asyncio
import copy
import functools
import importlib
import string
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from ..errors import is_reply_error
from . import aio
from .redaction import redact

if TYPE_CHECKING:
    from langchain_core.callbacks import CallbackManagerForChainRun
    from ragas.prompt import PydanticPrompt
    from ragas.prompt.metrics.base_prompt import BasePrompt

__all__ = [
    "MAX_EXTRA_CALLS",
    "MODES",
    "MODE_NAMES",
    "ProbeMode",
    "ProbeSet",
    "Prompt",
    "PromptSpec",
    "collect_probes",
    "normalise_question",
    "prompt_label",
    "register",
    "render",
    "resolve_probe_prompt",
]

MAX_EXTRA_CALLS = 2

# A prompt object RAGAS renders, and a probe prompt as users give it: a mode's name or an object.
Prompt: TypeAlias = "PydanticPrompt[Any, Any] | BasePrompt"
PromptSpec: TypeAlias = "str | Prompt"

# Apostrophes are dropped, any other punctuation becomes a space: one str.translate, or for
# ASCII text the same table as bytes (a fifth of the cost: str.translate looks up each character).
_FOLD = str.maketrans({**dict.fromkeys(string.punctuation + "¿¡“”", " "), **dict.fromkeys("'‘’")})
_ASCII_PUNCTUATION = string.punctuation.replace("'", "").encode()
_FOLD_ASCII = bytes.maketrans(_ASCII_PUNCTUATION, b" " * len(_ASCII_PUNCTUATION))


def normalise_question(question: str) -> str:
    """Fold case, punctuation and white space, so near-identical probes compare equal."""
    folded = question.casefold()
    if folded.isascii():
        return " ".join(folded.encode().translate(_FOLD_ASCII, b"'").decode().split())
    return " ".join(folded.translate(_FOLD).split())


@dataclass
class ProbeSet:
    """The probes kept for one sample, and what it took to get them."""

    questions: list[str] = field(default_factory=list)
    noncommittal: list[int] = field(default_factory=list)
    judge_calls: int = 0
    duplicates_dropped: int = 0
    notes: list[str] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set, repr=False)  # the kept probes, folded

    def offer(self, question: Any, flag: Any, where: str) -> bool:
        """Our modes' cleaning: keep one candidate probe, stripped, if usable and new."""
        if not isinstance(question, str) or not question.strip():
            self.notes.append(f"{where}: dropped an empty question")
            return False
        if isinstance(flag, bool) or flag not in (0, 1):
            self.notes.append(f"{where}: dropped {question!r}: noncommittal={flag!r} is not 0 or 1")
            return False
        key = normalise_question(question)
        if key in self._seen:
            self.duplicates_dropped += 1
            return False
        self._seen.add(key)
        self.questions.append(question.strip())
        self.noncommittal.append(int(flag))
        return True

    def distinct(self) -> int:
        """How many kept probes differ once folded by :func:`normalise_question`."""
        return len(self._seen)

    def keep_as_stock(self, question: str, flag: int, where: str) -> None:
        """Stock's handling of one reply: kept as written, its flag as given; an empty or
        whitespace-only question (which RAGAS embeddings refuse) is dropped with a note."""
        if not question.strip():
            kind = "a whitespace-only" if question else "an empty"
            self.notes.append(f"{where}: dropped {kind} question")
            return
        self._seen.add(normalise_question(question))
        self.questions.append(question)
        self.noncommittal.append(flag)


# (the prompt's input data) -> the judge's reply as the prompt's output model; counts the call.
Ask = Callable[[Any], Awaitable[Any]]
# (ask, prompt, response, strictness, probes): fills ``probes``.
Collect = Callable[[Ask, "Prompt", str, int, ProbeSet], Awaitable[None]]


@dataclass(frozen=True)
class ProbeMode:
    """One way of asking for probes: its prompt classes (by name in :mod:`.prompts`), strategy.

    ``legacy_prompt``: the ``ragas.evaluate`` metric's default when it differs from ``prompt``.
    ``ragas_replies``: replies are read as RAGAS's prompts read them, repair requests included.
    """

    name: str
    prompt: str
    collect: Collect
    help: str
    legacy_prompt: str = ""
    ragas_replies: bool = False

    def prompt_class(self, legacy: bool = False) -> type[Prompt]:
        """The mode's default prompt class for the modern or the legacy metric (imports RAGAS)."""
        name = (self.legacy_prompt or self.prompt) if legacy else self.prompt
        return getattr(importlib.import_module(".prompts", __package__), name)

    def prompt_classes(self) -> list[type[Prompt]]:
        """Every prompt class of the mode, the modern default first."""
        classes = [self.prompt_class()]
        return classes + [self.prompt_class(legacy=True)] if self.legacy_prompt else classes

    def fits(self, prompt: Any) -> bool:
        """Whether ``prompt``'s input and output models are those of one of the mode's classes."""
        return any(
            _is_sub(getattr(prompt, "input_model", None), cls.input_model)
            and _is_sub(getattr(prompt, "output_model", None), cls.output_model)
            for cls in self.prompt_classes()
        )


MODES: dict[str, ProbeMode] = {}


def register(mode: ProbeMode) -> ProbeMode:
    """Add ``mode`` to :data:`MODES`; a prompt object is matched to the first mode it fits."""
    MODES[mode.name] = mode
    return mode


def _registered(name: str, prompt: str, help: str, **more: Any) -> Callable[[Collect], Collect]:
    """Register the decorated strategy as the probe mode ``name``."""
    return lambda collect: register(ProbeMode(name, prompt, collect, help, **more)).collect


@_registered("diverse", "DiverseProbePrompt", "one judge call returns N distinct probes")
async def _collect_diverse(
    ask: Ask, prompt: Prompt, response: str, strictness: int, probes: ProbeSet
) -> None:
    while len(probes.questions) < strictness and probes.judge_calls < 1 + MAX_EXTRA_CALLS:
        missing = strictness - len(probes.questions)
        avoid = list(probes.questions) or None
        data = prompt.input_model(response=response, n=missing, avoid=avoid)
        where = f"call {probes.judge_calls + 1}"
        try:
            reply = await ask(data)
        except Exception as exc:
            if not is_reply_error(exc):
                raise
            probes.notes.append(f"{where}: {_describe(exc)}")
            continue
        items = list(reply.probes)
        if len(items) != missing:
            probes.notes.append(f"{where}: asked for {missing} probe(s), got {len(items)}")
        for used, item in enumerate(items):
            if len(probes.questions) >= strictness:
                extra = len(items) - used
                probes.notes.append(f"{where}: ignored {extra} probe(s) beyond {strictness}")
                break
            probes.offer(item.question, item.noncommittal, where)
    _note_shortfall(probes, strictness)


@_registered("sequential", "SequentialProbePrompt", "N calls, each shown the probes so far")
async def _collect_sequential(
    ask: Ask, prompt: Prompt, response: str, strictness: int, probes: ProbeSet
) -> None:
    budget = strictness + MAX_EXTRA_CALLS
    while len(probes.questions) < strictness and probes.judge_calls < budget:
        previous = list(probes.questions) or None
        data = prompt.input_model(response=response, previous_questions=previous)
        await _ask_at_once(ask, [data], probes, first_call=probes.judge_calls + 1)
    _note_shortfall(probes, strictness)


@_registered(
    "stock",
    "AnswerRelevancePrompt",
    "RAGAS's own prompt, one call per probe",
    legacy_prompt="ResponseRelevancePrompt",
    ragas_replies=True,
)
async def _collect_stock(
    ask: Ask, prompt: Prompt, response: str, strictness: int, probes: ProbeSet
) -> None:
    data = prompt.input_model(response=response)
    await _ask_at_once(ask, [data] * strictness, probes, first_call=1, as_stock=True)


@_registered("angles", "AngleProbePrompt", "N concurrent one-probe calls, each from another angle")
async def _collect_angles(
    ask: Ask, prompt: Prompt, response: str, strictness: int, probes: ProbeSet
) -> None:
    # call i is worded from angle i (the built-in angles for a prompt without its own); what is
    # missing is asked again from fresh angles
    from .prompts import AngleProbePrompt

    angle = getattr(prompt, "angle", None)
    angle = angle if callable(angle) else AngleProbePrompt().angle
    asked, budget = 0, strictness + MAX_EXTRA_CALLS
    while (wanted := min(strictness - len(probes.questions), budget - asked)) > 0:
        avoid = list(probes.questions) or None
        inputs = [
            prompt.input_model(response=response, angle=angle(i), avoid=avoid)
            for i in range(asked, asked + wanted)
        ]
        await _ask_at_once(ask, inputs, probes, first_call=asked + 1)
        asked += wanted
    _note_shortfall(probes, strictness)


MODE_NAMES: tuple[str, ...] = tuple(MODES)


def resolve_probe_prompt(spec: Any, legacy: bool = False) -> tuple[ProbeMode, Prompt]:
    """Turn a mode's name (a new default prompt, modern or ``legacy``) or a prompt object (its
    input and output models pick the mode; TypeError when none fits) into (mode, prompt)."""
    if isinstance(spec, str):
        if spec not in MODES:
            raise ValueError(
                f"probe_prompt must be one of {sorted(MODES)} or a prompt object, got {spec!r}"
            )
        return MODES[spec], MODES[spec].prompt_class(legacy)()
    if not isinstance(spec, _prompt_families()):
        raise TypeError(
            f"probe_prompt must be a mode name or a ragas prompt object (ragas.prompt."
            f"PydanticPrompt or ragas.prompt.metrics.base_prompt.BasePrompt), "
            f"got {type(spec).__name__}"
        )
    for mode in MODES.values():
        if mode.fits(spec):
            return mode, spec
    wanted = "; ".join(
        f"{mode.name}: "
        + " or ".join(
            f"{_name(c.input_model)}/{_name(c.output_model)}" for c in mode.prompt_classes()
        )
        for mode in MODES.values()
    )
    raise TypeError(
        f"{type(spec).__name__} ({_family(spec)}) has input/output models "
        f"{_name(getattr(spec, 'input_model', None))}/{_name(getattr(spec, 'output_model', None))}"
        f", which fit no probe mode; a probe prompt needs the input/output models of one of "
        f"({wanted})"
    )


def prompt_label(mode: ProbeMode, prompt: Any) -> str:
    """What a report calls the prompt sent: the mode's name for the mode's own prompt unedited,
    else the prompt's class name; a language other than English is added in brackets."""
    edited = {"instruction", "examples"} & set(vars(prompt))
    label = (
        mode.name if type(prompt) in mode.prompt_classes() and not edited else type(prompt).__name__
    )
    language = getattr(prompt, "language", "english")
    return label if language == "english" else f"{label} ({language})"


def render(prompt: Prompt, data: Any) -> str:
    """The text ``prompt`` sends for ``data``, byte for byte as RAGAS renders it; the part
    before the input is rendered once per prompt object and reused while it is unedited."""
    process = getattr(prompt, "process_input", None)
    if process is not None:
        data = process(data)
    tail = data.model_dump_json(indent=4, exclude_none=True) + _INPUT_TAIL
    head, state = _RENDERED.get(id(prompt), ("", None))
    if state is not None and state == _state(prompt):
        return head + tail
    text = prompt.to_string(data)
    if _renders_as_ragas(type(prompt)) and text.endswith(tail):
        key = id(prompt)
        try:  # the head goes when the prompt does
            if key not in _RENDERED:
                weakref.finalize(prompt, _RENDERED.pop, key, None)
        except TypeError:  # not weakly referable: rendered every time
            return text
        _RENDERED[key] = (text[: len(text) - len(tail)], copy.deepcopy(_state(prompt)))
    return text


# RAGAS's prompts end their text with the input's JSON and this line.
_INPUT_TAIL = "\nOutput: "
# The rendering methods whose output depends only on what _state holds.
_RENDERING = ("to_string", "_generate_examples", "_generate_output_signature")
# id(prompt) -> its text up to the input, and the state it was rendered from
_RENDERED: dict[int, tuple[str, Any]] = {}


def _state(prompt: Any) -> tuple[Any, ...]:
    """What a prompt's text before its input is rendered from (examples compared last)."""
    language = getattr(prompt, "language", None)
    return (prompt.instruction, language, prompt.input_model, prompt.output_model, prompt.examples)


@functools.cache
def _renders_as_ragas(cls: type) -> bool:
    """Whether ``cls`` renders with RAGAS's ``PydanticPrompt`` or collections ``BasePrompt``
    methods unchanged (a subclass overriding one of them is rendered every time)."""
    for family in _prompt_families():
        if issubclass(cls, family):
            return all(
                getattr(cls, name, None) is getattr(family, name, None) for name in _RENDERING
            )
    return False


class _PromptStep:
    """The trace step RAGAS opens for a prompt, opened at the first judge call and closed with
    every reply (or the error); without callbacks or a name, nothing is traced."""

    def __init__(self, name: str | None, callbacks: Any):
        self.name, self.callbacks = name, callbacks
        self.run: CallbackManagerForChainRun | None = None
        self.replies: list[Any] = []

    def open(self, data: Any) -> Any:
        if self.run is None and self.name is not None and self.callbacks is not None:
            from ragas.callbacks import ChainType, new_group

            self.run, self.callbacks = new_group(
                self.name,
                inputs={"data": data},
                callbacks=self.callbacks,
                metadata={"type": ChainType.RAGAS_PROMPT},
            )
        return self.callbacks

    def close(self, error: BaseException | None = None) -> None:
        if self.run is None:
            return
        if error is not None:
            self.run.on_chain_error(error=error)
        else:  # RAGAS's trace reader takes the first of a list: no reply, no list
            self.run.on_chain_end({"output": self.replies} if self.replies else {})


def completion_budget(llm: Any) -> int:
    """The reply tokens a judge asks for (``max_tokens``), which providers count against the
    tokens per minute before the reply comes; 0 when not known."""
    for judge in (llm, getattr(llm, "inner", None)):
        args = getattr(judge, "model_args", None)
        if isinstance(args, dict):
            budget = args.get("max_completion_tokens") or args.get("max_tokens")
            if isinstance(budget, int) and budget > 0:
                return budget
    return 0


async def collect_probes(
    llm: Any,
    mode: ProbeMode,
    prompt: Prompt,
    response: str,
    strictness: int,
    limiter: aio.Limiter = None,
    callbacks: Any = None,
    trace_name: str | None = None,
) -> ProbeSet:
    """Ask ``llm`` for ``strictness`` probes of ``response`` with ``prompt`` in ``mode``."""
    from .judges import ask_judge

    probes = ProbeSet()
    step = _PromptStep(trace_name, callbacks)

    def repaired(requests: int) -> None:
        if requests:
            probes.judge_calls += requests
            probes.notes.append(f"a reply did not parse: {requests} RAGAS repair request(s) sent")

    budget = completion_budget(llm)

    async def ask(data: Any) -> Any:
        probes.judge_calls += 1
        step_callbacks = step.open(data)
        text = render(prompt, data)
        reply = await aio.send(
            limiter,
            "judge",
            text,
            lambda: ask_judge(
                llm,
                text,
                prompt.output_model,
                step_callbacks,
                repaired if mode.ragas_replies else None,
            ),
            budget,
        )
        step.replies.append(reply)
        return reply

    try:
        await mode.collect(ask, prompt, response, strictness, probes)
    except BaseException as exc:
        step.close(exc)
        raise
    step.close()
    return probes


async def _ask_at_once(
    ask: Ask, inputs: list[Any], probes: ProbeSet, first_call: int, as_stock: bool = False
) -> None:
    """Ask with each of ``inputs`` at once; offer the replies in order (kept as written when
    ``as_stock``, else cleaned); transport errors raise."""
    replies = await asyncio.gather(*(ask(data) for data in inputs), return_exceptions=True)
    for reply in replies:
        if isinstance(reply, BaseException) and not is_reply_error(reply):
            raise reply
    for number, reply in enumerate(replies, first_call):
        where = f"call {number}"
        if isinstance(reply, BaseException):
            probes.notes.append(f"{where}: {_describe(reply)}")
        elif as_stock:
            probes.keep_as_stock(reply.question, reply.noncommittal, where)
        else:
            probes.offer(reply.question, reply.noncommittal, where)


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


def _prompt_families() -> tuple[type[PydanticPrompt[Any, Any]], type[BasePrompt]]:
    from ragas.prompt import PydanticPrompt
    from ragas.prompt.metrics.base_prompt import BasePrompt

    return (PydanticPrompt, BasePrompt)


def _family(prompt: Any) -> str:
    families = [f"{c.__module__}.{c.__name__}" for c in _prompt_families() if isinstance(prompt, c)]
    return families[0] if families else type(prompt).__module__


def _name(model: Any) -> str:
    return getattr(model, "__name__", repr(model))
