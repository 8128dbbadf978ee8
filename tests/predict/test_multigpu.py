"""Multi-GPU plans: `--gpu "2x RTX 3090"` and friends, per-device memory, and the split/TP figures against published
multi-GPU measurements (sources/published_perf: XiongjieDai's llama-bench runs on 1-8 GPUs; aiconfigurator's measured
vLLM all-reduce tables). None of these rows was measured by this project: no multi-GPU machine has been lent."""

import dataclasses
import csv
import importlib.util
import statistics

import pytest

from conftest import ROOT, assert_user_error
from recommender.hardware.host import GpuInfo
from recommender.hardware.multi import build_machine, local_machine, parse_gpu_list
from recommender.hardware.profiles import find_profile, load_profiles
from recommender.predict import split as S
from recommender.predict.predictor import Config, Predictor

LLAMA_CSV = ROOT / "sources/published_perf/multigpu_llamacpp.csv"
AR_CSV = ROOT / "sources/published_perf/aiconfigurator_allreduce.csv"
MODELS = {"LLaMA-3-8B": "meta-llama/Llama-3.1-8B", "LLaMA-3-70B": "meta-llama/Llama-3.1-70B"}
GIB = 1024**3


@pytest.fixture(scope="module")
def catalog():
    from recommender.cli.common import open_catalog

    return open_catalog()


def _predict(catalog, model: str, quant: str, profile: str, n: int, tokens: int = 512, mode: str = "layer"):
    """A llama-bench tgN run (N tokens generated from an empty context) on n identical GPUs."""
    spec = catalog.models()[MODELS.get(model, model)]
    prof = find_profile(profile, load_profiles())
    shape = dict(model=spec.id, quant=quant, engine="llama.cpp" if mode in ("layer", "row") else "vllm",
                 context_tokens=tokens + 1, batch=1, prompt_tokens=1, output_tokens=tokens)
    variant = catalog.variants().get((spec.id, quant))
    if n == 1:
        return Predictor(prof).predict(spec, Config(**shape), variant=variant)
    return Predictor(prof, machine=build_machine([prof] * n)).predict(
        spec, Config(**shape, split=S.SplitPlan(mode=mode)), variant=variant)


def _published():
    return [r for r in csv.DictReader(LLAMA_CSV.open()) if r["profile"] and r["model"] in MODELS
            and r["quant"] in ("Q4_K_M", "F16")]


# ------------------------------------------------------------------------------------------- parsing the machine
def test_gpu_list_forms():
    profs = load_profiles()
    two = parse_gpu_list("2x RTX 3090", profiles=profs)
    assert [d.name for d in two] == ["GeForce RTX 3090"] * 2
    assert [d.name for d in parse_gpu_list("RTX 4090, RTX 3090", profiles=profs)] == \
           ["GeForce RTX 4090", "GeForce RTX 3090"]
    assert len(parse_gpu_list("RTX 3090", gpus=4, profiles=profs)) == 4
    m = build_machine(two)
    assert m.memory_bytes == 48 * GIB and m.link.kind == "pcie" and m.link.pcie_generation == 4
    # PCIe 4.0 x16: 16 GT/s x 16 lanes x 128/130 / 8 = 31.5 GB/s per direction (PCI-SIG)
    assert m.link.bytes_per_s == pytest.approx(31.5e9, rel=1e-3)
    # SXM boards always carry NVLink: H100 SXM5 900 GB/s bidirectional = 450 GB/s per direction
    h = build_machine(parse_gpu_list("8x H100 SXM5", profiles=profs))
    assert h.link.kind == "nvlink" and h.link.bytes_per_s == 450e9
    assert build_machine(two, link="pcie3 x8").link.bytes_per_s == pytest.approx(7.88e9, rel=1e-3)


