"""The JSONL report: one line per sample, written as each finishes, and read back to resume.

Each line is a :meth:`RelevancyReport.to_dict` plus ``row`` (line or item number in the input),
``key`` (hash of user_input and response), ``judge``, ``embeddings`` and ``extra`` (the
input's other columns). A run that is stopped keeps every finished line; a re-run with the same
file skips the rows it already holds (same row number and key) and appends the rest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

from ...report import RelevancyReport
from ..errors import UsageError

META_KEYS = ("row", "key", "judge", "embeddings", "extra")


class ReportFileError(UsageError):
    """An existing report file cannot be resumed."""


def report_line(
    number: int,
    key: str,
    report: RelevancyReport,
    judge: str,
    embeddings: str,
    extra: dict[str, Any] | None = None,
) -> str:
    """One JSON line (with its newline) for one sample."""
    record = {"row": number, "key": key, **report.to_dict()}
    record.update(judge=judge, embeddings=embeddings, extra=extra or {})
    return json.dumps(record, ensure_ascii=False, allow_nan=False, default=str) + "\n"


def read_report_lines(path: str | Path) -> dict[tuple[int, str], dict[str, Any]]:
    """Records already in ``path`` by (row, key); ``{}`` when the file does not exist.

    A last line cut off mid-write (no newline) is dropped from the file, so appending goes on
    from the last complete line.
    """
    path = Path(path)
    if not path.exists():
        return {}
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):
        raw = raw[: raw.rfind(b"\n") + 1]
        with path.open("r+b") as handle:
            handle.truncate(len(raw))
    records: dict[tuple[int, str], dict[str, Any]] = {}
    for number, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            records[(int(record["row"]), str(record["key"]))] = record
        except (ValueError, KeyError, TypeError):
            raise ReportFileError(
                f"{path}: line {number} is not a report line; give --out a new file"
            ) from None
    return records


def report_from_record(record: dict[str, Any]) -> RelevancyReport:
    """The :class:`RelevancyReport` in one line written by :func:`report_line`."""
    return RelevancyReport.from_dict({k: v for k, v in record.items() if k not in META_KEYS})


class JsonlWriter:
    """Appends one line per finished sample and flushes it at once."""

    def __init__(self, path: str | Path, judge: str, embeddings: str):
        self.path = Path(path)
        self.judge = judge
        self.embeddings = embeddings
        self.written = 0
        self._handle: IO[str] | None = None

    def __enter__(self) -> JsonlWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = self.path.open("a", encoding="utf-8")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def write(
        self, number: int, key: str, report: RelevancyReport, extra: dict[str, Any] | None = None
    ) -> None:
        """Write and flush one sample's line."""
        if self._handle is None:
            raise RuntimeError("JsonlWriter is not open; use it in a with block")
        line = report_line(number, key, report, self.judge, self.embeddings, extra)
        self._handle.write(line)
        self._handle.flush()
        self.written += 1
