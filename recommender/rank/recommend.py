"""Candidates (model x quant x engine x batch x context) -> predictions -> hard constraints -> score -> ranking."""

from __future__ import annotations

import gc


from pydantic import Field

from recommender.core.records import CatalogReader, Strict
from recommender.rank.candidates import Candidate, CandidateBuilder, enumerate_candidates, skips_base
from recommender.rank.query import Query
from recommender.score.order import answer_notes, rank


class Recommendation(Strict):
    query: Query
    candidates: list[Candidate]
    excluded: list[Candidate]  # strongest excluded candidates, with reasons
    counts: dict[str, int]
    notes: list[str] = Field(default_factory=list)


def recommend(catalog: CatalogReader, q: Query) -> Recommendation:
    """The answer to one query: candidates predicted, limits applied, the feasible ones scored and ranked.

    Python's cyclic garbage collector is paused meanwhile: the ~10,000 candidate records are freed by reference
    counting as usual, and its full passes over them (they all stay alive until ranked) took about a quarter of the
    time."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _recommend(catalog, q)
    finally:
        if was_enabled:
            gc.enable()


def _recommend(catalog: CatalogReader, q: Query) -> Recommendation:
    builder = CandidateBuilder(catalog, q)
    # memory first: a configuration above the budget is excluded before its latency is computed; rank builds it in
    # full only where it could be shown (the strongest excluded). The answer is the full enumeration's.
    cands = enumerate_candidates(catalog, q, builder, screen=True)
    ranked, strongest, feasible = rank(cands, q)
    if not ranked:  # nothing fits: the notes read every exclusion's reasons (an unknown latency among them)
        cands = [c.full() if getattr(c, "deferred", False) else c for c in cands]
    notes = []
    if builder.predictor.stale:
        notes.append(f"{builder.predictor.stale} stored calibration(s) come from another version and were ignored: "
                     f"rerun `recommender calibrate` on that machine")
    notes += answer_notes(cands, feasible, ranked, q.weights, q.normalization, q.workload.rank_by == "goodput")
    base = [m for m, spec in builder.models.items() if not builder.wanted and skips_base(q, spec, builder.wanted)]
    if base:
        notes.append(f"{len(base)} base (not chat-tuned) or classifier checkpoint(s) not ranked for the {q.workload.name} workload: "
                     f"add --include-base, or name one with --model")
    if q.normalization == "value" and ranked:
        top = ranked[0].figures["task_accuracy"]
        notes.append(f"task accuracy = {' + '.join(q.workload.accuracy_tasks)} (en: Open LLM Leaderboard v2 scale, "
                     f"zh: C-Eval %), in points; docs/scoring.md")
        if top.provenance == "estimated":
            iv = f", 95 % interval {top.interval[0]:.1f}-{top.interval[1]:.1f}" if top.interval else ""
            notes.append(f"the top pick's task accuracy is estimated ({top.value:.1f}{iv}): measure it with "
                         f"`recommender probe accuracy`")
    return Recommendation(query=q, candidates=ranked, excluded=strongest,
                          counts={"candidates": len(cands), "feasible": len(feasible),
                                  "excluded": len(cands) - len(feasible), "models": len({c.model for c in cands})},
                          notes=notes)
