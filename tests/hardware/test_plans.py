"""Plans an expert would sign (issue 24): any CPU gets an answer, Apple plans under the Metal working set,
--bandwidth works for any profile. In process, on the shipped catalog (fast)."""

from __future__ import annotations

import pytest

from recommender.catalog.store import Catalog
from recommender.cli.query_opts import LatencyMetricOpt, MissingOpt, QueryOptions, build_query
from recommender.core.errors import UserError
from recommender.core.paths import base_catalog_path
from recommender.core.units import parse_bandwidth
from recommender.hardware import cpu_bench, profiles
from recommender.hardware.host import probe_host
from recommender.hardware.profiles import (cpu_profile, find_profile, load_profiles, metal_working_set,
                                           planning_hardware)
from recommender.rank.candidates import enumerate_candidates
from recommender.rank.recommend import recommend
from recommender.score.order import OVER_LIMIT_ALTERNATIVE_FACTOR, over_limit_alternative, rank

GIB = 1024**3


@pytest.fixture(scope="module")
def catalog():
    return Catalog(base_catalog_path())


def ask(catalog, gpu, vram=None, max_latency=None, workload="chat", metric="ttft", bandwidth=None, top=10):
    opts = QueryOptions(vram=vram, max_latency=max_latency, latency_metric=LatencyMetricOpt(metric),
                        workload=workload, context=None, batch=None, prompt_tokens=None, output_tokens=None,
                        weights=None, missing=MissingOpt.worst, gpu=gpu, model=None, engine=None, quant=None,
                        top=top, per_model=1, catalog_path=None, bandwidth=bandwidth)
    q, notes = build_query(opts, "value")
    ranked, _, _ = rank(enumerate_candidates(catalog, q), q)
    return q, ranked, notes


# A 2-core box's figures as cpu_bench measures them (this dev machine: 8-16 GB/s copy, 30-50 GFLOP/s sgemm)
FAKE_BENCH = {"version": cpu_bench.BENCH_VERSION, "memory_bandwidth_bytes_per_s": 12e9, "fp32_flops_per_s": 40e9,
              "basis": "measured here (test stand-in)", "measured_at": "2026-12-01T00:00:00Z"}


@pytest.fixture
def fake_bench(monkeypatch):
    monkeypatch.setattr(cpu_bench, "cached_or_measure", lambda fingerprint, threads: dict(FAKE_BENCH))


def test_cpu_profile_takes_the_measured_bandwidth_and_matmul_rate(fake_bench):
    p = cpu_profile(probe_host())
    assert p.memory_bandwidth_bytes_per_s == 12e9 and p.fp32_flops_per_s == 40e9
    assert p.sources["memory_bandwidth_bytes_per_s"].startswith("measured")
    off = cpu_profile(probe_host(), measure=False)
    assert off.memory_bandwidth_bytes_per_s == 0.0  # unknown, never invented


def test_cpu_bench_measures_and_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("RECOMMENDER_CACHE", str(tmp_path))
    monkeypatch.setattr(cpu_bench, "BANDWIDTH_BYTES", 16 * 1024 * 1024)
    monkeypatch.setattr(cpu_bench, "MATMUL_N", 128)
    calls = []
    real = cpu_bench.measure
    monkeypatch.setattr(cpu_bench, "measure", lambda threads: calls.append(threads) or real(threads))
    a = cpu_bench.cached_or_measure("abc", 2)
    b = cpu_bench.cached_or_measure("abc", 2)
    assert len(calls) == 1 and a == b  # measured once, then read back
    assert a["memory_bandwidth_bytes_per_s"] > 1e8 and a["fp32_flops_per_s"] > 1e6
    monkeypatch.setenv(cpu_bench.ENV_OFF, "off")
    assert cpu_bench.cached_or_measure("other", 2) is None


