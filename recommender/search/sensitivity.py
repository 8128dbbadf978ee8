"""How much the ranking depends on the weights (seed 003 §4.4: weight perturbation in 5 % steps, min-max vs z-score).

The candidates are enumerated and estimated once (the expensive part); each weight vector only re-scores them.
Definitions (docs/sensitivity.md):

- Perturbation of criterion i: w_i' = w_i + k * step for k = -K..K, k != 0, K = floor(span / step), keeping only
  0 <= w_i' <= 1. The other weights keep their proportions and are rescaled to sum to 1 - w_i':
  w_j' = w_j * (1 - w_i') / (1 - w_i). When the others are all zero (w_i = 1), 1 - w_i' is split equally among them.
- The base ranking: the query's ranking at the base weights, as `recommend` makes it (scores rounded to
  SCORE_DECIMALS, ties ordered by latency, de-duplicated per model, first --top entries). Each entry is a slot
  "model M's j-th best configuration" (j = 1 with --per-model 1): under other weights the slot's score is that of
  whichever configuration of M is then j-th best. Kendall's tau-b compares the entries' base scores with their
  scores under the perturbed weights (ties count as ties).
- The top pick: the best feasible configuration (model, quant, engine, batch, context). Top-1 flip rate: the share
  of perturbed weight vectors whose top pick differs from the base top pick.
- Stability interval of w_i: the values of w_i (others rescaled as above) for which the base top pick stays the best.
  Normalized costs do not depend on the weights, so along that line each candidate's score is linear in w_i and
  the interval is found exactly, from the crossing points of those lines with the top pick's.
"""

from __future__ import annotations

import math
from typing import Literal, Optional, Sequence


from recommender.core.collector import collector_paused
from recommender.core.errors import UserError
from recommender.core.records import CatalogReader, Strict
from recommender.rank.candidates import Candidate, CandidateBuilder, candidate_keys
from recommender.rank.query import Query
from recommender.score.order import (QUALITY_COLUMNS, SCORE_DECIMALS, choose_batches_arrays, cost_columns,
                                     no_fit_notes, order_arrays, quality_values, value_scale)
from recommender.score.weighted import CRITERIA, NORMALIZATIONS, normalize_array, value_u_array

DEFAULT_STEP = 0.05  # seed 003 §4.4: "±5 % steps"
DEFAULT_SPAN = 0.20  # farthest perturbation each way: 4 steps of 0.05, from about dropping a default weight to
#                      nearly doubling it (this project's choice)
_SLOPE_EPS = 1e-12  # score slopes closer than this are parallel (no crossing)


class Pick(Strict):
    model: str
    quant: str
    engine: str
    batch: int
    context_tokens: int
    score: float  # under the weights the pick was made with


class Point(Strict):
    """One perturbed weight vector."""

    weight: float  # the perturbed criterion's new weight
    delta: float  # weight - base weight
    weights: dict[str, float]  # the whole vector (sums to 1)
    tau: Optional[float]  # Kendall tau-b against the base ranking; None with fewer than 2 entries (or all tied)
    top: Pick
    top_changed: bool  # another configuration is best
    top_model_changed: bool  # another model is best


class CriterionSensitivity(Strict):
    criterion: str
    base_weight: float
    stability_interval: tuple[float, float]  # [lo, hi] of this weight over which the base top pick stays best
    below: Optional[Pick]  # the pick that takes over just below lo (None when lo is 0)
    above: Optional[Pick]  # the pick that takes over just above hi (None when hi is 1)
    top_changes: int  # perturbed vectors (of this criterion) whose top pick differs
    points: list[Point]


class NormalizationSensitivity(Strict):
    normalization: Literal["value", "minmax", "zscore"]
    base_top: Pick
    base_ranking: list[Pick]  # the entries tau is computed over
    vectors: int  # perturbed weight vectors
    top1_flip_rate: Optional[float]  # share of vectors whose top configuration differs from base_top
    top1_model_flip_rate: Optional[float]  # share whose top model differs
    tau_mean: Optional[float]
    tau_min: Optional[float]
    criteria: list[CriterionSensitivity]


