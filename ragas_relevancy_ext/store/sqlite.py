"""The judge-reply store: JSON text in SQLite (write-ahead log, so processes share it), each write
synced before it returns. A damaged file is moved aside; a link, or another program's database,
is refused untouched. Every call holds a process-wide lock that ``fork()`` takes too, and each
process opens its own connection.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..errors import UsageError

__all__ = ["CACHE_FILE", "CacheError", "SqliteStore"]

CACHE_FILE = "replies.sqlite3"
BUSY_TIMEOUT = 30.0  # seconds a write waits for another process holding the lock
T = TypeVar("T")
_CALLS = threading.Lock()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_CALLS.acquire, after_in_parent=_CALLS.release, after_in_child=_CALLS.release
    )


class CacheError(UsageError):
    """The store cannot be used (read-only, not a directory, a link, not ours, a full disk)."""


class SqliteStore:
    """JSON text values in one SQLite table in ``directory/name`` (the folder is created);
    ``option`` names the store in errors."""

    def __init__(self, directory: str | Path, name: str = CACHE_FILE, option: str = "--cache"):
        self.directory, self.path, self.option = Path(directory), Path(directory) / name, option
        self._dbs: dict[int, sqlite3.Connection] = {}  # by process: a parent's is never closed
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self._error(f"cannot create {self.directory} ({exc.strerror or exc})") from None
        self._call(lambda db: None)  # opened now: an unusable store is said before the run

    def _error(self, problem: str) -> CacheError:
        return CacheError(f"{self.option} {self.path}: {problem}")

    def _call(self, work: Callable[[sqlite3.Connection], T], doing: str = "use") -> T:
        """``work`` on this process's connection; a lock another process holds is waited for
        (up to :data:`BUSY_TIMEOUT`) between tries, outside the module's lock."""
        for _ in range(int(BUSY_TIMEOUT / 0.02)):
            with _CALLS:
                try:
                    db = self._dbs.get(os.getpid())
                    if db is None:
                        db = self._dbs[os.getpid()] = self._open()
                    return work(db)
                except sqlite3.DatabaseError as exc:  # a full disk, damage, a lock held
                    if "locked" not in str(exc):
                        raise self._error(f"cannot {doing} it ({exc})") from None
            time.sleep(0.02)
        raise self._error(f"cannot {doing} it (another process held its lock {BUSY_TIMEOUT:g} s)")

    def _open(self) -> sqlite3.Connection:
        for path in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm")):
            if path.is_symlink():
                raise self._error(f"{path.name} is a link; it was left as it is")
        readonly = f"read-only; give {self.option} a folder you can write"
        if self.path.exists() and not all(
            os.access(p, os.W_OK) for p in (self.path, self.directory)
        ):
            raise self._error(readonly)
        try:
            return _connect(self.path)
        except ValueError as exc:
            raise self._error(str(exc)) from None
        except sqlite3.OperationalError as exc:
            if any(word in str(exc) for word in ("readonly", "read-only", "unable to open")):
                raise self._error(readonly) from None
            if "malformed" not in str(exc):
                raise
        except sqlite3.DatabaseError:
            pass  # not a database (any more): moved aside below
        aside = self.path.with_name(f"{self.path.name}.damaged-{time.time_ns()}")
        try:
            os.link(self.path, aside)  # never over another file
            _delete(self.path)
        except OSError as exc:
            raise self._error(f"damaged and cannot be moved ({exc.strerror or exc})") from None
        print(
            f"ragas-relevancy: {self.option} {self.path} was damaged; moved it to {aside} and "
            "started a new one",
            file=sys.stderr,
        )
        return _connect(self.path)

    def get(self, key: str) -> str | None:
        """The JSON text stored under ``key``, or None."""
        query = "SELECT value FROM replies WHERE key = ?"
        row = self._call(lambda db: db.execute(query, (key,)).fetchone(), "read")
        return row[0] if row and isinstance(row[0], str) else None

    def set(self, key: str, value: Any) -> None:
        """Store ``value`` (JSON text; anything else is turned into JSON text first), on disk
        when this returns."""
        text = value if isinstance(value, str) else json.dumps(value)

        def write(db: sqlite3.Connection) -> None:
            with db:
                db.execute("INSERT OR REPLACE INTO replies (key, value) VALUES (?, ?)", (key, text))

        self._call(write, "write to")

    def close(self) -> None:
        """Close this process's connection."""
        with _CALLS:
            if (db := self._dbs.pop(os.getpid(), None)) is not None:
                db.close()

    def remove(self) -> None:
        """Close and delete the database and its write-ahead files."""
        self.close()
        _delete(self.path)


def _delete(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _connect(path: Path) -> sqlite3.Connection:
    """Open (or create) the database in WAL mode, each commit synced; ``ValueError`` when it
    holds another program's tables (it is left as it is)."""
    db = sqlite3.connect(path, timeout=0, check_same_thread=False)  # waits: SqliteStore._call
    try:
        tables = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        if set(tables) - {("replies",)}:
            raise ValueError("holds tables this tool did not write; it was left as it is")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.commit()
    except BaseException:
        db.close()
        raise
    return db
