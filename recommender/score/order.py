"""From scored candidates to a ranking: the score of each feasible candidate (weighted.py), the order (score, then
the documented tie-breaks), one or a few configurations per model, and the strongest excluded candidates.

Tie-breaks (docs/scoring.md): at an equal rounded score the candidate with the smaller quantization cost wins (so
Q4_K_M beats legacy Q4_0, a measured cost beats none), then the more accurate model, then the higher goodput (serve),
then less memory, then lower latency, then model, quant and engine names.

Pure functions over candidate records (recommender.rank.candidates.Candidate: any object with the fields used here).
"""

from __future__ import annotations

import heapq
import math
from typing import Optional

from recommender.score.weighted import (COMFORT_TPOT_MS, READING_TPOT_MS, U_DECODE_AT_READING, ValueScale, score_arrays,
                                        score_rows, value_u_array)

STRONGEST_EXCLUDED = 5  # excluded candidates shown with --explain, one per model
# Scores are rounded to this many decimals before sorting: closer ones tie and are ordered by latency (order_key).
SCORE_DECIMALS = 6


def _less(v: Optional[float]) -> Optional[float]:
    return None if v is None else 100.0 - v


def costs(c, method: str = "minmax") -> dict[str, Optional[float]]:
    """The criteria of one candidate as costs (lower is better). The brief's (minmax / zscore): latency ms, memory
    bytes, perplexity ratio, 100 - published C-Eval/CMMLU %, 100 - MMLU %, 100 - A. Value: the same latency and
    memory, goodput (serve), the quantization cost in points, and 100 - the comparable group accuracies."""
    acc = c.figures.get("task_accuracy_ranked") or c.figures.get("task_accuracy")  # --risk's lower quantile
    out = {"latency": c.latency_ms, "vram": float(c.total_vram_bytes), "acc": _less(acc.value if acc else None)}
    if method == "value":
        qp = c.figures.get("quant_cost_points")
        out.update({"ppl": None, "quant_points": qp.value if qp else None, "goodput": c.goodput_per_s,
                    "ttft": c.ttft_ms, "tpot": c.tpot_ms,
                    "zh": _less(c.figures["zh_comparable"].value) if "zh_comparable" in c.figures else None,
                    "en": _less(c.figures["en_comparable"].value) if "en_comparable" in c.figures else None})
    else:
        out.update({"ppl": c.ppl_ratio, "zh": _less(c.zh_accuracy), "en": _less(c.en_accuracy)})
    return out


def value_scale(q) -> ValueScale:
    """The anchors of the value functions for one query (docs/scoring.md): the memory budget; the latency limit the
    user gave, else the workload's default; the comfortable latency min(comfort, limit / 2); the goodput target."""
    wl = q.workload
    if q.latency_metric == "ttft":
        comfort, default = wl.ttft_comfort_ms, wl.ttft_limit_ms
    elif q.latency_metric == "tpot":
        comfort, default = comfort_tpot_ms(wl), READING_TPOT_MS
    else:  # e2e = TTFT + (n_out - 1) x TPOT at the anchors
        n = max(wl.output_tokens - 1, 0)
        comfort, default = wl.ttft_comfort_ms + n * COMFORT_TPOT_MS, wl.ttft_limit_ms + n * READING_TPOT_MS
    limit = q.max_latency_ms if q.max_latency_ms is not None else default
    target = goodput_target(wl) if wl.rank_by == "goodput" else None
    guard = None
    if q.latency_metric == "ttft":
        guard = ("tpot", comfort_tpot_ms(wl), READING_TPOT_MS, U_DECODE_AT_READING)
    elif q.latency_metric == "tpot":
        guard = ("ttft", min(wl.ttft_comfort_ms, wl.ttft_limit_ms / 2.0), wl.ttft_limit_ms)
    return ValueScale(q.vram_bytes, min(comfort, limit / 2.0), limit, q.max_latency_ms is not None, target, guard)


def comfort_tpot_ms(wl) -> float:
    """The TPOT from which a faster stream costs nothing: the workload's comfortable decode speed, else twice
    reading speed."""
    return 1000.0 / wl.decode_comfort_tok_s if wl.decode_comfort_tok_s else COMFORT_TPOT_MS


