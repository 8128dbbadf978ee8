"""Multi-GPU split and tensor-parallel error against published measurements (none of them ours: no multi-GPU machine
has been lent; the separate issue measures splits when one is).

1. llama.cpp layer split (``-sm layer``), sources/published_perf/multigpu_llamacpp.csv: XiongjieDai's llama-bench
   runs of LLaMA-3-8B/70B (Q4_K_M, F16) on 1 to 8 identical GPUs (RunPod, May 2024). Stand-ins: Llama-3.1-8B and
   Llama-3.1-70B of the catalog (the same architecture; rope scaling only changes long contexts).
   - The hop constant (LLAMA_CPP_HOP_MS) is fitted on the FIT rows only: RTX 3090, LLaMA-3-8B (Q4_K_M and F16),
     tg512, 2/4/6 GPUs,
     as (1/tg_n - 1/tg_1) / (n - 1) minus the predicted transfer time. Every other row is held out.
   - Ratio error: the prediction of the n-GPU row is the predicted n-GPU/1-GPU slow-down applied to the published
     1-GPU figure of the same GPU, model, quant and test (this isolates the split model from the single-GPU speed
     model, which bench/fit_llamacpp.py checks). Rows without a published 1-GPU row (70B on 24 GB cards) get the
     absolute error only.
   - Absolute error: the shipped analytical prediction against the published figure.
2. vLLM all-reduce (the tensor-parallel communication term), sources/published_perf/aiconfigurator_allreduce.csv:
   ai-dynamo/aiconfigurator's measured vLLM 0.14 custom all-reduce latencies (CUDA graphs, bf16) on H100 SXM,
   H200 SXM and A100 SXM, 2/4/8 GPUs. The latency terms and the bus efficiency are fitted on H100 SXM; H200 SXM and
   A100 SXM (another NVLink generation: 300 GB/s per direction) are held out.

3. vLLM decode matmuls (the per-GPU term of TP and of single-GPU vLLM), sources/published_perf/
   aiconfigurator_gemm_decode.csv: aiconfigurator's measured vLLM 0.14 GEMMs at m = 1-8 tokens. The bandwidth
   efficiency (weight bytes / latency / the profile's memory bandwidth) is fitted on H100 SXM (median) and used to
   predict the held-out H200 SXM and A100 SXM latencies; it is printed beside the shipped vLLM model (efficiency and
   fixed time per GEMM, fitted by bench/vllm_refit.py on H100 SXM and A100 SXM).

    PYTHONPATH=. .venv/bin/python bench/multigpu.py [--json]
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
from pathlib import Path

from recommender.cli.common import open_catalog
from recommender.hardware.multi import build_machine
from recommender.hardware.profiles import find_profile, load_profiles
from recommender.predict import split as S
from recommender.predict.engines import llama_cpp as L, vllm as V
from recommender.predict.predictor import Config, Predictor

ROOT = Path(__file__).resolve().parents[1]
LLAMA_CSV = ROOT / "sources/published_perf/multigpu_llamacpp.csv"
AR_CSV = ROOT / "sources/published_perf/aiconfigurator_allreduce.csv"
GEMM_CSV = ROOT / "sources/published_perf/aiconfigurator_gemm_decode.csv"
GEMM_BYTES = {"bfloat16": 2, "fp8": 1}
GEMM_FAMILY = {"bfloat16": "float", "fp8": "fp8"}
MODELS = {"LLaMA-3-8B": "meta-llama/Llama-3.1-8B", "LLaMA-3-70B": "meta-llama/Llama-3.1-70B"}
QUANTS = {"Q4_K_M": "Q4_K_M", "F16": "F16"}
TESTS = ("tg512", "pp512")
FIT_GPU, FIT_MODEL, FIT_TEST = "GeForce RTX 3090", "LLaMA-3-8B", "tg512"
# aiconfigurator system -> (profile, NVLink bytes/s per direction from profiles/links/links.yaml)
AR_SYSTEMS = {"h100_sxm": "H100 SXM5", "h200_sxm": "H200 SXM", "a100_sxm": "A100 80GB SXM4"}
AR_FIT = "h100_sxm"
SMALL_ELEMENTS = 65536  # latency-bound rows: the fit of the latency terms
LARGE_ELEMENTS = 4 * 1024 * 1024  # bandwidth-bound rows: the fit of the bus efficiency


def shape(test: str) -> dict:
    """llama-bench's test as a configuration: tgN generates N tokens from an empty context; ppN one N-token prompt."""
    n = int(test[2:])
    if test.startswith("tg"):
        return dict(context_tokens=n + 1, batch=1, prompt_tokens=1, output_tokens=n)
    return dict(context_tokens=n + 1, batch=1, prompt_tokens=n, output_tokens=1)


