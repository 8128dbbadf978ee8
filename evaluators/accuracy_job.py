"""The records an accuracy probe passes between the parent (recommender.probes.accuracy) and the child
(evaluators.accuracy_worker): every figure the child needs comes in the job."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import Field

from evaluators.base import _Strict

VLLM_ACCURACY_SEQS = 4  # sequences vLLM scores at once (the 4 options of a multiple-choice item)


class AccuracyJob(_Strict):
    engine: str  # llama.cpp | hf | vllm
    model_path: str
    tasks: dict[str, str] = Field(default_factory=dict)  # task -> item file
    shots: int = 0
    n_ctx: int = 4096
    threads: Optional[int] = None
    gpu_layers: int = -1
    dtype: str = "auto"
    device: Optional[str] = None  # hf backend: None = the GPU when torch sees one, else the CPU
    trust_remote_code: bool = False
    ppl_texts: dict[str, str] = Field(default_factory=dict)  # language -> text file
    kl_reference: Optional[str] = None  # a GGUF of the same model (llama.cpp only)
    fewshot_files: dict[str, str] = Field(default_factory=dict)  # task -> its dev file (few-shot examples)
    vllm_kv_cache_bytes: Optional[int] = None  # vLLM: the KV cache to allocate (the parent sizes it)


class AccuracyResult(_Strict):
    status: str
    failure_reason: Optional[str] = None
    engine: dict[str, Any] = Field(default_factory=dict)
    records: dict[str, list[dict]] = Field(default_factory=dict)
    ppl: dict[str, dict] = Field(default_factory=dict)  # language -> tokens, bytes, nll_nats (+ kl)
    wall_s: float = 0.0
    peak_rss_bytes: Optional[int] = None
