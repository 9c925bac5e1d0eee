"""No file the command did not write is ever changed: pages, reports, Parquet folders, cache.

Every output path (``--out``, ``--html``, a Parquet folder) is refused, byte for byte as it was,
when it is the input or another output (symlinks and hard links included) or a file this tool
did not write; a link is written through; a Parquet folder is locked as the JSONL report is;
and a judge cache that cannot be written costs the cache, never a score.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from common import ROOT
from test_writers import make_report
from typer.testing import CliRunner

from ragas_relevancy_ext.cli import app, ray_score
from ragas_relevancy_ext.cli.output import html
from ragas_relevancy_ext.cli.output.jsonl import FORMAT
from ragas_relevancy_ext.cli.ray_score import open_output
from ragas_relevancy_ext.cli.stats import summarise
from ragas_relevancy_ext.store import sqlite
from ragas_relevancy_ext.testing.loopback import LoopbackServer

OFFLINE = ["--embeddings", "hash", "--no-progress"]
TOPICS = ["order A17", "a refund", "the warranty", "card payments", "delivery", "returns"]


def invoke(*args: str | Path, env: dict[str, str | None] | None = None):
    return CliRunner().invoke(app, [str(a) for a in args], env=env)


def some_rows(n: int) -> list[dict[str, str]]:
    return [
        {
            "user_input": f"What about {TOPICS[i % len(TOPICS)]} ({i})?",
            "response": f"Here is what we know about {TOPICS[i % len(TOPICS)]} ({i}): handled.",
        }
        for i in range(n)
    ]


def write_jsonl(path: Path, rows: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def files_in(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


# -- --html and --out: never the same file, never a file not ours ------------------------------


def link_to(target: Path, kind: str) -> Path:
    """``target`` itself, or a new symlink or hard link to it."""
    if kind == "direct":
        return target
    link = target.with_name(f"{kind}-to-{target.name}")
    if kind == "symlink":
        link.symlink_to(target)
    else:
        os.link(target, link)
    return link


@pytest.mark.parametrize("kind", ["direct", "symlink", "hardlink"])
def test_html_onto_the_input_is_refused_and_the_input_left_as_it_was(tmp_path, kind):
    path = write_jsonl(tmp_path / "rows.jsonl", some_rows(3))
    before = path.read_bytes()
    page = link_to(path, kind)
    result = invoke("score", path, *OFFLINE, "--html", page)
    assert result.exit_code == 2, result.output
    assert f"--html {page} is the input file; give --html a file of its own" in result.stderr
    assert "scored" not in result.stdout  # refused before any row was scored
    assert path.read_bytes() == before
    assert page.is_symlink() == (kind == "symlink")


def test_html_onto_a_file_not_written_by_the_tool_is_refused_untouched(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", some_rows(2))
    theirs = {
        "photo.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
        "notes.html": b"<!DOCTYPE html><html><head><title>mine</title>",
    }
    for name, data in theirs.items():
        other = tmp_path / name
        other.write_bytes(data)
        result = invoke("score", path, *OFFLINE, "--html", other)
        assert result.exit_code == 2, result.output
        assert (
            f"--html {other} exists and is not a page of ragas-relevancy; it was left as it is: "
            "give --html a new file"
        ) in " ".join(result.stderr.split())
        assert other.read_bytes() == data
        assert "scored" not in result.stdout


def test_html_onto_out_is_refused_and_a_later_resume_still_reads_the_report(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", some_rows(3))
    out = tmp_path / "report.jsonl"
    # neither exists yet: the same path twice
    result = invoke("score", path, *OFFLINE, "--out", out, "--html", out)
    assert result.exit_code == 2, result.output
    assert f"--html {out} is the same file as --out {out}" in result.stderr
    assert not out.exists()

    assert invoke("score", path, *OFFLINE, "--out", out).exit_code == 0
    before = out.read_bytes()
    for page in (out, link_to(out, "symlink"), link_to(out, "hardlink")):
        result = invoke("score", path, *OFFLINE, "--out", out, "--html", page)
        assert result.exit_code == 2, result.output
        assert f"--html {page} is the same file as --out {out}" in result.stderr
        assert out.read_bytes() == before
    resumed = invoke("score", path, *OFFLINE, "--out", out)
    assert resumed.exit_code == 0, resumed.output
    assert "3 row(s) already there, 0 to score" in resumed.stdout


def test_show_html_onto_the_report_it_reads_is_refused(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", some_rows(2))
    out = tmp_path / "report.jsonl"
    assert invoke("score", path, *OFFLINE, "--out", out).exit_code == 0
    before = out.read_bytes()
    result = invoke("show", out, "--html", out)
    assert result.exit_code == 2, result.output
    assert f"--html {out} is the input file" in result.stderr
    assert out.read_bytes() == before


def test_a_page_of_ours_is_replaced_and_a_link_to_it_stays_a_link(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", some_rows(2))
    page = tmp_path / "pages" / "report.html"
    assert invoke("score", path, *OFFLINE, "--html", page).exit_code == 0
    assert html.GENERATOR in page.read_text(encoding="utf-8")
    link = link_to(page, "symlink")
    write_jsonl(path, some_rows(3))
    result = invoke("score", path, *OFFLINE, "--html", link)
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and page.read_text(encoding="utf-8").count('<article class="card') == 3
    assert len(list(page.parent.iterdir())) == 2  # the page and its link, no temporary file


def test_a_page_that_cannot_be_written_whole_leaves_the_old_page(tmp_path, monkeypatch):
    page = tmp_path / "report.html"
    items = [(1, make_report(0.4)), (2, make_report(0.9))]
    summary = summarise([(n, r.score, r.user_input) for n, r in items])
    html.write(page, items[:1], summary, {"judge": "offline"})
    before = page.read_bytes()

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        html.write(page, items, summary, {"judge": "offline"})
    assert page.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]  # no temporary file left


def test_out_through_a_symlink_writes_the_target_and_keeps_the_link(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", some_rows(2))
    real = tmp_path / "kept" / "report.jsonl"
    real.parent.mkdir()
    assert invoke("score", path, *OFFLINE, "--out", real).exit_code == 0
    link = tmp_path / "report.jsonl"
    link.symlink_to(real)
    write_jsonl(path, some_rows(4))
    result = invoke("score", path, *OFFLINE, "--out", link)  # appends, then rewrites in order
    assert result.exit_code == 0, result.output
    assert "2 row(s) already there, 2 to score" in result.stdout
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert [json.loads(line)["row"] for line in real.read_text().splitlines()] == [1, 2, 3, 4]
    assert sorted(p.name for p in real.parent.iterdir()) == ["report.jsonl"]  # no lock, no temp


@pytest.mark.slow
def test_refusals_come_before_ragas_loads(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", some_rows(2))
    before = path.read_bytes()
    command = [sys.executable, "-X", "importtime", "-m", "ragas_relevancy_ext", "score",
               str(path), "--embeddings", "hash", "--html", str(path)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "is the input file" in done.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert "ragas" not in imported and "openai" not in imported and "numpy" not in imported
    assert path.read_bytes() == before


# -- --engine ray into a Parquet folder: locked, refused untouched ----------------------------


def our_part(folder: Path) -> None:
    """One Parquet part as a first run leaves it, and that run's part still being written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir()
    rows = [{"key": "k1", "error": None, "format": FORMAT, "row": 1, **some_rows(1)[0]}]
    pq.write_table(pa.Table.from_pylist(rows), folder / "part-first-000001.parquet")
    (folder / ".part-first-000002.parquet.tmp").write_bytes(b"PAR1 being written")


