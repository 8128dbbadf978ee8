"""Weighted score over normalized costs (lower is better). See docs/scoring.md.

score = sum_i w_i * norm_i(cost_i), with sum_i w_i = 1 and costs:
  latency: the constrained latency metric (TTFT by default), ms
  vram:    total_vram_bytes
  ppl:     perplexity ratio of the quantized weights to 16-bit weights (>= 1)
  zh:      100 - Chinese-task accuracy (%)
  en:      100 - MMLU accuracy (%)                       (weight 0 unless asked for)
Normalization over the candidates being ranked:
  minmax (default): (x - min) / (max - min), in [0, 1]; 0 for every candidate when max == min.
  zscore:           (x - mean) / std; 0 when std == 0.
Missing values (rule ``worst``, default): a candidate with no value for a criterion gets 1 under min-max (the worst
possible) and the worst value seen under z-score - lacking data never helps a candidate. Rule ``mean`` gives the
average of the known values. A criterion no candidate has a value for adds 0 to every score (it cannot separate
them); recommend says so in its notes.
"""

from __future__ import annotations

import math
import re
from typing import Optional


from recommender.core.errors import UserError

CRITERIA = ("latency", "vram", "ppl", "zh", "en")
DEFAULT_WEIGHTS = {"latency": 0.30, "vram": 0.25, "ppl": 0.20, "zh": 0.25, "en": 0.0}
NORMALIZATIONS = ("minmax", "zscore")
MISSING_RULES = ("worst", "mean")


def parse_weights(text: Optional[str]) -> dict[str, float]:
    """'latency=0.3,vram=0.25,ppl=0.2,zh=0.25' -> weights summing to 1. Criteria not named keep their default
    weight; the result is renormalized to sum to 1."""
    weights = dict(DEFAULT_WEIGHTS)
    if text:
        for part in [p for p in re.split(r"[,\s]+", text.strip()) if p]:
            if "=" not in part:
                raise UserError(f"cannot read weight {part!r}", hint="use name=value pairs, e.g. latency=0.5,zh=0.5")
            key, _, val = part.partition("=")
            key = key.strip().lower()
            if key not in CRITERIA:
                raise UserError(f"unknown weight {key!r}", hint=f"criteria are: {', '.join(CRITERIA)}")
            try:
                w = float(val)
            except ValueError:
                raise UserError(f"weight {key}={val!r} is not a number", hint="e.g. latency=0.3") from None
            if w < 0 or math.isnan(w) or math.isinf(w):
                raise UserError(f"weight {key}={val} must be a finite number >= 0", hint="e.g. latency=0.3")
            weights[key] = w
    top = max(weights.values())
    if top > 0:  # scaled by the largest first: latency=1e308,vram=1e308 must not sum to inf (every score NaN)
        weights = {k: v / top for k, v in weights.items()}
    total = sum(weights.values())
    if total <= 0:
        raise UserError("all weights are zero", hint="give at least one positive weight, e.g. latency=1")
    return {k: v / total for k, v in weights.items()}


def norm_stats(known: list[float], method: str) -> tuple[float, float]:
    """The statistics a normalization needs from the known values: (min, max) for min-max, (mean, std) for z-score."""
    if method == "minmax":
        return min(known), max(known)
    if method == "zscore":
        mean = sum(known) / len(known)
        return mean, math.sqrt(sum((v - mean) ** 2 for v in known) / len(known))
    raise UserError(f"unknown normalization {method!r}", hint=f"use one of {', '.join(NORMALIZATIONS)}")


def norm_value(v: float, stats: tuple[float, float], method: str) -> float:
    """One value normalized with ``norm_stats``: 0 when the values do not spread (max == min, std == 0)."""
    a, b = stats
    if method == "minmax":
        return (v - a) / (b - a) if b > a else 0.0
    return (v - a) / b if b > 0 else 0.0


def missing_fill(normed: list[float], method: str, missing: str) -> float:
    """The normalized value a missing figure gets, from the normalized known values (module docstring)."""
    if missing == "worst":
        return max(normed) if method == "zscore" else 1.0
    if missing == "mean":
        return sum(normed) / len(normed)
    raise UserError(f"unknown missing-value rule {missing!r}", hint=f"use one of {', '.join(MISSING_RULES)}")


def normalize(values: list[Optional[float]], method: str = "minmax", missing: str = "worst") -> list[float]:
    known = [v for v in values if v is not None]
    if not known:
        return [0.0 for _ in values]
    stats = norm_stats(known, method)
    norm = [None if v is None else norm_value(v, stats, method) for v in values]
    fill = missing_fill([n for n in norm if n is not None], method, missing)
    return [fill if n is None else n for n in norm]


def score_rows(costs: list[dict[str, Optional[float]]], weights: dict[str, float], method: str = "minmax",
               missing: str = "worst") -> list[tuple[float, dict[str, float]]]:
    """Score each row of raw costs; returns (score, normalized parts) per row, in input order."""
    columns = {c: normalize([row.get(c) for row in costs], method, missing) for c in CRITERIA if weights.get(c)}
    out = []
    for i in range(len(costs)):
        parts = {c: columns[c][i] for c in columns}
        out.append((sum(weights[c] * parts[c] for c in parts), parts))
    return out
