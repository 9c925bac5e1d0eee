"""The one error class of the command line: a problem the user can fix (file, option, key)."""

from __future__ import annotations

__all__ = ["UsageError"]


class UsageError(ValueError):
    """Bad input or settings; the command line prints its one-line message and exits 2."""
