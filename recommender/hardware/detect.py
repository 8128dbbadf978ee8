"""GPUs beyond NVML: AMD (amd-smi, else rocm-smi), Apple silicon (sysctl + system_profiler), Intel (xpu-smi).

Each tool's output is parsed by a pure function (``parse_*``, tested on recorded outputs in tests/data/detect/);
``probe_other_gpus()`` runs the tools that exist on this machine and never raises. None of these tools reports the
memory bandwidth: planning takes it, with the FLOP/s, from the shipped profile the device name and memory designate
(recommender.hardware.profiles.profile_from_gpu).

Formats (what each parser reads):
- ``amd-smi static --asic --vram --json`` (ROCm's AMD SMI CLI, docs: rocm.docs.amd.com/projects/amdsmi, "AMD SMI CLI
  tool usage"): a list of GPUs, or ``{"gpu_data": [...]}`` in ROCm 6.4+; per GPU ``asic.market_name`` and
  ``vram.size = {"value": N, "unit": "MB"}`` (amd-smi's MB are MiB: a 24 GiB RX 7900 XTX reads 24560).
- ``rocm-smi --showproductname --showmeminfo vram --json`` (ROCm SMI, deprecated for amd-smi): ``{"card0": {"Card
  Series": ..., "Card SKU": ..., "VRAM Total Memory (B)": "25753026560", ...}}``; the series is a marketing name
  ("AMD INSTINCT MI250 (MCM) OAM AC MBA") or a chip name with the product in brackets ("Navi 31 [Radeon RX 7900 XTX]").
- macOS: ``sysctl -n hw.memsize`` (bytes of unified memory) and ``system_profiler SPDisplaysDataType -json``
  (``SPDisplaysDataType[].sppci_model`` "Apple M3 Max", ``sppci_cores`` "40", ``sppci_vendor``/``spdisplays_vendor``
  "sppci_vendor_Apple").
- ``xpu-smi discovery -j`` (Intel XPU Manager, docs: intel.github.io/xpumanager): ``{"device_list": [{"device_id": 0,
  "device_name": "Intel(R) Arc(TM) A770 Graphics", "memory_physical_size_byte": "17102532608", ...}]}`` (the size is a
  string or a number, depending on the version).
"""

from __future__ import annotations

import json
import platform
import re
import shutil
import subprocess
from typing import Any, Callable, Optional

MIB = 1024**2
TOOL_TIMEOUT_S = 10


def _json(text: str) -> Any:
    """The JSON document in a tool's output (amd-smi prints permission warnings before it)."""
    text = text or ""
    start = min([i for i in (text.find("{"), text.find("[")) if i >= 0], default=-1)
    if start < 0:
        return None
    try:
        return json.loads(text[start:])
    except json.JSONDecodeError:
        return None


def _gpu(index: int, name: str, vendor: str, source: str, memory: int, used: int = 0, **kw) -> dict:
    """One detected GPU as the fields of recommender.hardware.host.GpuInfo (host builds the record)."""
    return dict(index=index, name=name, vendor=vendor, source=source, memory_total_bytes=memory,
                memory_used_bytes=used, memory_free_bytes=max(memory - used, 0), **kw)


def parse_amd_smi_static(text: str) -> list[dict]:
    data = _json(text)
    rows = data.get("gpu_data", []) if isinstance(data, dict) else data if isinstance(data, list) else []
    out = []
    for i, r in enumerate(rows):
        asic, vram = r.get("asic"), r.get("vram")
        if not isinstance(asic, dict) or not isinstance(vram, dict) or not isinstance(vram.get("size"), dict):
            continue
        size, unit = vram["size"].get("value"), str(vram["size"].get("unit", "MB")).upper()
        if not isinstance(size, (int, float)) or not asic.get("market_name"):
            continue
        mult = {"MB": MIB, "MIB": MIB, "GB": 1024 * MIB, "B": 1}.get(unit, MIB)
        out.append(_gpu(int(r.get("gpu", i)), str(asic["market_name"]).strip(), "AMD", "amd-smi", int(size * mult)))
    return out


def _rocm_product(series: str) -> str:
    m = re.search(r"\[([^\]]+)\]", series)  # "Navi 31 [Radeon RX 7900 XTX]"
    return (m.group(1) if m else series).strip()