def goodput_target(wl) -> float:
    """Requests/s of target_concurrency users each served at the workload's SLOs (its comfortable TTFT, reading speed;
    recommender.rank.query.serve_slos): concurrency / (TTFT_SLO + (n_out-1) TPOT_SLO)."""
    ttft, tpot = wl.ttft_comfort_ms, READING_TPOT_MS
    return wl.target_concurrency / ((ttft + max(wl.output_tokens - 1, 0) * tpot) / 1000.0)


def is_excluded(c) -> bool:
    """Whether a hard limit excludes the candidate: a vectorized row knows it without wording its reasons
    (recommender.rank.candidates.Row.blocked); a record has its list of reasons."""
    blocked = getattr(c, "blocked", None)
    return bool(c.excluded) if blocked is None else blocked


def value_scores(cands: list, q, scale: ValueScale, memo: Optional[dict]) -> list[tuple[float, dict[str, float]]]:
    """The value-method (score, parts) of each candidate. Each is the candidate's own (value functions, no scale from
    the other rows), so ``memo`` (id -> (candidate, score, parts), one query's) keeps them across the rounds of a
    best-first search (recommender.rank.recommend), which ranks a growing list again each round."""
    if memo is None:
        return score_rows([costs(c, "value") for c in cands], q.weights, "value", q.missing, scale)
    todo = [c for c in cands if memo.get(id(c), (None,))[0] is not c]
    for c, sp in zip(todo, score_rows([costs(c, "value") for c in todo], q.weights, "value", q.missing, scale)):
        memo[id(c)] = (c, *sp)
    return [memo[id(c)][1:] for c in cands]


def apply_scores(cands: list, q, memo: Optional[dict] = None) -> None:
    scale = value_scale(q) if q.normalization == "value" else None
    scored = (value_scores(cands, q, scale, memo) if scale is not None else
              score_rows([costs(c, q.normalization) for c in cands], q.weights, q.normalization, q.missing))
    for c, (s, parts) in zip(cands, scored):
        c.score = round(s, SCORE_DECIMALS)
        c.score_parts = {k: round(v, SCORE_DECIMALS) for k, v in parts.items()}


def dedupe(cands: list, per_model: int) -> list:
    """The first ``per_model`` candidates of each model, in order (0 = all)."""
    seen: dict[str, int] = {}
    out = []
    for c in cands:
        n = seen.get(c.model, 0)
        if per_model <= 0 or n < per_model:
            out.append(c)
            seen[c.model] = n + 1
    return out


def _fig(c, name: str, default: float) -> float:
    f = c.figures.get(name) if hasattr(c, "figures") else None
    return default if f is None or f.value is None else f.value


def order_key(score: Optional[float], c) -> tuple:
    """Ranking order: (rounded) score, then quantization cost, accuracy (higher first), goodput (higher first), memory,
    latency, model, quant, engine (module docstring)."""
    inf = float("inf")
    return (score, _fig(c, "quant_cost_points", inf), -_fig(c, "task_accuracy", -inf),
            -(getattr(c, "goodput_per_s", None) or 0.0), c.total_vram_bytes,
            c.latency_ms if c.latency_ms is not None else inf, c.model, c.quant, c.engine)


def choose_batches(cands: list) -> list:
    """Serve: per configuration (model, quant, engine, context, KV dtype), the batch of the highest goodput, then
    the highest output throughput under load (recommender.predict.serving), then the smallest."""
    best: dict[tuple, object] = {}
    for c in cands:
        key = (c.model, c.quant, c.engine, c.context_tokens, getattr(c, "kv_dtype", None))
        cur = best.get(key)
        if cur is None or _batch_key(c) < _batch_key(cur):
            best[key] = c
    keep = {id(c) for c in best.values()}
    return [c for c in cands if id(c) in keep]


def _batch_key(c) -> tuple:
    return (-(c.goodput_per_s or 0.0), -_fig(c, "output_throughput_tokens_per_s", 0.0), c.batch)


def lower_bound_costs(c) -> dict[str, Optional[float]]:
    """The value-method costs of a candidate whose latency was not computed (an OverBudget record of rank's
    memory-first pre-pass) at their best case - latency, TTFT and TPOT 0, unbounded goodput - so its score is a lower
    bound of its real one: every value function of latency is >= 0 and 0 there (u_latency, u_goodput), and the other
    criteria do not depend on latency."""
    out = costs(c, "value")
    out.update(latency=0.0, ttft=0.0, tpot=0.0, goodput=math.inf)
    return out