def tokens_per_s(pred, test: str):
    """The test's rate from the prediction; None when the profile lacks the figure the formula needs."""
    n = int(test[2:])
    ms = pred.tpot_ms if test.startswith("tg") else pred.ttft_ms
    if ms is None:
        return None
    return 1000.0 / ms if test.startswith("tg") else n * 1000.0 / ms


def predict(catalog, spec, quant: str, profile, count: int, test: str):
    devices = [profile] * count
    variant = catalog.variants().get((spec.id, quant))
    cfg = dict(model=spec.id, quant=quant, engine="llama.cpp", **shape(test))
    if count == 1:
        return Predictor(profile).predict(spec, Config(**cfg), variant=variant)
    machine = build_machine(devices)
    return Predictor(profile, machine=machine).predict(spec, Config(**cfg, split=S.SplitPlan(mode="layer")),
                                                       variant=variant)


def llama_rows():
    rows = [r for r in csv.DictReader(LLAMA_CSV.open()) if r["profile"] and r["oom"] == "0" and r["test"] in TESTS
            and r["model"] in MODELS and r["quant"] in QUANTS]
    single = {(r["profile"], r["model"], r["quant"], r["test"]): float(r["tokens_per_s"])
              for r in rows if r["gpu_count"] == "1"}
    multi = [r for r in rows if r["gpu_count"] != "1"]
    return single, multi


def fit_hop(catalog, profiles, single, multi) -> tuple[float, list[float]]:
    """(1/tg_n - 1/tg_1)/(n - 1) minus the predicted transfer, per fit row (ms); the median is the constant."""
    vals = []
    spec = catalog.models()[MODELS[FIT_MODEL]]
    for r in multi:
        if r["profile"] != FIT_GPU or r["model"] != FIT_MODEL or r["test"] != FIT_TEST:
            continue
        n = int(r["gpu_count"])
        one = single[(r["profile"], r["model"], r["quant"], r["test"])]
        measured_ms = (1000 / float(r["tokens_per_s"]) - 1000 / one) / (n - 1)
        link = build_machine([find_profile(r["profile"], profiles)] * n).link
        transfer_ms = spec.hidden_size * L.ACT_BYTES_LLAMA_CPP / link.bytes_per_s * 1e3
        vals.append(measured_ms - transfer_ms)
    return statistics.median(vals), vals


def llama_report(catalog, profiles) -> dict:
    single, multi = llama_rows()
    hop, hop_rows = fit_hop(catalog, profiles, single, multi)
    out = {"hop_fit_ms": hop, "hop_fit_rows_ms": hop_rows, "hop_shipped_ms": L.LLAMA_CPP_HOP_MS.value, "rows": []}
    for r in multi:
        fit = r["profile"] == FIT_GPU and r["model"] == FIT_MODEL and r["test"] == FIT_TEST
        spec = catalog.models()[MODELS[r["model"]]]
        prof = find_profile(r["profile"], profiles)
        n = int(r["gpu_count"])
        p_n = predict(catalog, spec, r["quant"], prof, n, r["test"])
        pub = float(r["tokens_per_s"])
        if tokens_per_s(p_n, r["test"]) is None:
            out.setdefault("skipped", []).append(f"{n}x {prof.name} {r['test']}: {'; '.join(p_n.notes)}")
            continue
        row = {"gpus": f"{n}x {r['profile']}", "model": r["model"], "quant": r["quant"], "test": r["test"],
               "published_tokens_per_s": pub, "set": "fit" if fit else "held-out",
               "fits": all(d.fits for d in p_n.devices),
               "predicted_tokens_per_s": tokens_per_s(p_n, r["test"])}
        row["abs_error"] = row["predicted_tokens_per_s"] / pub - 1
        one = single.get((r["profile"], r["model"], r["quant"], r["test"]))
        if one is not None:
            p_1 = predict(catalog, spec, r["quant"], prof, 1, r["test"])
            ratio = tokens_per_s(p_n, r["test"]) / tokens_per_s(p_1, r["test"])
            row["published_1gpu_tokens_per_s"] = one
            row["ratio_predicted_tokens_per_s"] = one * ratio
            row["ratio_error"] = one * ratio / pub - 1
        out["rows"].append(row)
    return out


