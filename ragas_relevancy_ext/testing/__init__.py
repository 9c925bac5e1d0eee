"""Instruments for tests, examples and benchmarks; the metric core never imports them.

- :mod:`.offline`: stand-in judges and embeddings (no LLM, no network).
- :mod:`.loopback`: an OpenAI- and Gemini-shaped HTTP server on 127.0.0.1 with latency (per
  request and per reply token) and fault knobs
  (``python -m ragas_relevancy_ext.testing.loopback --port P --latency S --token-latency T``).
- :mod:`.faults`: the fault catalogue and how each row's outcome is judged.
"""