class NormalizationComparison(Strict):
    """The base rankings under the two normalizations (seed 003 §4.4: min-max vs z-score)."""

    tau: Optional[float]  # tau-b of min-max vs z-score scores over the min-max base ranking's entries
    same_top: bool
    same_top_model: bool


class Sensitivity(Strict):
    query: Query
    step: float
    span: float
    counts: dict[str, int]
    results: list[NormalizationSensitivity]
    comparison: Optional[NormalizationComparison] = None
    notes: list[str]


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> Optional[float]:
    """Kendall's tau-b of two paired sequences, ties handled (Knight's O(n log n) algorithm, as scipy computes it).

    tau_b = (n0 - n1 - n2 + n3 - 2 D) / sqrt((n0 - n1) (n0 - n2)): n0 = n(n-1)/2 pairs, n1 / n2 pairs tied in x / y,
    n3 tied in both, D discordant pairs. None when undefined (fewer than 2 items, or one side all tied)."""
    n = len(x)
    if n != len(y):
        raise ValueError("x and y differ in length")
    if n < 2:
        return None
    pairs = sorted(zip(x, y))
    n0 = n * (n - 1) // 2
    n1 = n3 = 0
    i = 0
    while i < n:
        j = i
        while j < n and pairs[j][0] == pairs[i][0]:
            j += 1
        n1 += (j - i) * (j - i - 1) // 2
        k = i
        while k < j:  # within an x-tie, y is sorted: runs of equal y are joint ties
            m = k
            while m < j and pairs[m][1] == pairs[k][1]:
                m += 1
            n3 += (m - k) * (m - k - 1) // 2
            k = m
        i = j
    ys = [p[1] for p in pairs]
    discordant = _count_inversions(ys)  # sorts ys
    n2 = 0
    i = 0
    while i < n:
        j = i
        while j < n and ys[j] == ys[i]:
            j += 1
        n2 += (j - i) * (j - i - 1) // 2
        i = j
    den = (n0 - n1) * (n0 - n2)
    if den <= 0:
        return None
    return (n0 - n1 - n2 + n3 - 2 * discordant) / math.sqrt(den)


def _count_inversions(a: list) -> int:
    """Pairs i < j with a[i] > a[j] (strictly), by bottom-up merge sort; sorts a in place."""
    n = len(a)
    inv = 0
    width = 1
    buf = list(a)
    while width < n:
        for lo in range(0, n, 2 * width):
            mid, hi = min(lo + width, n), min(lo + 2 * width, n)
            i, j, k = lo, mid, lo
            while i < mid and j < hi:
                if a[j] < a[i]:
                    buf[k] = a[j]
                    inv += mid - i
                    j += 1
                else:
                    buf[k] = a[i]
                    i += 1
                k += 1
            buf[k:hi] = a[i:mid] + a[j:hi]
        a[:] = buf
        width *= 2
    return inv


def perturbed(weights: dict[str, float], criterion: str, value: float) -> dict[str, float]:
    """The weight vector with `criterion` set to `value`, the others keeping their proportions (sum 1)."""
    rest = 1.0 - weights[criterion]
    others = [c for c in CRITERIA if c != criterion]
    out = {}
    for c in others:
        out[c] = weights[c] * (1.0 - value) / rest if rest > 0 else (1.0 - value) / len(others)
    out[criterion] = value
    return {c: out[c] for c in CRITERIA}


def grid(base: float, step: float, span: float) -> list[float]:
    """The perturbed values of one weight: base + k * step, 0 < |k| <= floor(span / step), within [0, 1]."""
    k_max = int(math.floor(span / step + 1e-9))
    out = []
    for k in range(-k_max, k_max + 1):
        v = round(base + k * step, 12)
        if k and -1e-12 <= v <= 1 + 1e-12:
            out.append(min(max(v, 0.0), 1.0))
    return out


