"""The JSONL report: one line per input row, saved as each finishes, resumed, compacted.

A line is a :meth:`RelevancyReport.to_dict` plus :data:`META_KEYS` (``format`` first, so even a
torn line is ours; ``row``: the data row, with ``--engine ray`` the line's place; ``skipped``:
why a row could not be scored at all); NaN and Infinity as null, a lone surrogate as U+FFFD.
:class:`ReportFile` never writes over a file this tool did not write, holds a lock file, and
rewrites whole (a temporary file, then a rename), a symlink's target.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any, Literal, NamedTuple

from ...scoring.redaction import redact
from ...scoring.report import RelevancyReport, json_safe
from ..errors import UsageError
from .files import PidLock, atomic_file, same_file, through_link

FORMAT = "ragas-relevancy-report/1"
META_KEYS = ("format", "row", "line", "key", "judge", "embeddings", "settings", "extra", "skipped")
_MARK = json.dumps({"format": FORMAT})[:-1].encode()  # b'{"format": "ragas-relevancy-report/1"'
_LEGACY_KEYS = frozenset({"row", "key", "judge", "embeddings", "score", "user_input"})
# What a line this tool wrote never holds and a hand edit may: a surrogate escape, NaN, Infinity
_UNSAFE = r"\\u[dD][89a-fA-F]|NaN|Infinity"
_UNSAFE_TEXT, _UNSAFE_BYTES = re.compile(_UNSAFE), re.compile(_UNSAFE.encode())


class ReportFileError(UsageError):
    """An existing file cannot be used as the report (not ours, or it is the input)."""


class ReportLockError(ReportFileError):
    """Another process is writing the same report."""


def take_lock(lock: PidLock, path: Path, lock_path: Path, kind: str) -> None:
    """Take ``lock`` for ``--out path`` (a ``kind``: file or folder), or say who holds it."""
    if (holder := lock.acquire()) is not None:
        raise ReportLockError(
            f"--out {path} is being written by another ragas-relevancy process "
            f"(pid {holder}, lock {lock_path}); wait for it to finish or give --out another {kind}"
        )


def report_line(
    number: int,
    key: str,
    report: RelevancyReport | Mapping[str, Any],
    judge: str,
    embeddings: str,
    extra: dict[str, Any] | None = None,
    *,
    line: int | None = None,
    skipped: str | None = None,
    settings: Mapping[str, Any] | None = None,
) -> str:
    """One JSON line (with its newline) for one input row; ``report`` may be a ``to_dict`` (as
    Ray actors send it). Values JSON or UTF-8 cannot carry are made safe."""
    record: dict[str, Any] = {"format": FORMAT, "row": number, "line": line, "key": key}
    record.update(report if isinstance(report, Mapping) else report.to_dict())
    record.update(judge=redact(judge), embeddings=redact(embeddings), extra=extra or {})
    if settings is not None:
        record["settings"] = dict(settings)
    if skipped is not None:
        record["skipped"] = skipped
    try:
        text = json.dumps(record, ensure_ascii=False, allow_nan=False, default=str)
        text.encode("utf-8")
    except ValueError:  # NaN or Infinity, or a lone surrogate (UnicodeEncodeError) somewhere
        text = json.dumps(json_safe(record), ensure_ascii=False, allow_nan=False, default=str)
    return text + "\n"


def load_record(line: str | bytes) -> Any:
    """One report line's JSON value (``ValueError`` when not JSON), made :func:`~json_safe` when
    it may need it (an edit by hand)."""
    value = json.loads(line)
    unsafe = _UNSAFE_BYTES if isinstance(line, bytes) else _UNSAFE_TEXT
    return json_safe(value) if unsafe.search(line) else value  # type: ignore[arg-type]


def report_from_record(record: dict[str, Any]) -> RelevancyReport:
    """The :class:`RelevancyReport` in one line written by :func:`report_line`."""
    return RelevancyReport.from_dict({k: v for k, v in record.items() if k not in META_KEYS})


Status = Literal["scored", "failed", "skipped"]  # how a row ended


class Saved(NamedTuple):
    """Where one key's line sits in the file, and how that row ended."""

    offset: int
    length: int
    status: Status


def _status(record: dict[str, Any]) -> Status:
    if "skipped" in record:
        return "skipped"
    return "scored" if record.get("error") is None else "failed"


# A later line for a key wins, unless it would replace a scored row with a failed one.
_RANK = {"skipped": 0, "failed": 1, "scored": 2}


