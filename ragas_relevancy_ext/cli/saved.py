"""Saved JSONL reports read back: their rows as reports with their extra input columns, and the
mean of a run with its interval; what ``show``, ``diff``, ``plan`` and the pytest gate share."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..scoring.report import RelevancyReport
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

    @classmethod
    def read(cls, path: Path) -> SavedRun:
        """The report at ``path``; a :class:`UsageError` when it has no report lines."""
        records = read_records(path)
        if not records:
            raise UsageError(f"{path}: no report lines")
        numbers, reports = [int(r["row"]) for r in records], [report_of(r) for r in records]
        return cls(path, numbers, reports, [extra_of(r) for r in records], meta_of(path, records))


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
            records[(int(record["row"]), str(record.get("key", "")))] = record
    return [records[row_key] for row_key in sorted(records)]


def report_of(record: dict[str, Any]) -> RelevancyReport:
    """A report line's :class:`RelevancyReport`, fields an older or newer writer left out
    filled in."""
    return RelevancyReport.from_dict({**_FILLERS, **record})


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

    scores, stderrs, labels, missing, columns = [], [], [], 0, set()
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
