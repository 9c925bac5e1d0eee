"""The judge-reply store: JSON text in SQLite (write-ahead log, so processes share it). Each
write is synced to disk before it returns (``synchronous=FULL``). A damaged file is moved
aside and a new one started; a link, or a database holding tables of another program, is
refused untouched. Standard library only.

Every SQLite call of this module holds one process-wide lock, which ``fork()`` takes too: a
forked child never inherits a lock held mid-call, and opens a connection of its own (SQLite's
are not carried across ``fork``). A lock another process holds is waited for outside that lock.
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
_RETRY = 0.02  # seconds between tries while another process holds it

T = TypeVar("T")
_CALLS = threading.Lock()  # held around every SQLite call here, and across fork()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_CALLS.acquire, after_in_parent=_CALLS.release, after_in_child=_CALLS.release
    )


class CacheError(UsageError):
    """The store cannot be used (read-only, not a directory, a link, not ours, a full disk)."""


class SqliteStore:
    """JSON text values in one SQLite table, in ``directory/name`` (the folder is created);
    ``option`` names the store in errors (``--cache``, or the reply journal)."""

    def __init__(self, directory: str | Path, name: str = CACHE_FILE, option: str = "--cache"):
        self.directory = Path(directory)
        self.path = self.directory / name
        self.option = option
        self._db: sqlite3.Connection | None = None
        self._pid = 0  # the process self._db belongs to
        self._inherited: list[sqlite3.Connection] = []  # a parent's, never used nor closed
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
        waited = 0.0
        while True:
            with _CALLS:
                try:
                    if self._db is None or self._pid != os.getpid():
                        if self._db is not None:
                            self._inherited.append(self._db)
                        self._db, self._pid = self._open(), os.getpid()
                    return work(self._db)
                except sqlite3.DatabaseError as exc:  # a full disk, a lock held too long
                    if "locked" not in str(exc) or waited >= BUSY_TIMEOUT:
                        raise self._error(f"cannot {doing} it ({exc})") from None
            time.sleep(_RETRY)
            waited += _RETRY

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
                raise  # a lock another process holds is waited for; else said by _call
        except sqlite3.DatabaseError:
            pass  # not a database (any more): moved aside below
        aside = self.path.with_name(f"{self.path.name}.damaged-{time.time_ns()}")
        try:
            os.link(self.path, aside)  # never over another file
            self.path.unlink()
            for suffix in ("-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
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
            if self._db is not None and self._pid == os.getpid():
                self._db.close()
            self._db = None

    def remove(self) -> None:
        """Close and delete the database and its write-ahead files."""
        self.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)


def _connect(path: Path) -> sqlite3.Connection:
    """Open (or create) the database, in WAL mode with each commit synced; ``ValueError`` when
    it holds tables of another program (it is left as it is)."""
    # no busy wait inside SQLite: SqliteStore waits for other processes between tries
    db = sqlite3.connect(path, timeout=0, check_same_thread=False)
    try:
        if {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} - {
            "replies"
        }:
            raise ValueError("holds tables this tool did not write; it was left as it is")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.commit()
    except BaseException:
        db.close()
        raise
    return db
