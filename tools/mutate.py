"""Mutation testing of the metric core: does the suite notice when the code is subtly wrong?

Each mutant in :data:`MUTANTS` replaces one piece of text in one core module with a wrong
variant. For each, the package and the tests are copied to a temporary directory, the mutant is
applied to the copy (the working tree is never edited), and the test files that cover that module
(:data:`TESTS`) run with ``-x -q`` in a process forked after RAGAS is imported once (POSIX).
A failing run kills the mutant; a passing one lets it survive.
Prints killed/total per module and every survivor; survivors known to be equivalent (no test can
tell them apart) are listed with the reason from :data:`EQUIVALENT`. A mutant whose original text
is no longer in its module (the code was rewritten) is STALE: an error, the exit status is 1, and
the mutant must be rewritten for the current code. ``--check`` finds stale mutants in a second,
without running anything (``tests/test_mutation_catalogue.py`` runs it in the suite).

    python tools/mutate.py                    # every mutant, 2 at a time
    python tools/mutate.py --module report.py --jobs 1
    python tools/mutate.py --list             # the catalogue, without running
    python tools/mutate.py --check            # stale mutants and catalogue errors, without running
    python tools/mutate.py --root /path/to/other/checkout   # score another tree's tests

Too slow for the test suite (each mutant imports RAGAS): it is a tool, run by hand.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "EQUIVALENT",
    "MUTANTS",
    "TESTS",
    "Mutant",
    "Outcome",
    "catalogue_problems",
    "main",
    "run_mutant",
]

PACKAGE = "ragas_relevancy_ext"
REPO = Path(__file__).resolve().parent.parent
TIMEOUT = 300  # seconds per mutant; a mutant that hangs the tests counts as killed


@dataclass(frozen=True)
class Mutant:
    """Replace ``old`` (which must occur exactly once) by ``new`` in ``module``."""

    module: str
    old: str
    new: str
    what: str

    @property
    def key(self) -> str:
        return f"{self.module}: {self.what}"


@dataclass(frozen=True)
class Outcome:
    """What happened to one mutant: killed, survived, timeout, or stale (old text not found)."""

    mutant: Mutant
    status: str
    detail: str = ""


# The test files that cover each module, fastest and most direct first (``-x`` stops at the
# first failure); ``file::test`` picks one test of a slow file. Files missing from the tree being
# scored are left out.
TESTS: dict[str, list[str]] = {
    "scoring.py": ["test_scoring.py", "test_parity.py", "test_metric.py"],
    "probe_modes.py": [
        "test_scoring.py",
        "test_probe_modes.py",
        "test_angles.py",
        "test_metric.py",
        "test_parity.py",
        "test_concurrency.py",
    ],
    "pipeline.py": [
        "test_metric.py",
        "test_probe_modes.py",
        "test_report_data.py",
        "test_concurrency.py",
        "test_parity.py",
        "test_security.py",
        "test_evaluate.py",
    ],
    "embeddings.py": [
        "test_vector_checks.py",
        "test_metric.py",
        "test_adapter.py",
        "test_concurrency.py",
        "test_evaluate.py",
        "test_sdk_loopback.py",
        "test_usage.py",
    ],
    "report.py": ["test_report.py", "test_report_data.py", "test_metric.py", "test_writers.py"],
    "one_text_per_call.py": ["test_adapter.py", "test_evaluate.py", "test_local_model.py"],
    "cli/cache.py": ["test_cache.py", "test_usage.py"],
    "metric.py": [
        "test_metric.py",
        "test_concurrency.py",
        "test_long_runs.py::test_ascore_each_reads_lazily_and_saves_rows_as_they_start",
        "test_long_runs.py::test_a_row_that_is_not_a_mapping_is_nan_and_the_batch_goes_on",
        "test_languages.py",
        "test_compat.py",
        "test_batching.py",
        "test_parity.py",
        "test_probe_modes.py",
        "test_usage.py",
    ],
    "streaming.py": [
        "test_streaming.py",
        "test_concurrency.py",
        "test_metric.py",
        "test_long_runs.py::test_ascore_each_reads_lazily_and_saves_rows_as_they_start",
        "test_long_runs.py::test_calls_of_rows_started_earlier_get_the_next_free_slot",
        "test_long_runs.py::test_a_stopped_run_asks_nothing_for_rows_it_had_not_begun",
    ],
    "legacy.py": [
        "test_evaluate.py",
        "test_concurrency.py",
        "test_compat.py",
        "test_parity_legacy.py",
    ],
    "usage.py": ["test_usage.py", "test_report_data.py"],
    "judges.py": ["test_usage.py", "test_sdk_loopback.py"],
    "batching.py": ["test_usage.py", "test_batching.py"],
}

_NO_LIMIT = "asyncio.Semaphore(10**6)"

MUTANTS: list[Mutant] = [
    Mutant(
        "probe_modes.py",
        "question.encode().translate(_ASCII_FOLD, _ASCII_DROP)",
        "question.encode().translate(_ASCII_FOLD)",
        "ASCII probes keep their apostrophes when folded",
    ),
    Mutant(
        "probe_modes.py",
        'ord(" ") if chr(i) in string.punctuation else ord(chr(i).lower())',
        "ord(chr(i).lower())",
        "ASCII probes keep their punctuation when folded",
    ),
    Mutant(
        "judges.py",
        "        output_model = instructor_model(output_model)\n",
        "        pass\n",
        "instructor wraps the output model again on every call",
    ),
    Mutant(
        "streaming.py",
        'if first and self.stopping:\n            raise RowNotStarted("the run is stopping")',
        'if False:\n            raise RowNotStarted("the run is stopping")',
        "a stopping run still begins rows that come after the stop",
    ),
    Mutant(
        "streaming.py",
        'future.set_exception(RowNotStarted("the run is stopping"))',
        "pass",
        "a stopping run still begins the rows waiting for a slot",
    ),
    Mutant(
        "batching.py",
        "return max_concurrency + (2 * self.max_batch if self.coalesce else 0)",
        "return max_concurrency",
        "no rows wait for shared requests, which leave with a few texts each",
    ),
    # -- scoring.py ---------------------------------------------------------------------------
    Mutant(
        "scoring.py",
        "question, probes = units[:1], units[1:]",
        "probes = units[1:]",
        "cosine ignores the question's length",
    ),
    Mutant(
        "scoring.py",
        "question, probes = units[:1], units[1:]",
        "question = units[:1]",
        "cosine ignores the probes' lengths",
    ),
    Mutant(
        "scoring.py",
        "cosines = _clip((probes @ question.T).reshape(-1))",
        "cosines = _clip(np.abs(probes @ question.T).reshape(-1))",
        "negative cosines turned positive",
    ),
    Mutant(
        "scoring.py",
        "if len(cosines) != len(noncommittal):",
        "if False:",
        "cosines and flags of different lengths accepted",
    ),
    Mutant(
        "scoring.py",
        '    if len(cosines) == 0:\n        return float("nan")',
        "    if len(cosines) == 0:\n        return 0.0",
        "no probe gives 0 instead of NaN",
    ),
    Mutant(
        "scoring.py",
        "mean = float(np.add.reduce(values) / len(values))",
        "mean = float(np.median(values))",
        "median instead of mean",
    ),
    Mutant(
        "scoring.py",
        "return mean * int(not all_noncommittal(noncommittal))",
        "return mean * int(not any(noncommittal))",
        "any noncommittal probe zeroes the score",
    ),
    Mutant(
        "scoring.py",
        "return len(noncommittal) > 0 and all(noncommittal)",
        "return all(noncommittal)",
        "no probe counts as all noncommittal",
    ),
    Mutant(
        "scoring.py",
        "return len(noncommittal) > 0 and all(noncommittal)",
        "return len(noncommittal) > 0 and any(noncommittal)",
        "all_noncommittal true when any is",
    ),
    Mutant(
        "scoring.py",
        "matrix.shape[0] < 2",
        "matrix.shape[0] < 1",
        "diversity of a single probe is not None",
    ),
    Mutant("scoring.py", "k=1)", "k=0)", "diversity counts each probe with itself"),
    Mutant(
        "scoring.py",
        "return cosines, _mean_pairwise(probes) if",
        "return cosines, _mean_pairwise(np.asarray(probe_vectors, dtype=float)) if",
        "diversity on unnormalised vectors",
    ),
    Mutant(
        "scoring.py",
        "if len(probes) >= 2 else None",
        "if len(probes) >= 1 else None",
        "the metric's diversity of a single probe is not None",
    ),
    Mutant(
        "scoring.py",
        "scaled / np.sqrt(np.add.reduce(scaled * scaled, axis=1, keepdims=True))",
        "scaled / np.sqrt(np.add.reduce(scaled, axis=1, keepdims=True))",
        "unit rows divided by the sum, not the norm",
    ),
    Mutant(
        "scoring.py",
        "value = float(np.add.reduce(pairs) / len(pairs))",
        "value = float(np.min(pairs))",
        "diversity is the least similar pair",
    ),
    # -- probe_modes.py -----------------------------------------------------------------------
    Mutant(
        "probe_modes.py",
        "folded = question.casefold().translate(_FOLD)",
        "folded = question.translate(_FOLD)",
        "duplicates compared case-sensitively",
    ),
    Mutant(
        "probe_modes.py",
        "folded = question.casefold().translate(_FOLD)",
        "folded = question.casefold()",
        "duplicates compared with punctuation",
    ),
    Mutant(
        "probe_modes.py",
        "if not isinstance(question, str) or not question.strip():",
        "if not isinstance(question, str) or not question:",
        "our modes keep whitespace-only questions",
    ),
    Mutant(
        "probe_modes.py",
        "if isinstance(flag, bool) or flag not in (0, 1):",
        "if flag not in (0, 1, 2):",
        "our modes accept a flag of 2",
    ),
    Mutant(
        "probe_modes.py",
        "        if key in self._seen:\n            self.duplicates_dropped += 1\n"
        "            return False",
        "        if False:\n            return False",
        "our modes keep duplicates",
    ),
    Mutant(
        "probe_modes.py",
        "            self.duplicates_dropped += 1\n",
        "            pass\n",
        "dropped duplicates not counted",
    ),
    Mutant(
        "probe_modes.py",
        "self.questions.append(question.strip())",
        "self.questions.append(question)",
        "our modes do not strip probes",
    ),
    Mutant(
        "probe_modes.py",
        "        self.questions.append(question)\n        self.noncommittal.append(flag)",
        "        self.questions.append(question.strip())\n        self.noncommittal.append(flag)",
        "stock mode strips probes",
    ),
    Mutant(
        "probe_modes.py",
        "        if not question.strip():\n            kind",
        "        if not question:\n            kind",
        "stock mode keeps a whitespace-only question",
    ),
    Mutant(
        "probe_modes.py",
        '            self.notes.append(f"{where}: dropped {kind} question")\n',
        "",
        "stock mode drops a question without a note",
    ),
    Mutant(
        "probe_modes.py",
        "return_exceptions=True)",
        "return_exceptions=False)",
        "stock mode: one unparseable reply fails the sample",
    ),
    Mutant(
        "probe_modes.py",
        "        if isinstance(reply, BaseException) and not is_reply_error(reply):\n"
        "            raise reply",
        "        if isinstance(reply, BaseException) and not is_reply_error(reply):\n"
        "            continue",
        "stock mode swallows transport errors",
    ),
    Mutant(
        "probe_modes.py",
        "budget = strictness + MAX_EXTRA_CALLS",
        "budget = strictness",
        "sequential never asks again",
    ),
    Mutant(
        "probe_modes.py",
        "previous = list(probes.questions) or None",
        "previous = None",
        "sequential does not show the probes so far",
    ),
    Mutant(
        "probe_modes.py",
        "probes.judge_calls < 1 + MAX_EXTRA_CALLS",
        "probes.judge_calls < 1",
        "diverse never asks again",
    ),
    Mutant(
        "probe_modes.py",
        "input_model(response=response, n=missing, avoid=avoid)",
        "input_model(response=response, n=strictness, avoid=avoid)",
        "diverse asks again for all N, not the missing ones",
    ),
    Mutant(
        "probe_modes.py",
        "        avoid = list(probes.questions) or None\n        data = prompt.input_model(",
        "        avoid = None\n        data = prompt.input_model(",
        "diverse does not say which probes to avoid",
    ),
    Mutant(
        "probe_modes.py",
        "        avoid = list(probes.questions) or None\n        inputs = [",
        "        avoid = None\n        inputs = [",
        "angles does not say which probes to avoid",
    ),
    Mutant(
        "probe_modes.py",
        "            if len(probes.questions) >= strictness:\n                break",
        "            if False:\n                break",
        "diverse keeps probes beyond N",
    ),
    Mutant(
        "probe_modes.py",
        "        if len(items) != missing:\n",
        "        if False:\n",
        "wrong number of items not noted",
    ),
    Mutant(
        "probe_modes.py",
        'return redact(f"reply did not parse',
        'return (f"reply did not parse',
        "API key in an unparseable reply reaches the notes",
    ),
    Mutant(
        "probe_modes.py",
        "    if len(probes.questions) < strictness:\n        probes.notes.append(",
        "    if False:\n        probes.notes.append(",
        "shortfall not noted",
    ),
    Mutant(
        "probe_modes.py",
        "async with limiter if limiter is not None else contextlib.nullcontext():",
        "async with contextlib.nullcontext():",
        "judge calls ignore max_concurrency",
    ),
    Mutant(
        "probe_modes.py",
        "        if not is_reply_error(exc):\n            raise\n",
        "        if False:\n            raise\n",
        "our modes swallow transport errors",
    ),
    # -- pipeline.py --------------------------------------------------------------------------
    Mutant(
        "pipeline.py",
        "if not value.strip():",
        "if not value:",
        "whitespace-only input accepted",
    ),
    Mutant(
        "pipeline.py",
        '        if not isinstance(value, str):\n            raise TypeError(f"{name} must be',
        '        if False:\n            raise TypeError(f"{name} must be',
        "non-string input not refused by name",
    ),
    Mutant(
        "pipeline.py",
        "if isinstance(strictness, bool) or not isinstance(strictness, int) or strictness < 1:",
        "if not isinstance(strictness, int) or strictness < 1:",
        "strictness=True accepted",
    ),
    Mutant("pipeline.py", "strictness < 1:", "strictness < 0:", "strictness 0 accepted"),
    Mutant("pipeline.py", "limit < 1:", "limit < 0:", "max_concurrency 0 accepted"),
    Mutant(
        "pipeline.py",
        "RelevancyReport(score=math.nan, all_noncommittal=False, **common)",
        "RelevancyReport(score=math.nan, all_noncommittal=True, **common)",
        "no probes marked all_noncommittal",
    ),
    Mutant(
        "pipeline.py",
        "embeddings, user_input, probes.questions, limiter\n",
        "embeddings, user_input, probes.questions, None\n",
        "embeddings calls ignore max_concurrency",
    ),
    Mutant(
        "probe_modes.py",
        "return len({normalise_question(q) for q in self.questions})",
        "return len(self.questions)",
        "distinct probes not folded (stock mode)",
    ),
    Mutant(
        "probe_modes.py",
        "if len(self._seen) == len(self.questions):",
        "if True:",
        "distinct probes of stock mode counted from no folded keys",
    ),
    Mutant(
        "pipeline.py",
        "probe_similarity=similarity,",
        "probe_similarity=None,",
        "probe similarity lost",
    ),
    Mutant("pipeline.py", "notes=probes.notes,", "notes=[],", "notes lost"),
    Mutant(
        "pipeline.py",
        "question_language=PENDING,",
        "question_language=None,",
        "question language never detected",
    ),
    Mutant(
        "pipeline.py",
        "judge_calls=probes.judge_calls,",
        "judge_calls=options.strictness,",
        "judge calls reported as strictness",
    ),
    Mutant(
        "pipeline.py",
        "duplicates_dropped=probes.duplicates_dropped,",
        "duplicates_dropped=0,",
        "dropped duplicates not reported",
    ),
    Mutant(
        "pipeline.py",
        'error=redact(f"{type(exc).__name__}: {exc}")',
        'error=f"{type(exc).__name__}: {exc}"',
        "API key in a failure reaches the report",
    ),
    Mutant(
        "pipeline.py",
        "        score=math.nan,\n        strictness=strictness,",
        "        score=0.0,\n        strictness=strictness,",
        "a failed sample scores 0",
    ),
    Mutant(
        "pipeline.py",
        "            limiter,\n            callbacks,\n            trace_name,",
        "            limiter,\n            None,\n            trace_name,",
        "callbacks do not reach the judge",
    ),
    # -- embeddings.py ------------------------------------------------------------------------
    Mutant(
        "embeddings.py",
        '    if kwargs and embeddings_kind(embeddings) != "modern":\n        raise',
        "    if False:\n        raise",
        "options to LangChain embeddings not refused",
    ),
    Mutant(
        "embeddings.py",
        "async with request_slot(embeddings, limiter):",
        "async with request_slot(embeddings, None):",
        "embeddings calls ignore the limiter",
    ),
    Mutant(
        "embeddings.py",
        "    elif sends_one_request(embeddings):\n        async with limiter:\n            yield",
        "    elif sends_one_request(embeddings):\n        yield",
        "a one-request call takes no slot of the limiter",
    ),
    Mutant(
        "embeddings.py",
        "token = REQUEST_LIMIT.set(limiter)",
        "token = REQUEST_LIMIT.set(None)",
        "embeddings sending a request per text are not lent the limiter",
    ),
    Mutant(
        "embeddings.py",
        "            REQUEST_LIMIT.reset(token)",
        "            pass",
        "the lent limiter outlives the call",
    ),
    Mutant(
        "embeddings.py",
        "return check_vectors(vectors, len(texts), type(embeddings).__name__)",
        "return np.asarray(vectors, dtype=float)",
        "vectors not checked",
    ),
    Mutant(
        "embeddings.py",
        "    if question_vectors.shape[1] != probe_vectors.shape[1]:\n",
        "    if False:\n",
        "question/probe length mismatch not caught",
    ),
    Mutant(
        "embeddings.py",
        "if len(rows) != n_texts:",
        "if len(rows) < n_texts:",
        "more vectors than texts accepted",
    ),
    Mutant(
        "embeddings.py",
        "if len(set(lengths)) > 1:",
        "if len(set(lengths)) > 2:",
        "three texts of two lengths accepted",
    ),
    Mutant(
        "embeddings.py",
        "if lengths and lengths[0] == 0:",
        "if False:",
        "empty vectors not named as empty",
    ),
    Mutant(
        "embeddings.py",
        "if not all(math.isfinite(x) for x in row):",
        "if False:",
        "NaN vectors accepted",
    ),
    Mutant(
        "embeddings.py",
        "bad = ~np.isfinite(array).all(axis=1) | ~array.any(axis=1)",
        "bad = ~np.isfinite(array).all(axis=1)",
        "zero vectors accepted",
    ),
    Mutant(
        "embeddings.py",
        "    if not any(row):\n",
        "    if False:\n",
        "zero vectors not named as zero",
    ),
    Mutant(
        "embeddings.py",
        "except (TypeError, ValueError) as exc:",
        "except TypeError as exc:",
        "non-numeric vector text escapes as a bare ValueError",
    ),
    Mutant(
        "embeddings.py",
        '"aembed_texts", "embed_texts", list(texts)',
        '"aembed_texts", "aembed_texts", list(texts)',
        "sync-client embeddings called through the async method",
    ),
    Mutant(
        "embeddings.py",
        '    if isinstance(embeddings, _modern_base()):\n        return "modern"',
        '    if isinstance(embeddings, _modern_base()):\n        return "langchain"',
        "modern embeddings treated as LangChain",
    ),
    # -- report.py (the reason sentences are left to their own tests) -------------------------
    Mutant(
        "report.py",
        '        if not self.__dict__["_reason"]:\n',
        "        if False:\n",
        "no reason computed",
    ),
    Mutant(
        "report.py",
        "            value = instance.__dict__[self.key] = self.compute(instance)\n",
        "            value = self.compute(instance)\n",
        "a field worked out again on every read",
    ),
    Mutant(
        "report.py",
        'data["score"] = _finite_or_none(self.score)',
        'data["score"] = self.score',
        "NaN score written as NaN, not null",
    ),
    Mutant(
        "report.py",
        'data["probes"] = [{**p, "cosine": _finite_or_none(p["cosine"])} for p in data["probes"]]',
        'data["probes"] = [dict(p) for p in data["probes"]]',
        "NaN cosine written as NaN",
    ),
    Mutant(
        "report.py",
        '_nan_if_none(p["cosine"]), p.get("language")',
        'p["cosine"], p.get("language")',
        "null cosine read back as None",
    ),
    Mutant(
        "report.py",
        'values["score"] = _nan_if_none(data.get("score"))',
        'values["score"] = data.get("score")',
        "null score read back as None",
    ),
    Mutant(
        "report.py",
        'f"response: {clip(report.response, 160)}"',
        'f"response: {report.response}"',
        "long response not clipped in the table",
    ),
    Mutant(
        "report.py",
        'f"{probe.cosine:>8.4f}  {probe.noncommittal:>2}  {clip(probe.question, 300)}"',
        'f"{probe.cosine:>8.4f}  {clip(probe.question, 300)}"',
        "nc column dropped",
    ),
    Mutant(
        "report.py",
        'f"{probe.cosine:>8.4f}  {probe.noncommittal',
        'f"{probe.cosine:>8.2f}  {probe.noncommittal',
        "cosines with 2 decimals",
    ),
    Mutant(
        "report.py",
        'lines.extend(f"note: {note}" for note in report.notes)',
        "lines.extend([])",
        "notes missing from str(report)",
    ),
    Mutant(
        "report.py",
        "similarity = fmt(report.probe_similarity, 3) if report.probe_similarity is not None",
        "similarity = str(report.probe_similarity) if report.probe_similarity is not None",
        "probe similarity printed raw",
    ),
    Mutant(
        "report.py",
        'f"score {fmt(report.score)} | prompt',
        'f"score {fmt(report.score, 2)} | prompt',
        "score with 2 decimals in the table",
    ),
    Mutant(
        "report.py",
        "distinct {report.distinct_probes}/{report.strictness}",
        "distinct {report.distinct_probes}/{len(report.probes)}",
        "distinct out of probes, not strictness",
    ),
    Mutant(
        "report.py",
        'lines.append(f"reason: {report.reason}")',
        "pass",
        "reason missing from the table",
    ),
    Mutant(
        "report.py",
        'flat = " ".join(neutralise_bidi(text).split())',
        "flat = neutralise_bidi(text)",
        "clip keeps line breaks",
    ),
    Mutant(
        "report.py",
        'flat = " ".join(neutralise_bidi(text).split())',
        'flat = " ".join(text.split())',
        "clip lets bidi controls through",
    ),
    Mutant(
        "report.py",
        'flat[: width - 1] + "…"',
        'flat[:width] + "…"',
        "clip one character too long",
    ),
    Mutant("report.py", "len(flat) <= width", "len(flat) < width", "clip cuts at exactly width"),
    Mutant(
        "report.py",
        'if value is None or not math.isfinite(value):\n        return "NaN"',
        'if value is None:\n        return "NaN"',
        "fmt(nan) prints nan",
    ),
    Mutant(
        "report.py", 'return f"{value:.{digits}f}"', 'return f"{value:.4f}"', "fmt ignores digits"
    ),
    Mutant(
        "report.py",
        'v if isinstance(v, str) else "\\x01" + json.dumps(v, default=str)',
        "str(v)",
        "content key: a missing value keyed as its text",
    ),
    Mutant(
        "report.py",
        'hashlib.sha256(f"{settings}\\x00{texts[0]}',
        'hashlib.sha256(f"\\x00{texts[0]}',
        "content key: settings left out",
    ),
    # -- one_text_per_call.py -----------------------------------------------------------------
    Mutant(
        "one_text_per_call.py",
        "limiter = asyncio.Semaphore(self.max_concurrency)",
        f"limiter = {_NO_LIMIT}",
        "adapter ignores max_concurrency",
    ),
    Mutant(
        "one_text_per_call.py",
        "                        index,\n                    ) from exc",
        "                        0,\n                    ) from exc",
        "failing text's index lost",
    ),
    Mutant(
        "one_text_per_call.py",
        "            for task in tasks:\n                task.cancel()\n",
        "            for task in tasks:\n                pass\n",
        "a failure leaves the other calls running",
    ),
    Mutant(
        "one_text_per_call.py",
        "return check_vectors(vectors, len(texts), self.source).tolist()",
        "return [list(v) for v in vectors]",
        "adapter does not check vectors",
    ),
    Mutant(
        "one_text_per_call.py",
        "    if isinstance(texts, str):\n        raise",
        "    if False:\n        raise",
        "one string taken as a list of characters",
    ),
    Mutant(
        "one_text_per_call.py",
        "        if not isinstance(text, str):\n            raise",
        "        if False:\n            raise",
        "non-string text not refused",
    ),
    Mutant(
        "one_text_per_call.py",
        "            self.inner.set_run_config(run_config)",
        "            pass",
        "run config not handed on",
    ),
    Mutant(
        "one_text_per_call.py",
        "        try:\n            embeddings_kind(inner)\n        except TypeError:",
        "        try:\n            pass\n        except TypeError:",
        "wrong inner accepted",
    ),
    Mutant(
        "one_text_per_call.py",
        'return f"OneTextPerCall({type(self.inner).__name__})"',
        'return "OneTextPerCall"',
        "errors do not name the inner class",
    ),
    Mutant(
        "one_text_per_call.py",
        "inner = GoogleEmbeddings(client=client, model=model, **kwargs)",
        "inner = GoogleEmbeddings(client=client, model=DEFAULT_GEMINI_MODEL, **kwargs)",
        "gemini model argument ignored",
    ),
    Mutant(
        "one_text_per_call.py",
        "return run_sync(self.aembed_texts(texts))",
        "return run_sync(self.aembed_texts(texts[:1]))",
        "sync embed_documents returns only the first vector",
    ),
    Mutant(
        "one_text_per_call.py",
        'max_workers=1, thread_name_prefix="ragas-relevancy-encode"',
        'max_workers=4, thread_name_prefix="ragas-relevancy-encode"',
        "local model encodes side by side",
    ),
    Mutant(
        "one_text_per_call.py",
        "return await self._in_encoder(self.embed_texts, texts, **kwargs)",
        "return await super().aembed_texts(texts, **kwargs)",
        "local model encodes in RAGAS's thread per call",
    ),
    Mutant(
        "one_text_per_call.py",
        '        state.pop("_encode_pool", None)\n',
        "",
        "a copy shares the original's worker thread",
    ),
    # -- cli/cache.py -------------------------------------------------------------------------
    Mutant(
        "cli/cache.py",
        "[KEY_VERSION, model, output_model.__name__, prompt, occurrence]",
        "[KEY_VERSION, model, prompt, occurrence]",
        "output model missing from the key",
    ),
    Mutant(
        "cli/cache.py",
        "[KEY_VERSION, model, output_model.__name__, prompt, occurrence]",
        "[KEY_VERSION, model, output_model.__name__, prompt, 0]",
        "occurrence missing from the key",
    ),
    Mutant(
        "cli/cache.py",
        "[KEY_VERSION, model, output_model.__name__, prompt, occurrence]",
        "[KEY_VERSION, output_model.__name__, prompt, occurrence]",
        "judge model missing from the key",
    ),
    Mutant(
        "cli/cache.py",
        "        self._asked[asked] += 1\n",
        "        pass\n",
        "occurrence never advances",
    ),
    Mutant(
        "cli/cache.py",
        "            except ValueError:\n                reply = None",
        "            except ValueError:\n                raise",
        "a stale reply crashes instead of being asked again",
    ),
    Mutant("cli/cache.py", "self.hits += 1", "pass", "hits not counted"),
    Mutant(
        "cli/cache.py",
        "self.store.set(key, reply.model_dump_json())",
        "pass",
        "replies not stored",
    ),
    Mutant("cli/cache.py", "if isinstance(stored, str):", "if False:", "store never read"),
    # -- metric.py ----------------------------------------------------------------------------
    Mutant(
        "metric.py",
        "limiter = _limiter or asyncio.Semaphore(self.max_concurrency)",
        f"limiter = _limiter or {_NO_LIMIT}",
        "single ascore ignores max_concurrency",
    ),
    Mutant(
        "metric.py",
        "limiter = CallLimiter(self.max_concurrency)",
        "limiter = CallLimiter(10**6)",
        "batch ignores max_concurrency",
    ),
    Mutant(
        "metric.py",
        "limiter=limiter.slot(index),",
        "limiter=CallLimiter(options.max_concurrency).slot(index),",
        "each sample of a batch gets its own limit",
    ),
    Mutant(
        "metric.py",
        "RunEmbedder(self.embeddings, limiter, coalesce=",
        "RunEmbedder(self.embeddings, None, coalesce=",
        "batch embeddings requests ignore max_concurrency",
    ),
    Mutant(
        "metric.py",
        "coalesce=self.batch_embeddings)",
        "coalesce=True)",
        "batch_embeddings=False ignored",
    ),
    Mutant(
        "metric.py",
        "bounded_map(inputs, one, window)",
        "bounded_map(inputs, one, 10**6)",
        "ascore_each reads every input before the first result",
    ),
    Mutant(
        "metric.py",
        'unexpected = sorted(str(k) for k in set(row) - {"user_input", "response"})',
        "unexpected = []",
        "unknown row fields ignored",
    ),
    Mutant(
        "metric.py",
        "    if not isinstance(row, Mapping):\n        raise TypeError(",
        "    if False:\n        raise TypeError(",
        "a row that is not a mapping is not named as such",
    ),
    Mutant(
        "metric.py",
        "except Exception as exc:  # one bad sample",
        "except ValueError as exc:  # one bad sample",
        "a failing sample fails the batch",
    ),
    Mutant(
        "metric.py",
        "                        exc,\n                        meter.usage,\n",
        "                        exc,\n                        None,\n",
        "a failed sample's report does not say what it spent",
    ),
    Mutant(
        "metric.py",
        "results[index] = result",
        "results[results.index(None)] = result",
        "batch results in the order samples finish, not input order",
    ),
    Mutant(
        "metric.py",
        "            self.prompt,\n            self.max_concurrency,\n            language=",
        '            "diverse",\n            self.max_concurrency,\n            language=',
        "the prompt in use ignored",
    ),
    Mutant(
        "metric.py",
        "            self.strictness,\n            self.prompt,",
        "            3,\n            self.prompt,",
        "strictness set on the instance ignored",
    ),
    Mutant(
        "metric.py",
        "name=name, strictness=options.strictness, **kwargs",
        "name=name, strictness=3, **kwargs",
        "strictness argument ignored",
    ),
    Mutant(
        "metric.py",
        "self.max_concurrency = options.max_concurrency",
        "self.max_concurrency = DEFAULT_MAX_CONCURRENCY",
        "max_concurrency argument ignored",
    ),
    Mutant(
        "metric.py",
        "self.language = options.language",
        "self.language = AUTO",
        "language argument ignored",
    ),
    Mutant(
        "metric.py",
        "            adapted=self.adapted,\n            embedder=_embedder,",
        "            adapted=AdaptedPrompts(),\n            embedder=_embedder,",
        "ascore adapts the prompt again at every call",
    ),
    Mutant(
        "metric.py",
        "self._prompt = resolve_probe_prompt(value)[1]",
        "self._prompt = value",
        "metric.prompt keeps a mode's name, and a prompt that fits no mode, as given",
    ),
    Mutant(
        "metric.py",
        "    def probe_prompt(self, value: PromptSpec) -> None:\n        self.prompt = value",
        "    def probe_prompt(self, value: PromptSpec) -> None:\n        pass",
        "probe_prompt set on the instance ignored",
    ),
    Mutant(
        "metric.py",
        "return prompt_label(*resolve_probe_prompt(self.prompt))",
        'return "diverse"',
        "probe_prompt reads the default, not the prompt in use",
    ),
    Mutant(
        "metric.py",
        "return resolve_probe_prompt(self.prompt)[0].name",
        'return "diverse"',
        "probe_mode reads the default, not the prompt in use",
    ),
    Mutant(
        "metric.py",
        "return self.report.reason if self._reason is PENDING else self._reason",
        "return None if self._reason is PENDING else self._reason",
        "result has no reason",
    ),
    # -- streaming.py -------------------------------------------------------------------------
    Mutant(
        "streaming.py",
        "        for task in running:\n            task.cancel()\n        if running:\n"
        "            await asyncio.gather(*running, return_exceptions=True)\n",
        "        pass\n",
        "ascore_each leaves pending tasks running when the caller stops",
    ),
    Mutant(
        "streaming.py",
        "        if running:\n            await asyncio.gather(*running, return_exceptions=True)\n",
        "        pass\n",
        "closing returns before the cancelled work has stopped",
    ),
    Mutant(
        "streaming.py",
        "while not exhausted and len(running) < window:",
        "while not exhausted:",
        "every input read at once",
    ),
    Mutant(
        "streaming.py",
        "while not exhausted and len(running) < window:",
        "while not exhausted and len(running) <= window:",
        "one item more than the window in flight",
    ),
    Mutant(
        "streaming.py",
        "            if not finished:\n                wake.clear()",
        "            while len(finished) < len(running):\n                wake.clear()",
        "ascore_each yields when the whole window is done, not as each finishes",
    ),
    Mutant(
        "streaming.py",
        "heapq.heappush(self._waiting, (priority, next(self._arrivals), future))",
        "heapq.heappush(self._waiting, (0, next(self._arrivals), future))",
        "waiting calls served in arrival order, not earlier rows first",
    ),
    Mutant(
        "streaming.py",
        "            if not future.done():\n                future.set_result(None)",
        "            if True:\n                future.set_result(None)",
        "a slot handed to a cancelled waiter",
    ),
    Mutant(
        "streaming.py",
        "            if future.done() and not future.cancelled():\n                self.release()",
        "            if False:\n                self.release()",
        "a slot handed over as its waiter is cancelled is lost",
    ),
    # -- legacy.py ----------------------------------------------------------------------------
    Mutant(
        "legacy.py",
        "        judge_kind(self.llm)\n",
        "",
        "evaluate accepts an unknown judge",
    ),
    Mutant(
        "legacy.py",
        "            _trace_report(callbacks, failed)\n",
        "",
        "a failed row leaves no report",
    ),
    Mutant(
        "legacy.py",
        "limiter=self._limiter.get(self._calls_in_flight(options)),",
        "limiter=None,",
        "evaluate rows ignore max_concurrency",
    ),
    Mutant(
        "legacy.py",
        "limiter=self._limiter.get(self._calls_in_flight(options)),",
        "limiter=asyncio.Semaphore(self._calls_in_flight(options)),",
        "each evaluate row gets its own limit",
    ),
    Mutant(
        "legacy.py",
        "return min(workers, options.max_concurrency)",
        "return options.max_concurrency",
        "max_workers does not cap calls in flight",
    ),
    Mutant(
        "legacy.py",
        "                callbacks=callbacks,\n                trace_name=PROMPT_NAME,",
        "                callbacks=None,\n                trace_name=PROMPT_NAME,",
        "callbacks do not reach the judge in evaluate",
    ),
    Mutant(
        "legacy.py",
        "except (Exception, asyncio.CancelledError) as exc:",
        "except Exception as exc:",
        "a timed-out row leaves no report",
    ),
    Mutant(
        "legacy.py",
        'run.on_chain_end({"output": report.to_dict()})',
        'run.on_chain_end({"output": {}})',
        "report not kept in the trace",
    ),
    Mutant(
        "legacy.py",
        "if self.llm is None or self.embeddings is None:",
        "if self.llm is None:",
        "missing embeddings not named",
    ),
    Mutant(
        "legacy.py",
        '        self.__dict__["_ready"] = True\n        self._options()',
        '        self.__dict__["_ready"] = True',
        "bad options not refused at construction",
    ),
    Mutant(
        "legacy.py",
        "            self.strictness,\n            self.question_generation,",
        "            3,\n            self.question_generation,",
        "strictness ignored in evaluate",
    ),
    # -- usage.py, and where usage is recorded ------------------------------------------------
    Mutant(
        "usage.py",
        "return None if a is None or b is None else a + b",
        "return (a or 0) + (b or 0)",
        "a token count not reported adds as 0",
    ),
    Mutant(
        "usage.py",
        "for i in order[: amount - sum(shares)]:",
        "for i in order[: amount - sum(shares) - 1]:",
        "a shared request's split loses a unit",
    ),
    Mutant(
        "usage.py",
        'judge_prompt_tokens=tokens_from(usage, "prompt_tokens", "input_tokens"),',
        'judge_prompt_tokens=tokens_from(usage, "total_tokens", "input_tokens"),',
        "judge prompt tokens read from the total",
    ),
    Mutant(
        "usage.py",
        "            if item is None:\n                return None\n",
        "            if item is None:\n                continue\n",
        "a row without usage is summed as nothing",
    ),
    Mutant(
        "judges.py",
        "    record(judge_usage_of_reply(reply))\n",
        "",
        "instructor replies not recorded",
    ),
    Mutant(
        "judges.py",
        "        return await _metered(self.inner.generate(*args, **kwargs))",
        "        return await self.inner.generate(*args, **kwargs)",
        "RAGAS repair requests not recorded",
    ),
    Mutant(
        "batching.py",
        "                _charge(shares, meter)\n        finally:",
        "        finally:",
        "a shared request's usage charged to no sample",
    ),
    Mutant(
        "batching.py",
        "            if self.coalesce:\n"
        '                self._streams["probes"].withdraw(probe_share)\n'
        "            await asyncio.gather(probe_share, return_exceptions=True)\n"
        "            raise\n"
        "        except BaseException:",
        "        except BaseException:",
        "a failed question cancels its probes' request under way, and loses what it cost",
    ),
    Mutant(
        "batching.py",
        "            return self.limiter.ahead()",
        "            return self.limiter",
        "a full shared request waits behind every row's judge call",
    ),
    Mutant(
        "batching.py",
        "self._pending_texts >= self.max_batch * (self._full_waiting + 1)",
        "self._pending_texts >= self.max_batch",
        "every text past a full batch starts one more request",
    ),
    Mutant(
        "batching.py",
        "        self.meter = current_meter()",
        "        self.meter = None",
        "a share's usage reaches no sample's meter",
    ),
    Mutant(
        "embeddings.py",
        "    tokens = sum(counts) if counts and None not in counts else None",
        "    tokens = sum(c or 0 for c in counts)",
        "embeddings that report no usage counted as 0 tokens",
    ),
    Mutant(
        "cli/cache.py",
        "                record(_CACHED)\n",
        "",
        "cache hits not counted",
    ),
]

# Survivors no test can tell from the original, and why.
EQUIVALENT: dict[str, str] = {}


def _copy_tree(root: Path, into: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".venv", ".ci-venv")
    for name in (PACKAGE, "tests", "examples"):
        if (root / name).exists():
            shutil.copytree(root / name, into / name, ignore=ignore)
    shutil.copy2(root / "pyproject.toml", into / "pyproject.toml")


def _test_files(root: Path, module: str) -> list[str]:
    return [
        f"tests/{name}" for name in TESTS[module] if (root / "tests" / name.split("::")[0]).exists()
    ]


def _stale(root: Path, mutant: Mutant) -> str | None:
    """Why ``mutant`` cannot be applied to ``root``'s code (None when its text occurs once)."""
    path = root / PACKAGE / mutant.module
    if not path.exists():
        return f"{mutant.module} does not exist"
    found = path.read_text(encoding="utf-8").count(mutant.old)
    return None if found == 1 else f"old text found {found} times, not once"


