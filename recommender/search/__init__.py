"""Layer 6, searching and reporting on the space: tune (Optuna over configurations, predicted or measured per trial),
sensitivity (how much the ranking hangs on the weights) and report (the data of `recommend --report`). The package
face names its modules without importing them: `recommend --report` needs report and sensitivity, not tune."""

__all__ = ["report", "sensitivity", "tune"]
