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


from recommender.core.errors import UserError
from recommender.core.records import CatalogReader, Strict
from recommender.rank.candidates import Candidate, enumerate_candidates
from recommender.rank.query import Query
from recommender.score.order import (SCORE_DECIMALS, choose_batches, costs as _costs, dedupe as _dedupe, is_excluded,
                                     no_fit_notes, order_key, value_scale)
from recommender.score.weighted import CRITERIA, NORMALIZATIONS, columns_for

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


class _Ranker:
    """The feasible candidates' normalized costs under one normalization; re-scores them for any weights."""

    def __init__(self, cands: list[Candidate], normalization: str, missing: str, q: Optional[Query] = None) -> None:
        costs = [_costs(c, normalization) for c in cands]
        self.cands = cands
        scale = value_scale(q) if normalization == "value" and q is not None else None
        self.cols = columns_for(costs, CRITERIA, normalization, missing, scale)
        self.n = len(cands)
        self._arrays: dict[str, object] = {}  # numpy copies of cols, made on first use by raw()
        # order_key after the score: the same for every weight vector, so computed once per candidate
        self.ties = [order_key(0.0, c)[1:] for c in cands]

    def raw(self, w: dict[str, float]) -> list[float]:
        import numpy as np  # noqa: PLC0415

        # as score.score_rows sums them: 0 + w1 u1 + w2 u2 ..., element by element in the same order (exact)
        total = np.zeros(self.n)
        for k in CRITERIA:
            if w.get(k):
                if k not in self._arrays:
                    self._arrays[k] = np.asarray(self.cols[k], dtype=float)
                total = total + w[k] * self._arrays[k]
        return total.tolist()

    def scores(self, w: dict[str, float]) -> list[float]:
        return [round(s, SCORE_DECIMALS) for s in self.raw(w)]

    def key(self, s: list[float], i: int) -> tuple:
        return (s[i], *self.ties[i])

    def top(self, s: list[float]) -> int:
        """The index min(range(n), key=key) gives: the lowest score, then the tie-breaks, then the first."""
        if not self.n:
            raise ValueError("no candidates to rank")
        low = min(s)
        return min((i for i in range(self.n) if s[i] == low), key=lambda i: self.ties[i])

    def ranking(self, s: list[float], per_model: int, top: int) -> list[int]:
        order = sorted(range(self.n), key=lambda i: self.key(s, i))
        index = {id(self.cands[i]): i for i in order}
        return [index[id(c)] for c in _dedupe([self.cands[i] for i in order], per_model)[:top]]

    def slots(self, s: list[float], items: list[int]) -> list[tuple[str, int]]:
        """Each ranked entry as (model, j): the model's j-th best configuration (j = 0 with --per-model 1)."""
        return [(self.cands[i].model, self._by_model(s, self.cands[i].model).index(i)) for i in items]

    def slot_scores(self, s: list[float], slots: list[tuple[str, int]]) -> list[float]:
        """The score of whichever configuration holds each slot under these scores."""
        return [s[self._by_model(s, m)[j]] for m, j in slots]

    def _by_model(self, s: list[float], model: str) -> list[int]:
        if not hasattr(self, "_groups"):
            self._groups: dict[str, list[int]] = {}
            for i, c in enumerate(self.cands):
                self._groups.setdefault(c.model, []).append(i)
        return sorted(self._groups[model], key=lambda i: self.key(s, i))

    def pick(self, i: int, score: float) -> Pick:
        c = self.cands[i]
        return Pick(model=c.model, quant=c.quant, engine=c.engine, batch=c.batch, context_tokens=c.context_tokens,
                    score=round(score, SCORE_DECIMALS))

    def stability(self, w: dict[str, float], criterion: str, best: int) -> tuple[float, float, Optional[int],
                                                                                 Optional[int]]:
        """[lo, hi] of w[criterion] where `best` stays the best, and who takes over below lo / above hi.

        Along w(t) = perturbed(w, criterion, t), score_c(t) = t * p_c + (1 - t) * r_c with p_c the candidate's
        normalized cost for the criterion and r_c its score under the other weights rescaled to sum 1. So
        d_c(t) = score_c(t) - score_best(t) = a + b t is linear and `best` loses to c where d_c < 0."""
        base = w[criterion]
        rest = 1.0 - base
        others = [k for k in CRITERIA if k != criterion]
        share = {k: (w[k] / rest if rest > 0 else 1.0 / len(others)) for k in others}
        p = self.cols[criterion]
        r = [sum(share[k] * self.cols[k][i] for k in others if share[k]) for i in range(self.n)]
        lo, hi = 0.0, 1.0
        below: list[tuple[float, int]] = []  # (slope, index) of the candidates crossing at lo
        above: list[tuple[float, int]] = []
        for c in range(self.n):
            if c == best:
                continue
            a = r[c] - r[best]
            b = (p[c] - r[c]) - (p[best] - r[best])
            d0 = a + b * base
            if d0 < 0:  # ahead by less than the score rounding: `best` won the tie-break; it holds at `base`
                a -= d0
            if abs(b) <= _SLOPE_EPS:
                continue
            t = -a / b
            if b > 0 and t > 0:  # c wins below t
                if t > lo + 1e-12:
                    lo, below = t, [(b, c)]
                elif abs(t - lo) <= 1e-12:
                    below.append((b, c))
            elif b < 0 and t < 1:  # c wins above t
                if t < hi - 1e-12:
                    hi, above = t, [(b, c)]
                elif abs(t - hi) <= 1e-12:
                    above.append((b, c))
        lo, hi = min(lo, base), max(hi, base)

        # just past the bound, the steepest crossing line is lowest; equal slopes go by the ranking's tie-break
        def taker(crossing: list[tuple[float, int]], sign: int) -> Optional[int]:
            if not crossing:
                return None
            return min(crossing, key=lambda bc: (-sign * bc[0], order_key(0.0, self.cands[bc[1]])[1:]))[1]

        return lo, hi, taker(below, 1), taker(above, -1)