def test_cpu_bench_rates_are_per_cpu_second_received(monkeypatch):
    """On a shared box the probe's threads run part of the wall time: the figure kept is the rate per CPU-second they
    received x the cores (the machine with its cores free), never below the wall-clock rate, which stays beside it."""
    monkeypatch.setattr(cpu_bench, "BANDWIDTH_BYTES", 16 * 1024 * 1024)
    monkeypatch.setattr(cpu_bench, "MATMUL_N", 128)
    d = cpu_bench.measure(2)
    assert 0 < d["cpu_share"] <= 1
    assert d["memory_bandwidth_bytes_per_s"] >= d["wall_memory_bandwidth_bytes_per_s"] * 0.5
    assert d["fp32_flops_per_s"] <= d["wall_fp32_flops_per_s"] * 2 * 1.0001  # capped by the wall rate x cores
    assert "per CPU-second" in d["basis"] and "wall clock" in d["basis"]
    # a pass whose threads got half the wall time: per CPU-second the rate doubles
    clock = {"wall": 0.0, "cpu": 0.0}

    class HalfTime:
        @staticmethod
        def perf_counter():
            clock["wall"] += 1.0
            return clock["wall"]

        @staticmethod
        def thread_time():
            clock["cpu"] += 0.25  # called twice per thread and pass: 0.25 s of CPU per 1 s of wall between two calls
            return clock["cpu"]

        process_time = thread_time
        strftime, gmtime = staticmethod(__import__("time").strftime), staticmethod(__import__("time").gmtime)

    monkeypatch.setattr(cpu_bench, "time", HalfTime)
    rate, wall = cpu_bench._copy_bandwidth(1, nbytes=8 * 1024, repeats=1)
    assert rate == pytest.approx(4 * wall)


def test_a_16gb_cpu_box_gets_a_small_model_with_its_speed(catalog, fake_bench):
    """F: `recommend --gpu cpu --vram 16 --max-latency 5s` answered nothing (no sourced bandwidth)."""
    q, ranked, _ = ask(catalog, "cpu", vram="16", max_latency="5s")
    assert ranked, "no plan for a CPU"
    top = ranked[0]
    assert top.engine == "llama.cpp"
    tpot = top.figures["tpot_ms"]
    assert tpot.value and tpot.provenance in ("estimated", "calibrated", "measured")
    assert top.figures["ttft_ms"].value <= 5000


def test_bandwidth_override_works_for_any_profile(catalog, fake_bench):
    hw, notes = planning_hardware("RTX 4090", bandwidth="100GB/s")
    assert hw.memory_bandwidth_bytes_per_s == 100e9 and "--bandwidth" in hw.sources["memory_bandwidth_bytes_per_s"]
    _, fast, _ = ask(catalog, "RTX 4090", vram="24")
    _, slow, _ = ask(catalog, "RTX 4090", vram="24", bandwidth="100GB/s")
    f = {(c.model, c.quant): c.figures["tpot_ms"].value for c in fast}
    s = [(c.model, c.quant, c.figures["tpot_ms"].value) for c in slow if (c.model, c.quant) in f]
    assert s and all(t > f[(m, qq)] for m, qq, t in s if t and f[(m, qq)])
    hw, _ = planning_hardware("cpu", bandwidth="100")  # a CPU too, without measuring
    assert hw.memory_bandwidth_bytes_per_s == 100e9


def test_bad_bandwidth_is_a_user_error():
    for bad in ("fast", "-5GB/s", "0", "1e9TB/s"):
        with pytest.raises(UserError):
            parse_bandwidth(bad)
    assert parse_bandwidth("1.8TB/s") == 1.8e12


def test_metal_working_set_follows_the_measured_defaults():
    assert metal_working_set(32 * GIB)[0] == pytest.approx(21845.33 * 1024**2, rel=1e-4)  # llama.cpp logs
    assert metal_working_set(16 * GIB)[0] == pytest.approx(10922.67 * 1024**2, rel=1e-4)
    assert metal_working_set(96 * GIB)[0] == pytest.approx(73728 * 1024**2, rel=1e-6)
    assert metal_working_set(32 * GIB, wired_limit_mb=28000)[0] == 28000 * 1024**2


def test_a_mac_plans_under_its_working_set_and_vram_raises_it(catalog):
    """D: the pick must fit what Metal lets the GPU wire (2/3 of a 32 GB Mac), said in one line."""
    q, ranked, notes = ask(catalog, "Apple M2 Max 30-core GPU 32GB")
    assert any("working set" in n for n in notes)
    assert q.vram_bytes == pytest.approx(32 * GIB * 2 / 3, rel=1e-6)
    assert ranked and ranked[0].figures["total_vram_bytes"].value <= 32 * GIB * 2 / 3
    q2, _, notes2 = ask(catalog, "Apple M2 Max 30-core GPU 32GB", vram="28")
    assert q2.vram_bytes == 28 * GIB and not any("working set" in n for n in notes2)
    # a non-Apple profile is untouched
    assert planning_hardware("RTX 4090")[0].memory_bytes == find_profile("RTX 4090", load_profiles()).memory_bytes


