"""The judge cache's store: JSON text in SQLite (write-ahead log, so processes share it); a
damaged file is moved aside and a new one started. Standard library only."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ..errors import UsageError

__all__ = ["CACHE_FILE", "CacheError", "SqliteStore"]

CACHE_FILE = "replies.sqlite3"
BUSY_TIMEOUT = 30.0  # seconds a write waits for another process holding the lock


class CacheError(UsageError):
    """The cache directory cannot be used (read-only, not a directory)."""


class SqliteStore:
    """JSON text values in one SQLite table, in write-ahead-log mode for concurrent processes."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self.path = self.directory / CACHE_FILE
        self._lock = threading.Lock()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CacheError(
                f"--cache {self.directory}: cannot create it ({exc.strerror or exc})"
            ) from None
        self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        try:
            return _connect(self.path)
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and "malformed" not in str(exc):
                raise CacheError(f"--cache {self.path}: cannot be used ({exc})") from None
        aside = self.path.with_name(f"{self.path.name}.damaged-{int(time.time())}")
        try:
            self.path.replace(aside)
            for suffix in ("-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
        except OSError as exc:
            raise CacheError(
                f"--cache {self.path}: damaged and cannot be moved ({exc.strerror or exc})"
            ) from None
        print(
            f"ragas-relevancy: the judge cache {self.path} was damaged; moved it to {aside} "
            "and started a new one",
            file=sys.stderr,
        )
        try:
            return _connect(self.path)
        except sqlite3.DatabaseError as exc:
            raise CacheError(f"--cache {self.path}: cannot be used ({exc})") from None

    def get(self, key: str) -> str | None:
        """The JSON text stored under ``key``, or None."""
        with self._lock:
            row = self._db.execute("SELECT value FROM replies WHERE key = ?", (key,)).fetchone()
        return row[0] if row and isinstance(row[0], str) else None

    def set(self, key: str, value: Any) -> None:
        """Store ``value`` (JSON text; anything else is turned into JSON text first)."""
        text = value if isinstance(value, str) else json.dumps(value)
        try:
            with self._lock, self._db:
                self._db.execute(
                    "INSERT OR REPLACE INTO replies (key, value) VALUES (?, ?)", (key, text)
                )
        except sqlite3.DatabaseError as exc:  # a full disk, a lock held too long, damage
            raise CacheError(f"--cache {self.path}: cannot write to it ({exc})") from None

    def close(self) -> None:
        """Close the database."""
        self._db.close()


def _connect(path: Path) -> sqlite3.Connection:
    """Open (or create) the cache database; errors naming the path for an unusable one."""
    if path.exists() and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        raise CacheError(f"--cache {path}: read-only; give --cache a folder you can write")
    try:
        db = sqlite3.connect(path, timeout=BUSY_TIMEOUT, check_same_thread=False)
    except sqlite3.OperationalError as exc:
        raise CacheError(f"--cache {path}: cannot open it ({exc})") from None
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("SELECT count(*) FROM replies").fetchone()
        db.commit()
    except sqlite3.DatabaseError as exc:
        db.close()
        readonly = ("readonly", "read-only", "unable to open")
        if isinstance(exc, sqlite3.OperationalError) and any(w in str(exc) for w in readonly):
            raise CacheError(
                f"--cache {path}: read-only; give --cache a folder you can write"
            ) from None
        raise
    return db
