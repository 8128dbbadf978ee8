"""Refit of vLLM's single-GPU speed constants on ai-dynamo/aiconfigurator's measured vLLM GEMMs, with held-out errors.

Data (sources/published_perf/README.md): aiconfigurator's measured vLLM 0.14 GEMM latencies (kernel_source
vllm_default, CUDA events around the layer's matmul; collector/vllm), bf16 and fp8, model-sized weights
(n x k >= 16 Mi elements), on H100 SXM, H200 SXM and A100 SXM (bf16 only):
  - decode: m = 1, 2, 4, 8 tokens (aiconfigurator_gemm_decode.csv);
  - prefill: m = 256-8192 tokens, n x k >= 1 Mi elements (aiconfigurator_gemm_prefill.csv).

Models (recommender/predict/analytical.py, vLLM):
  - decode GEMM  latency = weight bytes / (bandwidth x DECODE_BW_EFFICIENCY) + VLLM_DECODE_GEMM_FIXED_MS
    (the fixed part: launch and, for fp8, the activation quantization kernel), fitted by least squares on the
    relative error;
  - prefill GEMM latency = 2 m n k / (FP16 dense peak x PREFILL_MFU), the MFU of a least-squares fit (relative
    error) with an intercept that is not shipped.
Fit: H100 SXM and A100 SXM (bf16), H100 SXM (fp8). Held out: H200 SXM, the GPU the project measures on, and, in the
leave-one-GPU-out table, each GPU in turn. The shipped constants (constants.py) must equal the fit, rounded.

    PYTHONPATH=. .venv/bin/python bench/vllm_refit.py [--json]
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
from pathlib import Path

from recommender.hardware.profiles import find_profile, load_profiles
from recommender.predict import constants as C
from recommender.predict.engines import vllm as V

ROOT = Path(__file__).resolve().parents[1]
DECODE_CSV = ROOT / "sources/published_perf/aiconfigurator_gemm_decode.csv"
PREFILL_CSV = ROOT / "sources/published_perf/aiconfigurator_gemm_prefill.csv"
SYSTEMS = {"h100_sxm": "H100 SXM5", "h200_sxm": "H200 SXM", "a100_sxm": "A100 80GB SXM4"}
BYTES = {"bfloat16": 2, "fp8": 1}
FAMILY = {"bfloat16": "float", "fp8": "fp8"}
FIT = {"bfloat16": ("h100_sxm", "a100_sxm"), "fp8": ("h100_sxm",)}
HELD_OUT = "h200_sxm"
# estimate-v2's vLLM constants (assumptions, no fixed GEMM term), for the before/after comparison
FORMER = {"decode_efficiency": {"float": 0.75, "fp8": 0.65}, "prefill_mfu": {"float": 0.4, "fp8": 0.4}}


def load(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [dict(r, m=int(r["m"]), n=int(r["n"]), k=int(r["k"]), latency_ms=float(r["latency_ms"]))
                for r in csv.DictReader(f)]


def hardware() -> dict:
    profiles = load_profiles()
    return {s: find_profile(name, profiles) for s, name in SYSTEMS.items()}


def fit_decode(rows: list[dict], hw: dict) -> tuple[float, float]:
    """(efficiency, fixed ms) minimizing the squared relative error of bytes / (bw x eff) + t0."""
    import numpy as np  # noqa: PLC0415

    x = np.array([r["n"] * r["k"] * BYTES[r["gemm_dtype"]] * 1e3 / hw[r["system"]].memory_bandwidth_bytes_per_s
                  for r in rows])  # ms at 100 % of bandwidth
    y = np.array([r["latency_ms"] for r in rows])
    a = np.vstack([x, np.ones_like(x)]).T / y[:, None]
    (inv_eff, t0), *_ = np.linalg.lstsq(a, np.ones_like(y), rcond=None)
    return 1.0 / inv_eff, t0


def decode_ms(r: dict, hw: dict, eff: float, t0: float) -> float:
    return r["n"] * r["k"] * BYTES[r["gemm_dtype"]] * 1e3 / (hw[r["system"]].memory_bandwidth_bytes_per_s * eff) + t0


def fit_prefill(rows: list[dict], hw: dict) -> float:
    """The fraction of the FP16 dense peak of the least-squares fit (relative error) of FLOPs / (peak x MFU) + t0;
    the intercept t0 (a few us per GEMM, against the 0.8 ms per layer of VLLM_PREFILL_MS_PER_LAYER) is not shipped."""
    import numpy as np  # noqa: PLC0415

    x = np.array([2.0 * r["m"] * r["n"] * r["k"] / hw[r["system"]].fp16_flops_per_s * 1e3 for r in rows])
    y = np.array([r["latency_ms"] for r in rows])
    a = np.vstack([x, np.ones_like(x)]).T / y[:, None]
    (inv_mfu, _t0), *_ = np.linalg.lstsq(a, np.ones_like(y), rcond=None)
    return 1.0 / inv_mfu


def prefill_ms(r: dict, hw: dict, mfu: float) -> float:
    return 2.0 * r["m"] * r["n"] * r["k"] / (hw[r["system"]].fp16_flops_per_s * mfu) * 1e3


def stats(pred: list[float], meas: list[float]) -> dict:
    errs = [p / m - 1.0 for p, m in zip(pred, meas)]
    a = sorted(abs(e) for e in errs)
    return {"rows": len(a), "median_abs_pct": round(statistics.median(a) * 100, 1),
            "p90_abs_pct": round(a[int(0.9 * (len(a) - 1))] * 100, 1),
            "median_signed_pct": round(statistics.median(errs) * 100, 1)}


def fmt(s: dict) -> str:
    return (f"{s['rows']:>4} rows: median |error| {s['median_abs_pct']:5.1f} %, p90 {s['p90_abs_pct']:5.1f} %, "
            f"median signed {s['median_signed_pct']:+5.1f} %")


def report() -> dict:
    hw = hardware()
    dec, pre = load(DECODE_CSV), load(PREFILL_CSV)
    out: dict = {"fit": {}, "shipped": {}, "held_out": {}, "leave_one_gpu_out": {}}
    for dtype in ("bfloat16", "fp8"):
        fam = FAMILY[dtype]
        d_rows = [r for r in dec if r["gemm_dtype"] == dtype]
        p_rows = [r for r in pre if r["gemm_dtype"] == dtype]
        eff, t0 = fit_decode([r for r in d_rows if r["system"] in FIT[dtype]], hw)
        mfu = fit_prefill([r for r in p_rows if r["system"] in FIT[dtype]], hw)
        out["fit"][dtype] = {"decode_efficiency": round(eff, 4), "decode_gemm_fixed_ms": round(t0, 5),
                             "prefill_mfu": round(mfu, 4), "fit_on": list(FIT[dtype])}
        out["shipped"][dtype] = {"decode_efficiency": V.DECODE_BW_EFFICIENCY[fam].value,
                                 "decode_gemm_fixed_ms": V.VLLM_DECODE_GEMM_FIXED_MS[fam].value,
                                 "prefill_mfu": V.PREFILL_MFU[fam].value}
        ho_d = [r for r in d_rows if r["system"] == HELD_OUT]
        ho_p = [r for r in p_rows if r["system"] == HELD_OUT]
        sh = out["shipped"][dtype]
        out["held_out"][dtype] = {
            "decode_shipped": stats([decode_ms(r, hw, sh["decode_efficiency"], sh["decode_gemm_fixed_ms"])
                                     for r in ho_d], [r["latency_ms"] for r in ho_d]),
            "decode_former": stats([decode_ms(r, hw, FORMER["decode_efficiency"][fam], 0.0) for r in ho_d],
                                   [r["latency_ms"] for r in ho_d]),
            "prefill_shipped": stats([prefill_ms(r, hw, sh["prefill_mfu"]) for r in ho_p],
                                     [r["latency_ms"] for r in ho_p]),
            "prefill_former": stats([prefill_ms(r, hw, FORMER["prefill_mfu"][fam]) for r in ho_p],
                                    [r["latency_ms"] for r in ho_p]),
        }
        systems = sorted({r["system"] for r in d_rows})
        for s in systems if len(systems) > 1 else ():
            e, t = fit_decode([r for r in d_rows if r["system"] != s], hw)
            m = fit_prefill([r for r in p_rows if r["system"] != s], hw)
            rd = [r for r in d_rows if r["system"] == s]
            rp = [r for r in p_rows if r["system"] == s]
            out["leave_one_gpu_out"][f"{dtype} {s}"] = {
                "decode": stats([decode_ms(r, hw, e, t) for r in rd], [r["latency_ms"] for r in rd]),
                "prefill": stats([prefill_ms(r, hw, m) for r in rp], [r["latency_ms"] for r in rp])}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rep = report()
    if args.json:
        print(json.dumps(rep, indent=1))
        return
    print("== vLLM single-GPU constants refit on aiconfigurator's measured vLLM 0.14 GEMMs ==")
    for dtype, f in rep["fit"].items():
        s = rep["shipped"][dtype]
        print(f"{dtype}: fitted on {', '.join(f['fit_on'])}: decode efficiency {f['decode_efficiency']:.4f} + "
              f"{f['decode_gemm_fixed_ms'] * 1e3:.2f} us per GEMM, prefill MFU {f['prefill_mfu']:.4f} of FP16 peak; "
              f"shipped {s['decode_efficiency']}, {s['decode_gemm_fixed_ms'] * 1e3:.2f} us, {s['prefill_mfu']}")
        h = rep["held_out"][dtype]
        print(f"  held-out {HELD_OUT} decode  GEMMs, shipped (refit):          {fmt(h['decode_shipped'])}")
        print(f"  held-out {HELD_OUT} decode  GEMMs, estimate-v2 assumption:   {fmt(h['decode_former'])}")
        print(f"  held-out {HELD_OUT} prefill GEMMs, shipped (refit):          {fmt(h['prefill_shipped'])}")
        print(f"  held-out {HELD_OUT} prefill GEMMs, estimate-v2 assumption:   {fmt(h['prefill_former'])}")
    print("leave one GPU out (fit on the others, predict it):")
    for key, v in rep["leave_one_gpu_out"].items():
        print(f"  {key:<19} decode  {fmt(v['decode'])}")
        print(f"  {key:<19} prefill {fmt(v['prefill'])}")


if __name__ == "__main__":
    main()
