"""Batched llama.cpp decode against llama-batched-bench rows: the project's H200 rows (sources/measurements/
h200-batched-decode.csv, Qwen2.5-7B Q4_K_M, 1-16 sequences) and llama.cpp's own DGX Spark rows (sources/
published_perf/dgx_spark_batched_decode.csv, Qwen2.5-Coder-7B Q8_0, 1-32 sequences, 512 and 4096-token prompts).

The one fitted batched term (constants.LLAMA_CPP_MMVQ_FP32_FRACTION) comes from the H200 rows with 4 and 8 sequences;
every DGX Spark row and the H200 row with 16 sequences (the MMQ kernels, no batched term fitted) are held out.
Tolerance: 15 % per held-out DGX Spark row (estimate-v2, which took the step as max(memory, compute), was 9-28 % too
fast there) and 20 % on the H200 rows (estimate-v2: 33-55 % too fast)."""

import csv

import pytest

from recommender.catalog.build import load_models
from recommender.core.paths import SOURCES_DIR
from recommender.hardware.profiles import load_profiles, match_profile
from recommender.predict.predictor import Config, Predictor

CASES = ((SOURCES_DIR / "measurements" / "h200-batched-decode.csv", "NVIDIA H200", 0.20),
         (SOURCES_DIR / "published_perf" / "dgx_spark_batched_decode.csv", "NVIDIA GB10", 0.15))


def _rows():
    out = []
    for path, gpu, tol in CASES:
        with path.open(newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                out.append((path.name, gpu, tol, r))
    return out


@pytest.fixture(scope="module")
def env():
    return {m.id: m for m in load_models(SOURCES_DIR)}, load_profiles()


@pytest.mark.parametrize("src,gpu,tol,row", _rows(),
                         ids=lambda v: v if isinstance(v, str) else None)
def test_batched_decode_step_matches_llama_batched_bench(env, src, gpu, tol, row):
    specs, profiles = env
    spec, hw = specs[row["model_id"]], match_profile(gpu, profiles)
    b, prompt, gen = int(row["parallel_sequences"]), int(row["prompt_tokens_each"]), int(row["gen_tokens_each"])
    measured_ms = b / float(row["tg_tokens_per_s_all_sequences"]) * 1e3  # one step: a token for every sequence
    p = Predictor(hw).predict(spec, Config(model=spec.id, quant=row["quant"], engine="llama.cpp",
                                           context_tokens=prompt + gen, batch=b, prompt_tokens=prompt,
                                           output_tokens=gen))
    assert abs(p.tpot_ms - measured_ms) / measured_ms <= tol, (b, prompt, p.tpot_ms, measured_ms)


def test_more_sequences_never_make_a_step_shorter_within_one_kernel(env):
    """Within mul_mat_vec_q (1-8 sequences) and within MMQ (9+), a step of more sequences takes longer, as measured
    on both GPUs; across the switch (8 -> 16 on the H200) it may not, and the H200 rows show it (8.30 -> 7.28 ms)."""
    specs, profiles = env
    spec = specs["Qwen/Qwen2.5-7B"]
    for gpu, quant in (("NVIDIA H200", "Q4_K_M"), ("NVIDIA GB10", "Q8_0")):
        pr = Predictor(match_profile(gpu, profiles))
        t = {b: pr.predict(spec, Config(model=spec.id, quant=quant, engine="llama.cpp", context_tokens=640, batch=b,
                                        prompt_tokens=512, output_tokens=128)).tpot_ms for b in (1, 2, 4, 8, 16, 32)}
        assert t[1] < t[2] < t[4] < t[8] and t[16] < t[32], (gpu, t)
