"""Files the command writes: kept apart (links included), a link's target written, a pid lock
file, whole-file replacement."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from ..errors import UsageError


class OutputPathError(UsageError):
    """An output path that is another file of the run, or a file this tool did not write."""


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether ``a`` and ``b`` are one file: the same inode when both exist, else the same path
    once links are resolved."""
    with contextlib.suppress(OSError):
        if os.path.samefile(a, b):
            return True
    return os.path.realpath(a) == os.path.realpath(b)


def through_link(path: str | Path) -> Path:
    """``path``, or the file a symlink links to, so a rewrite by rename leaves the link."""
    path = Path(path)
    if not path.is_symlink():
        return path
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a loop of links: left for check_target to refuse
        return path


def check_target(path: str | Path, option: str, ours: Callable[[Path], bool], what: str) -> Path:
    """The file to write for ``option PATH`` (a link's target); refused when it exists and is
    not a regular file, or ``ours`` does not see ``what`` we wrote in it."""
    target = through_link(path)
    if target.exists() or target.is_symlink():
        if not target.is_file():
            raise OutputPathError(
                f"{option} {path} is not a regular file; give {option} a new file"
            )
        if not ours(target):
            raise OutputPathError(
                f"{option} {path} exists and is not {what} of ragas-relevancy; it was left as "
                f"it is: give {option} a new file"
            )
    return target


class PidLock:
    """A lock file holding its holder's pid, locked with ``flock`` (released if the process
    dies; where there is no flock, the file alone marks it)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._handle: IO[str] | None = None

    def acquire(self) -> str | None:
        """Take the lock: None when taken, else the holder's pid ("unknown" if unwritten)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+", encoding="utf-8")
        try:
            import fcntl

            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            taken = True
        except ImportError:  # not POSIX
            taken = handle.tell() == 0
        except OSError:
            taken = False
        handle.seek(0)
        if not taken:
            holder = handle.read().strip() or "unknown"
            handle.close()
            return holder
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._handle = handle
        return None

    @property
    def held(self) -> bool:
        return self._handle is not None

    def release(self) -> None:
        """Release and remove the lock file (safe to call twice)."""
        if self._handle is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        self._handle.close()
        self._handle = None


@contextlib.contextmanager
def atomic_file(path: str | Path) -> Iterator[IO[bytes]]:
    """A temporary file beside ``path``, synced and renamed over it when the block ends without
    an error (else removed): a stop leaves the old file or the new one."""
    path = Path(path)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with temp.open("wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    finally:
        with contextlib.suppress(OSError):
            temp.unlink()
    with contextlib.suppress(OSError, AttributeError):  # the rename on disk, where allowed
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_atomically(path: str | Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` through :func:`atomic_file`."""
    with atomic_file(path) as handle:
        handle.write(data)
