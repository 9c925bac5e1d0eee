"""The ``ragas-relevancy`` command: score a file, compare with stock RAGAS, calibrate.

Only typer and the standard library are imported here; RAGAS, numpy and rich tables load inside
the commands, so ``ragas-relevancy --help`` answers at once. Exit codes: 0 done, 1 a check
failed (compare beyond ``--tol``, nothing scored), 2 bad input or settings.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(
    name="ragas-relevancy",
    help=(
        "Answer relevancy (RAGAS) with every probe shown. Runs offline by default: "
        "--judge offline, --embeddings auto."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class ProbePrompt(str, Enum):
    """How probe questions are asked for."""

    diverse = "diverse"
    sequential = "sequential"
    stock = "stock"


FileArg = Annotated[
    Path, typer.Argument(help="JSONL, CSV or JSON rows with user_input and response.")
]
MapOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--map",
        "-m",
        metavar="COLUMN=FIELD",
        help="Read a column as user_input or response, e.g. --map question=user_input.",
    ),
]
JudgeOpt = Annotated[
    str, typer.Option(help="offline | openai:MODEL | gemini:MODEL (keys from the environment).")
]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option(help="Judge server URL, for any OpenAI-compatible server (Groq, vLLM, Ollama)."),
]
RetriesOpt = Annotated[
    int, typer.Option(min=0, help="Judge (and openai embeddings) client retries per call.")
]
TimeoutOpt = Annotated[
    float | None,
    typer.Option(
        min=0.001,
        metavar="SECONDS",
        help="Give up on a judge or openai embeddings request after this long (then retry).",
    ),
]
EmbeddingsOpt = Annotated[
    str,
    typer.Option(
        help="auto | hash | local | openai:MODEL | gemini:MODEL. auto: local when the 'local' "
        "extra is installed, else hash."
    ),
]
EmbeddingsUrlOpt = Annotated[
    str | None,
    typer.Option(help="Embeddings server URL (default: --base-url when the provider matches)."),
]
OneTextOpt = Annotated[
    bool,
    typer.Option(
        "--one-text-per-call",
        help="Send one text per embeddings call (providers that merge a list).",
    ),
]
StrictnessOpt = Annotated[int, typer.Option(min=1, help="Probes per sample.")]
PromptOpt = Annotated[ProbePrompt, typer.Option(help="How probes are asked for.")]
ConcurrencyOpt = Annotated[int, typer.Option(min=1, help="Judge and embedding calls in flight.")]
CacheOpt = Annotated[
    Path | None,
    typer.Option(metavar="DIR", help="Keep judge replies in DIR; a re-run reuses them."),
]


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """Known problems (input, settings, files) -> one line and exit 2; anything else exit 1."""
    from .datafile import DataFileError
    from .providers import ProviderError
    from .redaction import redact
    from .writers import ReportFileError

    try:
        yield
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except (DataFileError, ProviderError, ReportFileError) as exc:
        _error(redact(str(exc)))
        raise typer.Exit(2) from None
    except OSError as exc:  # e.g. --out or --html in a folder that cannot be written
        where = f" ({exc.filename})" if exc.filename else ""
        _error(redact(f"{exc.strerror or exc}{where}"))
        raise typer.Exit(2) from None
    except Exception as exc:
        if os.environ.get("RAGAS_RELEVANCY_DEBUG"):
            raise
        _error(redact(f"{type(exc).__name__}: {exc}".splitlines()[0]))
        print("(set RAGAS_RELEVANCY_DEBUG=1 to see the traceback)", file=sys.stderr)
        raise typer.Exit(1) from None


def _error(message: str) -> None:
    print(f"ragas-relevancy: error: {message}", file=sys.stderr)


def _settings(options: dict[str, Any], **overrides: Any) -> Any:
    """Settings from a command's options (its ``locals()``), with ``overrides`` on top."""
    from dataclasses import fields

    from .runner import Settings

    values = {f.name: options[f.name] for f in fields(Settings) if f.name in options}
    values.update(overrides)
    prompt = values.pop("probe_prompt", ProbePrompt.diverse)
    return Settings(probe_prompt=getattr(prompt, "value", prompt), **values)


