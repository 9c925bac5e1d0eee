"""The command line's error class and its one exit-code rule, for every command: 0 all rows
scored, 1 none (or a check failed), 2 bad input or settings, 3 some rows not scored, 4 ``score``
stopped early (the same failure no retry mends, row after row)."""

from __future__ import annotations

from ..errors import UsageError

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_PARTIAL",
    "EXIT_STOPPED",
    "EXIT_USAGE",
    "UsageError",
    "exit_code",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_PARTIAL = 3
EXIT_STOPPED = 4


def exit_code(scored: int, total: int) -> int:
    """0 when all ``total`` rows scored, 1 when none did, 3 when some did."""
    if total > 0 and scored >= total:
        return EXIT_OK
    return EXIT_PARTIAL if scored > 0 else EXIT_FAILED