def test_local_gpus_become_one_machine():
    """Two GPUs NVML lists (as recommender.hardware.host reads them) are planned as one machine, the link at NVML's
    PCIe generation and width."""
    gpus = [GpuInfo(index=i, name="NVIDIA GeForce RTX 3090", memory_total_bytes=24 * GIB, memory_free_bytes=23 * GIB,
                    memory_used_bytes=GIB, memory_clock_mhz=9751, memory_bus_width_bits=384,
                    memory_bandwidth_bytes_per_s=936e9, pcie_link_generation=4, pcie_link_width=8,
                    nvlink_active_links=0) for i in range(2)]
    m = local_machine(gpus)
    assert m.count == 2 and m.link.pcie_lanes == 8 and "measured: NVML" in m.link.source
    assert local_machine(gpus[:1]) is None


@pytest.mark.parametrize("args", [
    ["--gpu", "2x RTX 9999"],
    ["--gpu", "2x RTX 3090", "--gpus", "3"],
    ["--gpu", "RTX 3090", "--link", "nvlink"],
    ["--gpu", "2x RTX 4090", "--link", "nvlink"],
    ["--gpu", "2x RTX 3090", "--link", "pcie7 x3"],
    ["--gpu", "2x RTX 3090", "--split", "tensor"],
    ["--gpu", "2x RTX 3090", "--tensor-split", "1,x"],
    ["--gpu", "2x RTX 3090", "--tensor-split", "1,1,1"],
    ["--gpu", "RTX 3090", "--split", "layer"],
])
def test_bad_machine_input(cli_inproc, args):
    assert_user_error(cli_inproc("estimate", "Qwen/Qwen2.5-7B", *args))


def test_estimate_json_per_device(cli):
    """`estimate --gpu "RTX 4090,RTX 3090" -ts 3,1 --json`: one record per device, in device order, summing to the
    totals; -ts 3,1 puts the first three quarters of llama.cpp's 33 layers (32 blocks + the output layer) on the first
    card: blocks 0-24 (il / 33 < 0.75), the other 7 and the output layer on the second."""
    r = cli("estimate", "meta-llama/Llama-3.1-8B", "--gpu", "RTX 4090,RTX 3090", "--tensor-split", "3,1", "--json")
    assert r.code == 0, r.err
    d = r.json()
    devs = d["devices"]
    assert [x["name"] for x in devs] == ["GeForce RTX 4090", "GeForce RTX 3090"]
    assert d["split"] == {"mode": "layer", "tensor_split": [3.0, 1.0]}
    assert devs[0]["layers"] == 25 and devs[1]["layers"] == 7 and devs[1]["output_layer"]
    assert sum(x["total_bytes"] for x in devs) == d["figures"]["total_vram_bytes"]["value"]
    assert all(x["fits"] for x in devs) and d["figures"]["tpot_ms"]["provenance"] == "estimated"


# ------------------------------------------------------------------------------------------- against published rows
def test_fit_matches_published_out_of_memory(catalog):
    """Every published outcome of LLaMA-3 8B/70B (Q4_K_M, F16) on 1-8 GPUs with a shipped profile: the plan fits
    exactly where the run ran and not where it printed OOM (e.g. 70B Q4_K_M: OOM on one 24 GB card, runs on two;
    70B F16: OOM on 4x RTX 3090, runs on 6x RTX 3090)."""
    seen = {}
    for r in _published():
        key = (r["profile"], int(r["gpu_count"]), r["model"], r["quant"])
        seen.setdefault(key, r["oom"] == "1")
    assert len(seen) >= 40 and sum(seen.values()) >= 10
    wrong = []
    for (profile, n, model, quant), oom in seen.items():
        p = _predict(catalog, model, quant, profile, n)
        fits = all(d.fits for d in p.devices) if p.devices else \
            p.total_vram_bytes <= find_profile(profile, load_profiles()).memory_bytes
        if fits == oom:
            wrong.append((profile, n, model, quant, "OOM" if oom else "ran"))
    assert not wrong


