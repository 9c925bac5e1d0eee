"""What a run leaves behind: the console, the JSONL report, end-of-run pages: a :data:`FORMATS`
entry each (``--NAME PATH``), a module with ``write(path, items, summary, meta)`` and
``is_ours(path)``."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...scoring.report import RelevancyReport
    from ..stats import Summary

from .files import OutputPathError, check_target, same_file

__all__ = ["FORMATS", "Item", "OutputFormat", "OutputPathError", "Writer", "check_outputs"]

Item = tuple[int, "RelevancyReport"]  # (row number, report): what the tables and pages show
Writer = Callable[[Path, Sequence[Item], "Summary", Mapping[str, str]], None]


@dataclass(frozen=True)
class OutputFormat:
    """One end-of-run format: its ``--NAME`` help, its module (loaded when used), what one file
    of it is called."""

    help: str
    module: str
    kind: str

    def writer(self) -> Writer:
        return self._module().write

    def is_ours(self, path: Path) -> bool:
        """Whether the file at ``path`` is one this format's ``write`` wrote."""
        return bool(self._module().is_ours(path))

    def _module(self) -> Any:
        return importlib.import_module(self.module, __package__)


FORMATS = {"html": OutputFormat("Write a self-contained HTML report.", ".html", "a page")}


def check_outputs(
    outputs: Mapping[str, Path], *, input_path: Path | None = None, out: Path | None = None
) -> dict[str, Path]:
    """Each of ``outputs`` as the file to write (a link's target), before anything runs;
    :class:`OutputPathError` for the input, ``--out`` or another output (links included), or an
    existing file its format did not write."""
    given = [("the input file", input_path), (f"the same file as --out {out}", out)]
    taken = [(what, path) for what, path in given if path is not None]
    checked: dict[str, Path] = {}
    for name, path in outputs.items():
        option = f"--{name}"
        for what, other in taken:
            if same_file(path, other):
                raise OutputPathError(f"{option} {path} is {what}; give {option} a file of its own")
        fmt = FORMATS[name]
        checked[name] = check_target(path, option, fmt.is_ours, fmt.kind)
        taken.append((f"the same file as --{name} {path}", path))
    return checked
