"""Weighted score over per-criterion costs (lower is better). See docs/scoring.md.

score = sum_i w_i * u_i(cost_i), with sum_i w_i = 1. Three ways to turn a cost into u (``--normalization``):

  value (default): a fixed value function per criterion anchored on the user's limits and the workload (multi-criteria
    decision analysis [Keeney & Raiffa 1976; DCLG 2009]); u never depends on the other candidates, so the exchange
    rate between criteria is the same on every machine (docs/scoring.md gives it in accuracy points).
      latency  TTFT (or --latency-metric): 0 up to T_ok = min(comfort, L/2), then 0.02 ln(t/T_ok)/ln(L/T_ok) up to
               the limit L; beyond a default (not user-given) limit 0.02 + 0.98 min(1, log10(t/L)).
               serve (rank_by goodput): 0 at >= 10x the target goodput, 0.02 log10(10 target/goodput) down to the
               target, then 0.02 + 0.10 per decade short (u_goodput).
      vram     0 until the headroom left is thinner than H = max(10 % of the budget, 1 GiB), then 0.04 (excess/H)^2.
      ppl      quantization cost D in accuracy points (sources/quality/quant_quality.csv, size-scaled) / 80: at the
               default weights one point lost to quantization weighs one point of task accuracy.
      acc      (100 - A)/100, A = the workload's task accuracy (en / zh / both) in points on comparable scales.
      zh, en   (100 - A_group)/100 of one group (weight 0 by default).
  minmax, zscore: the brief's method, unchanged: the costs (latency ms, total_vram_bytes, perplexity ratio,
    100 - C-Eval/CMMLU %, 100 - MMLU %, 100 - A) normalized over the candidates being ranked:
      minmax: (x - min) / (max - min), in [0, 1]; 0 for every candidate when max == min.
      zscore: (x - mean) / std; 0 when std == 0.
    Missing values (rule ``worst``, default): a candidate with no value for a criterion gets 1 under min-max (the
    worst possible) and the worst value seen under z-score. Rule ``mean`` gives the average of the known values. A
    criterion no candidate has a value for adds 0 to every score; recommend says so in its notes. Under value a
    missing figure is priced as the worst of its scale (u = 1) - no shipped model lacks one (every model has a
    comparable accuracy, published or estimated).

Default weights (the brief's): latency 0.30, vram 0.25, ppl (quantization) 0.20, task accuracy 0.25 - the accuracy
weight is on ``acc`` (the workload's task mix) under value, on ``zh`` (C-Eval) under minmax / zscore as the brief had.
"""

from __future__ import annotations

import math
import re
from typing import Optional


from recommender.core.errors import UserError

# The label of the score, the order and the quality figures they read (recommender.versions; tests/e2e/test_golden.py):
# bump it when a ranking or a score changes while the predicted figures do not.
SCORE_VERSION = "score-v9-e1-v2"  # v1: the brief's min-max default; v2: value functions, comparable accuracy; v3:
# every catalog model's own comparable-accuracy row (sources/quality rebuilt 2026-12-01), classifier checkpoints out of
# chat; v4: bitsandbytes quantizations priced by their own quant_quality rows (were unknown: the worst price); v5: decode
# speed priced from the workload's comfortable speed (decode_comfort_tok_s) down to reading speed; v6 (issue 23): ranked
# on a lower quantile of the accuracy interval (--risk), publisher-table bridges (inputs/card_scores.csv), vision/code
# checkpoints on their text base's evidence, reasoning tokens in the time to the visible answer
# v7 (issue 23, 2026 evidence): the Qwen3.6-27B blog / Qwen3.5-4B-9B card C-Eval, MMLU-Pro, GPQA-Diamond rows and
# card C-Eval tables in zh (with the zh thinking-mode shift); Qwen3.6-27B and Qwen3.5-9B typed hybrid
# v8 (issue 23, E1-en): code/math and vision-language flags, year x size and publisher year slopes in E1-en
# (leave-family-out 5.06 -> 4.18, bench/e1_lofo.py), checkpoint_facts.csv kinds, the Nemotron-3-Nano card rows
# v9 (issue 23, E1-en v2): distillation flag (sources/quality/distilled.csv), generalized logit logit((y+5)/95), Huber
# loss, publisher slope penalty 1, publisher-gap interval: leave-family-out 4.24 -> 3.88 (nested 3.91); the Gemma 4
# model card's MMLU-Pro / GPQA-Diamond rows (gemma-4 26B-A4B / E4B / E2B -it bridged)
CRITERIA = ("latency", "vram", "ppl", "zh", "en", "acc")
# The brief's weights; under value the task-accuracy weight is on the workload's task mix (acc), under the brief's
# min-max / z-score on C-Eval (zh), as the brief had it.
DEFAULT_WEIGHTS = {"latency": 0.30, "vram": 0.25, "ppl": 0.20, "zh": 0.0, "en": 0.0, "acc": 0.25}
BRIEF_WEIGHTS = {"latency": 0.30, "vram": 0.25, "ppl": 0.20, "zh": 0.25, "en": 0.0, "acc": 0.0}
NORMALIZATIONS = ("value", "minmax", "zscore")
RELATIVE_NORMALIZATIONS = ("minmax", "zscore")  # normalized over the candidates at hand (the brief's method)
DEFAULT_NORMALIZATION = "value"
MISSING_RULES = ("worst", "mean")


