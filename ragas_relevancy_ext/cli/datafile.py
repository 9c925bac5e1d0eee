"""Read samples from a JSONL, CSV or JSON file, rename columns, and set bad rows aside.

Rows are numbered 1, 2, 3... in the order the file holds them (blank lines are not rows), the
same for JSONL, CSV and JSON; JSONL and CSV rows also know their line in the file. A
whole-file problem (missing, not UTF-8, no usable column, no rows) raises
:class:`DataFileError` with one sentence; a bad row is kept as a :class:`BadRow`, so the good
rows can still be scored. Values JSON or UTF-8 cannot carry are made safe as they are read
(:func:`~json_safe`: NaN and Infinity become None, a lone surrogate
U+FFFD), so every writer writes what was read. :class:`Source` reads lazily, so a file of any
length can be streamed; :func:`read_rows` loads it all. Standard library only: cheap to import.
"""

from __future__ import annotations

import csv
import json
import math
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
    "Row",
    "Scan",
    "Source",
    "describe_bad",
    "parse_map",
    "read_file",
    "read_rows",
    "row_key",
    "to_number",
    "where",
]

FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".json": "json"}
JSON_LIST_KEYS = ("rows", "data", "samples")
WARNINGS_SHOWN = 10


class DataFileError(UsageError):
    """The file as a whole cannot be read as samples."""


@dataclass(frozen=True)
class Row:
    """One usable sample: its data row number, its two texts, every other column, its line."""

    number: int
    user_input: str
    response: str
    extra: dict[str, Any] = field(default_factory=dict)
    line: int | None = None

    @property
    def key(self) -> str:
        """A short hash of the texts (see :func:`row_key`)."""
        return row_key(self.user_input, self.response)

    @property
    def where(self) -> str:
        """``row 3, line 4`` (``row 3`` for JSON)."""
        return where(self.number, self.line)


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
        """``row 3, line 4`` (``row 3`` for JSON)."""
        return where(self.number, self.line)


Entry = Row | BadRow


def where(number: int, line: int | None) -> str:
    """``row N, line L``: the data row, and the file line when the format has lines."""
    return f"row {number}" + (f", line {line}" if line is not None else "")


@dataclass
class DataFile:
    """The rows of one file, all in memory: the usable ones and the ones set aside."""

    path: Path
    kind: str
    rows: list[Row]
    bad: list[BadRow]
    warnings: list[str] = field(default_factory=list)

    @property
    def row_count(self) -> int:
        return len(self.rows)

    @property
    def bad_count(self) -> int:
        return len(self.bad)

    def describe_bad(self, limit: int = 10) -> list[str]:
        """One line per bad row (at most ``limit``, then a count of the rest)."""
        return describe_bad(self.bad, len(self.bad), limit)


def describe_bad(bad: Iterable[BadRow], total: int, limit: int = 10) -> list[str]:
    """``row 3, line 4: no response`` per bad row (at most ``limit``, then a count)."""
    lines = [f"{b.where}: {b.problem}" for _, b in zip(range(limit), bad, strict=False)]
    if total > limit:
        lines.append(f"... and {total - limit} more bad row(s)")
    return lines


def parse_map(specs: Iterable[str]) -> dict[str, str]:
    """``["question=user_input", ...]`` -> ``{"question": "user_input"}`` (file column -> field).

    Either side may name the field (``user_input=question`` works too); the other side is the
    file's column.
    """
    mapping: dict[str, str] = {}
    for spec in specs:
        left, sep, right = (part.strip() for part in spec.partition("="))
        if not sep or not left or not right:
            raise DataFileError(f"--map {spec!r}: write COLUMN=FIELD, e.g. question=user_input")
        if right in FIELDS and left not in FIELDS:
            column, target = left, right
        elif left in FIELDS and right not in FIELDS:
            column, target = right, left
        else:
            raise DataFileError(
                f"--map {spec!r}: exactly one side must be a field ({', '.join(FIELDS)}) "
                "and the other a column of the file"
            )
        if target in mapping.values():
            raise DataFileError(f"--map names a column for {target} twice")
        mapping[column] = target
    return mapping


def read_file(
    path: str | Path, map_specs: Iterable[str] | None = None, numeric: str | None = None
) -> DataFile:
    """:func:`read_rows` with ``--map`` specs as the command line gives them."""
    return read_rows(path, parse_map(map_specs or []), numeric=numeric)


