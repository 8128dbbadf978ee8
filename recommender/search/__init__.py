"""Layer 8, searching the space: tune (Optuna over configurations, predicted or measured per trial) and
sensitivity (how much the ranking hangs on the weights)."""

from recommender.search.sensitivity import sensitivity
from recommender.search.tune import run_tune

__all__ = ["run_tune", "sensitivity"]