def default_weights(method: str = DEFAULT_NORMALIZATION) -> dict[str, float]:
    return dict(DEFAULT_WEIGHTS if method == "value" else BRIEF_WEIGHTS)


def parse_weights(text: Optional[str], method: str = DEFAULT_NORMALIZATION) -> dict[str, float]:
    """'latency=0.3,vram=0.25,ppl=0.2,acc=0.25' -> weights summing to 1. Criteria not named keep their default weight
    (default_weights(method)); the result is renormalized to sum to 1."""
    weights = default_weights(method)
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
    raise UserError(f"unknown normalization {method!r}", hint=f"use one of {', '.join(RELATIVE_NORMALIZATIONS)}")


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
               missing: str = "worst", scale: Optional["ValueScale"] = None) -> list[tuple[float, dict[str, float]]]:
    """Score each row of costs; returns (score, parts) per row, in input order. ``value`` needs the query's scale."""
    columns = columns_for(costs, [c for c in CRITERIA if weights.get(c)], method, missing, scale)
    out = []
    for i in range(len(costs)):
        parts = {c: columns[c][i] for c in columns}
        out.append((sum(weights[c] * parts[c] for c in parts), parts))
    return out


def columns_for(costs: list[dict[str, Optional[float]]], criteria, method: str, missing: str,
                scale: Optional["ValueScale"]) -> dict[str, list[float]]:
    """criterion -> u per row: the value functions (method value) or the normalization over the rows."""
    if method == "value":
        if scale is None:
            raise ValueError("value normalization needs a ValueScale")
        return {c: [scale.u(c, row) for row in costs] for c in criteria}
    return {c: normalize([row.get(c) for row in costs], method, missing) for c in criteria}


# -- value functions (docs/scoring.md) ---------------------------------------------------------------------------

GIB = 1024**3
HEADROOM_SHARE = 0.10  # memory is free while more than this share of the budget is left ...
HEADROOM_MIN_BYTES = 1 * GIB  # ... or 1 GiB, whichever is larger (KV growth to the workload's context, runtime, error)
U_MEM_AT_LIMIT = 0.04  # u at the budget: 4 points at the default weights (0.25 x 0.04 / 0.0025)
U_LAT_AT_LIMIT = 0.02  # u at the latency limit: 2.4 points at the default weights (0.30 x 0.02 / 0.0025)
U_BEYOND = 0.98  # beyond a default (not user-given) limit: + 0.98 per decade, capped at u = 1
ACC_SCALE_POINTS = 100.0  # u_acc = (100 - A) / 100: one point = 0.0025 score at the default weight 0.25
# u_q = D / Q_SCALE_POINTS with Q_SCALE_POINTS = 100 x 0.20 / 0.25: at the default weights one point of accuracy lost
# to quantization weighs exactly one point of task accuracy (docs/quality-method.md section 9)
Q_SCALE_POINTS = ACC_SCALE_POINTS * 0.20 / 0.25
# Reading speed: 238 words/min silent reading of English non-fiction [Brysbaert 2019] x 4/3 tokens per word [OpenAI
# help: 1 token ~ 3/4 word] = 5.29 tokens/s -> 189 ms per token; twice as fast is comfortable (nobody waits).
READING_TPOT_MS = 60_000.0 / (238.0 * 4.0 / 3.0)
COMFORT_TPOT_MS = READING_TPOT_MS / 2.0


def u_memory(m_bytes: Optional[float], budget_bytes: float) -> float:
    if m_bytes is None:
        return 1.0
    h = max(HEADROOM_SHARE * budget_bytes, HEADROOM_MIN_BYTES)
    excess = max(0.0, m_bytes - (budget_bytes - h)) / h
    return U_MEM_AT_LIMIT * excess * excess


# Decode speed (the TPOT term of a latency-ranked workload): free from the workload's comfortable speed
# (decode_comfort_tok_s), priced on a log scale down to reading speed, where it costs U_DECODE_AT_READING: 9.6 points
# at the default weights (0.30 x 0.08 / 0.0025) -- what a user gives up to read as it streams rather than wait for it;
# beyond reading speed + U_BEYOND per decade as every latency.
U_DECODE_AT_READING = 0.08


