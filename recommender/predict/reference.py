"""Published llama.cpp speed figures (sources/published_perf/) as references for the estimator.

Each reading is a llama-bench test: ``pp512`` (prefill of 512 tokens from an empty cache, tokens/s) or ``tg128``
(128 generated tokens from an empty cache, tokens/s). :func:`predict` answers the same question with
:func:`recommender.predict.analytical.estimate`, so fitting and testing compare like with like.
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
from recommender.hardware.profiles import find_profile, profile_candidates
from recommender.predict.analytical import Estimate, estimate, prefill_peak
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


# ------------------------------------------------------------------------------------------------------------
# The scoreboards of every backend (sources/published_perf/llamacpp_scoreboards_*.csv) and the family fit
# ------------------------------------------------------------------------------------------------------------
BACKENDS = {"CUDA": "cuda", "ROCm/HIP": "rocm", "ROCm": "rocm", "Vulkan": "vulkan", "Metal": "metal"}
# A scoreboard row names the GPU as its contributor typed it: prefixes and suffixes that are not part of a profile name
_BOARD_NAME_NOISE = (r"\s*\((vulkan|dgx spark|compute capability [\d.]+)\)$", r"^nvidia\s+(?=(rtx|gtx))")


@dataclass(frozen=True)
class Point:
    """One published or measured llama.cpp speed of a dense model on one GPU profile."""

    gpu: str  # profile name
    backend: str  # the backend the row ran (cuda, rocm, vulkan, metal)
    test: str  # 'decode' | 'prefill'
    x: float  # decode: bytes read per token / bandwidth, ms; prefill: FLOPs of the prompt / the profile's peak, ms
    y: float  # the measured ms per token (decode) or ms for the prompt (prefill)
    source: str
    peak: str = ""  # prefill: the kind of peak x is counted against (analytical.prefill_peak: int8 / fp16 / fp32)


def _board_profile(name: str, profiles: list[HardwareProfile], test: str) -> Optional[HardwareProfile]:
    """The profile a scoreboard's GPU name designates. A name several profiles answer to ('RTX 4060 Ti': 8 or 16 GB)
    is used when they all have the same bandwidth (and, for prefill, the same prefill peak: 'Jetson AGX Orin' is the
    32 GB module's 14 SMs at 0.93 GHz or the 64 GB module's 16 at 1.3 GHz): the speed reading is then the same for
    each; otherwise the row is left out (no guess)."""
    import re

    clean = name
    for pat in _BOARD_NAME_NOISE:
        clean = re.sub(pat, "", clean, flags=re.I)
    found = profile_candidates(clean, profiles)
    if not found:
        return None

    def same(values) -> bool:  # within 2 % (spec sheets round: 897 vs 900 GB/s)
        values = [v for v in values]
        if any(v is None for v in values):
            return all(v is None for v in values)
        return max(values) <= 1.02 * min(values)

    agree = same([p.memory_bandwidth_bytes_per_s for p in found])
    if test == "prefill":  # the peak the prefill is counted against (INT8/MMQ, FP16 or FP32: analytical.prefill_peak)
        peaks = [prefill_peak(p) for p in found]
        agree = agree and len({k for _, _, k in peaks}) == 1 and same([v for v, _, _ in peaks])
    return found[0] if agree else None


def board_rows(directory: Path = REFERENCE_DIR) -> list[dict]:
    """Llama-2-7B rows of the GPU and Apple scoreboards with the flash-attention setting the profile's predictions
    assume (off: the estimate's compute buffer and speed follow the no-FA graph), pp512 and tg128 only."""
    rows = []
    with (directory / "llamacpp_scoreboards_gpu.csv").open(newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if "llama" in r["model"].lower() and "7b" in r["model"].lower() and r["flash_attn"][:1] in ("0", "") \
                    and r["test"] in ("pp512", "tg128"):
                rows.append(dict(gpu=r["gpu"], backend=BACKENDS.get(r["backend"], r["backend"]), quant=r["quant"],
                                 test=r["test"], tokens_per_s=float(r["tokens_per_s"]), source=r["source_url"]))
    with (directory / "llamacpp_scoreboards_apple.csv").open(newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if r["source_id"] == "llamacpp_disc4167_apple_table" and r["test"] in ("pp512", "tg128"):
                rows.append(dict(gpu=f"{r['chip']} {r['gpu_cores']}-core GPU", backend="metal", quant=r["quant"],
                                 test=r["test"], tokens_per_s=float(r["tokens_per_s"]), source=r["source_url"]))
    return rows


def board_points(profiles: list[HardwareProfile], spec: Optional[ModelSpec] = None) -> tuple[list[Point], list[str]]:
    """The scoreboard rows as fit points on the profiles they designate (the profile's own backend only: a Vulkan row
    of a CUDA card says nothing about its CUDA speed), and the names left out (no profile, or variants that differ).
    Several rows of one GPU, quant and test (harvest and transcription) are one point: their median."""
    import statistics

    spec = spec or reference_spec()
    groups: dict[tuple, list[float]] = {}
    srcs: dict[tuple, str] = {}
    dropped = set()
    hw_by_name = {}
    for r in board_rows():
        test = "decode" if r["test"] == "tg128" else "prefill"
        hw = _board_profile(r["gpu"], profiles, test)
        if hw is None or hw.backend != r["backend"] or r["quant"] not in ("Q4_0", "Q8_0"):
            if hw is None:
                dropped.add(r["gpu"])
            continue
        hw_by_name[hw.name] = hw
        k = (hw.name, r["backend"], r["quant"], test)
        groups.setdefault(k, []).append(r["tokens_per_s"])
        srcs[k] = r["source"]
    points = []
    for (name, backend, quant, test), tps in groups.items():
        hw = hw_by_name[name]
        t = statistics.median(tps)
        if test == "decode":
            e = estimate(spec, quant, "llama.cpp", hw, context_tokens=256, prompt_tokens=1, output_tokens=128)
            points.append(Point(name, backend, test, e.decode_bytes_per_step / hw.memory_bandwidth_bytes_per_s * 1e3,
                                1e3 / t, srcs[(name, backend, quant, test)]))
        else:
            peak, _, kind = prefill_peak(hw)
            if not peak:
                continue
            e = estimate(spec, quant, "llama.cpp", hw, context_tokens=1024, prompt_tokens=512, output_tokens=1)
            points.append(Point(name, backend, test, e.prefill_flops / peak * 1e3, 512 / t * 1e3,
                                srcs[(name, backend, quant, test)], kind))
    return points, sorted(dropped)


# ------------------------------------------------------------------------------------------------------------
# Fitting the family table
# ------------------------------------------------------------------------------------------------------------
FIT_MIN_OVERHEAD_MS, FIT_MAX_OVERHEAD_MS = 0.0, 5.0  # a family's own intercept outside this is not believed
FIT_OWN_INTERCEPT_SPREAD = 1.5  # a family fits its own overhead when its points' x span at least this ratio


def _weights(points: list[Point]) -> list[float]:
    """1 / (the number of points of the same GPU): every GPU counts once, however many models or quants it has."""
    n: dict[str, int] = {}
    for p in points:
        n[p.gpu] = n.get(p.gpu, 0) + 1
    return [1 / n[p.gpu] for p in points]


def _line(xs: list[float], ys: list[float], ws: list[float]) -> tuple[float, float]:
    """Weighted least-squares slope and intercept of y = s x + o."""
    sw = sum(ws)
    mx, my = sum(w * x for w, x in zip(ws, xs)) / sw, sum(w * y for w, y in zip(ws, ys)) / sw
    sxx = sum(w * (x - mx) ** 2 for w, x in zip(ws, xs))
    s = sum(w * (x - mx) * (y - my) for w, x, y in zip(ws, xs, ys)) / sxx
    return s, my - s * mx


def _slope_through(xs, ys, ws, o) -> float:
    """Weighted least-squares slope of y - o = s x."""
    return sum(w * x * (y - o) for w, x, y in zip(ws, xs, ys)) / sum(w * x * x for w, x in zip(ws, xs))


def _median_per_gpu(points: list[Point], f) -> float:
    """The median over GPUs of each GPU's median of f(point)."""
    import statistics

    per: dict[str, list[float]] = {}
    for p in points:
        per.setdefault(p.gpu, []).append(f(p))
    return statistics.median(statistics.median(v) for v in per.values())


def fit_decode(points: list[Point]) -> tuple[float, float]:
    """(efficiency, overhead ms) of ms/token = x / efficiency + overhead on a set of decode points: the family's own
    line when its x values spread enough (several models or quants, or GPUs of different bandwidth) and the intercept
    is believable, else None for the overhead (the caller supplies the backend's)."""
    xs, ys, ws = [p.x for p in points], [p.y for p in points], _weights(points)
    if len(points) >= 3 and max(xs) >= FIT_OWN_INTERCEPT_SPREAD * min(xs):
        s, o = _line(xs, ys, ws)
        if FIT_MIN_OVERHEAD_MS <= o <= FIT_MAX_OVERHEAD_MS and s > 0:
            return 1 / s, o
    return None, None


def fit_families(points: list[Point], family_of, leave_out: Optional[str] = None) -> dict[str, dict]:
    """The family table fitted on ``points`` (less the GPU ``leave_out``): for each family key (the most specific
    family of each point's GPU, ``family_of(gpu name)`` -> keys most specific first) and each backend, the decode
    efficiency and overhead and the prefill MFU (median over GPUs of x / y: the share of the peak reached). Every GPU
    weighs the same, however many points it has."""
    pts = [p for p in points if p.gpu != leave_out]
    fams: dict[str, list[Point]] = {}
    for p in pts:
        for k in family_of(p.gpu):
            fams.setdefault(k, []).append(p)
    table: dict[str, dict] = {}
    # backends first: their overhead is every family's fallback intercept
    for key in sorted(fams, key=lambda k: ":" in k):
        dec = [p for p in fams[key] if p.test == "decode"]
        pre = [p for p in fams[key] if p.test == "prefill"]
        row: dict = {}
        if dec:
            eff, ovh = fit_decode(dec)
            if eff is None or eff > 1.05:
                backend = key.split(":")[0]
                ovh = table.get(backend, {}).get("decode_overhead_ms")
                if ovh is None:  # a backend without a believable line: the scoreboard-wide CUDA overhead
                    ovh = table.get("cuda", {}).get("decode_overhead_ms", 1.2)
                eff = 1 / _slope_through([p.x for p in dec], [p.y for p in dec], _weights(dec), ovh)
            row.update(decode_efficiency=round(eff, 4), decode_overhead_ms=round(ovh, 4),
                       decode_gpus=sorted({p.gpu for p in dec}))
        if pre:  # one MFU per kind of peak (a family can mix GPUs with and without tensor cores: GTX 16 / RTX 20)
            mfu = {k: round(_median_per_gpu([p for p in pre if p.peak == k], lambda p: p.x / p.y), 4)
                   for k in sorted({p.peak for p in pre})}
            row.update(prefill_mfu=mfu, prefill_gpus=sorted({p.gpu for p in pre}))
        if row.get("decode_efficiency"):
            table[key] = row
    return table


def predict_point(p: Point, table: dict[str, dict], families: tuple[str, ...]) -> Optional[tuple[float, str]]:
    """(predicted y, family used) of one point from a family table, most specific family first."""
    for k in families:
        row = table.get(k)
        if row is None:
            continue
        if p.test == "decode":
            return p.x / row["decode_efficiency"] + row["decode_overhead_ms"], k
        if p.peak in (row.get("prefill_mfu") or {}):
            return p.x / row["prefill_mfu"][p.peak], k
    return None


def leave_one_gpu_out(points: list[Point], family_of, gpus=None) -> list[tuple[Point, float, str]]:
    """(point, predicted y, family used) for each point of each GPU (``gpus``: these only, default all), predicted
    from the family table fitted without that GPU; points no family of the table covers are left out."""
    out = []
    for g in sorted(gpus if gpus is not None else {p.gpu for p in points}):
        table = fit_families(points, family_of, leave_out=g)
        for p in points:
            if p.gpu == g:
                got = predict_point(p, table, family_of(g))
                if got:
                    out.append((p, got[0], got[1]))
    return out


PARTIAL_OFFLOAD_ROWS = SOURCES_DIR / "measurements" / "h200-partial-offload.csv"
# round 5 (bench/h200_round5.sh, 2026-12-02): MoE Qwen1.5-MoE-A2.7B-Chat and Mixtral-8x7B-v0.1, same layout
PARTIAL_OFFLOAD_ROWS_ROUND5 = SOURCES_DIR / "measurements" / "h200-partial-offload-2.csv"
# rounds 6-7 (bench/h200_round6.sh OFFLOAD=1, bench/h200_round7.sh): the same command in both llama.cpp load modes
# (-lm mmap / none), a `load_mode` and an `instance` column (rows of one device call share a host)
PARTIAL_OFFLOAD_ROWS_LOAD_MODE = SOURCES_DIR / "measurements" / "h200-partial-offload-3.csv"
PARTIAL_OFFLOAD_FILES = (PARTIAL_OFFLOAD_ROWS, PARTIAL_OFFLOAD_ROWS_ROUND5, PARTIAL_OFFLOAD_ROWS_LOAD_MODE)
# distinct routed experts per layer that one 512-token micro-batch of the synthetic (random-weight) files uses
SYNTHETIC_ROUTING = SOURCES_DIR / "measurements" / "synthetic-moe-routing.json"


def synthetic_routing(path: Path = SYNTHETIC_ROUTING) -> dict[str, tuple[int, ...]]:
    """model id -> measured distinct experts per layer (layer 0 first) in one 512-token prompt micro-batch of its
    synthetic file (the writer's random routers concentrate the tokens on fewer experts with depth: a trained router
    would use nearly all of them, E(1-(1-k/E)^512))."""
    return {d["model_id"]: tuple(d["distinct_experts_per_layer"]) for d in json.loads(path.read_text(encoding="utf-8"))}


@dataclass(frozen=True)
class OffloadPoint:
    """One llama-bench row of sources/measurements/h200-partial-offload.csv and the estimate of its configuration:
    tg (decode) rows against TPOT for a 1-token prompt, pp (prefill) rows against TTFT of that prompt."""
    row: dict
    decode: bool
    blocks_on_host: int
    measured_ms: float  # ms per token (tg), per prompt (pp)
    estimate: Estimate

    @property
    def predicted_ms(self) -> Optional[float]:
        return self.estimate.tpot_ms if self.decode else self.estimate.ttft_ms


def partial_offload_points(specs: dict[str, ModelSpec], hw: HardwareProfile,
                           path: Path = PARTIAL_OFFLOAD_ROWS) -> list[OffloadPoint]:
    """The H200 partial-offload rows (llama-bench -ngl N) with their estimates: n_gpu_layers above the model's block
    count means every layer on the GPU (gpu_layers None). A row without a load_mode ran llama.cpp's default (mmap);
    a synthetic MoE file's prefill copies the experts its router was measured to use (SYNTHETIC_ROUTING)."""
    out = []
    routes = synthetic_routing()
    with path.open(newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            spec, ngl, n = specs[r["model_id"]], int(r["n_gpu_layers"]), int(r["test"][2:])
            g = ngl if ngl <= spec.num_layers else None
            decode = r["test"].startswith("tg")
            used = routes.get(r["model_id"]) if r.get("synthetic") == "True" else None
            est = estimate(spec, r["quant"], "llama.cpp", hw, context_tokens=4096, prompt_tokens=1 if decode else n,
                           output_tokens=n if decode else 1, gpu_layers=g,
                           load_mode=r.get("load_mode") or "mmap", routed_experts_used=used)
            ts = float(r["tokens_per_s"])
            out.append(OffloadPoint(r, decode, 0 if g is None else spec.num_layers - (g - 1),
                                    1e3 / ts if decode else n / ts * 1e3, est))
    return out