def test_layer_split_slowdown_matches_published(catalog):
    """llama.cpp -sm layer: spreading a model over more identical cards makes decode slightly slower (one more hop
    per card). The predicted n-GPU/1-GPU ratio, applied to the published 1-GPU figure, is within 10 % of the
    published n-GPU tg512 on the median held-out row (the hop constant was fitted on RTX 3090 8B rows only)."""
    rows = [r for r in _published() if r["test"] == "tg512" and r["oom"] == "0"]
    one = {(r["profile"], r["model"], r["quant"]): float(r["tokens_per_s"]) for r in rows if r["gpu_count"] == "1"}
    errs = []
    for r in rows:
        n = int(r["gpu_count"])
        key = (r["profile"], r["model"], r["quant"])
        if n == 1 or key not in one or (r["profile"] == "GeForce RTX 3090" and r["model"] == "LLaMA-3-8B"):
            continue
        ratio = _predict(catalog, r["model"], r["quant"], r["profile"], 1).tpot_ms / \
            _predict(catalog, r["model"], r["quant"], r["profile"], n).tpot_ms
        errs.append(one[key] * ratio / float(r["tokens_per_s"]) - 1)
        assert ratio < 1.0  # slower on more cards, as every published row
    assert len(errs) >= 20
    assert statistics.median(abs(e) for e in errs) < 0.10


def test_layer_split_absolute_decode_against_published(catalog):
    """The absolute tg512 figure of every published 2-8 GPU layer-split row (not the ratio to a published 1-GPU row):
    with each device's own per-token step (LLAMA_CPP_SPLIT_DEVICE_STEP_MS) the median error is within 8 % and the
    median signed error within 3 % (without it: 11.9 % median, +8.6 % signed). The 0.281 ms were fitted on these rows
    (bench/multigpu.py prints the leave-one-GPU-type-out figure, 7.1 %). Two GPU types stay off by more than 20 % on
    their median row, the single-GPU model's error on them (4x A100 SXM4 +38 %, 4x H100 PCIe -29 %)."""
    rows = [r for r in _published() if r["test"] == "tg512" and r["oom"] == "0" and r["gpu_count"] != "1"]
    errs = []
    for r in rows:
        p = _predict(catalog, r["model"], r["quant"], r["profile"], int(r["gpu_count"]))
        errs.append(1000 / p.tpot_ms / float(r["tokens_per_s"]) - 1)
    assert len(errs) == 54
    assert statistics.median(abs(e) for e in errs) < 0.08
    assert abs(statistics.median(errs)) < 0.03


def test_70b_on_two_cards_against_published(catalog):
    """LLaMA-3-70B Q4_K_M on 2x RTX 3090 / 2x RTX 4090 (published tg512 16.57 / 19.22 t/s): the shipped estimate
    is within 25 %, and the 4090 pair is predicted faster than the 3090 pair as published."""
    p3 = 1000 / _predict(catalog, "LLaMA-3-70B", "Q4_K_M", "RTX 3090", 2).tpot_ms
    p4 = 1000 / _predict(catalog, "LLaMA-3-70B", "Q4_K_M", "RTX 4090", 2).tpot_ms
    assert p3 == pytest.approx(16.57, rel=0.25) and p4 == pytest.approx(19.22, rel=0.25)
    assert p4 > p3


def test_allreduce_against_published_held_out():
    """vLLM's custom all-reduce (TP's per-layer cost) against aiconfigurator's measured tables on H200 SXM and
    A100 SXM (held out: the terms were fitted on H100 SXM): decode-sized messages (<= 64 Ki bf16 elements) within
    30 % on the median."""
    prof = load_profiles()
    for system, name in (("h200_sxm", "H200 SXM"), ("a100_sxm", "A100 80GB SXM4")):
        p = find_profile(name, prof)
        bw = build_machine([p, p]).link.bytes_per_s
        errs = [S.ring_allreduce_ms(int(r["message_elements"]) * 2, int(r["num_gpus"]), bw, nvlink=True)
                / float(r["latency_ms"]) - 1
                for r in csv.DictReader(AR_CSV.open()) if r["system"] == system
                and int(r["message_elements"]) <= 65536]
        assert len(errs) == 30
        assert statistics.median(abs(e) for e in errs) < 0.30, system


