"""Read samples from a JSONL, CSV or JSON file, rename columns, and set bad rows aside.

A whole-file problem (missing, not UTF-8, no usable column, no rows) raises
:class:`DataFileError` with one sentence; a bad row is kept as a :class:`BadRow` with its line
number, so the good rows can still be scored. Standard library only: cheap to import.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import UsageError

FIELDS = ("user_input", "response")
FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".json": "json"}
JSON_LIST_KEYS = ("rows", "data", "samples")


class DataFileError(UsageError):
    """The file as a whole cannot be read as samples."""


@dataclass(frozen=True)
class Row:
    """One usable sample: where it is in the file, its two texts, and every other column."""

    number: int
    user_input: str
    response: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """A short hash of the texts, so a resumed run recognises rows already scored."""
        return row_key(self.user_input, self.response)


@dataclass(frozen=True)
class BadRow:
    """A row that cannot be scored, and why."""

    number: int
    problem: str


@dataclass
class DataFile:
    """The rows of one file: the usable ones and the ones set aside."""

    path: Path
    kind: str
    rows: list[Row]
    bad: list[BadRow]
    where: str = "line"

    def describe_bad(self, limit: int = 10) -> list[str]:
        """One line per bad row (at most ``limit``, then a count of the rest)."""
        lines = [f"{self.where} {b.number}: {b.problem}" for b in self.bad[:limit]]
        if len(self.bad) > limit:
            lines.append(f"... and {len(self.bad) - limit} more bad row(s)")
        return lines


def row_key(user_input: str, response: str) -> str:
    """sha256 of the two texts, first 16 hex digits."""
    digest = hashlib.sha256(f"{user_input}\x00{response}".encode())
    return digest.hexdigest()[:16]


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
    path = Path(path)
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        raise DataFileError(
            f"{path}: unknown file type {path.suffix or '(none)'!r}; use .jsonl, .csv or .json"
        )
    text = _read_text(path)
    records = list(_records(path, kind, text))
    if not records:
        raise DataFileError(f"{path}: no rows")
    mapping = dict(mapping or {})
    columns = _columns(records)
    _check_columns(path, columns, mapping, numeric)

    rows: list[Row] = []
    bad: list[BadRow] = []
    for number, record in records:
        problem = record if isinstance(record, str) else None
        row = None
        if problem is None:
            row, problem = _make_row(number, record, mapping, numeric)
        if row is not None:
            rows.append(row)
        else:
            bad.append(BadRow(number, problem or "unreadable row"))
    data = DataFile(path, kind, rows, bad, where="item" if kind == "json" else "line")
    if not rows:
        listed = "; ".join(data.describe_bad(limit=3))
        raise DataFileError(f"{path}: no usable row ({len(bad)} bad: {listed})")
    return data


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DataFileError(f"{path}: is a directory, not a file") from None
    except OSError as exc:
        raise DataFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataFileError(
            f"{path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} on line {line}); save it as UTF-8"
        ) from None


def _records(path: Path, kind: str, text: str) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """(line or item number, record) pairs; a record that is a str is the problem with it."""
    if kind == "jsonl":
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                yield number, f"not valid JSON ({exc.msg})"
                continue
            yield number, value if isinstance(value, dict) else _not_object(value)
    elif kind == "csv":
        yield from _csv_records(path, text)
    else:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataFileError(
                f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})"
            ) from None
        if isinstance(value, dict):
            lists = [k for k in JSON_LIST_KEYS if isinstance(value.get(k), list)]
            if not lists:
                raise DataFileError(
                    f"{path}: expected a list of rows (or an object with a 'rows' list)"
                )
            value = value[lists[0]]
        if not isinstance(value, list):
            raise DataFileError(f"{path}: expected a list of rows, got {type(value).__name__}")
        for number, item in enumerate(value, 1):
            yield number, item if isinstance(item, dict) else _not_object(item)


def _csv_records(path: Path, text: str) -> Iterator[tuple[int, dict[str, Any] | str]]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as exc:
        raise DataFileError(f"{path}: not readable as CSV ({exc})") from None
    header = [h.strip() for h in header]
    if not any(header):
        raise DataFileError(f"{path}: the first line should name the columns, but it is empty")
    start = reader.line_num + 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield start, f"not readable as CSV ({exc})"
            start = reader.line_num + 1
            continue
        number, start = start, reader.line_num + 1
        if not cells or not any(c.strip() for c in cells):
            if cells:
                yield number, "empty row"
            continue
        if len(cells) > len(header):
            yield number, f"{len(cells)} cells but the header names {len(header)} columns"
            continue
        yield number, dict(zip(header, cells, strict=False))


def _not_object(value: Any) -> str:
    return f"expected an object with fields, got {type(value).__name__}"


def _columns(records: Sequence[tuple[int, dict[str, Any] | str]]) -> set[str]:
    return {key for _, record in records if isinstance(record, dict) for key in record}


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


def _make_row(
    number: int, record: dict[str, Any], mapping: Mapping[str, str], numeric: str | None
) -> tuple[Row | None, str | None]:
    values = {mapping.get(key, key): value for key, value in record.items()}
    if not any(_present(v) for v in values.values()):
        return None, "empty row"
    texts: dict[str, str] = {}
    for name in FIELDS:
        value = values.get(name)
        if value is None:
            return None, f"no {name}"
        if not isinstance(value, str):
            return None, f"{name} is {type(value).__name__}, not text"
        if not value.strip():
            return None, f"{name} is empty"
        texts[name] = value
    extra = {k: v for k, v in values.items() if k not in FIELDS}
    if numeric is not None:
        number_value = to_number(extra.get(numeric))
        if number_value is None:
            return None, f"{numeric} is {extra.get(numeric)!r}, not a number"
        extra[numeric] = number_value
    return Row(number, texts["user_input"], texts["response"], extra), None


def _present(value: Any) -> bool:
    return value is not None and (not isinstance(value, str) or bool(value.strip()))


def to_number(value: Any) -> float | None:
    """A finite float from a number or numeric text, else None."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