def split_step_fit(lr: dict) -> dict:
    """The per-device step of a layer split (LLAMA_CPP_SPLIT_DEVICE_STEP_MS), fitted on the absolute tg512 figures of
    every n-GPU row (n >= 2): time = the split model without the term + D x n, D >= 0, least squares of the relative
    time error (minimizes sum ((t_model + D n - t_pub) / t_pub)^2: D = sum(n r / t) / sum(n^2 / t^2) with r the
    shortfall t_pub - t_model). Leave-one-GPU-type-out: each type's rows predicted with D fitted on the other types.
    Returns the fitted D and the absolute / ratio errors (tok/s, positive = predicted faster) without the term,
    leave-one-GPU-type-out and with the shipped constant."""
    shipped = L.LLAMA_CPP_SPLIT_DEVICE_STEP_MS.value
    rows = [r for r in lr["rows"] if r["test"] == "tg512"]
    for r in rows:
        r["n"] = int(r["gpus"].split("x", 1)[0])
        r["t_pub_ms"] = 1000 / r["published_tokens_per_s"]
        r["t_base_ms"] = 1000 / r["predicted_tokens_per_s"] - r["n"] * shipped  # the split model without the term

    def fit(sub):
        num = sum(r["n"] * (r["t_pub_ms"] - r["t_base_ms"]) / r["t_pub_ms"] ** 2 for r in sub)
        den = sum(r["n"] ** 2 / r["t_pub_ms"] ** 2 for r in sub)
        return max(num / den, 0.0)

    def err(r, d):
        return r["t_pub_ms"] / (r["t_base_ms"] + d * r["n"]) - 1

    def ratio_err(r, d):  # the published 1-GPU row x the predicted n-GPU / 1-GPU slow-down
        one = r.get("published_1gpu_tokens_per_s")
        if one is None or r["set"] == "fit":
            return None
        # the predicted 1-GPU time, from the shipped ratio (t1 / tn)
        t1 = (r["ratio_predicted_tokens_per_s"] / one) * (1000 / r["predicted_tokens_per_s"])
        return one * t1 / (r["t_base_ms"] + d * r["n"]) / r["published_tokens_per_s"] - 1

    types = sorted({r["gpus"].split("x ", 1)[1] for r in rows})
    logo, per_type = [], {}
    for g in types:
        d = fit([r for r in rows if not r["gpus"].endswith("x " + g)])
        per_type[g] = d
        logo += [err(r, d) for r in rows if r["gpus"].endswith("x " + g)]
    d_all = fit(rows)
    ratio = lambda d: [e for e in (ratio_err(r, d) for r in rows) if e is not None]  # noqa: E731
    return {"fitted_ms": d_all, "shipped_ms": shipped, "types": len(types), "logo_ms": per_type,
            "abs_without": [err(r, 0.0) for r in rows], "abs_logo": logo, "abs_shipped": [err(r, shipped) for r in rows],
            "ratio_without": ratio(0.0), "ratio_shipped": ratio(shipped)}


def allreduce_rows():
    rows = list(csv.DictReader(AR_CSV.open()))
    for r in rows:
        r["n"] = int(r["num_gpus"])
        r["bytes"] = int(r["message_elements"]) * 2  # bf16
        r["ms"] = float(r["latency_ms"])
    return rows


def link_bw(system: str, profiles) -> float:
    prof = find_profile(AR_SYSTEMS[system], profiles)
    return build_machine([prof, prof]).link.bytes_per_s


def fit_allreduce(rows, profiles) -> dict:
    fit = [r for r in rows if r["system"] == AR_FIT]
    small = [r for r in fit if int(r["message_elements"]) <= SMALL_ELEMENTS]
    # latency(n) = a + b (n - 2): least squares over the small messages
    xs = [r["n"] - 2 for r in small]
    ys = [r["ms"] for r in small]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    a = my - b * mx
    bw = link_bw(AR_FIT, profiles)
    large = [r for r in fit if int(r["message_elements"]) >= LARGE_ELEMENTS]
    effs = [2 * (r["n"] - 1) / r["n"] * r["bytes"] / ((r["ms"] - a - b * (r["n"] - 2)) / 1e3) / bw for r in large]
    return {"latency_ms": a, "latency_per_gpu_ms": b, "bus_efficiency": statistics.median(effs)}