def test_a_probed_mac_uses_its_wired_limit():
    from recommender.hardware.detect import probe_other_gpus

    sp = ('{"SPDisplaysDataType": [{"sppci_model": "Apple M2 Max", "sppci_cores": "30", '
          '"spdisplays_vendor": "sppci_vendor_Apple"}]}')
    answers = {"system_profiler": sp, "sysctl -n hw.memsize": str(32 * GIB), "sysctl -n iogpu.wired_limit_mb": "26000"}
    run = lambda cmd: answers.get(cmd[0]) or answers.get(" ".join(cmd))  # noqa: E731
    rows, _ = probe_other_gpus(run=run, system="Darwin")
    assert rows[0]["wired_limit_mb"] == 26000
    from recommender.hardware.host import GpuInfo, GpuProbe

    found = GpuProbe([GpuInfo(**rows[0])], "1 Apple GPU found")
    hw, notes = planning_hardware(None, found=found)
    assert hw.memory_bytes == 26000 * 1024**2 and any("iogpu.wired_limit_mb" in n for n in notes)
    assert profiles  # module imported for monkeypatching elsewhere


# The 20 names a user types (issue 24): each resolves to the card it names, or (Jetson Orin) lists the choices.
TYPED = [("3090", None, "GeForce RTX 3090"), ("RTX 3060 12GB", None, "GeForce RTX 3060 12GB"),
         ("A100 80GB SXM", None, "A100 80GB SXM4"), ("A100", "80", "A100 80GB PCIe"),
         ("M2 Max 32GB", None, "Apple M2 Max 30-core GPU 32GB"), ("M4 Pro 24GB", None, "Apple M4 Pro 16-core GPU 24GB"),
         ("V100 32GB", None, "Tesla V100 PCIe 32GB"), ("Radeon RX 7900 XTX", None, "Radeon RX 7900 XTX"),
         ("Arc B580", None, "Intel Arc B580"), ("RTX PRO 6000", None, "RTX PRO 6000 Blackwell Server Edition"),
         ("DGX Spark", None, "DGX Spark (GB10)"), ("Strix Halo 128GB", None, "Radeon 8060S (Ryzen AI Max+ 395)"),
         ("MI300X", None, "Instinct MI300X"), ("L40S", None, "L40S"), ("T4", None, "Tesla T4"),
         ("RTX 5060 Ti 16GB", None, "GeForce RTX 5060 Ti 16GB"), ("H20", None, "H20"),
         ("4070 Super", None, "GeForce RTX 4070 SUPER"), ("Mac Studio M3 Ultra 512GB", None, "Apple M3 Ultra 512GB")]


@pytest.mark.parametrize("name,vram,expected", TYPED)
def test_the_names_a_user_types_resolve(name, vram, expected):
    hw, notes = planning_hardware(name, vram=vram)
    assert hw.name == expected
    variants = [n for n in notes if "variants" in n]
    if expected in ("A100 80GB PCIe", "Apple M2 Max 30-core GPU 32GB", "Tesla V100 PCIe 32GB",
                    "RTX PRO 6000 Blackwell Server Edition"):
        assert variants and "slowest" in variants[0]  # said, never silent


def test_a_family_name_lists_its_choices_and_memory_variants_need_vram():
    with pytest.raises(UserError, match="Jetson AGX Orin 64GB.*Jetson Orin NX 8GB"):
        planning_hardware("Jetson Orin")
    with pytest.raises(UserError, match="40 GiB, 80 GiB"):
        planning_hardware("A100")  # 40 or 80 GB: --vram settles it
    assert planning_hardware("RTX 3060", vram="12")[0].name == "GeForce RTX 3060 12GB"
    q, _ = build_query(QueryOptions(vram="80", max_latency=None, latency_metric=LatencyMetricOpt("ttft"),
                                    workload="chat", context=None, batch=None, prompt_tokens=None, output_tokens=None,
                                    weights=None, missing=MissingOpt.worst, gpu="A100", model=None, engine=None,
                                    quant=None, top=10, per_model=1, catalog_path=None), "value")
    assert q.hardware.name == "A100 80GB PCIe" and q.vram_bytes == 80 * GIB  # through the CLI's path too
    with pytest.raises(UserError):
        planning_hardware("H100 SXM4")  # no such board: never the SXM5


def test_tool_printed_names_resolve():
    for name, expected in [("NVIDIA GeForce RTX 4090", "GeForce RTX 4090"), ("AMD Radeon RX 7900 XTX", "Radeon RX 7900 XTX"),
                           ("Intel(R) Arc(TM) B580 Graphics", "Intel Arc B580"), ("NVIDIA H100 80GB HBM3", "H100 SXM5"),
                           ("MacBook Pro M4 Max 40-core GPU 128GB", "Apple M4 Max 128GB")]:
        assert planning_hardware(name)[0].name == expected, name


