"""The command line's error class and its one exit-code rule.

Exit codes, the same for every command and for ``examples/gemini_adapter.py``:

- 0: every row was scored (a number, 0 included);
- 1: no row was scored, or a check failed (``compare`` beyond ``--tol``);
- 2: bad input or settings (file, option, key): one line on stderr, nothing scored;
- 3: some rows were scored and others were not: skipped as bad rows, or NaN;
- 4: ``score`` stopped early: rows failed one after another for a cause no retry mends (the
  judge refused the key, does not know the model, cannot be reached); what finished is saved.
"""

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
    """0 when all ``total`` rows scored, 1 when none did, 3 when some did (see the module)."""
    if total > 0 and scored >= total:
        return EXIT_OK
    return EXIT_PARTIAL if scored > 0 else EXIT_FAILED