def _read(file: Path, mapping: list[str] | None, numeric: str | None = None) -> Any:
    from .datafile import parse_map, read_rows

    return read_rows(file, parse_map(mapping or []), numeric=numeric)


@app.command()
def score(
    file: FileArg,
    map_: MapOpt = None,
    judge: JudgeOpt = "offline",
    base_url: BaseUrlOpt = None,
    max_retries: RetriesOpt = 2,
    timeout: TimeoutOpt = None,
    embeddings: EmbeddingsOpt = "auto",
    embeddings_base_url: EmbeddingsUrlOpt = None,
    one_text_per_call: OneTextOpt = False,
    strictness: StrictnessOpt = 3,
    probe_prompt: PromptOpt = ProbePrompt.diverse,
    concurrency: ConcurrencyOpt = 8,
    cache: CacheOpt = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Write one JSON line per sample as it finishes; re-runs resume it."),
    ] = None,
    html: Annotated[Path | None, typer.Option(help="Write a self-contained HTML report.")] = None,
    probes: Annotated[bool, typer.Option(help="Show each sample's probes.")] = True,
    progress: Annotated[bool, typer.Option(help="Progress bar on stderr (terminals).")] = True,
) -> None:
    """Score every row and show each probe, a summary and the lowest scores."""
    with handled():
        settings = _settings(locals())
        from .score_command import run_score

        code = run_score(
            _read(file, map_), settings, out=out, html=html, probes=probes, progress=progress
        )
    raise typer.Exit(code)


@app.command()
def compare(
    file: FileArg,
    map_: MapOpt = None,
    judge: JudgeOpt = "offline",
    base_url: BaseUrlOpt = None,
    max_retries: RetriesOpt = 2,
    embeddings: EmbeddingsOpt = "auto",
    embeddings_base_url: EmbeddingsUrlOpt = None,
    one_text_per_call: OneTextOpt = False,
    strictness: StrictnessOpt = 3,
    concurrency: ConcurrencyOpt = 8,
    cache: CacheOpt = None,
    tol: Annotated[
        float, typer.Option(min=0.0, help="Largest |stock - ours| that still counts as equal.")
    ] = 1e-9,
) -> None:
    """Stock AnswerRelevancy and ours (stock mode) on the same judge replies, side by side.

    Exits 1 when any score differs by more than --tol or the prompts differ.
    """
    with handled():
        settings = _settings(locals(), probe_prompt=ProbePrompt.stock)
        from .compare_command import run_compare

        code = run_compare(_read(file, map_), settings, tol=tol)
    raise typer.Exit(code)


@app.command()
def calibrate(
    file: FileArg,
    ratings: Annotated[
        str, typer.Option(help="Column with human relevance ratings (any numeric scale).")
    ],
    map_: MapOpt = None,
    judge: JudgeOpt = "offline",
    base_url: BaseUrlOpt = None,
    max_retries: RetriesOpt = 2,
    embeddings: EmbeddingsOpt = "auto",
    embeddings_base_url: EmbeddingsUrlOpt = None,
    one_text_per_call: OneTextOpt = False,
    strictness: StrictnessOpt = 3,
    probe_prompt: PromptOpt = ProbePrompt.diverse,
    concurrency: ConcurrencyOpt = 8,
    cache: CacheOpt = None,
    repeats: Annotated[
        int,
        typer.Option(min=1, help="Score each sample K times (cache off) and report the spread."),
    ] = 1,
    resamples: Annotated[int, typer.Option(min=100, help="Bootstrap resamples.")] = 2000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 20240611,
) -> None:
    """Pearson and Spearman correlation of scores with human ratings, with 95% intervals."""
    with handled():
        settings = _settings(locals())
        from .calibrate_command import run_calibrate

        code = run_calibrate(
            _read(file, map_, numeric=ratings),
            settings,
            ratings=ratings,
            repeats=repeats,
            resamples=resamples,
            seed=seed,
        )
    raise typer.Exit(code)


def main() -> None:
    """Entry point of the ``ragas-relevancy`` console script."""
    app(prog_name="ragas-relevancy")
