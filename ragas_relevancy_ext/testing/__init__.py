"""Instruments for tests, examples and benchmarks (the metric core never imports them):
:mod:`.offline` stand-in judges and embeddings, :mod:`.loopback` an OpenAI- and Gemini-shaped
server on 127.0.0.1 with latency, fault and rate-limit knobs, :mod:`.limits` its per-minute
buckets, :mod:`.faults` the fault catalogue."""
