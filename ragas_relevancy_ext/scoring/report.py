"""Probe-level results: each probe's question, flag and cosine, and why the score is what it is."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from functools import cached_property
from typing import Any

from ..errors import Cause, cause_phrase
from .languages import detect_language, language_name
from .usage import Usage, format_usage

_CAUSES = frozenset(Cause)
DRIFT_GAP = 0.15  # a probe this far below the closest probe's cosine "drifted" (reasons only)
LOW_SCORE = 0.5  # below this a score is "low" in reasons and displays
QUOTE_WIDTH = 80  # a probe question quoted in a reason is cut to this many characters
SKIPPED = "skipped: "  # the error of a row set aside unscored starts so
TEXT_FIELDS = ("user_input", "response")


def input_problem(record: Mapping[str, Any]) -> str | None:
    """Why a row holds nothing to score (``empty row``, ``no response``, ``user_input is int,
    not text``, ``response is empty``), or None; every engine sets such a row aside so."""
    if all(v is None or isinstance(v, str) and not v.strip() for v in record.values()):
        return "empty row"
    for name in TEXT_FIELDS:
        value = record.get(name)
        if value is None:
            return f"no {name}"
        if isinstance(value, float) and not math.isfinite(value):
            return f"{name} is {json.dumps(value)}, not text"  # NaN, Infinity, -Infinity
        if not isinstance(value, str):
            return f"{name} is {type(value).__name__}, not text"
        if not value.strip():
            return f"{name} is empty"
    return None


def row_key(
    user_input: Any, response: Any, settings_tag: str = "", problem: str | None = None
) -> str:
    """What identifies a row in every engine's report, so a re-run skips rows already scored
    (or set aside for ``problem``): 20 hex digits of sha256 over ``settings_tag`` and the texts."""
    if problem is not None:
        user_input, response = as_text(user_input), as_text(response)
        settings_tag = f"{settings_tag}|skipped|{problem}"
    texts = [
        clean_text(v) if isinstance(v, str) else "\x01" + json.dumps(v, default=str)
        for v in (user_input, response)
    ]
    digest = hashlib.sha256(f"{settings_tag}\x00{texts[0]}\x00{texts[1]}".encode())
    return digest.hexdigest()[:20]


def as_text(value: Any) -> str:
    """``value`` as :func:`clean_text` gives it when it is text, else ""."""
    return clean_text(value) if isinstance(value, str) else ""


_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` with each lone surrogate (UTF-8 cannot encode it) replaced by U+FFFD."""
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


def json_safe(value: Any) -> Any:
    """``value`` made safe for JSON and UTF-8 at any depth: non-finite floats become None and
    text (dict keys too) goes through :func:`clean_text`."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(k) if isinstance(k, str) else k: json_safe(v) for k, v in value.items()}
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


class _ProbeReadings:
    """A :class:`Probe`'s question language, detected when first read unless given."""

    @cached_property
    def language(self) -> str | None:
        return detect_language(self.question)  # type: ignore[attr-defined]


class _ReportReadings:
    """What a :class:`RelevancyReport` works out when first read unless given: a run that
    never reads them does not pay for them."""

    @cached_property
    def reason(self) -> str:
        return explain(self) + language_clause(self)  # type: ignore[arg-type]

    @cached_property
    def question_language(self) -> str | None:
        return detect_language(self.user_input)  # type: ignore[attr-defined]

    @cached_property
    def score_stderr(self) -> float:
        from .cosines import score_stderr

        cosines = [probe.cosine for probe in self.probes]  # type: ignore[attr-defined]
        return score_stderr(cosines, self.score, self.all_noncommittal)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Probe(_ProbeReadings):
    """One question the judge wrote from the response, its noncommittal flag and raw cosine;
    ``language`` given as ``""`` is detected when first read."""

    question: str
    noncommittal: int
    cosine: float
    # ISO 639-1 code or None; a default_factory keeps the cached_property reachable
    language: str | None = field(default_factory=lambda: None)

    def __post_init__(self) -> None:
        if self.language == "":
            del vars(self)["language"]