def test_a_parquet_folder_another_run_is_writing_is_refused_untouched(tmp_path, monkeypatch):
    path = write_jsonl(tmp_path / "rows.jsonl", some_rows(3))
    folder = tmp_path / "scored"
    our_part(folder)
    before = files_in(folder)
    runs: list[Path] = []

    def scored_on_ray(sink, *args, **kwargs) -> int:  # what would start Ray
        runs.append(sink.path)
        return 0

    monkeypatch.setattr(ray_score, "_run", scored_on_ray)
    first = open_output(folder, path)
    try:
        second = invoke("score", path, *OFFLINE, "--engine", "ray", "--out", folder)
    finally:
        first.close()
    assert second.exit_code == 2, second.output
    assert (
        f"--out {folder} is being written by another ragas-relevancy process (pid {os.getpid()}"
    ) in " ".join(second.stderr.split())
    assert runs == []
    assert files_in(folder) == before

    after = invoke("score", path, *OFFLINE, "--engine", "ray", "--out", folder)
    assert after.exit_code == 0, after.output
    assert runs == [folder]
    assert not (tmp_path / "scored.lock").exists()  # released and removed


def test_a_refused_parquet_folder_keeps_every_file(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", some_rows(3))
    folder = tmp_path / "scored"
    our_part(folder)
    (folder / "notes.txt").write_text("mine")
    before = files_in(folder)
    result = invoke("score", path, *OFFLINE, "--engine", "ray", "--out", folder)
    assert result.exit_code == 2, result.output
    assert "holds notes.txt, which this command did not write" in result.stderr
    assert files_in(folder) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.jsonl", "scored"]


# -- a judge cache that cannot be written -----------------------------------------------------


@pytest.fixture()
def full_disk(monkeypatch):
    """The cache database stops growing after it is created: SQLite's own 'database or disk is
    full' once a write needs a new page."""
    connect = sqlite._connect

    def limited(path: Path) -> sqlite3.Connection:
        db = connect(path)
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count = {pages}")
        return db

    monkeypatch.setattr(sqlite, "_connect", limited)


@pytest.mark.slow
@pytest.mark.parametrize("cache", [False, True])
def test_a_full_disk_keeps_every_score_with_one_warning_per_store(tmp_path, full_disk, cache):
    path = write_jsonl(tmp_path / "rows.jsonl", some_rows(30))
    out = tmp_path / "report.jsonl"
    with LoopbackServer(width=32) as server:
        options = ["--judge", "openai:loop-judge", "--base-url", server.openai_base_url]
        options += ["--cache", str(tmp_path / "cache")] if cache else []
        result = invoke(
            "score", path, *options, *OFFLINE, "--max-retries", "0", "--out", out,
            env={"OPENAI_API_KEY": "test"},
        )  # fmt: skip
        judge_requests = server.count("chat")
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 30 and all(r["error"] is None for r in records)
    assert all(isinstance(r["score"], float) for r in records)
    assert judge_requests == 30  # one diverse-prompt request per row, none repeated
    warnings = [line for line in result.stderr.splitlines() if "warning:" in line]
    assert len(warnings) == 1 + cache
    assert all("database or disk is full" in line for line in warnings)
    assert "the reply journal is off" in warnings[-1]  # the journal, asked last, fails last
    if cache:
        assert "cache is off" in warnings[0]
        assert "30 judge calls, off since a reply could not be stored" in result.stdout


def test_a_planted_link_at_the_reply_journal_is_refused_untouched(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", some_rows(3))
    mine = tmp_path / "mine.txt"
    mine.write_text("")
    (tmp_path / "report.jsonl.replies.sqlite3").symlink_to(mine)
    result = invoke("score", path, *OFFLINE, "--out", tmp_path / "report.jsonl")
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [
        f"ragas-relevancy: error: --out {tmp_path / 'report.jsonl.replies.sqlite3'}: "
        "report.jsonl.replies.sqlite3 is a link; it was left as it is"
    ]
    assert mine.read_text() == ""


def test_a_parquet_out_that_is_the_input_folder_is_refused(tmp_path, monkeypatch):
    folder = tmp_path / "scored"
    our_part(folder)
    before = files_in(folder)
    monkeypatch.setattr(ray_score, "_run", lambda *args, **kwargs: pytest.fail("scored"))
    for out in (folder, link_to(folder, "symlink")):
        result = invoke("score", folder, *OFFLINE, "--engine", "ray", "--out", out)
        assert result.exit_code == 2, result.output
        assert f"--out {out} is the input; give --out a new folder" in result.stderr
    assert files_in(folder) == before