def quality_bounds(values: list[tuple[float, ...]], q, scale: ValueScale,
                   least: Optional[dict] = None) -> list[float]:
    """The value-method scores of variants' quality figures (their ``quality_values``: recommender.rank.candidates.
    CandidateBuilder.quality_costs) at the best case of everything else - latency, TTFT, TPOT and memory 0, unbounded
    goodput: for each variant a lower bound of the (unrounded) score of each of its configurations. Every value
    function is >= 0 and 0 there (lower_bound_costs), and the weighted sum adds the same terms in the same order, so
    with floating-point rounding too the bound is never above a configuration's score. ``least``: criterion (latency,
    vram) -> for each variant the least u of that criterion among its configurations (least_parts), in place of 0:
    each term is still at most the configuration's own, so the bound still holds, and it is tighter."""
    import numpy as np  # noqa: PLC0415  (numpy where configurations are ranked as arrays)
    if not values:
        return []
    qual = np.array(values, dtype=float).reshape(len(values), len(QUALITY_COLUMNS))
    cols = {name: qual[:, j] for j, name in enumerate(QUALITY_COLUMNS)}
    zero = np.zeros(len(values))
    cols.update(latency=zero, ttft=zero, tpot=zero, vram=zero, goodput=np.full(len(values), np.inf))
    return score_arrays(cost_columns(cols, "value"), q.weights, "value", q.missing, scale, given=least)[0].tolist()


LEAST_CRITERIA = ("latency", "vram")  # the criteria of a configuration's figures (not its variant's quality)


def least_parts(cols: dict, q, scale: ValueScale, known, groupings) -> list:
    """For quality_bounds' ``least``: for each (group codes, rows mask) of ``groupings`` (each row's group, 0 ..
    groups - 1; the rows that count) a pair (criterion (LEAST_CRITERIA, weighted ones) -> each group's least
    value-method u among those rows, from their figures (``cols``: rank_arrays' columns); whether each group has
    any). A row whose figures are not ``known`` (not predicted yet) counts at its best case, u 0."""
    import numpy as np  # noqa: PLC0415
    costs_ = cost_columns(cols, "value")
    us = {c: np.where(known, value_u_array(scale, c, costs_), 0.0) for c in LEAST_CRITERIA if q.weights.get(c)}
    out = []
    for groups, rows in groupings:
        n_groups = int(groups.max()) + 1 if len(groups) else 0
        has = np.zeros(n_groups, dtype=bool)
        has[groups[rows]] = True
        least = {}
        for c, u in us.items():
            least[c] = np.full(n_groups, np.inf)
            np.minimum.at(least[c], groups[rows], u[rows])
        out.append((least, has))
    return out