def allreduce_report(profiles) -> dict:
    rows = allreduce_rows()
    fitted = fit_allreduce(rows, profiles)
    out = {"fitted": fitted, "shipped": {"latency_ms": V.VLLM_ALLREDUCE_LATENCY_MS.value,
                                         "latency_per_gpu_ms": V.VLLM_ALLREDUCE_LATENCY_PER_GPU_MS.value,
                                         "bus_efficiency": V.VLLM_ALLREDUCE_BUS_EFFICIENCY.value}, "rows": []}
    for r in rows:
        bw = link_bw(r["system"], profiles)
        pred = V.ring_allreduce_ms(r["bytes"], r["n"], bw, nvlink=True)
        out["rows"].append({"system": r["system"], "n": r["n"], "elements": int(r["message_elements"]),
                            "published_ms": r["ms"], "predicted_ms": pred, "error": pred / r["ms"] - 1,
                            "set": "fit" if r["system"] == AR_FIT else "held-out"})
    return out


def gemm_report(profiles) -> dict:
    rows = list(csv.DictReader(GEMM_CSV.open()))
    bw = {s: find_profile(n, profiles).memory_bandwidth_bytes_per_s for s, n in AR_SYSTEMS.items()}

    def eff(r):
        return int(r["n"]) * int(r["k"]) * GEMM_BYTES[r["gemm_dtype"]] / (float(r["latency_ms"]) / 1e3) / \
            bw[r["system"]]

    out = {"fitted": {}, "shipped": {}, "errors": {}}
    for dt in GEMM_BYTES:
        fit = [eff(r) for r in rows if r["system"] == AR_FIT and r["gemm_dtype"] == dt]
        e = statistics.median(fit)
        out["fitted"][dt] = e
        out["shipped"][dt] = V.DECODE_BW_EFFICIENCY[GEMM_FAMILY[dt]].value
        t0 = V.VLLM_DECODE_GEMM_FIXED_MS[GEMM_FAMILY[dt]].value  # the shipped model's fixed time per GEMM
        for sysname in AR_SYSTEMS:
            sel = [r for r in rows if r["system"] == sysname and r["gemm_dtype"] == dt]
            if not sel:
                continue
            for label, e_use, fixed in (("fitted", e, 0.0), ("shipped", out["shipped"][dt], t0)):
                errs = [(int(r["n"]) * int(r["k"]) * GEMM_BYTES[dt] / (bw[sysname] * e_use) * 1e3 + fixed)
                        / float(r["latency_ms"]) - 1 for r in sel]
                out["errors"][f"{sysname}/{dt}/{label}"] = errs
    return out