def analyse(feasible: list[Candidate], q: Query, step: float = DEFAULT_STEP, span: float = DEFAULT_SPAN,
            normalizations: Sequence[str] = NORMALIZATIONS) -> tuple[list[NormalizationSensitivity],
                                                                      Optional[NormalizationComparison]]:
    """Sensitivity of the ranking of these (feasible) candidates to q.weights, per normalization."""
    check_grid(step, span)
    results = []
    base_scores: dict[str, list[float]] = {}
    rankers: dict[str, _Ranker] = {}
    for norm in normalizations:
        rk = _Ranker(feasible, norm, q.missing, q)
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
                                    top_model_changed=feasible[t].model != feasible[top0].model))
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
    return rk.pick(i, rk.raw(perturbed(w, crit, value))[i])


def check_grid(step: float, span: float) -> None:
    if not (isinstance(step, (int, float)) and math.isfinite(step) and 0 < step <= 1):
        raise UserError(f"--step {step} must be a number in (0, 1]", hint="a weight step, e.g. --step 0.05 (5 %)")
    if not (isinstance(span, (int, float)) and math.isfinite(span) and step <= span <= 1):
        raise UserError(f"--span {span} must lie between --step ({step}) and 1",
                        hint="the farthest perturbation each way, in weight units, e.g. --span 0.2")


def sensitivity(catalog: CatalogReader, q: Query, step: float = DEFAULT_STEP, span: float = DEFAULT_SPAN,
                normalizations: Sequence[str] = NORMALIZATIONS) -> Sensitivity:
    """Enumerate and estimate the query's candidates once, then analyse the feasible ones."""
    check_grid(step, span)
    cands = enumerate_candidates(catalog, q, rows=True)  # numbers only: the analysis needs no record
    feasible = [c for c in cands if not is_excluded(c)]
    if q.workload.rank_by == "goodput":  # the batch each configuration serves at, as recommend chooses it
        feasible = choose_batches(feasible)
    infeasible = [c for c in cands if is_excluded(c)]
    counts = {"candidates": len(cands), "feasible": len(feasible), "excluded": len(infeasible),
              "models": len({c.model for c in cands})}
    notes = []
    if not feasible:
        return Sensitivity(query=q, step=step, span=span, counts=counts, results=[], notes=no_fit_notes(infeasible))
    method = normalizations[0] if normalizations else "minmax"
    field = {"ppl": "quant_points", "latency": "goodput" if q.workload.rank_by == "goodput" else "latency"} \
        if method == "value" else {}
    for crit in CRITERIA:
        if all(_costs(c, method)[field.get(crit, crit)] is None for c in feasible):
            notes.append(f"no candidate has a value for '{crit}': changing its weight cannot change the ranking")
    results, comparison = analyse(feasible, q, step, span, normalizations)
    return Sensitivity(query=q, step=step, span=span, counts=counts, results=results, comparison=comparison,
                       notes=notes)