class _Rows:
    """The feasible configurations as score.order.rank_arrays' columns (one element per configuration, NaN: no
    value) and each one's (model, quant, engine, batch, context_tokens)."""

    def __init__(self, cols: dict, names: list[tuple[str, str, str, int, int]]) -> None:
        self.cols, self.names = cols, names

    @classmethod
    def of_records(cls, cands: list) -> "_Rows":
        """The columns of candidate records (or rows): what score.order.costs and order_key read of each."""
        import numpy as np  # noqa: PLC0415

        def col(values) -> np.ndarray:
            return np.array([math.nan if v is None else v for v in values], dtype=float)

        def codes(values: list) -> np.ndarray:
            at = {v: j for j, v in enumerate(sorted(set(values)))}
            return np.array([at[v] for v in values], dtype=np.int64)

        qual = np.array([quality_values(c.figures) for c in cands], dtype=float).reshape(len(cands),
                                                                                       len(QUALITY_COLUMNS))
        cols = {name: qual[:, j] for j, name in enumerate(QUALITY_COLUMNS)}
        def fig(c, name: str) -> Optional[float]:  # a record without that figure (a test's): None
            try:
                return getattr(c, name)
            except KeyError:
                return None

        cols.update(latency=col(c.latency_ms for c in cands), ttft=col(fig(c, "ttft_ms") for c in cands),
                    tpot=col(fig(c, "tpot_ms") for c in cands), vram=col(float(c.total_vram_bytes) for c in cands),
                    goodput=col(getattr(c, "goodput_per_s", None) for c in cands),
                    model=codes([c.model for c in cands]), quant=codes([c.quant for c in cands]),
                    engine=codes([c.engine for c in cands]))
        return cls(cols, [(c.model, c.quant, c.engine, c.batch, c.context_tokens) for c in cands])


class _Scores:
    """One weight vector's scores: the raw sums, rounded to SCORE_DECIMALS where read (round is monotone, so the
    lowest rounded score is the rounded lowest raw one)."""

    def __init__(self, raw) -> None:
        self.raw = raw

    def __getitem__(self, i: int) -> float:
        return round(float(self.raw[i]), SCORE_DECIMALS)

    def rounded(self, idx=None) -> list[float]:
        vals = self.raw.tolist() if idx is None else self.raw[idx].tolist()
        return [round(v, SCORE_DECIMALS) for v in vals]


