#!/usr/bin/env bash
# The ragas-relevancy command on the example data. Offline unless a provider is named.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=examples/support_qa.jsonl

# Score offline (judge: offline; embeddings: auto = local model if the [local] extra is
# installed, else hash), every probe under its sample, then a summary.
ragas-relevancy score "$DATA"

# Keep a JSONL line per sample (re-running resumes) and a self-contained HTML page.
ragas-relevancy score "$DATA" --embeddings hash --out /tmp/support_qa.report.jsonl \
    --html /tmp/support_qa.report.html --no-probes

# Same probes, other embeddings: the judge cache answers, the judge is asked nothing.
ragas-relevancy score "$DATA" --embeddings hash --cache /tmp/support_qa.cache --no-probes
ragas-relevancy score "$DATA" --embeddings auto --cache /tmp/support_qa.cache --no-probes

# Other column names.
#   ragas-relevancy score qa.csv --map question=user_input --map answer=response

# Stock RAGAS and ours on identical judge replies; exits 1 on any difference > --tol.
ragas-relevancy compare "$DATA" --embeddings hash

# Agreement with the human ratings in the 'rating' field, and stability over 3 repeats.
ragas-relevancy calibrate "$DATA" --ratings rating --embeddings hash
ragas-relevancy calibrate "$DATA" --ratings rating --embeddings hash --repeats 3

# Real providers (keys from the environment, never printed):
#   OPENAI_API_KEY=... ragas-relevancy score "$DATA" --judge openai:gpt-4o-mini \
#       --embeddings openai:text-embedding-3-small
#   ragas-relevancy score "$DATA" --judge openai:llama3.1 --base-url http://localhost:11434/v1
#   GEMINI_API_KEY=... ragas-relevancy score "$DATA" --judge gemini:gemini-2.5-flash \
#       --embeddings gemini:gemini-embedding-2