def u_latency(t_ms: Optional[float], t_ok_ms: float, limit_ms: float, user_limit: bool,
              u_at_limit: float = U_LAT_AT_LIMIT) -> float:
    if t_ms is None:
        return 1.0
    if t_ms <= t_ok_ms:
        return 0.0
    if t_ms <= limit_ms:
        return u_at_limit * math.log(t_ms / t_ok_ms) / math.log(limit_ms / t_ok_ms)
    if user_limit:  # cannot happen for a ranked candidate: the limit excluded it
        return 1.0
    return u_at_limit + U_BEYOND * min(1.0, math.log10(t_ms / limit_ms))


GOODPUT_FREE_FACTOR = 10.0  # goodput beyond 10x the target costs nothing more
U_GOODPUT_SHORT = 0.10  # per decade below the target (the team does not fit at the SLOs): 12 points per decade


def u_goodput(goodput: Optional[float], target: float) -> float:
    """Serve: 0 at >= 10x the target goodput (requests/s meeting the SLOs); 0.02 per decade below that down to the
    target (a decade more capacity is worth 2.4 points at the default weights); below the target 0.02 + 0.10 per
    decade short, up to 1."""
    if not goodput or goodput <= 0:
        return 1.0
    hi = GOODPUT_FREE_FACTOR * target
    if goodput >= hi:
        return 0.0
    if goodput >= target:
        return U_LAT_AT_LIMIT * math.log10(hi / goodput)
    return min(1.0, U_LAT_AT_LIMIT + U_GOODPUT_SHORT * math.log10(target / goodput))


def u_points(points: Optional[float], scale_points: float) -> float:
    return 1.0 if points is None else max(0.0, points) / scale_points


class ValueScale:
    """The anchors of one query's value functions: budget, latency comfort and limit (user or workload default),
    goodput target (serve). Built by recommender.rank from the Query; pure arithmetic here."""

    def __init__(self, budget_bytes: float, t_ok_ms: float, limit_ms: float, user_limit: bool,
                 goodput_target: Optional[float] = None,
                 guard: Optional[tuple[str, float, float]] = None) -> None:
        self.budget_bytes = budget_bytes
        self.t_ok_ms = t_ok_ms
        self.limit_ms = limit_ms
        self.user_limit = user_limit
        self.goodput_target = goodput_target
        # the other latency at the workload's anchors (field, T_ok, default limit): a TTFT query still pays for a
        # TPOT slower than reading, a TPOT query for a TTFT past the workload's comfort
        self.guard = guard

    def u(self, criterion: str, row: dict[str, Optional[float]]) -> float:
        if criterion == "latency":
            if self.goodput_target is not None:
                return u_goodput(row.get("goodput"), self.goodput_target)
            u = u_latency(row.get("latency"), self.t_ok_ms, self.limit_ms, self.user_limit)
            if self.guard is not None and row.get(self.guard[0]) is not None:
                g = self.guard
                u += u_latency(row[g[0]], g[1], g[2], False, *(g[3:] or (U_LAT_AT_LIMIT,)))
            return u
        if criterion == "vram":
            return u_memory(row.get("vram"), self.budget_bytes)
        if criterion == "ppl":
            return u_points(row.get("quant_points"), Q_SCALE_POINTS)
        return u_points(None if row.get(criterion) is None else row[criterion], ACC_SCALE_POINTS)


# -- the same scores for columns of costs (numpy arrays, NaN: no value) -------------------------------------------
# recommend ranks every configuration of a query (recommender.rank.candidates.KeyTable) without a record per row:
# element by element these are the numbers of score_rows / ValueScale.u (the same IEEE operations in the same order;
# the logarithms through math, as the scalar path; the statistics of min-max / z-score summed by Python as there).


def _each(fn, x, mask):
    """fn(v) (through math, as the scalar path: the same bits) for each element v of ``x`` where ``mask``, 0 elsewhere."""
    import numpy as np  # noqa: PLC0415  (numpy where configurations are scored as arrays)
    out = np.zeros(len(x))
    sel = np.flatnonzero(mask)
    if len(sel):
        out[sel] = [fn(v) for v in x[sel].tolist()]
    return out


def u_latency_array(t, t_ok_ms: float, limit_ms: float, user_limit: bool, u_at_limit: float = U_LAT_AT_LIMIT):
    """u_latency of each element of ``t`` (NaN: unknown, u = 1)."""
    import numpy as np  # noqa: PLC0415
    nan = np.isnan(t)
    slow = ~nan & (t > t_ok_ms)
    mid = slow & (t <= limit_ms)
    beyond = slow & (t > limit_ms)
    u = np.where(nan, 1.0, 0.0)
    if mid.any():
        logs = _each(lambda v: math.log(v / t_ok_ms), t, mid)
        u = np.where(mid, u_at_limit * logs / math.log(limit_ms / t_ok_ms), u)
    if beyond.any():
        if user_limit:
            u = np.where(beyond, 1.0, u)
        else:
            logs = _each(lambda v: math.log10(v / limit_ms), t, beyond)
            u = np.where(beyond, u_at_limit + U_BEYOND * np.minimum(1.0, logs), u)
    return u


