"""Layer 2, the brief's weighted score, pure functions: weights, normalization and the weighted cost (weighted), and
from scored candidates to a ranking (order). Imports only recommender.core."""

from recommender.score.order import SCORE_DECIMALS, costs, dedupe, no_fit_notes, order_key, rank
from recommender.score.weighted import CRITERIA, DEFAULT_WEIGHTS, normalize, parse_weights, score_rows

__all__ = ["CRITERIA", "DEFAULT_WEIGHTS", "SCORE_DECIMALS", "costs", "dedupe", "no_fit_notes", "normalize",
           "order_key", "parse_weights", "rank", "score_rows"]