def read_rows(
    path: str | Path,
    mapping: Mapping[str, str] | None = None,
    numeric: str | None = None,
) -> DataFile:
    """Read ``path`` into rows with ``user_input`` and ``response`` (after ``mapping``).

    ``numeric`` names an extra column every row must hold a finite number in (human ratings);
    a row without one is bad.
    """
    source = Source(path, mapping, numeric)
    scan = source.scan()
    rows: list[Row] = []
    bad: list[BadRow] = []
    for entry in source.entries():
        (rows if isinstance(entry, Row) else bad).append(entry)  # type: ignore[arg-type]
    return DataFile(source.path, source.kind, rows, bad, scan.warnings)


@dataclass
class Scan:
    """What one pass over a file found: how many rows are usable and bad, and warnings."""

    path: Path
    row_count: int = 0
    bad_count: int = 0
    warnings: list[str] = field(default_factory=list)
    first_bad: list[BadRow] = field(default_factory=list)

    def describe_bad(self, limit: int = 10) -> list[str]:
        """One line per bad row (at most ``limit``, then a count of the rest)."""
        return describe_bad(self.first_bad, self.bad_count, limit)


class Source:
    """One data file, read lazily: :meth:`scan` checks it, :meth:`entries` yields its rows.

    Each call of :meth:`entries` reads the file again from the start, holding one row at a
    time (a ``.json`` file is one document, so it is loaded whole).
    """

    def __init__(
        self,
        path: str | Path,
        mapping: Mapping[str, str] | None = None,
        numeric: str | None = None,
    ):
        self.path = Path(path)
        kind = FORMATS.get(self.path.suffix.lower())
        if kind is None:
            raise DataFileError(
                f"{self.path}: unknown file type {self.path.suffix or '(none)'!r}; "
                "use .jsonl, .csv or .json"
            )
        self.kind = kind
        self.mapping = dict(mapping or {})
        self.numeric = numeric
        self.warnings: list[str] = []
        _check_readable(self.path)

    def scan(self, keep_bad: int = WARNINGS_SHOWN) -> Scan:
        """Read the whole file once: count rows, check the columns, collect warnings.

        Raises :class:`DataFileError` when the file cannot give a single usable row.
        """
        scan = Scan(self.path)
        columns: set[str] = set()
        records = 0
        for _, _, record in self.records():
            records += 1
            if isinstance(record, dict):
                columns.update(clean_text(str(name)) for name in record)
        if not records:
            raise DataFileError(f"{self.path}: no rows")
        _check_columns(self.path, columns, self.mapping, self.numeric)
        for entry in self.entries():
            if isinstance(entry, Row):
                scan.row_count += 1
            else:
                scan.bad_count += 1
                if len(scan.first_bad) < keep_bad:
                    scan.first_bad.append(entry)
        scan.warnings = list(self.warnings)
        if not scan.row_count:
            listed = "; ".join(scan.describe_bad(limit=3))
            raise DataFileError(f"{self.path}: no usable row ({scan.bad_count} bad: {listed})")
        return scan

    def entries(self) -> Iterator[Entry]:
        """Every row in file order: a :class:`Row`, or a :class:`BadRow` saying why not."""
        for number, line, record in self.records():
            if isinstance(record, str):
                yield BadRow(number, record, line)
            else:
                yield _make_entry(number, line, record, self.mapping, self.numeric)

    def records(self) -> Iterator[tuple[int, int | None, dict[str, Any] | str]]:
        """(row number, file line, record) triples; a record that is a str is its problem."""
        self.warnings = []
        if self.kind == "jsonl":
            raw = _jsonl_records(self.path)
        elif self.kind == "csv":
            raw = _csv_records(self.path, self.warnings)
        else:
            raw = _json_records(self.path)
        for number, (line, record) in enumerate(raw, 1):
            yield number, line, record


def _check_readable(path: Path) -> None:
    if not path.exists():
        raise DataFileError(f"{path}: no such file")
    if path.is_dir():
        raise DataFileError(f"{path}: is a directory, not a file")
    try:
        with path.open("rb") as handle:
            handle.read(1)
    except OSError as exc:
        raise DataFileError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _not_utf8(path: Path, line: int, byte: int) -> DataFileError:
    return DataFileError(
        f"{path}: not UTF-8 text (byte 0x{byte:02x} on line {line}); save it as UTF-8"
    )


def _first_not_utf8(path: Path) -> DataFileError:
    """The error for the first line of ``path`` that is not UTF-8 (a text reader decodes in
    blocks, so its own position is not the line's)."""
    with path.open("rb") as handle:
        for line_number, raw in enumerate(handle, 1):
            if line_number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                return _not_utf8(path, line_number, raw[exc.start])
    return DataFileError(f"{path}: not UTF-8 text; save it as UTF-8")


def _unreadable(exc: ValueError | RecursionError) -> str:
    """Why a JSON value that parses by the grammar still cannot be read, in a few words."""
    if isinstance(exc, RecursionError):
        return "not readable as JSON (nested too deeply)"
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON ({exc.msg})"
    return f"not readable as JSON ({str(exc).split(';')[0]})"


