"""Hugging Face transformers' planning rules (eager ``generate``): its activations, its host-bound step time and the
full-head MLA cache of its eager attention. One GPU only (no multi-GPU plan is modelled)."""

from __future__ import annotations

from recommender.core.records import HardwareProfile, ModelSpec
from recommender.predict import constants as C
from recommender.predict.constants import Const
from recommender.predict.counts import minimum, window_or, kv_elements_per_token_per_layer, mlp_width
from recommender.predict.engines.base import EngineRules

# --- Decode (per generated token) -----------------------------------------------------------------------------
# time/token = bytes read / (bandwidth x efficiency) + per-token overhead (kernel launches, sampling, host work).
DECODE_BW_EFFICIENCY: dict[str, Const] = {
    "float": Const(0.6, "fraction of bandwidth", "assumption; eager decode is host-bound (see overhead)"),
    "awq": Const(0.3, "fraction of bandwidth", "assumption; to be fitted by calibration"),
    "gptq": Const(0.3, "fraction of bandwidth", "assumption; to be fitted by calibration"),
    "fp8": Const(0.3, "fraction of bandwidth", "assumption; to be fitted by calibration"),
}
DECODE_OVERHEAD_MS = Const(70.0, "ms/token", "shared/notes/engines.md: eager generate on the H200 is host-bound, "
                                             "TPOT 60-80 ms per step for 0.5B-8B models at batch 1")

# --- Prefill ----------------------------------------------------------------------------------------------------
PREFILL_MFU: dict[str, Const] = {"*": Const(0.3, "fraction of FP16 peak", "assumption; to be fitted by calibration")}
PREFILL_OVERHEAD_MS = Const(70.0, "ms", "shared/notes/engines.md: one eager step costs 60-80 ms of host time")


class TransformersRules(EngineRules):
    name = "transformers"

    def kv_elements_per_token_per_layer(self, spec: ModelSpec) -> int:
        # transformers' eager cache stores full per-head K (nope+rope) and V of an MLA model, not the latent
        return kv_elements_per_token_per_layer(spec, mla_latent=False)

    def kv_cache_tokens(self, spec: ModelSpec, context_tokens: int) -> tuple[int, int]:
        return context_tokens, minimum(context_tokens, window_or(spec, context_tokens))

    def compute_buffer(self, spec, quant, hw, context_tokens, prompt_tokens, batch):
        act_bytes = 2  # activations in f16/bf16
        tokens = prompt_tokens * batch
        return (tokens * mlp_width(spec) * int(C.TORCH_ACTIVATION_COPIES.value) * act_bytes
                + batch * spec.vocab_size * C.F32_BYTES,
                "prompt x batch x intermediate x TORCH_ACTIVATION_COPIES x 2 B + last-token logits (f32)")

    def runtime_overhead(self, hw: HardwareProfile) -> tuple[int, str]:
        return int(C.CUDA_CONTEXT_BYTES.value), "CUDA_CONTEXT_BYTES"

    def decode_efficiency(self, family: str) -> Const:
        return DECODE_BW_EFFICIENCY.get(family) or DECODE_BW_EFFICIENCY["float"]

    def prefill_mfu(self, key: str) -> Const:
        return PREFILL_MFU.get(key) or PREFILL_MFU["*"]

    def fixed_step_ms(self, spec: ModelSpec, family: str) -> tuple[float, float, str]:
        return DECODE_OVERHEAD_MS.value, PREFILL_OVERHEAD_MS.value, ""


RULES = TransformersRules()