@dataclass
class RelevancyReport(_ReportReadings):
    """Everything behind one score: inputs, probes, judge calls, usage and a one-line reason.
    ``probe_similarity``: mean cosine between pairs of probes; ``cause``: why the score is NaN;
    ``reason``, ``question_language`` and ``score_stderr`` given empty are worked out when read."""

    user_input: str
    response: str
    score: float
    strictness: int
    probe_prompt: str
    all_noncommittal: bool
    probes: list[Probe] = field(default_factory=list)
    judge_calls: int = 0
    duplicates_dropped: int = 0
    distinct_probes: int = 0
    probe_similarity: float | None = None
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    reason: str = field(default_factory=str)
    question_language: str | None = field(default_factory=lambda: None)
    usage: Usage | None = None
    cause: Cause | None = None
    score_stderr: float = field(default_factory=lambda: math.nan)

    def __post_init__(self) -> None:
        given = vars(self)  # a field deleted from it is worked out when first read
        if not self.reason:
            del given["reason"]
        if self.question_language == "":
            del given["question_language"]
        if self.score_stderr is None or math.isnan(self.score_stderr):
            del given["score_stderr"]
        if self.cause is not None:
            self.cause = _as_cause(self.cause)
        elif self.error and self.error.startswith(SKIPPED):  # a row set aside, unscored
            self.cause = Cause.BAD_INPUT
        elif not self.error and not math.isfinite(self.score) and not self.probes:
            self.cause = Cause.NO_USABLE_PROBE

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (NaN becomes None)."""
        data = asdict(self)
        data["cause"] = None if self.cause is None else str(self.cause)
        data["score"] = _finite_or_none(self.score)
        data["probe_similarity"] = _finite_or_none(self.probe_similarity)
        data["score_stderr"] = _finite_or_none(data["score_stderr"])
        data["probes"] = [{**p, "cosine": _finite_or_none(p["cosine"])} for p in data["probes"]]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RelevancyReport:
        """Rebuild a report written by :meth:`to_dict`; keys it does not know are left out."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["probes"] = [
            Probe(
                p["question"], int(p["noncommittal"]), _nan_if_none(p["cosine"]), p.get("language")
            )
            for p in data.get("probes", [])
        ]
        values["score"] = _nan_if_none(data.get("score"))
        values["usage"] = Usage.from_dict(data.get("usage"))
        return cls(**values)

    def __str__(self) -> str:
        return format_report(self)


def _as_cause(value: Any) -> Any:
    """A cause read back as a :class:`Cause`; one this version does not know stays text."""
    try:
        return Cause(value)
    except ValueError:
        return str(value)