def rank(cands: list, q, memo: Optional[dict] = None) -> tuple[list, list, list]:
    """(ranked, strongest excluded, feasible) of a query's candidates: the feasible ones scored, ordered and
    de-duplicated to q.top; the best-scoring excluded ones (everything scored together, as if there were no limits),
    one per model, so --explain shows what the limits cost.

    ``cands`` may hold rows of the vectorized Predictor (recommender.rank.candidates.Row: their figures as numbers):
    the ranked and strongest excluded ones are returned as their full records (``full()``).
    ``cands`` may hold deferred records (``deferred`` true: recommender.rank.candidates.OverBudget, excluded by their
    memory alone): they are never feasible, and one is replaced in ``cands`` by its full candidate (``full()``) only
    where its figures matter - with the value method when its score's lower bound (lower_bound_costs) could place it
    among the strongest excluded; with the relative methods (min-max, z-score: every row moves the scale) always.
    The answer is the one of the full list. ``memo``: value-method scores kept between calls (value_scores)."""
    if q.normalization != "value":
        for i, c in enumerate(cands):
            if getattr(c, "deferred", False):
                cands[i] = c.full()
    feasible = [c for c in cands if not is_excluded(c)]
    if q.workload.rank_by == "goodput":
        feasible = choose_batches(feasible)
    apply_scores(feasible, q, memo)
    feasible.sort(key=lambda c: order_key(c.score, c))
    ranked = dedupe(feasible, q.per_model)[: q.top]
    for c in feasible:  # ranked again (recommender.rank.recommend ranks a growing list): no rank left from before
        c.rank = None
    for i, c in enumerate(ranked, 1):
        c.rank = i
    # rows of the vectorized Predictor (recommender.rank.candidates.Row: numbers only) are shown as their records
    ranked = [c.full() if hasattr(c, "_table") else c for c in ranked]
    strongest: list = []
    if len(feasible) < len(cands):
        scale = value_scale(q) if q.normalization == "value" else None
        if scale is None:  # relative methods: the scale comes from every row, feasible ones included
            scored = dict(enumerate(score_rows([costs(c, q.normalization) for c in cands], q.weights,
                                               q.normalization, q.missing)))
            pool = [(scored[i][0], c.model, i) for i, c in enumerate(cands) if is_excluded(c)]
        else:  # value: each row's score is its own (value functions), so the excluded rows are scored alone
            idx = [i for i, c in enumerate(cands) if is_excluded(c)]
            deferred = [i for i in idx if getattr(cands[i], "deferred", False)]
            scored = dict(zip(deferred, score_rows([lower_bound_costs(cands[i]) for i in deferred], q.weights,
                                                   "value", q.missing, scale)))
            whole = [i for i in idx if i not in scored]
            scored.update(zip(whole, value_scores([cands[i] for i in whole], q, scale, memo)))
            pool = [(scored[i][0], cands[i].model, i) for i in idx]
        # best first (score, model, position), as one sort of the full list would order them: a deferred record's
        # key is a lower bound, so when it comes first it is replaced by its full candidate, scored and put back
        heapq.heapify(pool)
        seen: set[str] = set()
        while pool and len(strongest) < STRONGEST_EXCLUDED:
            s, model, i = heapq.heappop(pool)
            if model in seen:  # one per model: this model's best excluded candidate is in already
                continue
            if getattr(cands[i], "deferred", False):
                cands[i] = cands[i].full()
                scored[i] = value_scores([cands[i]], q, scale, memo)[0]
                heapq.heappush(pool, (scored[i][0], model, i))
                continue
            seen.add(model)
            shown = cands[i].full() if hasattr(cands[i], "_table") else cands[i]
            strongest.append(shown.model_copy(update={
                "score": round(s, SCORE_DECIMALS),
                "score_parts": {k: round(v, SCORE_DECIMALS) for k, v in scored[i][1].items()}}))
    return ranked, strongest, feasible


def no_fit_notes(infeasible: list) -> list[str]:
    """The notes for a question nothing fits."""
    notes = ["no candidate satisfies the constraints"]
    if any("unknown" in r for c in infeasible for r in c.excluded):
        notes.append("some candidates have an unknown latency on this GPU profile (no sourced peak FLOP/s): "
                     "try --latency-metric tpot, or plan for a profile with that figure")
    return notes


# An offload plan held back by the latency limit alone is shown beside the answer (issue 24, question C) when its
# latency is within this multiple of the limit: a user who asked for 800 ms may take 1.1 s for a better model, hardly
# 8 s. A stated policy of the answer, not a measured figure.
OVER_LIMIT_ALTERNATIVE_FACTOR = 2.0


def effective_accuracy(c) -> Optional[float]:
    """Task accuracy as ranked (--risk's quantile) less the points the quantization costs; None when unknown."""
    acc = c.figures.get("task_accuracy_ranked") or c.figures.get("task_accuracy")
    if acc is None or acc.value is None:
        return None
    qp = c.figures.get("quant_cost_points")
    return acc.value - (qp.value if qp is not None and qp.value is not None else 0.0)


