"""Leave-one-GPU-out errors of llama.cpp's decode and prefill predictions, by segment and backend; writes the family
table the estimator uses.

Data: llama.cpp's own scoreboards, copied in sources/published_perf/ (discussion #15013 CUDA, #15021 ROCm, #10879
Vulkan, #4167 Apple; Llama-2-7B Q4_0/Q8_0, pp512 and tg128, flash attention off), each row on the profile its GPU name
designates (names several variants share only where the variants' bandwidth and peaks agree), plus the project's own
measured dense llama.cpp rows (sources/measurements: H200, llama-cpp-python, batch 1, f16 cache, 4K context).

For each GPU: fit the family table (recommender.predict.reference.fit_families) on every other GPU, predict this GPU
from its most specific family that still has a fit (its backend when it was its family's only GPU), and compare with
what was published or measured. Families: recommender.predict.analytical.speed_family. A report, not a test.

It also fits and checks the scalar llama.cpp terms measured on particular rows (quantized KV cache, MoE, batched
decode: kv_quant_fit, moe_fit, batched_fit) and prints the batched-decode rows against the prediction.

    python bench/gpu_loo.py            # the tables (markdown), with the shipped constants
    python bench/gpu_loo.py --write    # also fit on every GPU and write recommender/predict/family_speeds.py: the
                                       # family table and FITTED_TERMS (the one place their values live; constants.py
                                       # names them with units and sources)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import contextlib
import io
import json
import statistics
import sys
from pathlib import Path

from recommender.catalog.build import load_measurements, load_models
from recommender.core.paths import SOURCES_DIR
from recommender.hardware.profiles import load_profiles, match_profile
from recommender.predict import constants as C
from recommender.predict.engines import llama_cpp as L
from recommender.predict.analytical import clear_memos, estimate, prefill_peak, speed_family
from recommender.predict.counts import moe_layers
from recommender.predict.reference import Point, board_points, fit_families, leave_one_gpu_out

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "recommender" / "predict" / "family_speeds.py"


def measured_points(profiles) -> list[Point]:
    """The project's dense llama.cpp rows as decode and prefill points (batch 1, f16 cache, <= 4K context, every layer
    on the GPU, GGUF-quantized weights)."""
    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    out = []
    for m in load_measurements(SOURCES_DIR):
        spec = specs.get(m.model_id)
        if (m.status != "ok" or m.engine != "llama.cpp" or m.batch != 1 or m.kv_dtype != "f16" or spec is None
                or spec.is_moe or m.context_tokens > 4096 or not m.tpot_ms or spec.num_swa_layers):
            continue
        hw = match_profile(m.hardware_name, profiles)
        if hw is None or hw.backend == "cpu":
            continue
        e = estimate(spec, m.quant, "llama.cpp", hw, context_tokens=m.context_tokens, prompt_tokens=m.prompt_tokens,
                     output_tokens=m.output_tokens)
        if m.quant in ("F16", "BF16"):
            continue  # the table is for GGUF-quantized weights
        out.append(Point(hw.name, hw.backend, "decode", e.decode_bytes_per_step / hw.memory_bandwidth_bytes_per_s
                         * 1e3, m.tpot_ms, f"measurement {m.id}"))
        peak, _, kind = prefill_peak(hw)
        if m.ttft_ms and peak:
            out.append(Point(hw.name, hw.backend, "prefill", e.prefill_flops / peak * 1e3, m.ttft_ms,
                             f"measurement {m.id}", kind))
    return out


KV_CSV = SOURCES_DIR / "measurements" / "h200-long-context-kv.csv"


def kv_quant_fit(profiles) -> tuple[float, float, int]:
    """A quantized KV cache's decode time on llama.cpp from the H200 long-context sweep (llama-bench, depth 0-65,536,
    f16/q8_0/q4_0): for each quantized row, its ms/token less its model's f16 ms/token at depth 0, least squares on
    a x layers + c x (cached tokens x layers x query heads x head_dim). The cached tokens: depth + half of tg128."""
    import csv

    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    with KV_CSV.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    base = {r["model_id"]: 1e3 / float(r["tg128_tokens_per_s"]) for r in rows
            if r["kv_type"] == "f16" and r["depth_tokens"] == "0"}
    eqs = []
    for r in rows:
        if r["kv_type"] == "f16":
            continue
        s = specs[r["model_id"]]
        z = (int(r["depth_tokens"]) + 64) * s.num_layers * s.num_attention_heads * s.head_dim
        eqs.append((s.num_layers, z, 1e3 / float(r["tg128_tokens_per_s"]) - base[r["model_id"]]))
    sll = sum(L * L for L, _, _ in eqs); slz = sum(L * z for L, z, _ in eqs); szz = sum(z * z for _, z, _ in eqs)
    sly = sum(L * y for L, _, y in eqs); szy = sum(z * y for _, z, y in eqs)
    det = sll * szz - slz * slz
    return (sly * szz - szy * slz) / det, (sll * szy - slz * sly) / det, len(eqs)


def long_context_check(profiles) -> list[tuple]:
    """Predicted (analytical) against measured tg128 ms/token on the H200 sweep, every model x KV type x depth."""
    import csv

    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    hw = match_profile("NVIDIA H200", profiles)
    out = []
    with KV_CSV.open(newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            d = int(r["depth_tokens"])
            e = estimate(specs[r["model_id"]], r["quant"], "llama.cpp", hw, context_tokens=d + 128, prompt_tokens=d
                         if d else 1, output_tokens=128, kv_dtype=r["kv_type"])
            out.append((r["model_id"], r["kv_type"], d, 1e3 / float(r["tg128_tokens_per_s"]), e.tpot_ms))
    return out


def moe_fit(profiles) -> dict:
    """MoE on llama.cpp from measured MoE rows: the project's H200 Qwen3-30B-A3B rows (GGUF-quantized, batch 1) and the
    DGX Spark Qwen3-Coder-30B-A3B Q8_0 bench (llama.cpp benches/dgx-spark.md, tg32 / pp2048 at depth 0, in
    sources/published_perf). Decode: the time beyond what the dense terms give for the touched-expert bytes, per
    layer (expert routing and mul_mat_id launches); prefill: the factor on the matmul FLOPs time (attention unchanged).
    Both are medians over the rows; the terms are taken with the MoE constants set to neutral values."""
    import csv

    from recommender.predict.analytical import llama_cpp_latency_terms

    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    rows = []  # (spec, quant, hw, context, prompt, output, measured tpot ms or None, measured prefill ms or None)
    for m in load_measurements(SOURCES_DIR):
        spec = specs.get(m.model_id)
        if (m.status == "ok" and m.engine == "llama.cpp" and spec is not None and spec.is_moe and m.batch == 1
                and m.kv_dtype == "f16" and m.quant not in ("F16", "BF16")):
            hw = match_profile(m.hardware_name, profiles)
            if hw is not None:
                rows.append((spec, m.quant, hw, m.context_tokens, m.prompt_tokens, m.output_tokens, m.tpot_ms,
                             m.ttft_ms, f"measurement {m.id}"))
    spark = match_profile("NVIDIA GB10", profiles)
    with (SOURCES_DIR / "published_perf" / "llamacpp_scoreboards_gpu.csv").open(newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if r["source_id"] == "llamacpp_benches_dgx_spark" and "qwen3moe 30B.A3B" in r["model"]:
                spec = specs["Qwen/Qwen3-30B-A3B"]  # Qwen3-Coder-30B-A3B has the Qwen3-30B-A3B layout
                if r["test"] == "tg32":
                    rows.append((spec, r["quant"], spark, 2048, 1, 32, 1e3 / float(r["tokens_per_s"]), None,
                                 r["source_url"]))
                if r["test"] == "pp2048":
                    rows.append((spec, r["quant"], spark, 4096, 2048, 1, None,
                                 2048 / float(r["tokens_per_s"]) * 1e3, r["source_url"]))
    saved = (C.MOE_DECODE_MS_PER_LAYER, C.MOE_PREFILL_MATMUL_FACTOR)
    C.MOE_DECODE_MS_PER_LAYER = C.Const(0.0, "", "")
    C.MOE_PREFILL_MATMUL_FACTOR = C.Const(1.0, "", "")
    dec, pre = [], []
    try:
        for spec, quant, hw, ctx, prompt, out, tpot, pre_ms, src in rows:
            e = estimate(spec, quant, "llama.cpp", hw, context_tokens=ctx, prompt_tokens=prompt, output_tokens=out)
            if tpot:
                dec.append(((tpot - e.tpot_ms) / moe_layers(spec), src))
            t = llama_cpp_latency_terms(hw, "gguf")
            if pre_ms and t and t["mfu"]:
                rate = t["peak"] * t["mfu"]
                mm = e.prefill_flops - e.prefill_attention_flops
                pre.append(((pre_ms / 1e3 * rate - e.prefill_attention_flops) / mm, src))
    finally:
        C.MOE_DECODE_MS_PER_LAYER, C.MOE_PREFILL_MATMUL_FACTOR = saved
    return {"decode_ms_per_layer": statistics.median(x for x, _ in dec), "decode_rows": len(dec),
            "prefill_matmul_factor": statistics.median(x for x, _ in pre), "prefill_rows": len(pre),
            "decode_each": [round(x, 4) for x, _ in dec], "prefill_each": [round(x, 2) for x, _ in pre]}


BATCHED_H200_CSV = SOURCES_DIR / "measurements" / "h200-batched-decode.csv"
BATCHED_SPARK_CSV = SOURCES_DIR / "published_perf" / "dgx_spark_batched_decode.csv"


def batched_rows(profiles) -> list[tuple]:
    """The llama-batched-bench decode rows: (source, spec, quant, hw, batch, prompt tokens each, generated tokens each,
    measured step ms = batch / S_TG): the project's H200 rows and llama.cpp's DGX Spark rows (benches/dgx-spark.md)."""
    import csv

    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    out = []
    for path, gpu in ((BATCHED_H200_CSV, "NVIDIA H200"), (BATCHED_SPARK_CSV, "NVIDIA GB10")):
        hw = match_profile(gpu, profiles)
        with path.open(newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                b = int(r["parallel_sequences"])
                out.append((path.name, specs[r["model_id"]], r["quant"], hw, b, int(r["prompt_tokens_each"]),
                            int(r["gen_tokens_each"]), b / float(r["tg_tokens_per_s_all_sequences"]) * 1e3))
    return out


def _batched_tpot(spec, quant, hw, b, prompt, gen) -> float:
    return estimate(spec, quant, "llama.cpp", hw, context_tokens=prompt + gen, batch=b, prompt_tokens=prompt,
                    output_tokens=gen).tpot_ms


def batched_fit(profiles) -> tuple[float, int]:
    """LLAMA_CPP_MMVQ_FP32_FRACTION from the H200 rows with 2-8 sequences (mul_mat_vec_q): for each, the column time
    (measured step - the estimate with the column term taken out) against (batch - 1) x 2 x matmul params / FP32 rate;
    the median over the rows."""
    from recommender.predict.analytical import decode_flops

    saved = C.LLAMA_CPP_MMVQ_FP32_FRACTION
    C.LLAMA_CPP_MMVQ_FP32_FRACTION = C.Const(1e30, "", "")  # no column time
    ks = []
    try:
        for src, spec, quant, hw, b, prompt, gen, ms in batched_rows(profiles):
            if src == BATCHED_H200_CSV.name and 1 < b <= C.LLAMA_CPP_MMVQ_MAX_BATCH.value:
                col_ms = ms - _batched_tpot(spec, quant, hw, b, prompt, gen)
                ks.append((b - 1) * decode_flops(spec, 0, 1) / (col_ms / 1e3) / hw.fp32_flops_per_s)
    finally:
        C.LLAMA_CPP_MMVQ_FP32_FRACTION = saved
    return statistics.median(ks), len(ks)


def batched_check(profiles) -> list[tuple]:
    """(source, gpu, model, quant, batch, prompt, measured step ms, predicted TPOT ms) for every batched row."""
    out = []
    for src, spec, quant, hw, b, prompt, gen, ms in batched_rows(profiles):
        out.append((src, hw.name, spec.id, quant, b, prompt, ms, _batched_tpot(spec, quant, hw, b, prompt, gen)))
    return out


def fit_check(profiles) -> tuple[int, int, float]:
    """No false "fits": for every shipped measured llama.cpp row (the cache layouts the estimate models), the predicted
    GPU memory against NVML's measured peak. Returns (rows, rows predicted below the measurement, the largest shortfall
    as a fraction of the measurement): a card with exactly the predicted memory would not have held those rows."""
    specs = {m.id: m for m in load_models(SOURCES_DIR)}
    n = under = 0
    worst = 0.0
    for m in load_measurements(SOURCES_DIR):
        spec = specs.get(m.model_id)
        hw = match_profile(m.hardware_name, profiles)
        if (m.status != "ok" or m.engine != "llama.cpp" or spec is None or hw is None or not m.peak_vram_bytes
                or (spec.num_swa_layers and m.raw["engine"]["details"].get("swa_full"))):
            continue
        e = estimate(spec, m.quant, "llama.cpp", hw, context_tokens=m.context_tokens, batch=m.batch,
                     prompt_tokens=m.prompt_tokens, output_tokens=m.output_tokens, kv_dtype=m.kv_dtype)
        n += 1
        if e.total_vram_bytes < m.peak_vram_bytes:
            under += 1
            worst = max(worst, (m.peak_vram_bytes - e.total_vram_bytes) / m.peak_vram_bytes)
    return n, under, worst


def segments() -> dict[str, str]:
    data = json.loads((SOURCES_DIR / "gpus" / "names.json").read_text())
    return {p["name"]: p["segment"] for p in data["profiles"]}


def pct(v: list[float], q: float) -> float:
    v = sorted(v)
    i = (len(v) - 1) * q
    lo, hi = int(i), min(int(i) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (i - lo)


def v1(p: Point, hw):
    """What estimate-v1's single constants predicted for this point (for the comparison column; None: v1 had no
    TTFT for a profile without a tensor peak)."""
    if p.test == "decode":
        return p.x / V1_DECODE_EFFICIENCY + V1_DECODE_OVERHEAD_MS
    if p.peak == "fp32" or (p.peak == "int8" and not hw.int8_ops_per_s):
        return None
    if p.peak == "int8":  # v1 counted against the INT8 tensor peak; x is FLOPs / the MMQ rate (prefill_peak)
        return p.x * prefill_peak(hw)[0] / hw.int8_ops_per_s / V1_MFU_INT8
    return p.x / V1_MFU_FP16  # x = FLOPs / the FP16 peak


# estimate-v1's single constants (still constants.py's fallback for a GPU without a family fit), for comparison only
V1_DECODE_EFFICIENCY = L.DECODE_BW_EFFICIENCY["gguf"].value
V1_DECODE_OVERHEAD_MS = L.DECODE_OVERHEAD_MS.value
V1_MFU_INT8 = L.PREFILL_MFU["gguf-int8"].value
V1_MFU_FP16 = L.PREFILL_MFU["gguf"].value



def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write recommender/predict/family_speeds.py")
    ap.add_argument("--check", action="store_true",
                    help="write nothing, print no tables; exit 1 if family_speeds.py is not what --write would write")
    a = ap.parse_args(argv)
    if a.check:
        with contextlib.redirect_stdout(io.StringIO()):
            text = _run(a, fit=True)
        if OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT.relative_to(ROOT)} is stale: rerun `python bench/gpu_loo.py --write`", file=sys.stderr)
            return 1
        return 0
    text = _run(a, fit=a.write)
    if a.write:
        OUT.write_text(text, encoding="utf-8")
        print(f"\nwrote {OUT.relative_to(ROOT)}", file=sys.stderr)
    return 0


def _run(a, fit: bool) -> str:
    """Print the tables; with ``fit``, fit on every GPU and return the text of family_speeds.py."""
    profiles = load_profiles()
    by_name = {p.name: p for p in profiles}
    fam_of = lambda name: speed_family(by_name[name])  # noqa: E731
    board, dropped = board_points(profiles)
    points = board + measured_points(profiles)
    seg = segments()
    res = leave_one_gpu_out(points, fam_of)

    def seg_of(p):
        s = seg.get(p.gpu, "?")
        return f"{p.backend} {s}" if p.backend != "cuda" else s

    print(f"# Leave-one-GPU-out llama.cpp errors ({len({p.gpu for p in points})} GPUs, {len(points)} points; "
          f"left out as ambiguous or without a profile: {', '.join(dropped)})\n")
    print("Errors per GPU (the median over its points: quants, models), then over GPUs; signed = predicted time / "
          "published time - 1 (negative: predicted too fast). `v1`: the single constants of estimate-v1 (0.897 of "
          "bandwidth + 1.217 ms; prefill 0.229 of INT8 / 0.917 of FP16), on the same GPUs.\n")
    print("| test | segment | GPUs | median abs error | 90th pct | worst (GPU) | median signed | v1 median abs |")
    print("|---|---|---|---|---|---|---|---|")
    summary = {}
    for test in ("decode", "prefill"):
        per_gpu: dict[str, list] = {}
        for p, pred, _ in res:
            if p.test == test:
                old = v1(p, by_name[p.gpu])
                per_gpu.setdefault(p.gpu, []).append(((pred - p.y) / p.y, None if old is None else (old - p.y) / p.y,
                                                      p))
        groups: dict[str, list] = {}
        for g, items in per_gpu.items():
            e = statistics.median(x for x, _, _ in items)
            olds = [x for _, x, _ in items if x is not None]
            ev1 = statistics.median(olds) if olds else None
            groups.setdefault(seg_of(items[0][2]), []).append((e, ev1, g))
            groups.setdefault("all", []).append((e, ev1, g))
        for g in sorted(groups, key=lambda k: (k == "all", k)):
            errs = groups[g]
            ab = [abs(e) for e, _, _ in errs]
            worst = max(errs, key=lambda t: abs(t[0]))
            summary[(test, g)] = statistics.median(ab)
            print(f"| {test} | {g} | {len(errs)} | {statistics.median(ab):.1%} | {pct(ab, 0.9):.1%} | "
                  f"{worst[0]:+.0%} ({worst[2]}) | {statistics.median(e for e, _, _ in errs):+.1%} | "
                  + (f"{statistics.median(abs(x) for _, x, _ in errs if x is not None):.1%}"
                     if any(x is not None for _, x, _ in errs) else "-") + " |")
    print("\nper GPU (decode, prefill: predicted/published - 1, family used):")
    per = {}
    for p, pred, fam in res:
        per.setdefault(p.gpu, {}).setdefault(p.test, []).append(((pred - p.y) / p.y, fam))
    for g in sorted(per):
        parts = []
        for t in ("decode", "prefill"):
            if t in per[g]:
                e = statistics.median(x for x, _ in per[g][t])
                parts.append(f"{t} {e:+.0%} [{per[g][t][0][1]}]")
        print(f"  {g}: {'; '.join(parts)}")

    if fit:
        table = fit_families(points, fam_of)
        # intervals: 10-90 % of measured / predicted over the held-out predictions of each backend
        ratios: dict[tuple, list[float]] = {}
        for p, pred, _ in res:
            ratios.setdefault((p.backend, p.test), []).append(p.y / pred)
        for k, row in table.items():
            b = k.split(":")[0]
            for t in ("decode", "prefill"):
                r = ratios.get((b, t), [])
                if len(r) >= 5 and (t == "decode" or row.get("prefill_mfu")):
                    row[f"{t}_interval"] = [round(pct(r, 0.1), 3), round(pct(r, 0.9), 3)]
            row["source"] = (f"bench/gpu_loo.py on llama.cpp scoreboards #15013/#15021/#10879/#4167 (sources/"
                             f"published_perf/llamacpp_scoreboards_*.csv, Llama-2-7B Q4_0/Q8_0, FA off) and measured "
                             f"rows; {len(row.get('decode_gpus', []))} GPUs: {', '.join(row.get('decode_gpus', [])[:6])}"
                             + ("..." if len(row.get("decode_gpus", [])) > 6 else ""))
        # the fits below use the table just fitted
        C.FAMILY_SPEEDS.clear()
        C.FAMILY_SPEEDS.update({k: C.FamilySpeed(**{f: tuple(v) if isinstance(v, list) else v for f, v in row.items()})
                                for k, row in table.items()})
        clear_memos()  # the per-GPU terms memoized from the old fits

    fitted: dict = {}  # the fitted scalar terms (family_speeds.FITTED_TERMS; named in constants.py)
    a_ms, c, n = kv_quant_fit(profiles)
    fitted.update(kv_quant_decode_ms_per_layer=float(f"{a_ms:.3g}"), kv_quant_attn_ms_per_element=float(f"{c:.3g}"))
    if fit:
        C.KV_QUANT_DECODE_MS_PER_LAYER = C.Const(fitted["kv_quant_decode_ms_per_layer"], "", "")
        C.KV_QUANT_ATTN_MS_PER_ELEMENT = C.Const(fitted["kv_quant_attn_ms_per_element"], "", "")
    print(f"\nquantized KV cache (q8_0/q4_0) on llama.cpp, {n} H200 llama-bench rows (depth 0-64K): decode time = "
          f"{a_ms:.5f} ms x layers + {c:.3g} ms x tokens x layers x query heads x head_dim (constants.KV_QUANT_*)")
    print("\nH200 long context (llama-bench tg128, Q4_K_M; analytical, before calibration): measured -> predicted ms")
    print("| model | KV | " + " | ".join(f"depth {d}" for d in (0, 8192, 16384, 32768, 65536)) + " |")
    print("|---|---|" + "---|" * 5)
    lc = long_context_check(profiles)
    for mid in sorted({x[0] for x in lc}):
        for kv in ("f16", "q8_0", "q4_0"):
            cells = [f"{m:.2f} -> {p:.2f}" for i, k, d, m, p in sorted(lc, key=lambda t: t[2]) if i == mid and k == kv]
            print(f"| {mid} | {kv} | " + " | ".join(cells) + " |")
    errs = [abs(p - m) / m for _, _, _, m, p in lc]
    print(f"median |error| {statistics.median(errs):.1%}, worst {max(errs):.1%} over {len(lc)} rows")

    n, under, worst = fit_check(profiles)
    print(f"memory: {n} measured llama.cpp rows; predicted below NVML's peak on {under}, by at most {worst:.1%}")
    moe = moe_fit(profiles)
    print(f"MoE on llama.cpp: decode +{moe['decode_ms_per_layer']:.4f} ms/layer (median of {moe['decode_rows']} rows: "
          f"{moe['decode_each']}); prefill matmul time x {moe['prefill_matmul_factor']:.2f} (median of "
          f"{moe['prefill_rows']} rows: {moe['prefill_each']}) (constants.MOE_*)")
    fitted.update(moe_decode_ms_per_layer=round(moe["decode_ms_per_layer"], 4),
                  moe_prefill_matmul_factor=round(moe["prefill_matmul_factor"], 2))
    if fit:
        C.MOE_DECODE_MS_PER_LAYER = C.Const(fitted["moe_decode_ms_per_layer"], "", "")
        C.MOE_PREFILL_MATMUL_FACTOR = C.Const(fitted["moe_prefill_matmul_factor"], "", "")

    k, nk = batched_fit(profiles)
    fitted["mmvq_fp32_fraction"] = round(k, 3)
    if fit:
        C.LLAMA_CPP_MMVQ_FP32_FRACTION = C.Const(fitted["mmvq_fp32_fraction"], "", "")
    print(f"\nbatched decode on llama.cpp: mul_mat_vec_q column rate = {k:.3f} x the FP32 vector rate (median of {nk} "
          f"H200 rows with 2-{int(C.LLAMA_CPP_MMVQ_MAX_BATCH.value)} sequences; constants.LLAMA_CPP_MMVQ_FP32_FRACTION "
          f"= {C.LLAMA_CPP_MMVQ_FP32_FRACTION.value})")
    print("| source | GPU | model | quant | batch | prompt each | measured step ms | predicted TPOT ms | error |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = batched_check(profiles)
    for src, gpu, mid, quant, b, prompt, ms, pred in rows:
        print(f"| {src} | {gpu} | {mid} | {quant} | {b} | {prompt} | {ms:.2f} | {pred:.2f} | {(pred - ms) / ms:+.1%} |")
    for src in sorted({r[0] for r in rows}):
        e = [abs(r[7] - r[6]) / r[6] for r in rows if r[0] == src and r[4] > 1]
        print(f"batched decode ({src}, batch > 1): median |error| {statistics.median(e):.1%}, worst {max(e):.1%} over "
              f"{len(e)} rows")

    if not fit:
        return ""
    body = json.dumps(table, indent=1, sort_keys=True).replace(": null", ": None").replace(": true", ": True")
    return ('"""Generated by `python bench/gpu_loo.py --write`; do not edit. llama.cpp speed terms per GPU '
            'family\n(recommender.predict.constants.FamilySpeed; families: analytical.speed_family) and the '
            'fitted scalar terms\n(FITTED_TERMS: named, with units and sources, in recommender.predict.'
            'constants: KV_QUANT_*, MOE_*,\nLLAMA_CPP_MMVQ_FP32_FRACTION)."""\n\n'
            f"FAMILY_SPEED_ROWS: dict = {body}\n\n"
            f"FITTED_TERMS: dict = {json.dumps(fitted, indent=1, sort_keys=True)}\n")


if __name__ == "__main__":
    raise SystemExit(main())