def test_decode_speed_users_run_is_priced():
    """E: 18 tok/s no longer ties with 210 tok/s in chat; code wants faster streams; 30 tok/s chat is free."""
    from recommender.core.workloads import get_workload
    from recommender.rank.query import Query
    from recommender.score.order import value_scale
    from recommender.score.weighted import DEFAULT_WEIGHTS

    hw = find_profile("A100 80GB SXM4", load_profiles())

    def pts(wl, tok_s):
        q = Query(vram_bytes=80 * GIB, max_latency_ms=800.0, workload=get_workload(wl), hardware=hw,
                  weights=dict(DEFAULT_WEIGHTS))
        s = value_scale(q)
        return DEFAULT_WEIGHTS["latency"] * s.u("latency", {"latency": 100.0, "tpot": 1000.0 / tok_s}) / 0.0025

    assert pts("chat", 210) == 0 and pts("chat", 30) == 0
    assert pts("chat", 18) > 2  # points an 18 tok/s stream costs against a comfortable one
    assert pts("code", 30) > 2 and pts("code", 60) == 0
    assert pts("chat", 5.3) == pytest.approx(9.6, abs=0.2)  # reading speed: U_DECODE_AT_READING


def test_a100_pick_streams_fast_or_runs_on_a_server_engine(catalog):
    """E (`--gpu "A100 80GB SXM4" --max-latency 800ms`): the pick decodes >= 30 tok/s or runs on vLLM / SGLang."""
    _, ranked, _ = ask(catalog, "A100 80GB SXM4", max_latency="800ms")
    top = ranked[0]
    assert top.engine in ("vllm", "sglang") or 1000.0 / top.figures["tpot_ms"].value >= 30


def test_serve_plans_8k_per_request_and_its_top_has_the_best_goodput_of_its_quality(catalog):
    """I (`--gpu L40S --workload serve`): 8K per request by default (--context changes it), ranked by goodput at
    that context; no row of the same quality (task accuracy and quantization cost) serves more requests/s."""
    opts = dict(gpu="L40S", workload="serve")
    q, ranked, _ = ask(catalog, **opts)
    assert set(q.workload.contexts) == {8192}
    top = ranked[0]
    assert top.context_tokens >= 8192 and top.goodput_per_s > 0
    all_q = QueryOptions(vram=None, max_latency=None, latency_metric=LatencyMetricOpt("ttft"), workload="serve",
                         context=None, batch=None, prompt_tokens=None, output_tokens=None, weights=None,
                         missing=MissingOpt.worst, gpu="L40S", model=[top.model], engine=None, quant=None, top=500,
                         per_model=0, catalog_path=None)
    q2, _ = build_query(all_q, "value")
    rows, _, _ = rank(enumerate_candidates(catalog, q2), q2)
    same = [c for c in rows if c.figures["quant_cost_points"].value == top.figures["quant_cost_points"].value]
    assert same and max(c.goodput_per_s or 0 for c in same) <= top.goodput_per_s + 1e-9
    opts3 = all_q._replace(model=None, context=["4K"], top=10, per_model=1)
    q3, _ = build_query(opts3, "value")
    assert set(q3.workload.contexts) == {4096}


def test_partial_offload_is_ranked_when_host_ram_holds_the_rest(catalog):
    """C: on a 12 GB card a >= 30B MoE at >= 4 bits with its other layers in host RAM is offered (the table shows
    the split: n_gpu_layers); with too little RAM it is not."""
    def plans(ram):
        opts = QueryOptions(vram=None, max_latency=None, latency_metric=LatencyMetricOpt("ttft"), workload="chat",
                            context=None, batch=None, prompt_tokens=None, output_tokens=None, weights=None,
                            missing=MissingOpt.worst, gpu="RTX 3060 12GB", model=["Qwen/Qwen3-30B-A3B-Instruct-2507"],
                            engine=None, quant=["Q4_K_M", "Q5_K_M"], top=20, per_model=0, catalog_path=None, ram=ram)
        q, notes = build_query(opts, "value")
        assert any("host RAM for partial offload" in n for n in notes)
        return rank(enumerate_candidates(catalog, q), q)[0]

    ranked = plans("64")
    off = [c for c in ranked if c.gpu_layers is not None]
    assert off, "no offload plan"
    c = off[0]
    assert c.params_total >= 30e9 and c.total_vram_bytes <= 12 * GIB and c.host_weights_bytes > 0
    assert 1 <= c.gpu_layers < 49 and c.tpot_ms > 0
    assert not [c for c in plans("8") if c.gpu_layers is not None]  # 8 GiB (4 usable) cannot hold the rest
    from recommender.cli.common import engine_label
    assert engine_label(c) == f"llama.cpp ngl {c.gpu_layers}"