class ReportFile:
    """One report file: checked on open (:class:`ReportFileError` for a file we did not write,
    left as it was), then locked, appended to and compacted."""

    def __init__(self, path: str | Path, input_path: str | Path | None = None):
        self.path = through_link(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.index: dict[str, Saved] = {}  # key -> the line that counts for it
        self.order: list[tuple[str, int]] = []  # (key, row) of every line, in file order
        self.appended = 0
        self._torn = 0  # bytes of a cut-off last line of ours
        self._end = 0
        self._handle: IO[bytes] | None = None
        self._lock = PidLock(self.lock_path)
        if input_path is not None and same_file(self.path, input_path):
            raise ReportFileError(f"--out {self.path} is the input file; give --out a new file")
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        if not self.path.is_file():
            raise ReportFileError(f"--out {self.path} is not a regular file")
        with self.path.open("rb") as handle:
            for number, raw in enumerate(handle, 1):
                whole = raw.endswith(b"\n")
                record = _record(raw) if whole else None
                if record is not None:
                    self._keep(str(record["key"]), record, len(raw))
                elif not whole and (raw.startswith(_MARK) or (number > 1 and not raw.strip())):
                    self._torn = len(raw)  # a write cut off by a stop: dropped by begin()
                elif whole and not raw.strip():
                    self._end += len(raw)  # a blank line
                else:
                    raise ReportFileError(
                        f"--out {self.path} exists and is not a report of ragas-relevancy (line "
                        f"{number} is not a report line); it was left as it is: give --out a "
                        "new file"
                    )

    def _keep(self, key: str, record: dict[str, Any], length: int) -> None:
        """Index the line of ``length`` bytes at the end of the file, and count it."""
        saved = Saved(self._end, length, _status(record))
        old = self.index.get(key)
        if old is None or _RANK[saved.status] >= _RANK[old.status]:
            self.index[key] = saved
        self.order.append((key, record["row"]))
        self._end += length

    @property
    def lines(self) -> int:
        """Report lines in the file (a torn last line left out)."""
        return len(self.order)

    def status(self, key: str) -> Status | None:
        """How the key's row ended, or None (not in the file)."""
        saved = self.index.get(key)
        return None if saved is None else saved.status

    def records(self) -> Iterator[dict[str, Any]]:
        """Every line's record, in file order (a torn last line left out)."""
        if not self.path.exists():
            return
        with self.path.open("rb") as handle:
            yield from filter(None, (_record(raw) for raw in handle if raw.endswith(b"\n")))

    def in_order(self, keys: Iterable[tuple[str, int]]) -> bool:
        """True when the file holds exactly these (key, row) lines in this order."""
        return not self._torn and list(keys) == self.order

    def lock(self) -> None:
        """Take ``PATH.lock``; :class:`ReportLockError` naming the holder's pid if taken."""
        take_lock(self._lock, self.path, self.lock_path, "file")

    def begin(self) -> None:
        """Open for appending, after dropping a torn last line of ours (a stopped write)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = self.path.open("ab")
        if self._torn:
            self._handle.truncate(self._end)
            self._torn = 0

    def write(self, key: str, line: str) -> None:
        """Append one line and flush it to the operating system at once."""
        assert self._handle is not None, "ReportFile.begin() was not called"
        data = line.encode("utf-8")
        self._handle.write(data)
        self._handle.flush()
        self._keep(key, json.loads(line), len(data))  # the line as it will be read back
        self.appended += 1

    def close(self) -> None:
        """Close the file, then release and remove the lock file (safe to call twice)."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        self._lock.release()

    def compact(self, rows: Iterable[tuple[str, int, int | None]]) -> int:
        """Rewrite the file as one line per ``(key, row, line)``, in that order; lines of keys
        not listed go. Returns the lines written."""
        return self._rewrite((key, (number, line)) for key, number, line in rows)

    def deduplicate(self) -> int:
        """Rewrite the file as one line per key (the one :meth:`status` reads) in the order keys
        first appear, numbers as written (Ray does not know the input's order)."""
        if self.lines == len(self.index) and not self._torn:
            return self.lines
        return self._rewrite((key, None) for key in list(self.index))

    def _rewrite(self, rows: Iterable[tuple[str, tuple[int, int | None] | None]]) -> int:
        """Write ``(key, (row, line) or None to keep them)`` lines, whole, over this file."""
        if self._handle is not None:
            self._handle.flush()
        written = 0
        with atomic_file(self.path) as new, self.path.open("rb") as old:
            for key, numbers in rows:
                if (saved := self.index.get(key)) is None:
                    continue
                old.seek(saved.offset)
                raw = old.read(saved.length)
                if numbers is not None:
                    record = load_record(raw)
                    if (record.get("row"), record.get("line")) != numbers:
                        record["row"], record["line"] = numbers
                        text = json.dumps(record, ensure_ascii=False, allow_nan=False)
                        raw = (text + "\n").encode("utf-8")
                new.write(raw)
                written += 1
        return written


def _record(raw: bytes) -> dict[str, Any] | None:
    """The record of one report line, or None when the line is not one of ours."""
    try:
        record = load_record(raw)
    except (ValueError, RecursionError):
        return None
    return record if is_report_record(record) else None


def is_report_record(record: Any) -> bool:
    """True for a record this tool wrote (a report line or a Parquet row): the report format
    (or an older report's fields), a key and a row number."""
    if not isinstance(record, dict):
        return False
    ours = record.get("format") == FORMAT or _LEGACY_KEYS <= set(record)
    return ours and "key" in record and isinstance(record.get("row"), int)
