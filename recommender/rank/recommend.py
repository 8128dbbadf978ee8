"""Candidates (model x quant x engine x batch x context) -> predictions -> hard constraints -> score -> ranking."""

from __future__ import annotations


from pydantic import Field

from recommender.core.records import CatalogReader, Strict
from recommender.rank.candidates import Candidate, CandidateBuilder, enumerate_candidates
from recommender.rank.query import Query
from recommender.score.order import answer_notes, rank


class Recommendation(Strict):
    query: Query
    candidates: list[Candidate]
    excluded: list[Candidate]  # strongest excluded candidates, with reasons
    counts: dict[str, int]
    notes: list[str] = Field(default_factory=list)


def recommend(catalog: CatalogReader, q: Query) -> Recommendation:
    """The answer to one query: candidates predicted, limits applied, the feasible ones scored and ranked."""
    builder = CandidateBuilder(catalog, q)
    cands = enumerate_candidates(catalog, q, builder)
    ranked, strongest, feasible = rank(cands, q)
    notes = []
    if builder.predictor.stale:
        notes.append(f"{builder.predictor.stale} stored calibration(s) come from another version and were ignored: "
                     f"rerun `recommender calibrate` on that machine")
    notes += answer_notes(cands, feasible, ranked, q.weights, q.normalization, q.workload.rank_by == "goodput")
    return Recommendation(query=q, candidates=ranked, excluded=strongest,
                          counts={"candidates": len(cands), "feasible": len(feasible),
                                  "excluded": len(cands) - len(feasible), "models": len({c.model for c in cands})},
                          notes=notes)
