"""(estimate-v1, superseded by bench/gpu_loo.py: the per-family fit and its leave-one-GPU-out errors.) Fit llama.cpp's decode and prefill constants on published llama-bench figures; report held-out error.

Data: sources/published_perf/ — the llama.cpp CUDA scoreboard (discussion #15013, Llama-2-7B Q4_0, no flash
attention), restricted to GPUs with a shipped profile. GPUs are sorted by name and split alternately: even positions
fit, odd positions are held out. Models fitted (see docs/estimates.md):

  decode:  ms/token = bytes read per step / (bandwidth x e) + o        (least squares in x = bytes/bandwidth)
  prefill: MFU = achieved FLOP/s / dense FP16 peak                     (median over the fit GPUs)

It prints the fitted values, the error on fit and held-out GPUs with the constants currently in
recommender/predict/constants.py, and what the fitted values would give. A report, not a test.

    .venv/bin/python bench/fit_llamacpp.py [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics


from recommender.hardware.profiles import load_profiles
from recommender.predict import constants as C
from recommender.predict.predictor import Config, Predictor
from recommender.predict.reference import predict, reference_spec, scoreboard



def analytical(spec, quant: str, hw, **shape):
    """The Predictor's analytical prediction (no calibration, no measured row: this fits the analytical constants)."""
    return Predictor(hw).predict(spec, Config(model=spec.id, quant=quant, engine="llama.cpp", **shape))

def split(rows):
    gpus = sorted({hw.name for _, hw in rows})
    fit = set(gpus[0::2])
    return [r for r in rows if r[1].name in fit], [r for r in rows if r[1].name not in fit]


def fit_decode(spec, rows):
    xs, ys = [], []
    for r, hw in rows:
        if r.test != "tg128":
            continue
        e = analytical(spec, r.quant, hw, context_tokens=256, prompt_tokens=1, output_tokens=128)
        xs.append(e.decode_bytes_per_step / hw.memory_bandwidth_bytes_per_s * 1e3)  # ms at 100 % bandwidth
        ys.append(1e3 / r.tokens_per_s)  # measured ms/token
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return {"efficiency": 1 / slope, "overhead_ms": my - slope * mx, "n": n}


def fit_prefill(spec, rows, peak_field):
    """Median fraction of a peak (fp16_flops_per_s or int8_ops_per_s) that llama-bench pp512 reached."""
    mfus = []
    for r, hw in rows:
        peak = getattr(hw, peak_field)
        if r.test != "pp512" or not peak:
            continue
        e = analytical(spec, r.quant, hw, context_tokens=1024, prompt_tokens=512, output_tokens=1)
        achieved = e.terms["prefill_flops"] / (512 / r.tokens_per_s)
        mfus.append(achieved / peak)
    if not mfus:
        return None
    return {"mfu": statistics.median(mfus), "n": len(mfus), "range": [min(mfus), max(mfus)]}


def fit_float_from_pr(spec, overhead_ms):
    """F16 efficiency from the one RTX 4090 F16 tg128 reading (PR #4766), given the fitted per-token overhead."""
    from recommender.hardware.profiles import find_profile
    from recommender.predict.reference import readings

    profiles = load_profiles()
    for r in readings():
        if r.quant == "F16" and r.test == "tg128" and "4766" in r.source_url:
            hw = find_profile(r.gpu, profiles)
            e = analytical(spec, "F16", hw, context_tokens=256, prompt_tokens=1, output_tokens=128)
            x_ms = e.decode_bytes_per_step / hw.memory_bandwidth_bytes_per_s * 1e3
            pre = [q for q in readings() if q.quant == "F16" and q.test == "pp512" and "4766" in q.source_url][0]
            ep = analytical(spec, "F16", hw, context_tokens=1024, prompt_tokens=512, output_tokens=1)
            mfu = ep.terms["prefill_flops"] / (512 / pre.tokens_per_s) / hw.fp16_flops_per_s
            return {"efficiency": x_ms / (1e3 / r.tokens_per_s - overhead_ms), "prefill_mfu": mfu, "gpu": hw.name}
    return None


def errors(spec, rows):
    out = {}
    for test in ("tg128", "pp512"):
        errs = []
        for r, hw in rows:
            if r.test != test:
                continue
            p = predict(spec, r, hw)
            if p is not None:
                errs.append(abs(p - r.tokens_per_s) / r.tokens_per_s)
        if errs:
            out[test] = {"n": len(errs), "median_abs_pct": 100 * statistics.median(errs),
                         "max_abs_pct": 100 * max(errs)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    spec = reference_spec()
    rows = scoreboard(load_profiles())
    fit_rows, held = split(rows)
    res = {
        "gpus_fit": sorted({hw.name for _, hw in fit_rows}),
        "gpus_held_out": sorted({hw.name for _, hw in held}),
        "fitted_decode": fit_decode(spec, fit_rows),
        "fitted_prefill_fp16": fit_prefill(spec, fit_rows, "fp16_flops_per_s"),
        "fitted_prefill_int8": fit_prefill(spec, fit_rows, "int8_ops_per_s"),
        "fitted_float": None,
        "current_constants": {
            "decode_efficiency_gguf": C.DECODE_BW_EFFICIENCY["llama.cpp"]["gguf"].value,
            "decode_overhead_ms": C.DECODE_OVERHEAD_MS["llama.cpp"].value,
            "prefill_mfu_gguf_fp16_fallback": C.PREFILL_MFU["llama.cpp"]["gguf"].value,
            "prefill_mfu_gguf_int8": C.PREFILL_MFU["llama.cpp"]["gguf-int8"].value,
        },
        "error_current_constants": {"fit": errors(spec, fit_rows), "held_out": errors(spec, held)},
    }
    res["fitted_float"] = fit_float_from_pr(spec, res["fitted_decode"]["overhead_ms"])
    res["current_constants"]["decode_efficiency_float"] = C.DECODE_BW_EFFICIENCY["llama.cpp"]["float"].value
    res["current_constants"]["prefill_mfu_float"] = C.PREFILL_MFU["llama.cpp"]["float"].value
    if args.json:
        print(json.dumps(res, indent=2))
        return
    d = res["fitted_decode"]
    print(f"fit GPUs ({len(res['gpus_fit'])}): {', '.join(res['gpus_fit'])}")
    print(f"held-out GPUs ({len(res['gpus_held_out'])}): {', '.join(res['gpus_held_out'])}")
    print(f"decode fit: efficiency {d['efficiency']:.3f}, overhead {d['overhead_ms']:.3f} ms/token ({d['n']} rows)")
    for key in ("fitted_prefill_fp16", "fitted_prefill_int8"):
        p = res[key]
        print(f"prefill {key[-4:]} fit: MFU {p['mfu']:.3f} (median of {p['n']}, range {p['range'][0]:.3f}-"
              f"{p['range'][1]:.3f})")
    f = res["fitted_float"]
    print(f"F16 from PR #4766 ({f['gpu']}): decode efficiency {f['efficiency']:.3f}, prefill MFU {f['prefill_mfu']:.3f}")
    print(f"constants in use: {res['current_constants']}")
    for part in ("fit", "held_out"):
        for test, e in res["error_current_constants"][part].items():
            print(f"  {part:8s} {test}: median |error| {e['median_abs_pct']:.1f} %, max {e['max_abs_pct']:.1f} % "
                  f"({e['n']} GPUs)")


if __name__ == "__main__":
    main()