def over_limit_alternative(cands: list, ranked: list, q):
    """The partial-offload plan (llama.cpp n_gpu_layers < all, the rest in host RAM) that only the user's latency
    limit holds back, within OVER_LIMIT_ALTERNATIVE_FACTOR of it, and more accurate than the top pick (task accuracy
    as ranked less its quantization cost): the best-scoring such plan, scored as the ranked ones but with the latency
    limit widened to OVER_LIMIT_ALTERNATIVE_FACTOR x the user's (the comfortable latency kept), so that between the
    limit and that bound the faster plan gains as the more accurate one does. None when there is none (no limit,
    nothing ranked, or nothing better). Deferred records (over the memory budget) never qualify."""
    if q.max_latency_ms is None or not ranked:
        return None
    top = effective_accuracy(ranked[0])
    if top is None:
        return None
    pool = []
    for c in cands:
        if getattr(c, "deferred", False) or c.gpu_layers is None or len(c.excluded) != 1 or c.latency_ms is None:
            continue
        if not (q.max_latency_ms < c.latency_ms <= OVER_LIMIT_ALTERNATIVE_FACTOR * q.max_latency_ms):
            continue
        eff = effective_accuracy(c)
        if eff is None or eff <= top:
            continue
        pool.append(c)
    if not pool:
        return None
    method = q.normalization
    scale = None
    if method == "value":
        base = value_scale(q)
        scale = ValueScale(base.budget_bytes, base.t_ok_ms, OVER_LIMIT_ALTERNATIVE_FACTOR * base.limit_ms,
                           base.user_limit, base.goodput_target, base.guard)
    scored = score_rows([costs(c, method) for c in pool], q.weights, method, q.missing, scale)
    return min(zip(pool, scored), key=lambda cs: (round(cs[1][0], SCORE_DECIMALS), cs[0].latency_ms, cs[0].model,
                                                   cs[0].quant))[0]


def over_limit_note(alt, top, q) -> str:
    """One line saying what the over-the-limit offload plan costs and gives."""
    tpot = alt.figures["tpot_ms"].value
    host = alt.terms.get("host_weights_bytes") if getattr(alt, "terms", None) else None
    return (f"over the limit, if you can wait longer: {alt.model} {alt.quant} with partial offload (n_gpu_layers "
            f"{alt.gpu_layers}" + (f", {host / 1024**3:.1f} GiB of weights in host RAM" if host else "") + "): "
            f"{q.latency_metric.upper()} {alt.latency_ms:.0f} ms, over the {q.max_latency_ms:.0f} ms limit by "
            f"{alt.latency_ms - q.max_latency_ms:.0f} ms; decodes "
            + (f"{1000.0 / tpot:.0f} tok/s" if tpot else "at an unknown rate")
            + f"; accuracy less quantization cost {effective_accuracy(alt):.1f} points against the top pick's "
              f"{effective_accuracy(top):.1f}")


# -- the same ranking over columns (recommend: every configuration as numbers, no record per row) -----------------
# The columns (numpy arrays over all of a query's configurations, NaN: no value; recommender.rank.candidates.KeyTable
# .columns): the value-method costs of ``costs`` (latency, vram, acc, quant_points, goodput, ttft, tpot, zh_comparable
# and en_comparable as 100 - A), the brief's (ppl, zh_accuracy and en_accuracy as 100 - A), task_accuracy (a
# tie-break), output_throughput (serve), batch, blocked (a hard limit excludes the row), and integer codes whose order
# is the names' order: model, quant, engine, and config (one per model, quant, engine, context and KV dtype).

QUALITY_COLUMNS = ("acc", "quant_points", "zh_comparable", "en_comparable", "ppl", "zh_accuracy", "en_accuracy",
                   "task_accuracy")


def quality_values(f: dict) -> tuple[float, ...]:
    """The QUALITY_COLUMNS of a candidate's (or a variant's) quality figures, as ``costs`` reads them (accuracies as
    100 - A; NaN: no figure or no value)."""
    def value(name: str) -> float:
        fig = f.get(name)
        return math.nan if fig is None or fig.value is None else fig.value

    acc = f.get("task_accuracy_ranked") or f.get("task_accuracy")  # --risk's lower quantile
    return (100.0 - (math.nan if acc is None or acc.value is None else acc.value), value("quant_cost_points"),
            100.0 - value("zh_comparable"), 100.0 - value("en_comparable"), value("ppl_ratio"),
            100.0 - value("zh_accuracy"), 100.0 - value("en_accuracy"), value("task_accuracy"))


