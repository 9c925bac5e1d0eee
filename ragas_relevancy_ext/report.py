"""Probe-level results: each probe's question, flag and cosine, and why the score is what it is."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["DRIFT_GAP", "Probe", "RelevancyReport", "clip", "explain", "fmt", "format_report"]

# A probe "drifted" when its cosine sits this far below the closest probe's. Only the reason
# sentence uses it; the score never does.
DRIFT_GAP = 0.15


@dataclass(frozen=True)
class Probe:
    """One question the judge wrote from the response, its noncommittal flag and its raw cosine."""

    question: str
    noncommittal: int
    cosine: float


@dataclass
class RelevancyReport:
    """Everything behind one score: inputs, probes, judge calls and a one-line reason."""

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
    probe_diversity: float | None = None
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    reason: str = ""

    def __post_init__(self) -> None:
        if not self.reason:
            self.reason = explain(self)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (NaN becomes None)."""
        data = asdict(self)
        data["score"] = _finite_or_none(self.score)
        data["probe_diversity"] = _finite_or_none(self.probe_diversity)
        data["probes"] = [{**p, "cosine": _finite_or_none(p["cosine"])} for p in data["probes"]]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RelevancyReport:
        """Rebuild a report written by :meth:`to_dict`."""
        values = dict(data)
        values["probes"] = [
            Probe(p["question"], int(p["noncommittal"]), _nan_if_none(p["cosine"]))
            for p in data.get("probes", [])
        ]
        values["score"] = _nan_if_none(data.get("score"))
        return cls(**values)

    def __str__(self) -> str:
        return format_report(self)


def _finite_or_none(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def _nan_if_none(value: float | None) -> float:
    return math.nan if value is None else float(value)


def explain(report: RelevancyReport) -> str:
    """One or two sentences on why the score is what it is."""
    if report.error:
        return f"Not scored: {report.error}"
    if not report.probes:
        return (
            "Not scored: the judge wrote no usable probe question "
            f"({report.judge_calls} judge call(s)), so there was nothing to compare."
        )
    n = len(report.probes)
    if report.all_noncommittal:
        return (
            f"Score 0: all {n} probe(s) were flagged noncommittal, so the response "
            "is treated as evading the question whatever the cosines."
        )
    best = max(p.cosine for p in report.probes)
    drifted = [p for p in report.probes if p.cosine < best - DRIFT_GAP]
    text = f"Score {report.score:.4f} is the mean cosine of {n} probe(s) with the question"
    if drifted:
        listed = "; ".join(f'"{p.question}" ({p.cosine:.2f})' for p in drifted[:3])
        text += f"; {len(drifted)} drifted from it: {listed}."
    else:
        text += f"; all probes sit within {DRIFT_GAP} of the closest ({best:.2f})."
    if report.duplicates_dropped:
        text += (
            f" The judge repeated itself {report.duplicates_dropped} time(s); "
            f"{report.distinct_probes} distinct probe(s) were kept."
        )
    elif report.distinct_probes < n:
        text += (
            f" Only {report.distinct_probes} of the {n} probes are distinct: the judge "
            "repeated itself, so strictness bought less evidence."
        )
    elif n < report.strictness:
        text += f" Only {n} of {report.strictness} probes were usable."
    return text


def format_report(report: RelevancyReport) -> str:
    """A plain-text table: one line per probe, then the score and the reason."""
    lines = [
        f"question: {report.user_input}",
        f"response: {clip(report.response, 160)}",
        f"{'cosine':>8}  {'nc':>2}  probe",
    ]
    for probe in report.probes:
        lines.append(f"{probe.cosine:>8.4f}  {probe.noncommittal:>2}  {probe.question}")
    diversity = "-" if report.probe_diversity is None else f"{report.probe_diversity:.3f}"
    lines.append(
        f"score {report.score:.4f} | prompt {report.probe_prompt} | judge calls "
        f"{report.judge_calls} | distinct {report.distinct_probes}/{report.strictness} | "
        f"diversity {diversity}"
    )
    lines.extend(f"note: {note}" for note in report.notes)
    lines.append(f"reason: {report.reason}")
    return "\n".join(lines)


def clip(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def fmt(value: float | None, digits: int = 4) -> str:
    """A number with ``digits`` decimals, or ``NaN`` (for missing and non-finite values)."""
    if value is None or not math.isfinite(value):
        return "NaN"
    return f"{value:.{digits}f}"
