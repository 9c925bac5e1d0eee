"""The ``ragas-relevancy`` command: one module per subcommand, shared options in :mod:`.options`;
nothing heavier than typer loads before a command runs, so ``--help`` answers at once."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import typer

from .calibrate import calibrate
from .compare import compare
from .diff import diff
from .errors import UsageError
from .plan import plan
from .score import score
from .show import show

__all__ = ["COMMANDS", "app", "handled", "main", "version_line"]

app = typer.Typer(
    name="ragas-relevancy",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

COMMANDS: tuple[Callable[..., int], ...] = (score, show, compare, calibrate, diff, plan)


def version_line() -> str:
    """``ragas-relevancy-ext 0.1.0 (ragas 0.4.3, Python 3.11.2)``, read without importing RAGAS."""
    from importlib.metadata import PackageNotFoundError, version

    from .. import __version__

    try:
        ragas = version("ragas")
    except PackageNotFoundError:
        ragas = "not installed"
    python = ".".join(map(str, sys.version_info[:3]))
    return f"ragas-relevancy-ext {__version__} (ragas {ragas}, Python {python})"


def _print_version(value: bool) -> None:
    if value:
        print(version_line())
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Answer relevancy (RAGAS) with every probe shown. Runs offline by default: --judge offline,
    --embeddings auto."""


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """Known problems (input, settings, files) -> one line and exit 2; anything else exit 1."""
    from ..scoring.redaction import redact

    try:
        yield
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except UsageError as exc:
        _print_error(redact(str(exc)))
        raise typer.Exit(2) from None
    except OSError as exc:  # e.g. --out or --html in a folder that cannot be written
        where = f" ({exc.filename})" if exc.filename else ""
        _print_error(redact(f"{exc.strerror or exc}{where}"))
        raise typer.Exit(2) from None
    except Exception as exc:
        if os.environ.get("RAGAS_RELEVANCY_DEBUG"):
            raise
        _print_error(redact(f"{type(exc).__name__}: {exc}".splitlines()[0]))
        print("(set RAGAS_RELEVANCY_DEBUG=1 to see the traceback)", file=sys.stderr)
        raise typer.Exit(1) from None


def _print_error(message: str) -> None:
    """The one error line; a message quoting the data shows its control characters as codes."""
    from ..scoring.report import neutralise_controls

    print(f"ragas-relevancy: error: {neutralise_controls(message, one_line=True)}", file=sys.stderr)


def _command(run: Callable[..., int]) -> Callable[..., None]:
    """A command as typer calls it: errors through :func:`handled`, the result as exit code."""

    @functools.wraps(run)
    def command(**kwargs: Any) -> None:
        with handled():
            code = run(**kwargs)
        raise typer.Exit(code)

    return command


for _run in COMMANDS:
    app.command(name=_run.__name__)(_command(_run))


def main() -> None:
    """Entry point of the ``ragas-relevancy`` console script."""
    app(prog_name="ragas-relevancy")
