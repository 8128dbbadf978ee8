"""llm-recommender: which open LLM, quantization, engine, batch and context to run on a machine."""

__version__ = "0.1.0"
