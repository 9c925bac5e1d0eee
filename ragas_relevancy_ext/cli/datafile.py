"""Read samples from a JSONL, CSV or JSON file, rename columns, set bad rows aside: rows are
numbered from 1 in file order; a whole-file problem raises :class:`DataFileError`, a bad row
becomes a :class:`BadRow` so the good rows can still be scored."""

from __future__ import annotations

import csv
import json
import math
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..scoring.report import TEXT_FIELDS as FIELDS
from ..scoring.report import as_text, clean_text, input_problem, json_safe, row_key
from .errors import UsageError

__all__ = [
    "BadRow",
    "DataFile",
    "DataFileError",
    "Entry",
    "InputRow",
    "Scan",
    "Source",
    "parse_map",
    "read_file",
    "row_key",
    "to_number",
]

FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".json": "json"}
JSON_LIST_KEYS = ("rows", "data", "samples")
WARNINGS_SHOWN = 10
Records = Iterator[tuple[int | None, dict[str, Any] | str]]  # (file line, record or problem)


class DataFileError(UsageError):
    """The file as a whole cannot be read as samples."""


@dataclass(frozen=True)
class InputRow:
    """One usable sample: its data row number, its two texts, every other column, its line."""

    number: int
    user_input: str
    response: str
    extra: dict[str, Any] = field(default_factory=dict)
    line: int | None = None


@dataclass(frozen=True)
class BadRow:
    """A row that cannot be scored, and why; its texts as text and its other columns, kept."""

    number: int
    problem: str
    line: int | None = None
    user_input: str = ""
    response: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def where(self) -> str:
        """``row 3, line 4``: the data row, and the file line when the format has lines."""
        return f"row {self.number}" + (f", line {self.line}" if self.line is not None else "")


Entry = InputRow | BadRow


@dataclass
class Scan:
    """What one pass over a file found: usable and bad rows counted, the first bad ones (all for
    :func:`read_file`), and warnings."""

    path: Path
    row_count: int = 0
    bad_count: int = 0
    warnings: list[str] = field(default_factory=list)
    bad: list[BadRow] = field(default_factory=list)

    def describe_bad(self, limit: int = 10) -> list[str]:
        """``row 3, line 4: no response`` per bad row (at most ``limit``, then a count)."""
        lines = [f"{b.where}: {b.problem}" for b in self.bad[:limit]]
        if self.bad_count > limit:
            lines.append(f"... and {self.bad_count - limit} more bad row(s)")
        return lines


@dataclass
class DataFile(Scan):
    """The rows of one file, all in memory: the usable ones and every one set aside."""

    rows: list[InputRow] = field(default_factory=list)


def parse_map(specs: Iterable[str]) -> dict[str, str]:
    """``["question=user_input"]`` -> ``{"question": "user_input"}`` (column -> field; either
    side may name the field)."""
    mapping: dict[str, str] = {}
    for spec in specs:
        left, sep, right = (part.strip() for part in spec.partition("="))
        if not sep or not left or not right:
            raise DataFileError(f"--map {spec!r}: write COLUMN=FIELD, e.g. question=user_input")
        if (left in FIELDS) == (right in FIELDS):
            raise DataFileError(
                f"--map {spec!r}: exactly one side must be a field ({', '.join(FIELDS)}) "
                "and the other a column of the file"
            )
        column, target = (left, right) if right in FIELDS else (right, left)
        if target in mapping.values():
            raise DataFileError(f"--map names a column for {target} twice")
        mapping[column] = target
    return mapping


def read_file(
    path: str | Path, map_specs: Iterable[str] | None = None, numeric: str | None = None
) -> DataFile:
    """Read ``path`` into rows with ``user_input`` and ``response`` (after the ``--map`` specs);
    ``numeric``: a column every row must hold a finite number in (human ratings)."""
    source = Source(path, parse_map(map_specs or []), numeric)
    scan = source.scan(keep_bad=sys.maxsize)
    rows = [e for e in source.entries() if isinstance(e, InputRow)]
    return DataFile(**vars(scan), rows=rows)