class _Ranker:
    """The feasible candidates' normalized costs under one normalization; re-scores them for any weights."""

    def __init__(self, rows: _Rows, normalization: str, missing: str, q: Optional[Query] = None) -> None:
        import numpy as np  # noqa: PLC0415

        self.rows = rows
        self.n = len(rows.names)
        costs = cost_columns(rows.cols, normalization)
        if normalization == "value":
            scale = value_scale(q) if q is not None else None
            if scale is None:
                raise ValueError("value normalization needs a ValueScale")
            self.cols = {c: value_u_array(scale, c, costs) for c in CRITERIA}
        else:
            self.cols = {c: normalize_array(costs[c], normalization, missing) for c in CRITERIA}
        # order_key after the score: the same for every weight vector, so each candidate's place in it, once
        order = order_arrays(rows.cols, np.arange(self.n), np.zeros(self.n))
        self.tie = np.empty(self.n, dtype=np.int64)
        self.tie[order] = np.arange(self.n)
        self._groups: dict[str, np.ndarray] = {}
        for i, name in enumerate(rows.names):
            self._groups.setdefault(name[0], []).append(i)
        self._groups = {m: np.array(v) for m, v in self._groups.items()}

    def raw(self, w: dict[str, float]):
        import numpy as np  # noqa: PLC0415

        # as score.score_rows sums them: 0 + w1 u1 + w2 u2 ..., element by element in the same order (exact)
        total = np.zeros(self.n)
        for k in CRITERIA:
            if w.get(k):
                total = total + w[k] * self.cols[k]
        return total

    def scores(self, w: dict[str, float]) -> _Scores:
        return _Scores(self.raw(w))

    def top(self, s: _Scores) -> int:
        """The index min(range(n), key=(rounded score, order_key's tie-breaks)) gives: the lowest rounded score,
        then the tie-breaks, then the first."""
        import numpy as np  # noqa: PLC0415

        if not self.n:
            raise ValueError("no candidates to rank")
        low_raw = float(s.raw.min())
        low = round(low_raw, SCORE_DECIMALS)
        near = np.flatnonzero(s.raw <= low_raw + 10 ** -SCORE_DECIMALS)  # every row that can round to `low`
        tying = [i for i, v in zip(near.tolist(), s.rounded(near)) if v == low]
        return min(tying, key=lambda i: self.tie[i])

    def ranking(self, s: _Scores, per_model: int, top: int) -> list[int]:
        import numpy as np  # noqa: PLC0415

        order = np.lexsort((self.tie, np.array(s.rounded())))
        seen: dict[str, int] = {}
        out: list[int] = []
        for i in order.tolist():  # score.order.dedupe, then the first `top`
            m = self.rows.names[i][0]
            k = seen.get(m, 0)
            if per_model <= 0 or k < per_model:
                out.append(i)
                seen[m] = k + 1
                if len(out) >= top:
                    break
        return out

    def slots(self, s: _Scores, items: list[int]) -> list[tuple[str, int]]:
        """Each ranked entry as (model, j): the model's j-th best configuration (j = 0 with --per-model 1)."""
        return [(self.rows.names[i][0], self._by_model(s, self.rows.names[i][0]).index(i)) for i in items]

    def slot_scores(self, s: _Scores, slots: list[tuple[str, int]]) -> list[float]:
        """The score of whichever configuration holds each slot under these scores."""
        seen: dict[str, list[int]] = {}
        out = []
        for m, j in slots:
            if m not in seen:
                seen[m] = self._by_model(s, m)
            out.append(s[seen[m][j]])
        return out

    def _by_model(self, s: _Scores, model: str) -> list[int]:
        rows = self._groups[model]
        keys = s.rounded(rows)
        return [int(i) for _k, _t, i in sorted(zip(keys, self.tie[rows].tolist(), rows.tolist()))]

    def pick(self, i: int, score: float) -> Pick:
        model, quant, engine, batch, ctx = self.rows.names[i]
        return Pick(model=model, quant=quant, engine=engine, batch=batch, context_tokens=ctx,
                    score=round(score, SCORE_DECIMALS))

    def stability(self, w: dict[str, float], criterion: str, best: int) -> tuple[float, float, Optional[int],
                                                                                 Optional[int]]:
        """[lo, hi] of w[criterion] where `best` stays the best, and who takes over below lo / above hi.

        Along w(t) = perturbed(w, criterion, t), score_c(t) = t * p_c + (1 - t) * r_c with p_c the candidate's
        normalized cost for the criterion and r_c its score under the other weights rescaled to sum 1. So
        d_c(t) = score_c(t) - score_best(t) = a + b t is linear and `best` loses to c where d_c < 0. The lines are
        computed as arrays; the crossings are then taken in the candidates' order, as one loop over them would."""
        import numpy as np  # noqa: PLC0415

        base = w[criterion]
        rest = 1.0 - base
        others = [k for k in CRITERIA if k != criterion]
        share = {k: (w[k] / rest if rest > 0 else 1.0 / len(others)) for k in others}
        p = self.cols[criterion]
        r = np.zeros(self.n)
        for k in others:  # sum(share[k] * cols[k][i] for k in others if share[k]), element by element
            if share[k]:
                r = r + share[k] * self.cols[k]
        a = r - r[best]
        b = (p - r) - (p[best] - r[best])
        d0 = a + b * base
        a = np.where(d0 < 0, a - d0, a)  # ahead by less than the score rounding: `best` won the tie-break
        steep = np.abs(b) > _SLOPE_EPS
        steep[best] = False
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(steep, -a / np.where(steep, b, 1.0), 0.0)
        lo, hi = 0.0, 1.0
        below: list[tuple[float, int]] = []  # (slope, index) of the candidates crossing at lo
        above: list[tuple[float, int]] = []
        idx = np.flatnonzero(steep & (((b > 0) & (t > 0)) | ((b < 0) & (t < 1))))
        for c, bc, tc in zip(idx.tolist(), b[idx].tolist(), t[idx].tolist()):
            if bc > 0:  # c wins below t
                if tc > lo + 1e-12:
                    lo, below = tc, [(bc, c)]
                elif abs(tc - lo) <= 1e-12:
                    below.append((bc, c))
            else:  # c wins above t
                if tc < hi - 1e-12:
                    hi, above = tc, [(bc, c)]
                elif abs(tc - hi) <= 1e-12:
                    above.append((bc, c))
        lo, hi = min(lo, base), max(hi, base)

        # just past the bound, the steepest crossing line is lowest; equal slopes go by the ranking's tie-break
        def taker(crossing: list[tuple[float, int]], sign: int) -> Optional[int]:
            if not crossing:
                return None
            return min(crossing, key=lambda bc: (-sign * bc[0], self.tie[bc[1]]))[1]

        return lo, hi, taker(below, 1), taker(above, -1)