def _finite_or_none(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def _nan_if_none(value: float | None) -> float:
    return math.nan if value is None else float(value)


def plural(count: int, word: str, many: str | None = None) -> str:
    """``"1 probe"``, ``"3 probes"``: the count and the word in the right number."""
    return f"{count} {word if count == 1 else many or word + 's'}"


def pull_downs(report: RelevancyReport) -> list[tuple[Probe, float]]:
    """The drifted probes (more than :data:`DRIFT_GAP` below the closest, and below the mean),
    lowest first, each with how much leaving it out would raise the score."""
    cosines = [p.cosine for p in report.probes]
    if len(cosines) < 2 or report.all_noncommittal or not all(map(math.isfinite, cosines)):
        return []
    best, total, n = max(cosines), sum(cosines), len(cosines)
    low = min(best - DRIFT_GAP, total / n)  # below the mean too, or leaving it out lowers the score
    drifted = sorted((p for p in report.probes if p.cosine < low), key=lambda p: p.cosine)
    return [(p, (total - p.cosine) / (n - 1) - total / n) for p in drifted]


def explain(report: RelevancyReport) -> str:
    """Why the score is what it is, for someone who has never read the metric's paper: which
    probes pulled it down, whether the judge repeated itself, and what to look at next."""
    if report.error:
        if report.cause is None or report.error.startswith(SKIPPED):
            return f"Not scored: {report.error}"
        embeddings = report.error.startswith(("EmbeddingCallError", "EmbeddingShapeError"))
        return not_scored_reason(report.cause, report.error, embeddings)
    n = len(report.probes)
    finite = math.isfinite(report.score)
    if not finite:
        lead = "Not scored"
    elif report.score == 0:
        lead = "Score 0"
    else:
        lead = f"Score {report.score:.2f}"
    if n == 0:
        return (
            f"{lead}: the judge wrote no usable probe question in "
            f"{plural(report.judge_calls, 'call')}, so there was nothing to compare with the "
            "question. Next: read the judge's replies in the notes; a judge that cannot follow "
            "the probe prompt may do better with another one."
        )
    if report.all_noncommittal:
        which = {1: "its only probe question", 2: "both probe questions"}.get(
            n, f"all {n} probe questions"
        )
        return (
            f"Score 0: the judge flagged {which} as noncommittal, which means the answer dodges "
            'the question ("I don\'t know", "it depends"), and that rule sets the score to 0 '
            "whatever the similarities. Next: read the answer and check whether it answers."
        )
    if not finite or not all(math.isfinite(p.cosine) for p in report.probes):
        return (
            f"{lead}: a similarity came out as {report.score}, not a number, so the score means "
            "nothing. Next: check the embeddings' vectors for this row (infinite, tiny or "
            "wrong-sized values)."
        )
    sentences = [_what_the_score_is(report)]
    pulls = pull_downs(report)
    if pulls:
        sentences.append(_pulled_down(pulls))
    elif n > 1:
        best = max(p.cosine for p in report.probes)
        every = "Both probes are" if n == 2 else f"All {n} probes are"
        sentences.append(
            f"{every} within {DRIFT_GAP} of the closest one ({best:.2f}), so no single probe "
            "pulled the score down."
        )
    sentences.extend(_repeats(report))
    sentences.extend(_next_step(report, pulls))
    return " ".join(sentences)


def language_clause(report: RelevancyReport) -> str:
    """`` 2 of 3 probes are in English while the question is in Japanese...``, or ``""``:
    appended to a report's reason."""
    question = report.question_language
    if question is None or report.all_noncommittal:  # score 0 by rule: the cosines do not count
        return ""
    others = Counter(p.language for p in report.probes if p.language not in (None, question))
    if not others:
        return ""
    count = sum(others.values())
    listed = " or ".join(language_name(code) for code, _ in others.most_common())
    verb = "is" if count == 1 else "are"
    return (
        f" {count} of {len(report.probes)} probes {verb} in {listed} while the question is in "
        f"{language_name(question)}, which lowers the cosine whatever the meaning."
    )


def not_scored_reason(cause: Cause | str, error: str, embeddings: bool = False) -> str:
    """``Not scored (auth): the judge refused the API key: <error>``: a failed sample's reason."""
    phrase = cause_phrase(cause, embeddings) + ": " if cause in _CAUSES else ""
    return f"Not scored ({cause}): {phrase}{error}"


def _what_the_score_is(report: RelevancyReport) -> str:
    n = len(report.probes)
    if n == 1:
        quoted = clip(report.probes[0].question, QUOTE_WIDTH)
        return (
            f"Score {report.score:.2f} is the similarity (1 = same meaning) between the question "
            f'and the one question the judge wrote from the answer: "{quoted}".'
        )
    return (
        f"Score {report.score:.2f} is the average similarity (1 = same meaning) between the "
        f"question and {n} questions the judge wrote from the answer (the probes)."
    )


def _pulled_down(pulls: list[tuple[Probe, float]]) -> str:
    if len(pulls) == 1:
        probe, pull = pulls[0]
        return (
            f'The probe "{clip(probe.question, QUOTE_WIDTH)}" (similarity {probe.cosine:.2f}) '
            f"pulled it down by {pull:.2f}."
        )
    first, second = (
        f'"{clip(p.question, QUOTE_WIDTH)}" ({p.cosine:.2f}) by {pull:.2f}' for p, pull in pulls[:2]
    )
    if len(pulls) == 2:
        return f"Two probes pulled it down: {first} and {second}."
    more = plural(len(pulls) - 2, "more")
    return f"{len(pulls)} probes pulled it down: {first}, {second} and {more}."


def _repeats(report: RelevancyReport) -> list[str]:
    n = len(report.probes)
    if report.duplicates_dropped:
        dropped = report.duplicates_dropped
        return [
            f"The judge repeated itself: {plural(dropped, 'duplicate')} "
            f"{'was' if dropped == 1 else 'were'} dropped, leaving "
            f"{plural(report.distinct_probes, 'distinct probe')}."
        ]
    if report.distinct_probes and report.distinct_probes < n:
        verb = "is" if report.distinct_probes == 1 else "are"
        return [
            f"The judge repeated itself: only {report.distinct_probes} of the {n} probes {verb} "
            "distinct, so the score rests on less evidence than it seems."
        ]
    if n < report.strictness:
        verb = "was" if n == 1 else "were"
        return [
            f"Only {n} of the {report.strictness} probes asked for {verb} usable; "
            "the notes say why."
        ]
    return []


def _next_step(report: RelevancyReport, pulls: list[tuple[Probe, float]]) -> list[str]:
    if pulls:
        return [
            "Next: read the part of the answer behind the lowest probe; it may answer something "
            "the user did not ask."
        ]
    if report.score < LOW_SCORE:
        return [
            "Next: every probe is far from the question, so the answer may address another "
            "question; read the two side by side."
        ]
    if len(report.probes) == 1 and report.strictness == 1:
        return ["A higher strictness (more probes) gives a steadier score."]
    return []


def weak_point(report: RelevancyReport) -> str:
    """A short phrase for lists of low rows: what pulled this score down."""
    if not math.isfinite(report.score):
        return "not scored: " + clip(report.error or report.reason, 90)
    if report.all_noncommittal:
        return "every probe flagged noncommittal"
    if not report.probes:
        return "no usable probe"
    pulls = pull_downs(report)
    if pulls:
        probe, pull = pulls[0]
        return f"“{clip(probe.question, 70)}” ({probe.cosine:.2f}) pulled it down by {pull:.2f}"
    if report.score < LOW_SCORE:
        return "every probe far from the question"
    return "no probe stands out"


def not_scored_cause(report: RelevancyReport) -> str:
    """Why a sample is NaN in one word: its cause, ``skipped``, or (older) the error type."""
    if report.error and report.error.startswith(SKIPPED):
        return SKIPPED.split(":", 1)[0]
    if report.cause is not None:
        return str(report.cause)
    if report.error:
        return report.error.split(":", 1)[0]
    return str(Cause.NO_USABLE_PROBE)


def format_report(report: RelevancyReport) -> str:
    """A plain-text table: one line per probe, then the score and the reason, control
    characters shown as codes (it is printed to terminals)."""
    lines = [
        f"question: {clip(report.user_input, 300)}",
        f"response: {clip(report.response, 160)}",
        f"{'cosine':>8}  {'nc':>2}  probe",
    ]
    for probe in report.probes:
        line = f"{probe.cosine:>8.4f}  {probe.noncommittal:>2}  {clip(probe.question, 300)}"
        lines.append(line + language_tag(probe.language, report.question_language))
    similarity = fmt(report.probe_similarity, 3) if report.probe_similarity is not None else "-"
    lines.append(
        f"score {fmt(report.score)} | prompt {report.probe_prompt} | judge calls "
        f"{report.judge_calls} | distinct {report.distinct_probes}/{report.strictness} | "
        f"probe similarity {similarity}"
    )
    lines.extend(f"note: {neutralise_controls(note)}" for note in report.notes)
    if report.usage is not None:
        lines.append("usage: " + format_usage(report.usage))
    lines.append(f"reason: {neutralise_controls(report.reason)}")
    return "\n".join(lines)


# C0 controls but tab and newline, DEL, C1 controls, and the bidi controls and marks.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_LINE_BREAKS = re.compile("[\t\n]")


def neutralise_controls(text: str, one_line: bool = False) -> str:
    """``text`` with control and bidi characters shown as codes (ESC as ``<U+001B>``), so it
    cannot steer a terminal; tab and newline too when ``one_line``."""
    text = _CONTROLS.sub(_code, text)
    return _LINE_BREAKS.sub(_code, text) if one_line else text


def _code(match: re.Match[str]) -> str:
    return f"<U+{ord(match.group()):04X}>"


def language_tag(probe_language: str | None, question_language: str | None) -> str:
    """`` [English]`` after a probe whose language differs from the question's, else ``""``."""
    if None in (probe_language, question_language) or probe_language == question_language:
        return ""
    return f" [{language_name(probe_language)}]"


def clip(text: str, width: int) -> str:
    """``text`` on one line, control characters shown as codes, cut to ``width`` with "…"."""
    flat = neutralise_controls(" ".join(text.split()))
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def fmt(value: float | None, digits: int = 4) -> str:
    """A number with ``digits`` decimals, or ``NaN`` (for missing and non-finite values)."""
    if value is None or not math.isfinite(value):
        return "NaN"
    return f"{value:.{digits}f}"