def _summ(errs: list[float]) -> str:
    if not errs:
        return "no rows"
    a = sorted(abs(e) for e in errs)
    return (f"{len(a)} rows: median |error| {statistics.median(a) * 100:.1f} %, "
            f"p90 {a[int(0.9 * (len(a) - 1))] * 100:.1f} %, max {a[-1] * 100:.1f} %, "
            f"median signed {statistics.median(errs) * 100:+.1f} %")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    catalog = open_catalog()
    profiles = load_profiles()
    lr = llama_report(catalog, profiles)
    ar = allreduce_report(profiles)
    gm = gemm_report(profiles)
    if args.json:
        print(json.dumps({"llama_cpp_layer_split": lr, "vllm_allreduce": ar, "vllm_decode_gemm": gm}, indent=2))
        return
    print("== llama.cpp -sm layer against XiongjieDai/GPU-Benchmarks-on-LLM-Inference (published, May 2024) ==")
    print(f"hop latency fitted on {FIT_GPU} {FIT_MODEL} {FIT_TEST} (Q4_K_M, F16; 2/4/6 GPUs): "
          f"{', '.join(f'{v:.3f}' for v in lr['hop_fit_rows_ms'])} ms -> median {lr['hop_fit_ms']:.3f} ms "
          f"(shipped LLAMA_CPP_HOP_MS = {lr['hop_shipped_ms']} ms)")
    print(f"{'GPUs':28} {'model':12} {'quant':6} {'test':6} {'set':8} {'published':>9} {'ratio-pred':>10} "
          f"{'err':>7} {'abs-pred':>9} {'err':>7}")
    for r in lr["rows"]:
        rp = r.get("ratio_predicted_tokens_per_s")
        print(f"{r['gpus']:28} {r['model']:12} {r['quant']:6} {r['test']:6} {r['set']:8} "
              f"{r['published_tokens_per_s']:9.1f} "
              + (f"{rp:10.1f} {r['ratio_error'] * 100:+6.1f}%" if rp else f"{'-':>10} {'-':>7}")
              + f" {r['predicted_tokens_per_s']:9.1f} {r['abs_error'] * 100:+6.1f}%")
    for test in TESTS:
        held = [r for r in lr["rows"] if r["set"] == "held-out" and r["test"] == test]
        print(f"held-out {test}, split model (ratio to the published 1-GPU row): "
              f"{_summ([r['ratio_error'] for r in held if 'ratio_error' in r])}")
        print(f"held-out {test}, absolute (shipped analytical model): {_summ([r['abs_error'] for r in held])}")
    st = split_step_fit(lr)
    print(f"per-device step of a layer split (tg512, every n-GPU row, {st['types']} GPU types): fitted "
          f"{st['fitted_ms']:.3f} ms per device per token (shipped LLAMA_CPP_SPLIT_DEVICE_STEP_MS = "
          f"{st['shipped_ms']} ms); leave-one-GPU-type-out fits {min(st['logo_ms'].values()):.3f}-"
          f"{max(st['logo_ms'].values()):.3f} ms")
    print(f"  tg512 absolute, without the term:            {_summ(st['abs_without'])}")
    print(f"  tg512 absolute, leave-one-GPU-type-out:      {_summ(st['abs_logo'])}")
    print(f"  tg512 absolute, shipped constant (in-sample): {_summ(st['abs_shipped'])}")
    print(f"  tg512 ratio to the 1-GPU row, without / with: {_summ(st['ratio_without'])} / "
          f"{_summ(st['ratio_shipped'])}")
    print()
    print("== vLLM custom all-reduce (TP communication) against ai-dynamo/aiconfigurator measured tables ==")
    f, s = ar["fitted"], ar["shipped"]
    print(f"fitted on {AR_FIT}: latency {f['latency_ms'] * 1e3:.2f} us + {f['latency_per_gpu_ms'] * 1e3:.2f} us per GPU "
          f"beyond 2, bus efficiency {f['bus_efficiency']:.3f}; shipped {s['latency_ms'] * 1e3:.2f} us, "
          f"{s['latency_per_gpu_ms'] * 1e3:.2f} us, {s['bus_efficiency']:.3f}")
    for sysname in AR_SYSTEMS:
        for lo, hi, label in ((0, SMALL_ELEMENTS, "<= 64 Ki elements (decode: batch x hidden)"),
                              (SMALL_ELEMENTS + 1, 10 ** 12, "> 64 Ki elements (prefill)")):
            errs = [r["error"] for r in ar["rows"] if r["system"] == sysname and lo <= r["elements"] <= hi]
            tag = "fit" if sysname == AR_FIT else "held-out"
            print(f"{tag:8} {sysname:9} {label:44} {_summ(errs)}")
    print()
    print("== vLLM decode GEMMs (m = 1-8) against ai-dynamo/aiconfigurator measured tables ==")
    for dt in GEMM_BYTES:
        print(f"{dt}: bandwidth efficiency fitted on {AR_FIT} {gm['fitted'][dt]:.3f} (median, no fixed term); "
              f"shipped vLLM DECODE_BW_EFFICIENCY['{GEMM_FAMILY[dt]}'] = {gm['shipped'][dt]} + "
              f"VLLM_DECODE_GEMM_FIXED_MS (bench/vllm_refit.py)")
        for sysname in AR_SYSTEMS:
            for label in ("fitted", "shipped"):
                errs = gm["errors"].get(f"{sysname}/{dt}/{label}")
                if errs is None:
                    continue
                tag = "fit" if sysname == AR_FIT else "held-out"
                print(f"  {tag:8} {sysname:9} with the {label:7} efficiency: GEMM latency {_summ(errs)}")


if __name__ == "__main__":
    main()
