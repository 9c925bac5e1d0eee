"""One sample, from (user_input, response) to its report: options, probe modes and prompts,
judges, embeddings and vector checks, cosines, the report and its reason, usage."""