def catalogue_problems(root: Path = REPO) -> list[str]:
    """Everything that keeps the catalogue from scoring ``root``'s code, one line each.

    A stale mutant (its text is not in the code once), a mutant that changes nothing, a repeated
    name, a module with no tests, a ``file::test`` naming no test, an equivalent naming no mutant.
    """
    problems: list[str] = []
    keys = [mutant.key for mutant in MUTANTS]
    for mutant in MUTANTS:
        why = _stale(root, mutant)
        if why:
            problems.append(f"STALE {mutant.key}: {why}")
        if mutant.old == mutant.new:
            problems.append(f"{mutant.key}: the mutant changes nothing")
        if keys.count(mutant.key) > 1:
            problems.append(f"{mutant.key}: two mutants with this name")
        if mutant.module not in TESTS:
            problems.append(f"{mutant.key}: {mutant.module} has no tests in TESTS")
    for module, names in TESTS.items():
        for name in names:
            file, _, test = name.partition("::")
            path = root / "tests" / file
            if not path.exists():
                problems.append(f"TESTS[{module!r}]: tests/{file} does not exist")
            elif test and f"def {test}(" not in path.read_text(encoding="utf-8"):
                problems.append(f"TESTS[{module!r}]: tests/{file} has no test {test}")
    problems += [f"EQUIVALENT {key!r} names no mutant" for key in EQUIVALENT if key not in keys]
    return sorted(dict.fromkeys(problems))