class Source:
    """One data file, read lazily: each :meth:`entries` call reads it again, a row at a time."""

    def __init__(
        self, path: str | Path, mapping: Mapping[str, str] | None = None, numeric: str | None = None
    ):
        self.path = Path(path)
        kind = FORMATS.get(self.path.suffix.lower())
        if kind is None:
            raise DataFileError(
                f"{self.path}: unknown file type {self.path.suffix or '(none)'!r}; "
                "use .jsonl, .csv or .json"
            )
        self.kind, self.mapping, self.numeric = kind, dict(mapping or {}), numeric
        self.warnings: list[str] = []
        try:
            with self.path.open("rb") as handle:
                handle.read(1)
        except FileNotFoundError:
            raise DataFileError(f"{self.path}: no such file") from None
        except IsADirectoryError:
            raise DataFileError(f"{self.path}: is a directory, not a file") from None
        except OSError as exc:
            raise DataFileError(f"{self.path}: cannot read ({exc.strerror or exc})") from None

    def scan(self, keep_bad: int = WARNINGS_SHOWN) -> Scan:
        """Read the whole file once: count rows, check the columns, collect warnings;
        :class:`DataFileError` when no row is usable."""
        scan = Scan(self.path)
        columns: set[str] = set()
        for record in self.records():
            if isinstance(record[2], dict):
                columns.update(clean_text(str(name)) for name in record[2])
            if isinstance(entry := self._entry(*record), InputRow):
                scan.row_count += 1
            else:
                scan.bad_count += 1
                if len(scan.bad) < keep_bad:
                    scan.bad.append(entry)
        if not scan.row_count + scan.bad_count:
            raise DataFileError(f"{self.path}: no rows")
        self._check_columns(columns)
        scan.warnings = list(self.warnings)
        if not scan.row_count:
            listed = "; ".join(scan.describe_bad(limit=3))
            raise DataFileError(f"{self.path}: no usable row ({scan.bad_count} bad: {listed})")
        return scan

    def entries(self) -> Iterator[Entry]:
        """Every row in file order: a :class:`InputRow`, or a :class:`BadRow` saying why not."""
        return (self._entry(*record) for record in self.records())

    def records(self) -> Iterator[tuple[int, int | None, dict[str, Any] | str]]:
        """(row number, file line, record) triples; a record that is a str is its problem."""
        self.warnings = []
        read = {"jsonl": _jsonl_records, "csv": _csv_records, "json": _json_records}[self.kind]
        for number, (line, record) in enumerate(read(self.path, self.warnings), 1):
            yield number, line, record

    def _check_columns(self, columns: set[str]) -> None:
        if not columns:
            return  # every row is bad; scan lists them
        names = sorted(columns)
        found = ", ".join(names[:8]) + (f", ... ({len(names)} in all)" if len(names) > 8 else "")
        for column in self.mapping:
            if column not in columns:
                raise DataFileError(f"{self.path}: --map names column {column!r}, which no row has")
        targets = {target: column for column, target in self.mapping.items()}
        for name in FIELDS:
            if (column := targets.get(name, name)) not in columns:
                raise DataFileError(
                    f"{self.path}: no {column!r} column (found: {found}); "
                    f"name yours with --map COLUMN={name}"
                )
        if self.numeric is not None and self.numeric not in columns:
            raise DataFileError(f"{self.path}: no {self.numeric!r} column (found: {found})")

    def _entry(self, number: int, line: int | None, record: dict[str, Any] | str) -> Entry:
        """An :class:`InputRow` or a :class:`BadRow` (a str record is its problem), made
        JSON-safe after the checks (a NaN ``user_input`` is not text, not null)."""
        if isinstance(record, str):
            return BadRow(number, record, line)
        values = {self.mapping.get(key, key): value for key, value in record.items()}
        problem = input_problem(values)
        if problem is None and self.numeric is not None:
            if (value := to_number(values.get(self.numeric))) is None:
                problem = f"{self.numeric} is {values.get(self.numeric)!r}, not a number"
            else:
                values[self.numeric] = value
        try:
            values = json_safe(values)
        except RecursionError:
            return BadRow(number, "not readable as JSON (nested too deeply)", line)
        extra = {k: v for k, v in values.items() if k not in FIELDS}
        if problem is not None:
            texts = {name: as_text(values.get(name)) for name in FIELDS}
            return BadRow(number, problem, line, texts["user_input"], texts["response"], extra)
        return InputRow(number, values["user_input"], values["response"], extra, line)


