"""From scored candidates to a ranking: the score of each feasible candidate (weighted.py), the order (score, then
latency, model, quant, engine), one or a few configurations per model, and the strongest excluded candidates.

Pure functions over candidate records (recommender.rank.candidates.Candidate: any object with the fields used here).
"""

from __future__ import annotations

from typing import Optional

from recommender.score.weighted import score_rows

STRONGEST_EXCLUDED = 5  # excluded candidates shown with --explain, one per model
# Scores are rounded to this many decimals before sorting: closer ones tie and are ordered by latency (order_key).
SCORE_DECIMALS = 6


def costs(c) -> dict[str, Optional[float]]:
    """The criteria of one candidate as costs (lower is better): latency, memory, perplexity ratio, 100 - accuracy."""
    return {
        "latency": c.latency_ms,
        "vram": float(c.total_vram_bytes),
        "ppl": c.ppl_ratio,
        "zh": None if c.zh_accuracy is None else 100.0 - c.zh_accuracy,
        "en": None if c.en_accuracy is None else 100.0 - c.en_accuracy,
    }


def apply_scores(cands: list, q) -> None:
    scored = score_rows([costs(c) for c in cands], q.weights, q.normalization, q.missing)
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


def order_key(score: Optional[float], c) -> tuple:
    """Ranking order: (rounded) score, then latency, model, quant, engine."""
    return (score, c.latency_ms if c.latency_ms is not None else float("inf"), c.model, c.quant, c.engine)


def rank(cands: list, q) -> tuple[list, list, list]:
    """(ranked, strongest excluded, feasible) of a query's candidates: the feasible ones scored, ordered and
    de-duplicated to q.top; the best-scoring excluded ones (everything scored together, as if there were no limits),
    one per model, so --explain shows what the limits cost."""
    feasible = [c for c in cands if not c.excluded]
    apply_scores(feasible, q)
    feasible.sort(key=lambda c: order_key(c.score, c))
    ranked = dedupe(feasible, q.per_model)[: q.top]
    for i, c in enumerate(ranked, 1):
        c.rank = i
    strongest: list = []
    if len(feasible) < len(cands):
        scored = score_rows([costs(c) for c in cands], q.weights, q.normalization, q.missing)
        pool = sorted(((s, i) for i, (s, _) in enumerate(scored) if cands[i].excluded),
                      key=lambda si: (si[0], cands[si[1]].model, si[1]))
        seen: set[str] = set()
        for s, i in pool:
            if cands[i].model not in seen and len(strongest) < STRONGEST_EXCLUDED:
                seen.add(cands[i].model)
                strongest.append(cands[i].model_copy(update={
                    "score": round(s, SCORE_DECIMALS),
                    "score_parts": {k: round(v, SCORE_DECIMALS) for k, v in scored[i][1].items()}}))
    return ranked, strongest, feasible


def answer_notes(cands: list, feasible: list, ranked: list, weights: dict[str, float]) -> list[str]:
    """What the user should know about the answer: weights that had nothing to weigh, and why nothing fits."""
    notes = []
    for crit, w in weights.items():
        if w and feasible and all(v is None for v in (costs(c)[crit] for c in feasible)):
            notes.append(f"no candidate has a value for '{crit}': its weight ({w:.2f}) did not affect the ranking")
    if not ranked:
        notes += no_fit_notes([c for c in cands if c.excluded])
    return notes


def no_fit_notes(infeasible: list) -> list[str]:
    """The notes for a question nothing fits."""
    notes = ["no candidate satisfies the constraints"]
    if any("unknown" in r for c in infeasible for r in c.excluded):
        notes.append("some candidates have an unknown latency on this GPU profile (no sourced peak FLOP/s): "
                     "try --latency-metric tpot, or plan for a profile with that figure")
    return notes