def cost_columns(cols: dict, method: str) -> dict:
    """``costs`` for columns: criterion -> array (NaN: None)."""
    out = {"latency": cols["latency"], "vram": cols["vram"], "acc": cols["acc"]}
    if method == "value":
        out.update({"quant_points": cols["quant_points"], "goodput": cols["goodput"], "ttft": cols["ttft"],
                    "tpot": cols["tpot"], "zh": cols["zh_comparable"], "en": cols["en_comparable"]})
    else:
        out.update({"ppl": cols["ppl"], "zh": cols["zh_accuracy"], "en": cols["en_accuracy"]})
    return out


def _take(cols: dict, idx) -> dict:
    return {k: v[idx] for k, v in cols.items()}


def _scores(cols: dict, idx, q, memo: Optional[dict]):
    """(score, criterion -> u) of the rows ``idx``: value-method scores kept in ``memo`` between calls (each row's
    own), relative methods over exactly these rows."""
    import numpy as np  # noqa: PLC0415  (numpy where configurations are ranked as arrays)
    if q.normalization != "value":
        return score_arrays(cost_columns(_take(cols, idx), q.normalization), q.weights, q.normalization, q.missing)
    if memo is None:
        memo = {}
    if "score" not in memo:
        n = len(cols["blocked"])
        memo.update(score=np.full(n, np.nan), parts={}, done=np.zeros(n, dtype=bool))
    todo = idx[~memo["done"][idx]]
    if len(todo):
        s, parts = score_arrays(cost_columns(_take(cols, todo), "value"), q.weights, "value", q.missing,
                                value_scale(q))
        memo["score"][todo] = s
        for c, u in parts.items():
            memo["parts"].setdefault(c, np.full(len(memo["score"]), np.nan))[todo] = u
        memo["done"][todo] = True
    return memo["score"][idx], {c: u[idx] for c, u in memo["parts"].items()}


def _rounded(s: float, parts: dict, j: int) -> tuple[float, dict[str, float]]:
    return round(s, SCORE_DECIMALS), {c: round(float(u[j]), SCORE_DECIMALS) for c, u in parts.items()}


