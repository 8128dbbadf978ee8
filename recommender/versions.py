"""The labels of every figure and score a user sees (tests/e2e/test_golden.py reads them): a changed figure or ranking
needs a changed label. ``formula`` and ``calibration`` label the predicted figures (recommender.predict); ``score``
labels the score and the order (recommender.score) and the quality figures the ranking reads; ``engines`` the set of
planned engines (recommender.core.engines: a new engine adds candidates)."""

from recommender.core.engines import ENGINES_VERSION
from recommender.predict import versions as _predict_versions
from recommender.score.weighted import SCORE_VERSION


def versions() -> dict[str, str]:
    return {**_predict_versions(), "score": SCORE_VERSION, "engines": ENGINES_VERSION}
