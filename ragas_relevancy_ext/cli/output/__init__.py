"""What a run leaves behind: the console, the JSONL report it resumes from, and end-of-run pages.

End-of-run formats are one :data:`FORMATS` entry each: the command line offers ``--NAME PATH``
for every entry and calls its writer with ``(path, items, summary, meta)`` once the run is done.
A new format is a module here with a ``write`` function and one entry below.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...report import RelevancyReport
    from ..stats import Summary

__all__ = ["FORMATS", "OutputFormat", "Writer"]

# (path, (row number, report) pairs, summary, what the run used) -> None
Writer = Callable[
    [Path, "Sequence[tuple[int, RelevancyReport]]", "Summary", Mapping[str, str]], None
]


@dataclass(frozen=True)
class OutputFormat:
    """One end-of-run format: its ``--NAME`` help, and the module whose ``write`` makes it."""

    help: str
    module: str

    def writer(self) -> Writer:
        """The format's ``write`` function (its module loads only now)."""
        module: Any = importlib.import_module(self.module, __package__)
        return module.write


FORMATS: dict[str, OutputFormat] = {
    "html": OutputFormat("Write a self-contained HTML report.", ".html"),
}
