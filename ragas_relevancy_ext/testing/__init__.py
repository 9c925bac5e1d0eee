"""Instruments for tests, examples and benchmarks (the metric core never imports them):
:mod:`.offline` stand-in judges and embeddings, :mod:`.loopback` an OpenAI- and Gemini-shaped
server on 127.0.0.1 with latency and fault knobs, :mod:`.faults` the fault catalogue."""
