"""SGLang, added as two files (its EngineSpec record in recommender/core/engines.py and its rules in
recommender/predict/engines/sglang.py): planned on CUDA GPUs where its quantizations apply, its memory as its server
arguments reserve it, spread by tensor parallelism; no probe adapter here (a probe of it is refused with a hint)."""

import pytest

from conftest import assert_user_error
from recommender.core.engines import engine_spec, engines_running
from recommender.core.errors import UserError
from recommender.hardware.multi import build_machine
from recommender.hardware.profiles import find_profile, load_profiles
from recommender.predict.analytical import estimate
from recommender.predict.engines import sglang as S
from recommender.predict.split import SplitPlan, default_plan, estimate_split
from recommender.rank.candidates import engine_supported

MIB = 1024**2


@pytest.fixture(scope="module")
def profiles():
    return load_profiles()


@pytest.fixture(scope="module")
def spec():
    from recommender.cli.common import open_catalog

    return open_catalog().models()["meta-llama/Llama-3.1-8B"]


def test_record_and_quantizations():
    e = engine_spec("sglang")
    assert e.adapter is None and e.file_format == "safetensors" and e.backends == ("cuda",)
    for fam in ("float", "fp8", "awq", "gptq", "int8"):
        assert "sglang" in engines_running(fam)
    assert "sglang" not in engines_running("gguf")


@pytest.mark.parametrize("gpu, quant, family, ok", [
    ("H100 SXM", "FP8", "fp8", True),
    ("RTX 3090", "FP8", "fp8", False),  # FP8 kernels from compute capability 8.9
    ("RTX 3090", "AWQ-4bit", "awq", True),
    ("T4", "F16", "float", True),  # 7.5: SGLang's floor
    ("M2 Max 96GB", "F16", "float", False),  # no Metal backend planned
    ("MI300X", "BF16", "float", False),  # ROCm exists upstream but is not planned here (no sourced terms)
])
def test_where_sglang_is_a_candidate(profiles, gpu, quant, family, ok):
    assert (engine_supported("sglang", family, quant, find_profile(gpu, profiles)) is None) == ok


@pytest.mark.parametrize("gpu, chunk, bs, reserve_mib", [
    # server_args: reserve = 512 + 1.5 x max(chunk, 2048) + 2 x cuda_graph_max_bs + 128 (tp 1); >= 10 GiB above 60 GiB
    ("RTX 4090", 2048, 24, 512 + 3072 + 48 + 128),
    ("T4", 2048, 8, 512 + 3072 + 16 + 128),
    ("H200", 8192, 256, 512 + 12288 + 512 + 128),
])
def test_reserve_follows_its_server_arguments(profiles, gpu, chunk, bs, reserve_mib):
    hw = find_profile(gpu, profiles)
    assert S.gpu_class(hw.memory_bytes) == (chunk, bs)
    act, rest = S.reserve_mib(hw.memory_bytes)
    assert act + rest == reserve_mib


def test_estimate_on_an_h200(profiles, spec):
    hw = find_profile("H200", profiles)
    e = estimate(spec, "BF16", "sglang", hw, context_tokens=8192, batch=4)
    v = estimate(spec, "BF16", "vllm", hw, context_tokens=8192, batch=4)
    assert e.kv_cache_bytes == v.kv_cache_bytes  # token-granular pool, the same cache as vLLM's (no padding)
    assert e.compute_buffer_bytes + e.runtime_overhead_bytes == (512 + 12288 + 512 + 128) * MIB
    assert e.total_vram_bytes == e.weights_gpu_bytes + e.kv_cache_bytes + e.overhead_bytes
    assert any("mem_fraction_static=0.907" in n for n in e.notes)  # (143771 - 13440) / 143771
    assert e.tpot_ms and e.ttft_ms and "assumption" in e.basis["decode"]
    assert e.kv_dtype == "bf16"


def test_tensor_parallel(profiles, spec):
    hw = find_profile("H100 SXM", profiles)
    machine = build_machine([hw, hw])
    assert default_plan("sglang", spec, machine) == SplitPlan(mode="tensor")
    s = estimate_split(spec, "BF16", "sglang", machine, SplitPlan(mode="tensor"), context_tokens=4096)
    assert len(s.devices) == 2 and s.comm_ms_per_token > 0 and all(d.fits for d in s.devices)
    with pytest.raises(ValueError, match="no 'layer' split"):
        estimate_split(spec, "BF16", "sglang", machine, SplitPlan(mode="layer"), context_tokens=4096)


def test_no_probe_adapter():
    from evaluators.base import get_engine

    with pytest.raises(UserError, match="no probe adapter") as e:
        get_engine("sglang")
    assert e.value.hint


def test_probe_cli_refuses_sglang(cli):
    assert_user_error(cli("probe", "perf", "meta-llama/Llama-3.1-8B", "--engine", "sglang", "--synthetic",
                          prog="recommender"))


def test_recommend_plans_sglang(cli):
    r = cli("recommend", "--gpu", "H100 SXM", "--model", "meta-llama/Llama-3.1-8B", "--engine", "sglang",
            "--per-model", "0", "--top", "20", "--json", prog="recommender")
    assert r.code == 0, r.err
    cands = r.json()["candidates"]
    assert cands and {c["engine"] for c in cands} == {"sglang"}