def test_an_moe_offload_plan_over_the_ttft_limit_is_shown_beside_the_answer(catalog):
    """C with --max-latency 1500ms: the 30B-A3B at >= 4 bits with blocks in host RAM copies their experts to the GPU
    for each 512-token micro-batch (all of them: a trained router uses nearly every expert in 512 tokens) at the mmap'd
    pages' HOST_TO_GPU_COPY_BYTES_PER_S, about 2.5 s for a 1024-token prompt: over the limit, so not ranked, but shown
    beside the answer with what it costs (over by X ms) and gives (tok/s, accuracy)."""
    opts = QueryOptions(vram=None, max_latency="1500ms", latency_metric=LatencyMetricOpt("ttft"), workload="chat",
                        context=None, batch=None, prompt_tokens=None, output_tokens=None, weights=None,
                        missing=MissingOpt.worst, gpu="RTX 3060 12GB",
                        model=["Qwen/Qwen3-30B-A3B-Instruct-2507", "Qwen/Qwen3-8B"], engine=["llama.cpp"],
                        quant=["Q8_0", "IQ4_XS"], top=5, per_model=1, catalog_path=None, ram="64")
    q, _ = build_query(opts, "value")
    cands = enumerate_candidates(catalog, q)
    ranked, _, _ = rank(cands, q)
    assert ranked and all(c.ttft_ms <= 1500 for c in ranked)
    alt = over_limit_alternative(cands, ranked, q)
    assert alt is not None and alt.gpu_layers is not None and alt.params_total >= 30e9 and alt.quant == "IQ4_XS"
    assert 1500 < alt.ttft_ms <= OVER_LIMIT_ALTERNATIVE_FACTOR * 1500
    assert alt.excluded == [f"TTFT {alt.ttft_ms:.0f} ms exceeds the limit of 1500 ms"]
    rec = recommend(catalog, q)
    note = next(n for n in rec.notes if n.startswith("over the limit"))
    assert f"over the 1500 ms limit by {alt.ttft_ms - 1500:.0f} ms" in note and "tok/s" in note
    assert rec.alternatives and rec.alternatives[0].quant == "IQ4_XS" and rec.alternatives[0].launch
    # no latency limit: nothing beside the answer (every plan is ranked)
    q2, _ = build_query(opts._replace(max_latency=None), "value")
    c2 = enumerate_candidates(catalog, q2)
    r2, _, _ = rank(c2, q2)
    assert over_limit_alternative(c2, r2, q2) is None


def test_the_load_mode_of_an_offload_plan_sets_its_prompt_copies_and_launch(catalog):
    """recommend --load-mode none: the same 30B-A3B partial-offload plan on a 12 GB card prefills faster (host
    weights in pinned memory: 32.6 vs 6.5 GB/s, the ratio measured on the H200 host, -lm none 3.1x faster than mmap
    at -ngl 25 on Qwen3-30B-A3B, sources/measurements/h200-partial-offload-3.csv), decodes the same, and its
    llama.cpp commands carry --no-mmap; mmap (llama.cpp's default) is what recommend plans without the option."""
    from recommender.rank.recommend import recommend

    def top(mode):
        opts = QueryOptions(vram=None, max_latency=None, latency_metric=LatencyMetricOpt("ttft"), workload="chat",
                            context=None, batch=None, prompt_tokens=None, output_tokens=None, weights=None,
                            missing=MissingOpt.worst, gpu="RTX 3060 12GB", model=["Qwen/Qwen3-30B-A3B-Instruct-2507"],
                            engine=["llama.cpp"], quant=["Q4_K_M"], top=1, per_model=1, catalog_path=None, ram="64",
                            load_mode=mode)
        q, _ = build_query(opts, "value")
        return recommend(catalog, q).candidates[0]

    base, mmap, none = top(None), top("mmap"), top("none")
    assert mmap.gpu_layers is not None and none.gpu_layers == mmap.gpu_layers
    assert base.ttft_ms == mmap.ttft_ms and none.tpot_ms == mmap.tpot_ms
    assert 2.0 < mmap.ttft_ms / none.ttft_ms < 32.6 / 6.5
    argv = {c.tool: c.argv for c in none.launch.commands}
    assert "--no-mmap" in argv["llama-server"] and "--no-mmap" not in {a for c in mmap.launch.commands for a in c.argv}