def parse_rocm_smi(text: str) -> list[dict]:
    data = _json(text)
    out = []
    if not isinstance(data, dict):
        return out
    for key, r in data.items():
        m = re.fullmatch(r"card(\d+)", key)
        if not m or not isinstance(r, dict):
            continue
        series = r.get("Card Series") or r.get("Card series") or ""
        total = r.get("VRAM Total Memory (B)")
        if not series or total in (None, "", "N/A"):
            continue
        used = r.get("VRAM Total Used Memory (B)")
        out.append(_gpu(int(m.group(1)), _rocm_product(series), "AMD", "rocm-smi", int(total),
                        int(used) if str(used or "").isdigit() else 0))
    return out


def parse_apple(system_profiler_json: str, memsize: str, wired_limit_mb: Optional[str] = None) -> list[dict]:
    data = _json(system_profiler_json)
    wired = int(str(wired_limit_mb).strip()) if str(wired_limit_mb or "").strip().isdigit() else None
    try:
        mem = int(str(memsize).strip())
    except ValueError:
        return []
    out = []
    for i, r in enumerate((data or {}).get("SPDisplaysDataType", []) if isinstance(data, dict) else []):
        vendor = str(r.get("spdisplays_vendor") or r.get("sppci_vendor") or "")
        model = str(r.get("sppci_model") or "")
        if "apple" not in vendor.lower() or not model.startswith("Apple"):
            continue
        cores = r.get("sppci_cores")
        out.append(_gpu(i, model, "Apple", "system_profiler + sysctl hw.memsize", mem,
                        gpu_cores=int(cores) if str(cores or "").isdigit() else None, wired_limit_mb=wired or None))
    return out


def parse_xpu_smi_discovery(text: str) -> list[dict]:
    data = _json(text)
    out = []
    for r in (data or {}).get("device_list", []) if isinstance(data, dict) else []:
        size = r.get("memory_physical_size_byte")
        if r.get("device_type", "GPU") != "GPU" or size in (None, "") or not str(size).isdigit():
            continue
        if str(r.get("device_function_type", "physical")).lower() == "virtual":
            continue  # an SR-IOV slice, not a card
        out.append(_gpu(int(r.get("device_id", len(out))), str(r.get("device_name", "")).strip(), "Intel",
                        "xpu-smi", int(size)))
    return out


def _run(cmd: list[str]) -> Optional[str]:
    if not shutil.which(cmd[0]):
        return None
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout if r.returncode == 0 else None


def probe_other_gpus(run: Callable[[list[str]], Optional[str]] = _run,
                     system: Optional[str] = None) -> tuple[list[dict], str]:
    """(GPUs, status) from the AMD, Apple and Intel tools present here; never raises."""
    system = system or platform.system()
    tried = []
    try:
        if system == "Darwin":
            tried.append("system_profiler")
            sp, mem = run(["system_profiler", "SPDisplaysDataType", "-json"]), run(["sysctl", "-n", "hw.memsize"])
            wired = run(["sysctl", "-n", "iogpu.wired_limit_mb"]) if sp and mem else None
            gpus = parse_apple(sp or "", mem or "", wired) if sp and mem else []
            if gpus:
                return gpus, f"{len(gpus)} Apple GPU found (system_profiler; unified memory {int(mem) // 2**30} GiB)"
        for tool, cmd, parse in (
                ("amd-smi", ["amd-smi", "static", "--asic", "--vram", "--json"], parse_amd_smi_static),
                ("rocm-smi", ["rocm-smi", "--showproductname", "--showmeminfo", "vram", "--json"], parse_rocm_smi),
                ("xpu-smi", ["xpu-smi", "discovery", "-j"], parse_xpu_smi_discovery)):
            tried.append(tool)
            text = run(cmd)
            gpus = parse(text) if text else []
            if gpus:
                vendor = gpus[0]["vendor"]
                return gpus, f"{len(gpus)} {vendor} GPU{'s' if len(gpus) > 1 else ''} found ({tool})"
    except Exception as exc:  # a tool printing something unexpected must not break planning
        return [], f"no other GPU found ({type(exc).__name__} while reading {tried[-1] if tried else 'tools'})"
    return [], f"no AMD, Apple or Intel GPU found ({', '.join(tried)} absent or reported none)"
