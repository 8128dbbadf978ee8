"""Layer 2, what a model is: its architecture from config.json or a GGUF header (arch) and its weights tensor by
tensor in every quantization (quant)."""

from recommender.model.arch import spec_from_config, spec_from_gguf
from recommender.model.quant import QUANTS, resolve_quant, weights_breakdown

__all__ = ["QUANTS", "resolve_quant", "spec_from_config", "spec_from_gguf", "weights_breakdown"]
