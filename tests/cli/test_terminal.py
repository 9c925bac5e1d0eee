"""No text from the data reaches a terminal raw: escape sequences, C1 and bidi controls are shown
as ``<U+XXXX>`` codes, and brackets are never read as rich markup, piped and on a terminal."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragas_relevancy_ext.cli import app

CLEAR = "\x1b[2J"
TITLE = "\x1b]0;title\x07"
LINK = "\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\"
CSI = "\x9b"
RLO = "\u202e"
MARKUP = "[bold red]x[/]"
EVIL = " ".join([MARKUP, CLEAR, RLO, TITLE, CSI, LINK])  # words: a cell cuts a long one
# Raw characters that must never reach a terminal (rich's own colour codes aside).
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
SGR = re.compile(r"\x1b\[[0-9;]*m")  # the colours rich writes on a terminal
TERMINAL = {"FORCE_COLOR": "1", "COLUMNS": "160"}  # rich takes the output for a terminal
PIPED = {"FORCE_COLOR": None, "TTY_COMPATIBLE": None, "COLUMNS": "160"}


def invoke(*args: str | Path, env: dict[str, str | None]):
    return CliRunner().invoke(app, [str(a) for a in args], env=env)


def assert_shown_safely(text: str, terminal: bool) -> None:
    """No raw control character in ``text``; the data's are there as codes, brackets as they
    are."""
    if terminal:
        assert SGR.search(text), "expected rich's colours on a terminal"
        text = SGR.sub("", text)
    else:
        assert "\x1b" not in text
    assert not RAW.search(text), repr(RAW.search(text))
    for code in ("<U+001B>[2J", "<U+001B>]0;title<U+0007>", "<U+001B>]8;;http://evil<U+001B>\\"):
        assert code in text
    assert "<U+009B>" in text and "<U+202E>" in text
    assert MARKUP in text  # printed as it is, not read as markup
    # question, response and probes: BEL shown too (rich's Text alone would drop it)
    assert text.count("title<U+0007>") >= 3


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """Two rows whose question and answer (and so the offline judge's probes) hold every kind
    of control character and a rich markup tag."""
    rows = [
        {"user_input": f"Where {EVIL} is my order?", "response": f"It shipped {EVIL} today. Ok."},
        {"user_input": "Plain question?", "response": "A plain answer."},
    ]
    path = tmp_path / "evil.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def saved(data: Path, tmp_path: Path) -> Path:
    out = tmp_path / "report.jsonl"
    result = invoke("score", data, "--embeddings", "hash", "--out", out, env=PIPED)
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.parametrize("env", [PIPED, TERMINAL], ids=["piped", "terminal"])
def test_score_shows_control_characters_as_codes(data: Path, env) -> None:
    result = invoke("score", data, "--embeddings", "hash", "--no-progress", env=env)
    assert result.exit_code == 0, result.output
    probe = f"It shipped {EVIL} today"  # the offline judge's probe: the answer's first sentence
    assert RLO in probe  # the probe line holds the bidi override too
    assert_shown_safely(result.stdout, terminal=env is TERMINAL)
    assert not RAW.search(SGR.sub("", result.stderr))


@pytest.mark.parametrize("env", [PIPED, TERMINAL], ids=["piped", "terminal"])
@pytest.mark.parametrize("how", [[], ["--row", "1"], ["--worst", "2"]], ids=["all", "row", "worst"])
def test_show_shows_control_characters_as_codes(saved: Path, env, how) -> None:
    result = invoke("show", saved, *how, env=env)
    assert result.exit_code == 0, result.output
    assert_shown_safely(result.stdout, terminal=env is TERMINAL)


def test_the_piped_table_with_every_reason_shows_codes(saved: Path) -> None:
    from ragas_relevancy_ext.cli.output import console as output
    from ragas_relevancy_ext.cli.saved import SavedRun

    run = SavedRun.read(saved)
    items = list(zip(run.numbers, run.reports, strict=True))
    sink = io.StringIO()
    console = output.make_console()
    console.file = sink
    output.print_scores(console, items, reasons=True)
    assert_shown_safely(sink.getvalue(), terminal=False)


def test_the_rich_table_keeps_styles_on_the_characters_they_had() -> None:
    from rich.text import Text

    from ragas_relevancy_ext.cli.output.console import neutralised_text

    text = Text("a\x1bb")
    text.stylize("red", 1, 3)  # ESC and b
    shown = neutralised_text(text)
    assert shown.plain == "a<U+001B>b"
    assert [(s.start, s.end, str(s.style)) for s in shown.spans] == [(1, 10, "red")]


def test_the_lowest_rows_of_the_summary_show_codes(tmp_path: Path) -> None:
    rows = [
        {"user_input": f"Low {EVIL}?", "response": "I don't know."},
        {"user_input": f"Bad {EVIL}?", "response": ""},
        {"user_input": "Fine?", "response": "Fine."},
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    flags = ["--embeddings", "hash", "--no-table", "--no-progress"]
    result = invoke("score", path, *flags, env=TERMINAL)
    assert "row    1" in result.stdout  # the lowest rows quote the question
    text = SGR.sub("", result.stdout + result.stderr)
    assert not RAW.search(text)
    assert f"Low {MARKUP} <U+001B>[2J <U+202E>" in text


def test_an_error_line_quoting_a_column_name_shows_codes(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({f"q{TITLE}{RLO}": "x", "response": "y"}) + "\n", encoding="utf-8")
    result = invoke("score", path, "--embeddings", "hash", env=PIPED)
    assert result.exit_code == 2
    assert "q<U+001B>]0;title<U+0007><U+202E>" in result.stderr
    assert not RAW.search(result.stderr.replace("\n", ""))


def test_compare_shows_control_characters_as_codes(data: Path) -> None:
    result = invoke("compare", data, "--embeddings", "hash", env=TERMINAL)
    assert result.exit_code == 0, result.output
    text = SGR.sub("", result.stdout)
    assert not RAW.search(text)
    assert f"{MARKUP} <U+001B>[2J <U+202E>" in text  # the question, cut at 60 or 70 characters


def test_calibrate_shows_control_characters_as_codes(tmp_path: Path) -> None:
    rows = [
        {"user_input": f"Q{n} {EVIL}?", "response": f"Answer {n}.", "rating": n % 3}
        for n in range(4)
    ]
    path = tmp_path / "rated.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result = invoke(
        "calibrate", path, "--ratings", "rating", "--embeddings", "hash", "--repeats", "2",
        env=TERMINAL,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    text = SGR.sub("", result.stdout)
    assert not RAW.search(text)
    assert f"{MARKUP} <U+001B>[2J <U+202E>" in text  # the question, cut at 60 or 70 characters


def test_the_text_report_a_check_or_print_shows_has_codes() -> None:
    from ragas_relevancy_ext.scoring.report import Probe, RelevancyReport

    made = RelevancyReport(
        f"Q {EVIL}?", f"A {EVIL}.", float("nan"), 1, "diverse", False,
        [Probe(f"P {EVIL}?", 0, 0.5)], notes=[f"note {EVIL}"], error=f"ValueError: {EVIL}",
    )  # fmt: skip
    text = str(made)  # what the pytest plugin's failure message and print(report) show
    assert not RAW.search(text.replace("\n", ""))
    assert text.count("<U+001B>[2J") == 5  # question, response, probe, note and reason


def test_the_console_every_command_prints_through_shows_codes(monkeypatch) -> None:
    from rich.table import Table
    from rich.text import Text

    from ragas_relevancy_ext.cli.output.console import make_console

    monkeypatch.setenv("FORCE_COLOR", "1")
    console = make_console()
    console.file = sink = io.StringIO()
    table = Table("cell")
    table.add_row(Text(f"t {RLO} {CLEAR}", style="bold"))
    table.add_row(f"s {CSI} {MARKUP}")
    console.print(Text(f"text {TITLE}", style="red"), f"str {LINK}", table)
    text = SGR.sub("", sink.getvalue())
    assert not RAW.search(text)
    assert "text <U+001B>]0;title " in text  # rich's Text itself drops the BEL
    assert "str <U+001B>]8;;http://evil<U+001B>\\click" in text
    assert "t <U+202E> <U+001B>[2J" in text and f"s <U+009B> {MARKUP}" in text
