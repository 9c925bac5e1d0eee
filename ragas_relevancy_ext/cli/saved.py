"""Saved JSONL reports read back: their rows as reports with their extra input columns and the
settings that scored them, and the mean of a run with its interval; what ``show``, ``diff``,
``plan`` and the pytest gate share. A line that cannot be read is one error naming file and row."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..scoring.report import RelevancyReport, clip
from .errors import UsageError
from .options import Interval
from .output.console import OFFLINE_CAUTION
from .output.jsonl import load_record

if TYPE_CHECKING:
    from ..error_bars import ErrorBars

__all__ = [
    "SavedRun",
    "cluster_labels",
    "extra_of",
    "meta_of",
    "read_records",
    "report_of",
    "run_bars",
    "settings_of",
]


# What a line needs to be shown when an older or newer writer left a field out.
_FILLERS = dict(user_input="", response="", strictness=0, probe_prompt="", all_noncommittal=False)


@dataclass(frozen=True)
class SavedRun:
    """A JSONL report as :func:`read_records` reads it: row numbers, reports, and each
    row's extra input columns."""

    path: Path
    numbers: list[int]
    reports: list[RelevancyReport]
    extras: list[Mapping[str, Any]]
    meta: dict[str, str]  # what the run used (:func:`meta_of`)
    settings: dict[str, str]  # the settings that change a score (:func:`settings_of`)

    @classmethod
    def read(cls, path: Path) -> SavedRun:
        """The report at ``path``; a :class:`UsageError` when it has no report lines or a line
        that cannot be read."""
        records = read_records(path)
        if not records:
            raise UsageError(f"{path}: no report lines")
        numbers, reports = [r["row"] for r in records], [report_of(r, path) for r in records]
        extras = [extra_of(r) for r in records]
        return cls(path, numbers, reports, extras, meta_of(path, records), settings_of(records))


def read_records(path: Path) -> list[dict[str, Any]]:
    """A JSONL report's lines as JSON objects, in row order.

    A later line for the same row and input replaces an earlier one (a re-run retried it);
    JSON objects without a ``row`` (a header) are passed over; a line cut off mid-write at the
    end is left out; any other line that is not a report line is a :class:`UsageError`.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    text = raw.decode("utf-8", errors="replace")
    lines = text.splitlines()
    if lines and not text.endswith("\n"):
        lines.pop()  # cut off mid-write
    records: dict[tuple[int, str], dict[str, Any]] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = load_record(line)
            if not isinstance(record, dict):
                raise ValueError(line)
        except (ValueError, RecursionError):
            raise UsageError(f"{path}: line {number} is not a report line") from None
        if "row" in record:  # else a header
            row = record["row"]
            if not (isinstance(row, int) and _number(row) and row >= 1):
                raise UsageError(f"{path}: line {number}: row {clip(repr(row), 40)} is not a row")
            records[(row, str(record.get("key", "")))] = record
    return [records[row_key] for row_key in sorted(records)]


def report_of(record: dict[str, Any], path: Path | str = "report") -> RelevancyReport:
    """A report line's :class:`RelevancyReport`, fields an older or newer writer left out
    filled in; a :class:`UsageError` naming ``path`` and the row when a field is not what this
    tool writes (a score that is not a number from -1 to 1, say)."""
    probes = record.get("probes")
    cosines = [p.get("cosine") for p in probes if isinstance(p, dict)] if probes else []
    numbers = [("score", record.get("score"), -1), ("score_stderr", record.get("score_stderr"), 0)]
    numbers += [("a probe's cosine", cosine, -1) for cosine in cosines]
    problem = next(
        (
            f"{name} {clip(repr(value), 40)} is not a number from {low} to 1"
            for name, value, low in numbers
            if not (value is None or _number(value) and low <= value <= 1)
        ),
        None,
    )
    strictness = record.get("strictness", 0)
    if problem is None and not (isinstance(strictness, int) and _number(strictness)):
        problem = f"strictness {clip(repr(strictness), 40)} is not a whole number"
    if problem is None:
        try:
            return RelevancyReport.from_dict({**_FILLERS, **record})
        except (TypeError, ValueError, KeyError, AttributeError):
            problem = "its fields are not those of a report line"
    raise UsageError(f"{path}: row {record.get('row')}: {problem}")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def settings_of(records: list[dict[str, Any]]) -> dict[str, str]:
    """The settings that change a score (judge, embeddings, their URLs, strictness, probe
    prompt, language) as the lines record them: ``"mixed: x; y"`` when lines differ; a setting
    some line does not record (an older version wrote it) is left out."""
    recorded = [
        {
            **(r["settings"] if isinstance(r.get("settings"), dict) else {}),
            "strictness": r.get("strictness"),
            "probe_prompt": r.get("probe_prompt"),
        }
        for r in records
    ]
    settings = {}
    for key in sorted(set.intersection(*map(set, recorded)) if recorded else ()):
        values = sorted({"none" if r[key] is None else str(r[key]) for r in recorded})
        settings[key] = values[0] if len(values) == 1 else "mixed: " + "; ".join(values)
    return settings


def meta_of(path: Path, records: list[dict[str, Any]]) -> dict[str, str]:
    meta = {"report": f"{path} ({len(records)} row(s))"}
    for field in ("judge", "embeddings"):
        seen = sorted({str(r[field]) for r in records if r.get(field)})
        if seen:
            meta[field] = seen[0] if len(seen) == 1 else "mixed: " + "; ".join(seen)
    if any(str(r.get("judge", "")).startswith("offline") for r in records):
        meta["caution"] = OFFLINE_CAUTION
    return meta


def extra_of(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """A report line's extra input columns ({} when it has none)."""
    extra = record.get("extra")
    return extra if isinstance(extra, dict) else {}


def cluster_labels(
    reports: Sequence[RelevancyReport], extras: Sequence[Mapping[str, Any]], column: str
) -> list[str]:
    """Each row's value of input column ``column`` (as JSON text, so any value groups); a
    :class:`UsageError` naming the column when a scored row has none."""
    labels, missing = [], 0
    for report, extra in zip(reports, extras, strict=True):
        value = extra.get(column)
        missing += value is None and math.isfinite(report.score)
        labels.append(json.dumps(value, sort_keys=True, default=str))
    if missing:
        _no_cluster(column, missing, {k for extra in extras for k in extra})
    return labels


def run_bars(
    rows: Iterable[tuple[RelevancyReport, Mapping[str, Any]]],
    cluster: str | None,
    interval: Interval = Interval.clt,
) -> ErrorBars:
    """The mean of a run's (report, extra columns) rows with its interval as ``--cluster`` and
    ``--interval`` ask; one pass, keeping three numbers per row (a stream will do)."""
    from ..error_bars import mean_interval

    scores, stderrs, labels, missing, columns = [], [], [], 0, set[str]()
    for report, extra in rows:
        scores.append(report.score)
        stderrs.append(report.score_stderr)
        if cluster:
            value = extra.get(cluster)
            missing += value is None and math.isfinite(report.score)
            columns.update(extra)
            labels.append(json.dumps(value, sort_keys=True, default=str))
    if missing:
        _no_cluster(cluster, missing, columns)
    method = "bootstrap" if interval is Interval.bootstrap else None
    return mean_interval(
        scores, stderrs=stderrs, clusters=labels if cluster else None, method=method
    )


def _no_cluster(column: str | None, missing: int, columns: set[str]) -> None:
    have = ", ".join(sorted(columns)) if columns else "none"
    raise UsageError(
        f"--cluster {column}: {missing} scored row(s) have no value in that column "
        f"(input columns kept in the report: {have})"
    )