def choose_batches_arrays(cols: dict, idx):
    """choose_batches for the rows ``idx`` (enumeration order): the same rows kept, in the same order."""
    import numpy as np  # noqa: PLC0415
    g = np.nan_to_num(cols["goodput"][idx], nan=0.0)
    thr = np.nan_to_num(cols["output_throughput"][idx], nan=0.0)
    order = np.lexsort((np.arange(len(idx)), cols["batch"][idx], -thr, -g, cols["config"][idx]))
    grp = cols["config"][idx][order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = grp[1:] != grp[:-1]
    keep = np.zeros(len(idx), dtype=bool)
    keep[order[first]] = True
    return idx[keep]


def order_arrays(cols: dict, idx, rounded):
    """The positions of ``idx`` sorted by order_key (``rounded``: each row's rounded score), stable."""
    import numpy as np  # noqa: PLC0415
    inf = np.inf
    qp = cols["quant_points"][idx]
    acc = cols["task_accuracy"][idx]
    g = np.nan_to_num(cols["goodput"][idx], nan=0.0)
    lat = cols["latency"][idx]
    return np.lexsort((cols["engine"][idx], cols["quant"][idx], cols["model"][idx], np.where(np.isnan(lat), inf, lat),
                       cols["vram"][idx], -g, np.where(np.isnan(acc), inf, -acc), np.where(np.isnan(qp), inf, qp),
                       rounded))


def rank_arrays(cols: dict, idx, q, memo: Optional[dict] = None, resolve=None) -> tuple[list, list, "np.ndarray"]:
    """rank() for the rows ``idx`` of columns (module comment above; positions in the enumeration, ascending):
    (ranked, strongest excluded, feasible), the first two as lists of (position, rounded score, rounded parts) in
    their order, feasible as positions (after choose_batches on a goodput workload). The same answer as rank() of
    the rows as records. ``memo``: value-method scores kept between calls (a growing ``idx``: best-first).
    Deferred rows (``cols["deferred"]``: excluded by their memory alone, their latency columns at its best case,
    lower_bound_costs) are never feasible; ``resolve(i)`` puts row i's real figures in the columns, called - as
    rank() replaces a deferred record by its full candidate - where a row's figures matter: with the value method
    when its lower bound could place it among the strongest excluded, with the relative methods always."""
    import numpy as np  # noqa: PLC0415
    idx = np.asarray(idx, dtype=np.int64)
    if memo is None and q.normalization == "value":
        memo = {}  # (a deferred row's score is replaced in it when resolved)
    deferred = cols.get("deferred")
    if deferred is not None and q.normalization != "value" and deferred[idx].any():
        for i in idx[deferred[idx]].tolist():  # every row moves the scale
            resolve(i)
    blocked = cols["blocked"][idx]
    feasible = idx[~blocked]
    if q.workload.rank_by == "goodput":
        feasible = choose_batches_arrays(cols, feasible)
    ranked: list = []
    if len(feasible):
        s, parts = _scores(cols, feasible, q, memo)
        rounded = np.array([round(v, SCORE_DECIMALS) for v in s.tolist()])
        seen: dict[int, int] = {}
        models = cols["model"][feasible]
        for j in order_arrays(cols, feasible, rounded).tolist():
            m = int(models[j])
            n = seen.get(m, 0)
            if q.per_model <= 0 or n < q.per_model:
                seen[m] = n + 1
                ranked.append((int(feasible[j]), *_rounded(float(s[j]), parts, j)))
                if len(ranked) >= q.top:
                    break
    strongest: list = []
    if len(feasible) < len(idx):
        excl = idx[blocked]
        if q.normalization == "value":
            s, parts = _scores(cols, excl, q, memo)
        else:  # relative methods: the scale comes from every row, feasible ones included
            s_all, parts_all = _scores(cols, idx, q, None)
            s, parts = s_all[blocked], {c: u[blocked] for c, u in parts_all.items()}
        seen_models: set[int] = set()
        models = cols["model"][excl]
        if q.normalization == "value" and deferred is not None and deferred[excl].any():
            return ranked, _strongest_deferred(cols, excl, s, q, memo, resolve), feasible
        for j in np.lexsort((excl, models, s)).tolist():
            m = int(models[j])
            if m in seen_models:
                continue
            seen_models.add(m)
            strongest.append((int(excl[j]), *_rounded(float(s[j]), parts, j)))
            if len(strongest) >= STRONGEST_EXCLUDED:
                break
    return ranked, strongest, feasible


def _strongest_deferred(cols: dict, excl, s, q, memo: dict, resolve) -> list:
    """rank_arrays' strongest excluded rows (value method) when some of ``excl`` are deferred (their scores ``s``
    lower bounds): best first by (score, model, position), as the sort of the full list orders them; a deferred row
    that comes first is resolved, scored again and put back (rank()'s way with deferred records)."""
    import numpy as np  # noqa: PLC0415
    deferred = cols["deferred"]
    models = cols["model"][excl]
    # the rows in (score, model, position) order - one sort - merged with the resolved rows put back (a heap)
    order = np.lexsort((excl, models, s)).tolist()
    s_, models_, excl_ = s.tolist(), models.tolist(), excl.tolist()
    back: list = []
    j = 0
    seen: set[int] = set()
    out: list = []
    while len(out) < STRONGEST_EXCLUDED:
        nxt = (s_[order[j]], models_[order[j]], excl_[order[j]]) if j < len(order) else None
        if back and (nxt is None or back[0] < nxt):
            score, model, i = heapq.heappop(back)
        elif nxt is not None:
            score, model, i = nxt
            j += 1
        else:
            break
        if model in seen:
            continue
        at = np.array([i])
        if deferred[i]:
            resolve(i)
            memo["done"][i] = False
            heapq.heappush(back, (float(_scores(cols, at, q, memo)[0][0]), model, i))
            continue
        seen.add(model)
        one, parts = _scores(cols, at, q, memo)
        out.append((i, *_rounded(float(one[0]), parts, 0)))
    return out


def unweighed_notes(weights: dict[str, float], method: str, goodput: bool, known) -> list[str]:
    """The notes of weights that had nothing to weigh: ``known(cost name)`` says whether any feasible candidate has a
    value for it (``costs``' names; under value ppl is the quantization cost, latency the goodput of a serve
    workload)."""
    field = {"ppl": "quant_points", "latency": "goodput" if goodput else "latency"} if method == "value" else {}
    return [f"no candidate has a value for '{crit}': its weight ({w:.2f}) did not affect the ranking"
            for crit, w in weights.items() if w and not known(field.get(crit, crit))]
