"""Engine names the planner knows. The probe adapters (evaluators/) register under the same names."""

from __future__ import annotations


from recommender.core.fuzzy import resolve

ENGINES = ("llama.cpp", "vllm", "transformers")
ENGINE_ALIASES = {"llamacpp": "llama.cpp", "llama-cpp": "llama.cpp", "llama_cpp": "llama.cpp", "gguf": "llama.cpp",
                  "hf": "transformers", "huggingface": "transformers", "vLLM": "vllm"}


def resolve_engine(name: str) -> str:
    return resolve(name, ENGINES, "engine", aliases=ENGINE_ALIASES, hint_cmd=f"engines: {', '.join(ENGINES)}")