def _preload() -> None:
    """Import what every test run needs once, in this process; each run forks from here.

    RAGAS takes seconds to import; the package under test is never imported here, so each
    forked run imports its own (mutated) copy.
    """
    os.environ.update(RAGAS_DO_NOT_TRACK="true", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    import numpy  # noqa: F401
    import pytest  # noqa: F401
    import ragas  # noqa: F401
    import ragas.metrics  # noqa: F401
    import ragas.metrics.collections  # noqa: F401

    if PACKAGE in sys.modules:
        sys.exit(f"{PACKAGE} was imported before the runs fork; each run must import its copy")


def _start(workdir: Path, files: list[str]) -> int:
    """Fork a child that runs ``pytest -x -q files`` in ``workdir``; returns its pid."""
    pid = os.fork()
    if pid:
        return pid
    try:  # the child: never returns
        import pytest

        os.chdir(workdir)
        sys.path.insert(0, str(workdir))
        log = os.open(workdir / "pytest.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(log, 1)
        os.dup2(log, 2)
        code = pytest.main(["-x", "-q", "-p", "no:cacheprovider", *files])
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(code))
    except BaseException:
        os._exit(99)


def _last_line(workdir: Path) -> str:
    try:
        lines = (workdir / "pytest.log").read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1] if lines else ""