def u_goodput_array(g, target: float):
    """u_goodput of each element of ``g`` (NaN: unknown, u = 1)."""
    import numpy as np  # noqa: PLC0415
    hi = GOODPUT_FREE_FACTOR * target
    none = np.isnan(g) | (g <= 0)
    above = ~none & (g >= target) & (g < hi)
    short = ~none & (g < target)
    u = np.where(none, 1.0, 0.0)
    if above.any():
        u = np.where(above, U_LAT_AT_LIMIT * _each(lambda v: math.log10(hi / v), g, above), u)
    if short.any():
        logs = _each(lambda v: math.log10(target / v), g, short)
        u = np.where(short, np.minimum(1.0, U_LAT_AT_LIMIT + U_GOODPUT_SHORT * logs), u)
    return u


def u_memory_array(m, budget_bytes: float):
    """u_memory of each element of ``m`` (NaN: unknown, u = 1)."""
    import numpy as np  # noqa: PLC0415
    h = max(HEADROOM_SHARE * budget_bytes, HEADROOM_MIN_BYTES)
    d = m - (budget_bytes - h)
    excess = np.where(d > 0.0, d, 0.0) / h
    return np.where(np.isnan(m), 1.0, U_MEM_AT_LIMIT * excess * excess)


def u_points_array(p, scale_points: float):
    """u_points of each element of ``p`` (NaN: unknown, u = 1)."""
    import numpy as np  # noqa: PLC0415
    return np.where(np.isnan(p), 1.0, np.where(p > 0.0, p, 0.0) / scale_points)


def value_u_array(scale: ValueScale, criterion: str, cols: dict):
    """ValueScale.u of every row of ``cols`` (cost name -> array, the keys of score.order.costs; NaN: None)."""
    import numpy as np  # noqa: PLC0415
    if criterion == "latency":
        if scale.goodput_target is not None:
            return u_goodput_array(cols["goodput"], scale.goodput_target)
        u = u_latency_array(cols["latency"], scale.t_ok_ms, scale.limit_ms, scale.user_limit)
        if scale.guard is not None:
            g = scale.guard
            other = cols[g[0]]
            u = np.where(np.isnan(other), u, u + u_latency_array(other, g[1], g[2], False,
                                                                  *(g[3:] or (U_LAT_AT_LIMIT,))))
        return u
    if criterion == "vram":
        return u_memory_array(cols["vram"], scale.budget_bytes)
    if criterion == "ppl":
        return u_points_array(cols["quant_points"], Q_SCALE_POINTS)
    return u_points_array(cols[criterion], ACC_SCALE_POINTS)


def normalize_array(values, method: str = "minmax", missing: str = "worst"):
    """normalize() of a column (NaN: None): the statistics from the known values summed as normalize sums them."""
    import numpy as np  # noqa: PLC0415
    known = ~np.isnan(values)
    if not known.any():
        return np.zeros(len(values))
    a, b = norm_stats(values[known].tolist(), method)
    if method == "minmax":
        normed = (values - a) / (b - a) if b > a else np.zeros(len(values))
    else:
        normed = (values - a) / b if b > 0 else np.zeros(len(values))
    fill = missing_fill(normed[known].tolist(), method, missing)
    return np.where(known, normed, fill)


def score_arrays(cols: dict, weights: dict[str, float], method: str = "minmax", missing: str = "worst",
                 scale: Optional[ValueScale] = None, given: Optional[dict] = None):
    """score_rows for columns of costs (cost name -> array over the rows, NaN: None): (score array, criterion ->
    u array), the same numbers as score_rows of the rows (the weighted sum in the same order). ``given`` (value):
    criterion -> u array taken as that criterion's u in place of its value function's (score.order.quality_bounds:
    the least u of the configurations a bound covers)."""
    import numpy as np  # noqa: PLC0415
    criteria = [c for c in CRITERIA if weights.get(c)]
    if method == "value":
        if scale is None:
            raise ValueError("value normalization needs a ValueScale")
        given = given or {}
        parts = {c: given[c] if c in given else value_u_array(scale, c, cols) for c in criteria}
    else:
        parts = {c: normalize_array(cols[c], method, missing) for c in criteria}
    n = len(next(iter(cols.values()))) if cols else 0
    total = np.zeros(n)
    for c in criteria:
        total = total + weights[c] * parts[c]
    return total, parts