def analyse(feasible: list[Candidate], q: Query, step: float = DEFAULT_STEP, span: float = DEFAULT_SPAN,
            normalizations: Sequence[str] = NORMALIZATIONS) -> tuple[list[NormalizationSensitivity],
                                                                      Optional[NormalizationComparison]]:
    """Sensitivity of the ranking of these (feasible) candidates to q.weights, per normalization."""
    return _analyse(_Rows.of_records(feasible), q, step, span, normalizations)


def _analyse(rows: _Rows, q: Query, step: float, span: float, normalizations: Sequence[str]) -> tuple[
        list[NormalizationSensitivity], Optional[NormalizationComparison]]:
    """analyse() of the feasible candidates as columns (_Rows)."""
    check_grid(step, span)
    results = []
    base_scores: dict[str, _Scores] = {}
    rankers: dict[str, _Ranker] = {}
    for norm in normalizations:
        rk = _Ranker(rows, norm, q.missing, q)
        rankers[norm] = rk
        s0 = rk.scores(q.weights)
        base_scores[norm] = s0
        top0 = rk.top(s0)
        items = rk.ranking(s0, q.per_model, q.top)
        slots = rk.slots(s0, items)
        x = rk.slot_scores(s0, slots)
        criteria = []
        all_points: list[Point] = []
        for crit in CRITERIA:
            points = []
            for v in grid(q.weights[crit], step, span):
                wv = perturbed(q.weights, crit, v)
                s = rk.scores(wv)
                t = rk.top(s)
                tau = kendall_tau_b(x, rk.slot_scores(s, slots))
                points.append(Point(weight=round(v, 6), delta=round(v - q.weights[crit], 6),
                                    weights={k: round(val, 6) for k, val in wv.items()},
                                    tau=None if tau is None else round(tau, 4), top=rk.pick(t, s[t]),
                                    top_changed=t != top0,
                                    top_model_changed=rows.names[t][0] != rows.names[top0][0]))
            lo, hi, below, above = rk.stability(q.weights, crit, top0)
            criteria.append(CriterionSensitivity(
                criterion=crit, base_weight=round(q.weights[crit], 6),
                stability_interval=(round(lo, 6), round(hi, 6)),
                below=None if below is None else _pick_at(rk, q.weights, crit, lo, below),
                above=None if above is None else _pick_at(rk, q.weights, crit, hi, above),
                top_changes=sum(p.top_changed for p in points), points=points))
            all_points += points
        taus = [p.tau for p in all_points if p.tau is not None]
        n = len(all_points)
        results.append(NormalizationSensitivity(
            normalization=norm, base_top=rk.pick(top0, s0[top0]), base_ranking=[rk.pick(i, s0[i]) for i in items],
            vectors=n, top1_flip_rate=round(sum(p.top_changed for p in all_points) / n, 4) if n else None,
            top1_model_flip_rate=round(sum(p.top_model_changed for p in all_points) / n, 4) if n else None,
            tau_mean=round(sum(taus) / len(taus), 4) if taus else None, tau_min=min(taus) if taus else None,
            criteria=criteria))
    comparison = None
    if len(results) == 2:
        a, b = results
        ra, rb = rankers[a.normalization], rankers[b.normalization]
        sa, sb = base_scores[a.normalization], base_scores[b.normalization]
        slots = ra.slots(sa, ra.ranking(sa, q.per_model, q.top))
        tau = kendall_tau_b(ra.slot_scores(sa, slots), rb.slot_scores(sb, slots))
        comparison = NormalizationComparison(
            tau=None if tau is None else round(tau, 4),
            same_top=(a.base_top.model, a.base_top.quant, a.base_top.engine, a.base_top.batch,
                      a.base_top.context_tokens) == (b.base_top.model, b.base_top.quant, b.base_top.engine,
                                                     b.base_top.batch, b.base_top.context_tokens),
            same_top_model=a.base_top.model == b.base_top.model)
    return results, comparison