def _failed_tests(workdir: Path) -> str:
    """The log's FAILED/ERROR lines, one per line, so a failing baseline names its test."""
    try:
        lines = (workdir / "pytest.log").read_text(errors="replace").splitlines()
    except OSError:
        return ""
    named = [line for line in lines if line.startswith(("FAILED ", "ERROR "))]
    return "".join(f"\n  {line}" for line in named)


def _run_all(root: Path, mutants: list[Mutant], jobs: int, timeout: float) -> list[Outcome]:
    """Run every mutant, ``jobs`` at once, printing each outcome as it comes."""
    waiting = list(mutants)
    running: dict[int, tuple[Mutant, Path, float]] = {}
    outcomes: list[Outcome] = []

    def done(outcome: Outcome) -> None:
        status = outcome.status.upper() if outcome.status == "stale" else outcome.status
        print(f"{status:>8}  {outcome.mutant.key}  {outcome.detail}", flush=True)
        outcomes.append(outcome)

    while waiting or running:
        while waiting and len(running) < jobs:
            mutant = waiting.pop(0)
            stale = _stale(root, mutant)
            if stale:
                done(Outcome(mutant, "stale", stale))
                continue
            text = (root / PACKAGE / mutant.module).read_text(encoding="utf-8")
            workdir = Path(tempfile.mkdtemp(prefix="mutant-"))
            _copy_tree(root, workdir)
            target = workdir / PACKAGE / mutant.module
            target.write_text(text.replace(mutant.old, mutant.new), encoding="utf-8")
            pid = _start(workdir, _test_files(root, mutant.module))
            running[pid] = (mutant, workdir, time.monotonic() + timeout)
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            for child, (mutant, workdir, deadline) in list(running.items()):
                if time.monotonic() > deadline:
                    os.kill(child, signal.SIGKILL)
                    os.waitpid(child, 0)
                    del running[child]
                    shutil.rmtree(workdir, ignore_errors=True)
                    done(Outcome(mutant, "timeout", f"over {timeout:.0f} s"))
            time.sleep(0.1)
            continue
        mutant, workdir, _ = running.pop(pid)
        code = os.waitstatus_to_exitcode(status)
        last = _last_line(workdir)
        shutil.rmtree(workdir, ignore_errors=True)
        done(Outcome(mutant, "survived" if code == 0 else "killed", last))
    order = {mutant.key: i for i, mutant in enumerate(mutants)}
    return sorted(outcomes, key=lambda o: order[o.mutant.key])


