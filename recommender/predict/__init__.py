"""Layer 3, the figures: analytical terms (analytical, constants), calibrated terms (calibrated; fitted by fit) and
the Predictor (predictor), the only place that applies analytical -> calibrated -> measured."""

from recommender.predict.calibrated import CALIBRATION_VERSION
from recommender.predict.constants import ESTIMATE_FORMULA_VERSION
from recommender.predict.predictor import Config, Prediction, Predictor
from recommender.predict.serving import SERVE_MODEL_VERSION


def versions() -> dict[str, str]:
    """The labels of the figures: a changed figure needs a changed label (tests/e2e/test_golden.py)."""
    return {"formula": ESTIMATE_FORMULA_VERSION, "calibration": CALIBRATION_VERSION, "serve": SERVE_MODEL_VERSION}


__all__ = ["CALIBRATION_VERSION", "ESTIMATE_FORMULA_VERSION", "SERVE_MODEL_VERSION", "Config", "Prediction", "Predictor",
           "versions"]
