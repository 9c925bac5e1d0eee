"""Ask the judge for probe questions in one of three modes, and keep the usable ones.

stock: N independent calls with RAGAS's prompt, run concurrently, duplicates kept (as stock).
sequential: one call at a time, each shown the probes so far.
diverse: one call for N probes.
In sequential and diverse modes duplicates are dropped and missing probes asked for again,
at most ``MAX_EXTRA_CALLS`` more calls per sample. Malformed replies never crash a sample:
they are skipped and written into the notes.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from ragas.prompt.metrics.base_prompt import BasePrompt

from .errors import is_reply_error
from .judges import ask_judge
from .prompts import AnswerRelevanceInput, DiverseProbeInput, ProbeMode, SequentialProbeInput
from .redaction import redact
from .scoring import normalise_question

MAX_EXTRA_CALLS = 2


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
    probes = ProbeSet(dedupe=mode != "stock")

    async def call(prompt_text: str) -> Any:
        probes.judge_calls += 1
        async with limiter if limiter is not None else contextlib.nullcontext():
            return await ask_judge(llm, prompt_text, prompt.output_model, callbacks)

    if mode == "stock":
        text = prompt.to_string(AnswerRelevanceInput(response=response))
        replies = await asyncio.gather(
            *(call(text) for _ in range(strictness)), return_exceptions=True
        )
        _raise_transport_error(replies)
        for number, reply in enumerate(replies, 1):
            where = f"call {number}"
            if isinstance(reply, BaseException):
                probes.notes.append(f"{where}: {_describe(reply)}")
            else:
                probes.offer(reply.question, reply.noncommittal, where)
        return probes

    if mode == "sequential":
        budget = strictness + MAX_EXTRA_CALLS
        while len(probes.questions) < strictness and probes.judge_calls < budget:
            previous = list(probes.questions) or None
            text = prompt.to_string(
                SequentialProbeInput(response=response, previous_questions=previous)
            )
            where = f"call {probes.judge_calls + 1}"
            reply = await _reply_or_note(call(text), probes, where)
            if reply is not None:
                probes.offer(reply.question, reply.noncommittal, where)
        _note_shortfall(probes, strictness)
        return probes

    # diverse: one call for all probes, then at most MAX_EXTRA_CALLS for the missing ones
    while len(probes.questions) < strictness and probes.judge_calls < 1 + MAX_EXTRA_CALLS:
        missing = strictness - len(probes.questions)
        avoid = list(probes.questions) or None
        text = prompt.to_string(DiverseProbeInput(response=response, n=missing, avoid=avoid))
        where = f"call {probes.judge_calls + 1}"
        reply = await _reply_or_note(call(text), probes, where)
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
    return probes


async def _reply_or_note(pending: Any, probes: ProbeSet, where: str) -> Any:
    try:
        return await pending
    except Exception as exc:
        if not is_reply_error(exc):
            raise
        probes.notes.append(f"{where}: {_describe(exc)}")
        return None


def _raise_transport_error(replies: list[Any]) -> None:
    for reply in replies:
        if isinstance(reply, BaseException) and not is_reply_error(reply):
            raise reply


def _describe(exc: BaseException) -> str:
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return redact(f"reply did not parse ({type(exc).__name__}: {first_line[:160]})")


def _note_shortfall(probes: ProbeSet, strictness: int) -> None:
    if len(probes.questions) < strictness:
        probes.notes.append(
            f"kept {len(probes.questions)} of {strictness} probes after "
            f"{probes.judge_calls} judge call(s)"
        )
