"""Layer 4, the answer: a query (query), candidates with their predictions and quality (candidates, quality), the
weighted score (score) and the ranking (recommend)."""

from recommender.rank.candidates import Candidate, CandidateBuilder, enumerate_candidates
from recommender.rank.query import Query
from recommender.rank.recommend import Recommendation, recommend

__all__ = ["Candidate", "CandidateBuilder", "Query", "Recommendation", "enumerate_candidates", "recommend"]