def test_tensor_parallel_shards_memory_per_gpu(catalog):
    """vLLM TP over 4 H100 SXM5: each GPU holds a quarter of the weights and of the KV heads (8 KV heads / 4), and
    its KV block budget is what gpu_memory_utilization leaves after them."""
    spec = catalog.models()["meta-llama/Llama-3.1-70B"]
    prof = find_profile("H100 SXM5", load_profiles())
    m = build_machine([prof] * 4)
    cfg = Config(model=spec.id, quant="FP8", engine="vllm", context_tokens=8192, batch=16, split=S.SplitPlan(
        mode="tensor"))
    p = Predictor(prof, machine=m).predict(spec, cfg, variant=catalog.variants().get((spec.id, "FP8")))
    one = Predictor(prof).predict(spec, dataclasses.replace(cfg, split=None),
                                  variant=catalog.variants().get((spec.id, "FP8")))
    assert len(p.devices) == 4
    for d in p.devices:
        assert d.weights_bytes == pytest.approx(one.weights_gpu_bytes / 4, rel=0.01)
        assert d.kv_cache_bytes == pytest.approx(one.kv_cache_bytes / 4, rel=0.01)
        assert d.kv_budget_bytes == d.budget_bytes - d.weights_bytes - d.compute_buffer_bytes - \
            d.runtime_overhead_bytes
        assert d.kv_blocks * 16 * (d.kv_cache_bytes / (8192 * 16)) <= d.kv_budget_bytes
    assert p.tpot_ms < one.tpot_ms  # four GPUs' bandwidth at once


needs_optuna = pytest.mark.skipif(importlib.util.find_spec("optuna") is None,
                                  reason="tune needs optuna (pip install 'llm-recommender[tune]')")


@needs_optuna
def test_tune_goodput_on_a_machine_matches_recommend(cli):
    """`tune --goodput` on 2x RTX 3090 (serve workload, its SLOs: TTFT 1 s, TPOT 189 ms) maximizes the goodput
    recommend shows: the grid's optimum is the configuration among recommend's candidates with the highest
    `goodput_requests_per_s` figure (one serving model, recommender.predict.serving), and every candidate is split
    over both cards. The serving model itself is checked against a published sweep in tests/predict/test_serving.py."""
    sel = ["--model", "Qwen/Qwen3-14B", "--gpu", "2x RTX 3090", "-w", "serve", "--quant", "Q4_K_M",
           "--quant", "Q8_0", "--engine", "llama.cpp"]
    rec = cli("recommend", *sel, "--per-model", "0", "--top", "100", "--json")
    assert rec.code == 0, rec.err
    d = rec.json()
    cands = [c for c in d["candidates"] + d.get("excluded", []) if c["devices"]]
    assert cands and all(len(c["devices"]) == 2 for c in cands)
    good = {(c["quant"], c["batch"], c["context_tokens"]): c["figures"]["goodput_requests_per_s"]["value"]
            for c in cands}
    assert len(set(good.values())) > 1  # the choice matters: the configurations serve at different rates
    best = max(good, key=good.get)
    r = cli("tune", "Qwen/Qwen3-14B", *sel[2:], "--kv-dtype", "default", "--goodput", "--slo-ttft", "1s",
            "--slo-tpot", "189ms", "--trials", "20", "--json")
    assert r.code == 0, r.err
    t = r.json()
    assert t["objective"] == "goodput" and t["slo"] == {"ttft_ms": 1000.0, "tpot_ms": 189.0}
    assert t["grid"]["optimum_score"] == pytest.approx(-good[best], rel=1e-6)
    opt = t["grid"]["optimum"][0]
    assert (opt["quant"], opt["batch"], opt["context_tokens"]) == best


@pytest.mark.parametrize("args", [["--goodput"], ["--slo-ttft", "2s"], ["--goodput", "--slo-tpot", "x"],
                                  ["--goodput", "--slo-tpot", "50ms", "--pareto"]])
@needs_optuna
def test_tune_goodput_bad_input(cli_inproc, args):
    assert_user_error(cli_inproc("tune", "Qwen/Qwen2.5-7B", "--gpu", "RTX 4090", "--trials", "2", *args))