def _pick_at(rk: _Ranker, w: dict[str, float], crit: str, value: float, i: int) -> Pick:
    return rk.pick(i, float(rk.raw(perturbed(w, crit, value))[i]))


def check_grid(step: float, span: float) -> None:
    if not (isinstance(step, (int, float)) and math.isfinite(step) and 0 < step <= 1):
        raise UserError(f"--step {step} must be a number in (0, 1]", hint="a weight step, e.g. --step 0.05 (5 %)")
    if not (isinstance(span, (int, float)) and math.isfinite(span) and step <= span <= 1):
        raise UserError(f"--span {span} must lie between --step ({step}) and 1",
                        hint="the farthest perturbation each way, in weight units, e.g. --span 0.2")


def sensitivity(catalog: CatalogReader, q: Query, step: float = DEFAULT_STEP, span: float = DEFAULT_SPAN,
                normalizations: Sequence[str] = NORMALIZATIONS) -> Sensitivity:
    """Enumerate and estimate the query's candidates once, then analyse the feasible ones (the cyclic collector
    paused meanwhile, as recommend pauses it: recommender.core.collector)."""
    with collector_paused():
        return _sensitivity(catalog, q, step, span, normalizations)


def _sensitivity(catalog: CatalogReader, q: Query, step: float, span: float,
                 normalizations: Sequence[str]) -> Sensitivity:
    import numpy as np  # noqa: PLC0415

    check_grid(step, span)
    builder = CandidateBuilder(catalog, q)
    keys = candidate_keys(q, builder)
    table = builder.table(keys)  # numbers only (the vectorized Predictor): the analysis needs no record
    table.fill(np.flatnonzero(~table.vectorized))  # the keys built one by one: whether a limit excludes them
    cols = table.columns()
    feasible = np.flatnonzero(~cols["blocked"])
    table.fill(feasible)  # the quality figures of the rows analysed (an excluded row's are never read)
    if q.workload.rank_by == "goodput":  # the batch each configuration serves at, as recommend chooses it
        feasible = choose_batches_arrays(cols, feasible)
    infeasible = np.flatnonzero(cols["blocked"]).tolist()
    counts = {"candidates": len(keys), "feasible": len(feasible), "excluded": len(infeasible),
              "models": len({k.model for k in keys})}
    notes = []
    if not len(feasible):
        return Sensitivity(query=q, step=step, span=span, counts=counts, results=[],
                           notes=no_fit_notes([table.row(i) for i in infeasible]))
    method = normalizations[0] if normalizations else "minmax"
    field = {"ppl": "quant_points", "latency": "goodput" if q.workload.rank_by == "goodput" else "latency"} \
        if method == "value" else {}
    costs = cost_columns(cols, method)
    for crit in CRITERIA:
        if np.isnan(costs[field.get(crit, crit)][feasible]).all():
            notes.append(f"no candidate has a value for '{crit}': changing its weight cannot change the ranking")
    rows = _Rows({k: v[feasible] for k, v in cols.items()},
                 [(k.model, k.quant, k.engine, k.batch, k.context_tokens) for k in (keys[i] for i in feasible)])
    results, comparison = _analyse(rows, q, step, span, normalizations)
    return Sensitivity(query=q, step=step, span=span, counts=counts, results=results, comparison=comparison,
                       notes=notes)
