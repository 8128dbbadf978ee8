"""Layer 1, the leaves: records that cross a boundary, units, errors, paths, name matching, engine names, the
workload presets and the GGUF header reader. Imports nothing else of the project; every other layer (and evaluators/) may import it."""

from recommender.core.errors import UserError
from recommender.core.records import JSON_SCHEMA_VERSION, Figure, HardwareProfile, Measurement, ModelSpec, Workload

__all__ = ["JSON_SCHEMA_VERSION", "Figure", "HardwareProfile", "Measurement", "ModelSpec", "UserError", "Workload"]
