"""Accuracy and perplexity probes: offline C-Eval / CMMLU / MMLU quick subsets scored through lm-eval, with intervals,
paired quantization deltas, and bits-per-byte / perplexity / KL-divergence on a shipped text sample
(docs/accuracy.md)."""
