"""What the tests share besides fixtures: paths, the shared fixture cases, a forked command.

Importable from every test folder (``pythonpath = ["tests"]`` in pyproject.toml).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
FIXTURES = ROOT / "tests" / "fixtures"
# Set to 1 (CI does) and a missing [local] extra fails the suite instead of skipping its tests.
REQUIRE_LOCAL = "RAGAS_RELEVANCY_REQUIRE_LOCAL"
# Set to 1 (CI does) and a run with any skipped test fails.
NO_SKIPS = "RAGAS_RELEVANCY_NO_SKIPS"


def load_cases() -> list[dict[str, Any]]:
    """Every shared fixture case (tests/fixtures/cases.json)."""
    return json.loads((FIXTURES / "cases.json").read_text(encoding="utf-8"))


def load_toy() -> dict[str, Any]:
    """Seed 004's toy vectors case, whose mean cosine is 0.7463."""
    return json.loads((FIXTURES / "toy_vectors.json").read_text(encoding="utf-8"))


class ForkedCommand:
    """``ragas-relevancy ARGS`` in a forked copy of this process: a real process to interrupt or
    kill, with RAGAS already imported (a new interpreter spends seconds importing it). Its
    stdout is discarded and its stderr kept in ``stderr_path``; the interface is Popen's."""

    def __init__(self, args: Sequence[str], env: Mapping[str, str], stderr_path: Path):
        import ragas  # noqa: F401  (once here, not once in each child)

        from ragas_relevancy_ext.cli import main

        self.stderr_path = stderr_path
        self.returncode: int | None = None
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns into pytest
            code = 1
            try:
                os.environ.clear()
                os.environ.update(env)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                err = open(stderr_path, "w", encoding="utf-8")  # noqa: SIM115
                out = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
                os.dup2(err.fileno(), 2)
                os.dup2(out.fileno(), 1)
                sys.stdout, sys.stderr = out, err
                sys.argv = ["ragas-relevancy", *args]
                try:
                    main()
                    code = 0
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
                except BaseException:
                    traceback.print_exc()
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)

    def poll(self) -> int | None:
        """The exit code (negative: killed by that signal), or None while it runs."""
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8") if self.stderr_path.exists() else ""

    def wait(self, timeout: float) -> int:
        """The exit code once it ends; killed after ``timeout`` seconds, then an error."""
        for _ in range(int(timeout / 0.01)):  # polls, not a timing check
            code = self.poll()
            if code is not None:
                return code
            time.sleep(0.01)
        self.send_signal(signal.SIGKILL)
        os.waitpid(self.pid, 0)
        raise TimeoutError(f"the forked command ran over {timeout} s: {self.stderr()}")

    def communicate(self, timeout: float) -> tuple[None, str]:
        """:meth:`wait`, then ``(None, stderr)``."""
        self.wait(timeout)
        return None, self.stderr()
