"""Masking: no secret part of any URL (user name and password, query values of any name, the
fragment) survives :func:`redact`, wherever and however the URL sits in a text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from common import OtlpReceiver
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ragas_relevancy_ext.cli import app
from ragas_relevancy_ext.scoring.redaction import MASK, redact
from ragas_relevancy_ext.testing.loopback import LoopbackServer

# Characters a URL part may hold as they are (RFC 3986 unreserved and sub-delimiters); any
# other character of a generated name or secret is percent-encoded
_PLAIN = "-._~!$'()*+,;=:@"
_TEXT = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=8)


def _part(text: str, keep: str) -> str:
    return quote(text, safe=keep)


@dataclass(frozen=True)
class SecretUrl:
    """A generated URL, and the parts of it that must never be shown."""

    url: str
    target: str  # the path and query alone, as a server sees the request
    secrets: tuple[str, ...]


@st.composite
def secret_urls(draw: st.DrawFn, host: st.SearchStrategy[str] | None = None) -> SecretUrl:
    """URLs (http ones on ``host`` when given) with user info, query keys of any name,
    fragments, percent-encoding, IPv6 hosts; every secret starts and ends with a unique marker,
    so finding either anywhere is a leak."""
    counter = iter(range(100))

    def secret() -> str:
        n = next(counter)
        return f"Zq{n}x{_part(draw(_TEXT), _PLAIN)}Wk{n}y"

    secrets: list[str] = []
    hosts = st.sampled_from(["127.0.0.1:8080", "example.com", "[::1]", "[2001:db8::7]:443"])
    netloc = draw(host if host is not None else hosts)
    if draw(st.booleans()):
        user = _part(draw(_TEXT), "-._~")
        password = secret()
        secrets.append(password)
        netloc = f"{user}:{password}@{netloc}"
    path = "/" + "/".join(_part(draw(_TEXT), "-._~") for _ in range(draw(st.integers(0, 2))))
    pairs = []
    for _ in range(draw(st.integers(1, 3))):
        name = _part(draw(_TEXT), "-._~!$'()*+,:@")  # a key of any name, encoded as needed
        value = secret()
        secrets.append(value)
        pairs.append(f"{name}={value}")
    query = "&".join(pairs)
    fragment = ""
    if draw(st.booleans()):
        fragment = secret()
        secrets.append(fragment)
    scheme = "http" if host is not None else draw(st.sampled_from(["http", "https"]))
    url = f"{scheme}://{netloc}{path}?{query}" + (f"#{fragment}" if fragment else "")
    return SecretUrl(url, f"{path}?{query}", tuple(secrets))


def markers(secrets: tuple[str, ...]) -> list[str]:
    """The unique markers that start and end each secret."""
    return [m for s in secrets for m in (s[: s.index("x") + 1], s[s.rindex("Wk") :])]


CONTEXTS = [
    "{}",
    "error: {}",
    "no route for {}.",
    "('{}')",
    '{{"message": "{}"}}',
    "{{'message': 'bad url {}', 'code': 404}}",
    "<a href={}>x</a>",
    "see {}, then retry",
]


@given(secret_urls(), st.sampled_from(CONTEXTS), st.booleans())
def test_no_secret_part_of_a_url_survives_masking(found: SecretUrl, context: str, alone: bool):
    # a server may echo the whole URL, or only the request it got (path and query)
    text = context.format(found.target if alone else found.url)
    masked = redact(text, {})
    for marker in markers(found.secrets):
        assert marker not in masked, (text, masked)
    assert MASK in masked


def test_names_hosts_and_the_sentence_around_a_url_are_kept():
    text = "at https://u:p@h:8/v1?code=s3cret&api-version=2024-06-01&flag#top, then (/v1?x=1)."
    assert redact(text, {}) == (
        "at https://***@h:8/v1?code=***&api-version=***&***#***, then (/v1?x=***)."
    )
    plain = "Where is order A17? It shipped to /home/a/b.txt on 3/4; see https://h/docs."
    assert redact(plain, {}) == plain


# -- every output of a run, with the URL echoed by the server -----------------------------------

ROW = {"user_input": "Where is order A17?", "response": "Order A17 shipped on 3 March."}


def plugin_outputs(folder: Path, base_url: str) -> str:
    """The JUnit XML and terminal text of a pytest run of the plugin against ``base_url``, in a
    process of its own (pytester would drop, at its end, modules this process needs)."""
    bot = "from ragas_relevancy_ext.pytest_plugin import assert_relevant\n\ndef test_row():\n"
    bot += f"    assert_relevant({ROW['user_input']!r}, {ROW['response']!r}, min_score=0.1)\n"
    (folder / "test_bot.py").write_text(bot, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "PYTEST_ADDOPTS")}
    if not [p for p in entry_points(group="pytest11") if p.name == "relevancy"]:
        env["PYTEST_PLUGINS"] = "ragas_relevancy_ext.pytest_plugin"
    judge = ["--relevancy-judge", "openai:loop-judge", "--relevancy-embeddings", "hash"]
    url = ["--relevancy-base-url", base_url, "--junitxml=junit.xml", "-p", "no:cacheprovider"]
    command = [sys.executable, "-m", "pytest", "test_bot.py", *judge, *url]
    ran = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 1, ran.stdout + ran.stderr  # the one test failed
    return (folder / "junit.xml").read_text(encoding="utf-8") + ran.stdout + ran.stderr


@pytest.mark.slow
@settings(
    max_examples=4,
    deadline=None,
    phases=[Phase.generate],
)
@given(data=st.data())
def test_no_secret_part_of_a_url_reaches_any_output(data):
    echoed = data.draw(secret_urls(), label="echoed")  # any host, IPv6 ones included

    def refuse(messages: list[dict[str, Any]]) -> str:
        raise ValueError(f"cannot serve {echoed.url}")  # a 500 whose body holds the URL

    with LoopbackServer(reply=refuse) as server, OtlpReceiver() as traces:
        here = f"127.0.0.1:{server.port}"
        found = data.draw(secret_urls(host=st.just(here)), label="base URL")
        if data.draw(st.booleans(), label="a path the server does not know"):
            base_url = found.url  # 404, the body naming the request: its path and query
        else:
            base_url = found.url.replace(found.target, "/v1?" + found.target.partition("?")[2])
        with tempfile.TemporaryDirectory() as folder:
            rows, out, page = (Path(folder) / name for name in ("in.jsonl", "out.jsonl", "p.html"))
            rows.write_text(json.dumps(ROW) + "\n", encoding="utf-8")
            result = CliRunner().invoke(
                app,
                ["score", str(rows), "--judge", "openai:loop-judge", "--embeddings", "hash"]
                + ["--base-url", base_url, "--max-retries", "0", "--otel", traces.url]
                + ["--out", str(out), "--html", str(page), "--no-progress"],
                env={"OPENAI_API_KEY": None, "COLUMNS": "300"},
            )
            files = out.read_text(encoding="utf-8") + page.read_text(encoding="utf-8")
            junit = plugin_outputs(Path(folder), base_url)
    assert result.exit_code == 1, result.output  # the row could not be scored
    echo = "no such endpoint: /" if base_url == found.url else "cannot serve http"
    for text in (result.stdout, files, junit):  # what the server said, wrapped or not
        assert echo in " ".join(text.split())
    assert traces.named("ragas-relevancy score")
    outputs = [result.stdout, result.stderr, files, junit, json.dumps(traces.spans)]
    for marker in markers(found.secrets + echoed.secrets):
        for text in outputs:
            assert marker not in text, (base_url, text)