def run_mutant(root: Path, mutant: Mutant, timeout: float = TIMEOUT) -> Outcome:
    """Apply ``mutant`` to a copy of ``root`` and run the module's tests on the copy."""
    _preload()
    return _run_all(root, [mutant], 1, timeout)[0]


def _baseline(root: Path, modules: list[str]) -> None:
    """The unmutated tests must pass, and the copy (not an installed package) is what they test."""
    files = sorted({f for m in modules for f in _test_files(root, m)})
    workdir = Path(tempfile.mkdtemp(prefix="mutant-base-"))
    try:
        _copy_tree(root, workdir)
        marker = workdir / "tests" / "test_zz_mutation_copy.py"
        marker.write_text(
            f"import {PACKAGE}\n\n\ndef test_the_copy_is_tested():\n"
            f"    assert {PACKAGE}.__file__.startswith({str(workdir)!r})\n"
        )
        pid = _start(workdir, [*files, "tests/test_zz_mutation_copy.py"])
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            failed = _failed_tests(workdir)
            sys.exit(f"the unmutated tests do not pass: {_last_line(workdir)}{failed}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _report(outcomes: list[Outcome]) -> int:
    by_module: dict[str, list[Outcome]] = defaultdict(list)
    for outcome in outcomes:
        by_module[outcome.mutant.module].append(outcome)
    print(f"\n{'module':<24} {'killed':>9} {'%':>5}  equivalent  stale")
    below = 0
    for module in TESTS:
        results = by_module.get(module, [])
        if not results:
            continue
        live = [o for o in results if o.status != "stale"]
        equivalent = [o for o in live if o.status == "survived" and o.mutant.key in EQUIVALENT]
        killed = sum(o.status in ("killed", "timeout") for o in live)
        judged = len(live) - len(equivalent)
        share = 100.0 * killed / judged if judged else 100.0
        below += share < 90.0
        print(
            f"{module:<24} {killed:>4}/{judged:<4} {share:>5.0f}  {len(equivalent):>10}  "
            f"{len(results) - len(live):>5}"
        )
    total_live = [o for o in outcomes if o.status != "stale"]
    total_killed = sum(o.status in ("killed", "timeout") for o in total_live)
    print(f"{'all':<24} {total_killed:>4}/{len(total_live):<4}")
    for outcome in outcomes:
        key = outcome.mutant.key
        if outcome.status == "survived":
            why = EQUIVALENT.get(key)
            print(f"  {'equivalent' if why else 'SURVIVED'}: {key}" + (f" ({why})" if why else ""))
    stale = [o for o in outcomes if o.status == "stale"]
    for outcome in stale:
        print(f"  STALE (error): {outcome.mutant.key} ({outcome.detail})", file=sys.stderr)
    if stale:
        print(
            f"error: {len(stale)} stale mutant(s): their text is no longer in the code; rewrite "
            "each for the code as it is now",
            file=sys.stderr,
        )
    return 1 if below or stale else 0


def main(argv: list[str] | None = None) -> int:
    """Run the catalogue (or part of it) and print the table; exit 1 if a module is under 90%
    or a mutant is stale."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=REPO, help="checkout whose tests to score")
    parser.add_argument("--module", action="append", help="only this module (repeatable)")
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once")
    parser.add_argument("--list", action="store_true", help="print the catalogue and stop")
    parser.add_argument(
        "--check", action="store_true", help="report stale mutants and catalogue errors, run none"
    )
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.module or m.module in args.module]
    root = args.root.resolve()
    if args.list:
        for mutant in chosen:
            print(mutant.key)
        return 0
    if args.check:
        problems = catalogue_problems(root)
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        print(f"{len(MUTANTS)} mutants, {len(problems)} problem(s)")
        return 1 if problems else 0
    _preload()
    _baseline(root, sorted({m.module for m in chosen}))
    outcomes = _run_all(root, chosen, max(1, args.jobs), TIMEOUT)
    return _report(outcomes)


if __name__ == "__main__":
    sys.exit(main())
