"""Published llama.cpp speed figures (sources/published_perf/) as references for the estimator.

Each reading is a llama-bench test: ``pp512`` (prefill of 512 tokens from an empty cache, tokens/s) or ``tg128``
(128 generated tokens from an empty cache, tokens/s). :func:`predict` answers the same question with
:func:`recommender.estimate.estimate`, so fitting and testing compare like with like.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional


from recommender.core.errors import UserError
from recommender.core.paths import SOURCES_DIR
from recommender.core.records import HardwareProfile, ModelSpec
from recommender.model.arch import spec_from_config
from recommender.hardware.profiles import find_profile
from recommender.predict.predictor import Config, Predictor

REFERENCE_DIR = SOURCES_DIR / "published_perf"
REFERENCE_MODEL_ID = "meta-llama/Llama-2-7b-hf"


@dataclass(frozen=True)
class Reading:
    gpu: str
    quant: str
    test: str  # 'pp512' | 'tg128'
    tokens_per_s: float
    flash_attn: str
    backend: str
    source_url: str
    note: str


def reference_spec(directory: Path = REFERENCE_DIR) -> ModelSpec:

    cfg = json.loads((directory / "Llama-2-7b-hf.config.json").read_text(encoding="utf-8"))
    return spec_from_config(cfg, REFERENCE_MODEL_ID, source="HPMLL/llm-benchmark@0347b4f3:"
                                                            "models/Llama-2-7b-hf/config.json")


def readings(directory: Path = REFERENCE_DIR) -> list[Reading]:
    with (directory / "llama_cpp_bench.csv").open(newline="", encoding="utf-8") as f:
        return [Reading(r["gpu"], r["quant"], r["test"], float(r["tokens_per_s"]), r["flash_attn"], r["backend"],
                        r["source_url"], r["source_note"]) for r in csv.DictReader(f)]


def scoreboard(profiles: list[HardwareProfile], flash_attn: str = "0") -> list[tuple[Reading, HardwareProfile]]:
    """The discussion-#15013 CUDA scoreboard rows whose GPU has a shipped profile (exact name or alias)."""

    out = []
    for r in readings():
        if r.backend != "CUDA" or r.flash_attn != flash_attn or "15013" not in r.source_url:
            continue
        try:
            hw = find_profile(r.gpu, profiles)
        except UserError:
            continue  # no profile, or an ambiguous name (e.g. "H100 80 GB": PCIe or SXM is not stated)
        out.append((r, hw))
    return out


def predict(spec: ModelSpec, r: Reading, hw: HardwareProfile) -> Optional[float]:
    """Tokens/s the estimator predicts for one llama-bench reading."""

    p = Predictor(hw)  # analytical: the scoreboard GPUs have no measured rows or calibration of ours
    if r.test == "tg128":
        return p.predict(spec, Config(model=spec.id, quant=r.quant, engine="llama.cpp", context_tokens=256,
                                      prompt_tokens=1, output_tokens=128)).decode_tokens_per_s
    if r.test == "pp512":
        ttft = p.predict(spec, Config(model=spec.id, quant=r.quant, engine="llama.cpp", context_tokens=1024,
                                      prompt_tokens=512, output_tokens=1)).ttft_ms
        return None if ttft is None else 512 / (ttft / 1000)
    return None