def _jsonl_records(path: Path) -> Iterator[tuple[int | None, dict[str, Any] | str]]:
    with path.open("rb") as handle:
        for line_number, raw in enumerate(handle, 1):
            if line_number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _not_utf8(path, line_number, raw[exc.start]) from None
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except (ValueError, RecursionError) as exc:  # also a number over Python's digits limit
                yield line_number, _unreadable(exc)
                continue
            yield line_number, value if isinstance(value, dict) else _not_object(value)


def _json_records(path: Path) -> Iterator[tuple[int | None, dict[str, Any] | str]]:
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, raw[: exc.start].count(b"\n") + 1, raw[exc.start]) from None
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


def _csv_records(
    path: Path, warnings: list[str]
) -> Iterator[tuple[int | None, dict[str, Any] | str]]:
    """CSV rows with the line each starts on; a quoted cell that swallowed lines is warned of."""
    with path.open("r", encoding="utf-8-sig", newline="") as handle:
        reader = csv.reader(handle)
        try:
            try:
                header = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise DataFileError(f"{path}: not readable as CSV ({exc})") from None
            header = [h.strip() for h in header]
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
                _warn_if_swallowed(warnings, header, number, start - 1, cells)
                if not any(c.strip() for c in cells):
                    yield number, "empty row"
                elif len(cells) > len(header):
                    yield number, f"{len(cells)} cells but the header names {len(header)} columns"
                else:
                    yield number, dict(zip(header, cells, strict=False))
        except UnicodeDecodeError:
            raise _first_not_utf8(path) from None
    if warnings:
        warnings.append(
            f"{path}: {rows} row(s) were read from {lines} data line(s); a quote that is "
            "never closed makes one cell of the lines after it"
        )


def _warn_if_swallowed(
    warnings: list[str], header: list[str], first: int, last: int, cells: list[str]
) -> None:
    """Warn when a cell spans lines and holds lines shaped like rows (an unbalanced quote)."""
    if last <= first or len(header) < 2:
        return
    for column, cell in zip(header, cells, strict=False):
        inner = cell.split("\n")[1:]
        looks_like_rows = sum(1 for text in inner if text.count(",") >= len(header) - 1)
        if looks_like_rows:
            if len(warnings) < WARNINGS_SHOWN:
                warnings.append(
                    f"line {first}: the {column!r} cell runs over lines {first}-{last} and "
                    f"holds {looks_like_rows} line(s) that look like rows; check for an "
                    f"unbalanced quote on line {first}"
                )
            return


def _not_object(value: Any) -> str:
    return f"expected an object with fields, got {type(value).__name__}"


def _check_columns(
    path: Path, columns: set[str], mapping: Mapping[str, str], numeric: str | None
) -> None:
    if not columns:
        return  # every row is bad; read_rows lists them
    for column in mapping:
        if column not in columns:
            raise DataFileError(f"{path}: --map names column {column!r}, which no row has")
    targets = {target: column for column, target in mapping.items()}
    for name in FIELDS:
        column = targets.get(name, name)
        if column not in columns:
            raise DataFileError(
                f"{path}: no {column!r} column (found: {_listed(columns)}); "
                f"name yours with --map COLUMN={name}"
            )
    if numeric is not None and numeric not in columns:
        raise DataFileError(f"{path}: no {numeric!r} column (found: {_listed(columns)})")


def _listed(columns: set[str], limit: int = 8) -> str:
    names = sorted(columns)
    text = ", ".join(names[:limit])
    return text + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def _make_entry(
    number: int,
    line: int | None,
    record: dict[str, Any],
    mapping: Mapping[str, str],
    numeric: str | None,
) -> Entry:
    """A :class:`Row`, or a :class:`BadRow` keeping its other columns; either made JSON-safe
    after the checks (a NaN ``user_input`` is not text, it is not turned into null)."""
    values = {mapping.get(key, key): value for key, value in record.items()}
    problem = input_problem(values)
    if problem is None and numeric is not None:
        number_value = to_number(values.get(numeric))
        if number_value is None:
            problem = f"{numeric} is {values.get(numeric)!r}, not a number"
        else:
            values[numeric] = number_value
    try:
        values = json_safe(values)
    except RecursionError:
        return BadRow(number, "not readable as JSON (nested too deeply)", line)
    extra = {k: v for k, v in values.items() if k not in FIELDS}
    if problem is not None:
        texts = (as_text(values.get(name)) for name in FIELDS)
        return BadRow(number, problem, line, *texts, extra)
    return Row(number, values["user_input"], values["response"], extra, line)


def to_number(value: Any) -> float | None:
    """A finite float from a number or numeric text, else None."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