def _utf8_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line; the first line not UTF-8 raises, naming it."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            try:
                yield number, raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                byte = exc.object[exc.start]
                raise DataFileError(
                    f"{path}: not UTF-8 text (byte 0x{byte:02x} on line {number}); save it as UTF-8"
                ) from None


def _unreadable(exc: ValueError | RecursionError) -> str:
    """Why a JSON value that parses by the grammar still cannot be read, in a few words."""
    if isinstance(exc, RecursionError):
        return "not readable as JSON (nested too deeply)"
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON ({exc.msg})"
    return f"not readable as JSON ({str(exc).split(';')[0]})"


def _jsonl_records(path: Path, warnings: list[str]) -> Records:
    for number, line in _utf8_lines(path):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError) as exc:  # also a number over Python's digits limit
            yield number, _unreadable(exc)
            continue
        yield number, value if isinstance(value, dict) else _not_object(value)


def _json_records(path: Path, warnings: list[str]) -> Records:
    text = "".join(line for _, line in _utf8_lines(path))
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFileError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except (ValueError, RecursionError) as exc:
        raise DataFileError(f"{path}: {_unreadable(exc)}") from None
    if isinstance(value, dict):
        lists = [k for k in JSON_LIST_KEYS if isinstance(value.get(k), list)]
        if not lists:
            raise DataFileError(
                f"{path}: expected a list of rows (or an object with a 'rows' list)"
            )
        value = value[lists[0]]
    if not isinstance(value, list):
        raise DataFileError(f"{path}: expected a list of rows, got {type(value).__name__}")
    for item in value:
        yield None, item if isinstance(item, dict) else _not_object(item)


def _csv_records(path: Path, warnings: list[str]) -> Records:
    """CSV rows with the line each starts on; a quoted cell that swallowed lines is warned of."""
    with path.open("r", encoding="utf-8-sig", newline="") as handle:
        reader = csv.reader(handle)
        try:
            try:
                header = [h.strip() for h in next(reader)]
            except StopIteration:
                return
            except csv.Error as exc:
                raise DataFileError(f"{path}: not readable as CSV ({exc})") from None
            if not any(header):
                raise DataFileError(
                    f"{path}: the first line should name the columns, but it is empty"
                )
            lines = rows = 0
            start = reader.line_num + 1
            while True:
                try:
                    cells = next(reader)
                except StopIteration:
                    break
                except csv.Error as exc:
                    yield start, f"not readable as CSV ({exc})"
                    start = reader.line_num + 1
                    continue
                number, start = start, reader.line_num + 1
                if not cells:
                    continue
                rows += 1
                lines += start - number
                if start - 1 > number and len(header) > 1 and len(warnings) < WARNINGS_SHOWN:
                    for column, cell in zip(header, cells, strict=False):  # an unbalanced quote?
                        rowlike = sum(t.count(",") >= len(header) - 1 for t in cell.split("\n")[1:])
                        if rowlike:
                            warnings.append(
                                f"line {number}: the {column!r} cell runs over lines "
                                f"{number}-{start - 1} and holds {rowlike} line(s) that look "
                                f"like rows; check for an unbalanced quote on line {number}"
                            )
                            break
                if not any(c.strip() for c in cells):
                    yield number, "empty row"
                elif len(cells) > len(header):
                    yield number, f"{len(cells)} cells but the header names {len(header)} columns"
                else:
                    yield number, dict(zip(header, cells, strict=False))
        except UnicodeDecodeError:  # a text reader decodes in blocks: find the line itself
            for _ in _utf8_lines(path):
                pass
            raise DataFileError(f"{path}: not UTF-8 text; save it as UTF-8") from None
    if warnings:
        warnings.append(
            f"{path}: {rows} row(s) were read from {lines} data line(s); a quote that is "
            "never closed makes one cell of the lines after it"
        )


def _not_object(value: Any) -> str:
    return f"expected an object with fields, got {type(value).__name__}"


def to_number(value: Any) -> float | None:
    """A finite float from a number or numeric text, else None."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
