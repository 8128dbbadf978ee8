"""This machine: NVIDIA GPUs through NVML (pynvml, imported lazily), the CPU from /proc/cpuinfo, RAM from /proc/meminfo.

``probe_host()`` never raises on a machine without a GPU; ``HostInfo.gpu_status`` says why none was found.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from pathlib import Path
from typing import Any, NamedTuple, Optional

from pydantic import BaseModel, ConfigDict, Field

from recommender.core.units import GIB
from recommender.hardware.detect import probe_other_gpus


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)  # schemas built on first use: cold start


class GpuInfo(_Strict):
    """One GPU as its vendor's tool reports it (NVML; amd-smi / rocm-smi; macOS sysctl + system_profiler; Intel
    xpu-smi: recommender.hardware.detect). Fields the tool cannot report on this GPU/driver are None."""

    index: int
    name: str
    vendor: str = "NVIDIA"
    source: str = "NVML"  # the tool that reported it
    gpu_cores: Optional[int] = None  # Apple: GPU cores (system_profiler sppci_cores)
    wired_limit_mb: Optional[int] = None  # Apple: sysctl iogpu.wired_limit_mb when set (0/None: macOS default)
    uuid: str = ""
    driver_version: str = ""
    memory_total_bytes: int
    memory_free_bytes: int
    memory_used_bytes: int
    compute_capability: Optional[str] = None  # "9.0"
    memory_clock_mhz: Optional[int] = None  # NVML max memory clock (NVML_CLOCK_MEM)
    memory_bus_width_bits: Optional[int] = None
    memory_bandwidth_bytes_per_s: Optional[float] = None  # see memory_bandwidth_from_clock()
    power_limit_w: Optional[float] = None  # enforced power limit
    pcie_link_generation: Optional[int] = None  # NVML max PCIe link generation of device + system
    pcie_link_width: Optional[int] = None  # NVML max PCIe link width (lanes)
    nvlink_active_links: Optional[int] = None  # NVML links in NVML_FEATURE_ENABLED state (None: no NVLink query)


class CpuInfo(_Strict):
    model: str
    arch: str  # platform.machine(): x86_64, aarch64, arm64
    physical_cores: int
    logical_cores: int
    flags: list[str] = Field(default_factory=list)  # ISA extensions of interest that are present (CPU_FLAGS)


class HostInfo(_Strict):
    gpus: list[GpuInfo] = Field(default_factory=list)
    cpu: CpuInfo
    ram_total_bytes: int
    ram_available_bytes: Optional[int] = None
    ram_limit_bytes: Optional[int] = None  # cgroup memory limit when lower than ram_total_bytes
    os: str
    python: str
    gpu_status: str  # one sentence: "1 NVIDIA GPU found (driver 550.54.15)" / "no NVIDIA GPU found (NVML: ...)"
    fingerprint: str  # stable short hash of the hardware (see host_fingerprint)


# ISA extensions that matter to CPU inference kernels (llama.cpp, ggml, oneDNN), in report order.
# x86 names are the Linux /proc/cpuinfo flag names; "amx" stands for any of amx_tile/amx_bf16/amx_int8.
X86_FLAGS = ("avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512_vnni", "avx512_bf16", "amx")


ARM_FLAGS = ("neon", "sve", "sve2", "i8mm", "bf16", "asimddp")


CPU_FLAGS = X86_FLAGS + ARM_FLAGS


# Double data rate: NVML's memory clock is half the transfer rate for HBM, GDDR6 and GDDR6X alike.
# Checked against published bandwidths: H200 3201 MHz x 6016 bit -> 4.81 TB/s (spec 4.8 TB/s; measured);
# RTX 4090 10501 MHz x 384 bit -> 1.008 TB/s (spec 1008 GB/s); A100 40GB 1215 MHz x 5120 bit -> 1.555 TB/s
# (spec 1555 GB/s); L4 6251 MHz x 192 bit -> 300 GB/s (spec 300 GB/s). See profiles/hardware/README.md.
DDR_FACTOR = 2


def memory_bandwidth_from_clock(memory_clock_mhz: float, bus_width_bits: int) -> float:
    """Theoretical peak DRAM bandwidth in bytes/s from NVML's max memory clock and bus width."""
    return memory_clock_mhz * 1e6 * (bus_width_bits / 8) * DDR_FACTOR


def _text(v: Any) -> str:
    return v.decode(errors="replace") if isinstance(v, (bytes, bytearray)) else str(v)


def _nvml_reason(exc: BaseException) -> str:
    msg = str(exc).strip() or type(exc).__name__
    return re.sub(r"\bnvml\b", "NVML", msg.lower())  # "Driver Not Loaded" -> "driver not loaded"


_NVML_LINUX_LIBRARY = "libnvidia-ml.so.1"  # what pynvml's _LoadNvmlLibrary loads on Linux


def _nvml_library_missing() -> Optional[str]:
    """The status ``_probe_nvml`` reports when NVML's library is absent (Linux), found without importing pynvml
    (~15-40 ms of every `recommend` on a machine without an NVIDIA driver): pynvml's nvmlInit loads
    ``libnvidia-ml.so.1`` with ctypes and, when that fails, raises NVMLError_LibraryNotFound ("NVML Shared Library
    Not Found"). None (probe as usual) where pynvml is not installed or already imported (or stood in for, as tests
    do), on other platforms, or when the library loads."""
    import sys  # noqa: PLC0415

    if not sys.platform.startswith("linux") or "pynvml" in sys.modules:
        return None
    import importlib.util  # noqa: PLC0415
    import ctypes  # noqa: PLC0415

    try:
        if importlib.util.find_spec("pynvml") is None:
            return None
    except (ImportError, ValueError):
        return None
    try:
        ctypes.CDLL(_NVML_LINUX_LIBRARY)
    except OSError:
        return f"no NVIDIA GPU found (NVML: {_nvml_reason(Exception('NVML Shared Library Not Found'))})"
    return None


def _probe_nvml() -> tuple[list[GpuInfo], str]:
    """Return (gpus, gpu_status). Never raises."""
    missing = _nvml_library_missing()
    if missing:
        return [], missing
    try:
        import pynvml  # lazy: nvidia-ml-py; only needed when probing
    except Exception as exc:  # ImportError, or a broken install
        return [], f"no NVIDIA GPU found (pynvml not importable: {_nvml_reason(exc)})"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError (driver not loaded, library not found...), OSError
        return [], f"no NVIDIA GPU found (NVML: {_nvml_reason(exc)})"
    try:
        driver = ""
        try:
            driver = _text(pynvml.nvmlSystemGetDriverVersion())
        except Exception:
            pass
        count = pynvml.nvmlDeviceGetCount()
        gpus = []
        for i in range(count):
            gpus.append(_probe_one(pynvml, i, driver))
        if not gpus:
            return [], "no NVIDIA GPU found (NVML: driver loaded, 0 devices)"
        plural = "GPU" if len(gpus) == 1 else "GPUs"
        return gpus, f"{len(gpus)} NVIDIA {plural} found" + (f" (driver {driver})" if driver else "")
    except Exception as exc:
        return [], f"no NVIDIA GPU found (NVML: {_nvml_reason(exc)})"
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _probe_one(nv: Any, index: int, driver: str) -> GpuInfo:
    h = nv.nvmlDeviceGetHandleByIndex(index)

    def opt(fn, *args):
        try:
            return fn(h, *args)
        except Exception:  # NVMLError_NotSupported, old driver / old pynvml without the function
            return None

    mem = nv.nvmlDeviceGetMemoryInfo(h)
    cc = opt(nv.nvmlDeviceGetCudaComputeCapability)
    clock = opt(nv.nvmlDeviceGetMaxClockInfo, nv.NVML_CLOCK_MEM)
    bus = opt(getattr(nv, "nvmlDeviceGetMemoryBusWidth", None) or _missing)
    power_mw = opt(nv.nvmlDeviceGetEnforcedPowerLimit)
    uuid = opt(nv.nvmlDeviceGetUUID)
    # max rather than current: the current link drops to gen 1 at idle (power saving)
    pcie_gen = opt(getattr(nv, "nvmlDeviceGetMaxPcieLinkGeneration", None) or _missing)
    pcie_width = opt(getattr(nv, "nvmlDeviceGetMaxPcieLinkWidth", None) or _missing)
    nvlink = _nvlink_links(nv, h)
    bw = memory_bandwidth_from_clock(clock, bus) if clock and bus else None
    return GpuInfo(
        index=index,
        name=_text(nv.nvmlDeviceGetName(h)),
        uuid=_text(uuid) if uuid is not None else "",
        driver_version=driver,
        memory_total_bytes=int(mem.total),
        memory_free_bytes=int(mem.free),
        memory_used_bytes=int(mem.used),
        compute_capability=f"{cc[0]}.{cc[1]}" if cc else None,
        memory_clock_mhz=int(clock) if clock else None,
        memory_bus_width_bits=int(bus) if bus else None,
        memory_bandwidth_bytes_per_s=bw,
        power_limit_w=power_mw / 1000.0 if power_mw else None,
        pcie_link_generation=int(pcie_gen) if pcie_gen else None,
        pcie_link_width=int(pcie_width) if pcie_width else None,
        nvlink_active_links=nvlink,
    )


NVML_NVLINK_MAX_LINKS = 18  # nvml.h NVML_NVLINK_MAX_LINKS (Hopper has 18 links)


def _nvlink_links(nv: Any, h: Any) -> Optional[int]:
    """How many NVLink links are enabled on this GPU (0 on a card without NVLink), None when NVML cannot say."""
    fn = getattr(nv, "nvmlDeviceGetNvLinkState", None)
    if fn is None:
        return None
    n = 0
    for link in range(NVML_NVLINK_MAX_LINKS):
        try:
            n += 1 if fn(h, link) == getattr(nv, "NVML_FEATURE_ENABLED", 1) else 0
        except Exception:  # NVMLError_NotSupported / InvalidArgument past the last link
            break
    return n


def _missing(*_a):
    raise AttributeError("not available in this pynvml")


def _read(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _parse_cpuinfo(text: str) -> tuple[str, set[str], set[tuple[str, str]], int]:
    """(model, flags, {(physical id, core id)}, processor count) from /proc/cpuinfo text."""
    model = ""
    flags: set[str] = set()
    cores: set[tuple[str, str]] = set()
    nproc = 0
    phys = core = None
    for line in text.splitlines():
        key, sep, val = line.partition(":")
        if not sep:
            if phys is not None and core is not None:
                cores.add((phys, core))
            phys = core = None
            continue
        key, val = key.strip().lower(), val.strip()
        if key == "processor":
            nproc += 1
        elif key in ("model name", "cpu model", "hardware") and not model:
            model = val
        elif key in ("flags", "features") and not flags:
            flags = set(val.lower().split())
        elif key == "physical id":
            phys = val
        elif key == "core id":
            core = val
    if phys is not None and core is not None:
        cores.add((phys, core))
    return model, flags, cores, nproc


def _physical_cores_sysfs() -> int:
    """Distinct core sibling sets under /sys (0 when unavailable)."""
    base = Path("/sys/devices/system/cpu")
    sets = set()
    try:
        for d in base.glob("cpu[0-9]*"):
            s = _read(str(d / "topology" / "thread_siblings_list"))
            if s:
                sets.add(s.strip())
    except OSError:
        return 0
    return len(sets)


def _interesting_flags(raw: set[str], arch: str) -> list[str]:
    present = set()
    for f in X86_FLAGS:
        if f == "amx":
            if any(x.startswith("amx") for x in raw):
                present.add("amx")
        elif f in raw:
            present.add(f)
    if "asimd" in raw or "neon" in raw:
        present.add("neon")
    for f in ("sve", "sve2", "i8mm", "bf16", "asimddp"):
        if f in raw:
            present.add(f)
    if not raw and arch.lower() in ("arm64", "aarch64"):
        present.add("neon")  # Advanced SIMD is mandatory in AArch64 (e.g. macOS, where there is no cpuinfo)
    return [f for f in CPU_FLAGS if f in present]


def probe_cpu() -> CpuInfo:
    arch = platform.machine() or "unknown"
    logical = os.cpu_count() or 1
    text = _read("/proc/cpuinfo")
    model, raw_flags, core_pairs, nproc = _parse_cpuinfo(text) if text else ("", set(), set(), 0)
    if not model:
        model = platform.processor() or arch
    physical = _physical_cores_sysfs() or len(core_pairs) or nproc or logical
    return CpuInfo(
        model=model,
        arch=arch,
        physical_cores=min(physical, logical) if physical else logical,
        logical_cores=logical,
        flags=_interesting_flags(raw_flags, arch),
    )


def probe_ram() -> tuple[int, Optional[int], Optional[int]]:
    """(total, available, cgroup limit) in bytes; available/limit are None when unknown."""
    total = avail = None
    text = _read("/proc/meminfo")
    if text:
        for line in text.splitlines():
            m = re.match(r"(\w+):\s+(\d+)\s*kB", line)
            if not m:
                continue
            if m.group(1) == "MemTotal":
                total = int(m.group(2)) * 1024
            elif m.group(1) == "MemAvailable":
                avail = int(m.group(2)) * 1024
    if total is None:
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            total = 0
    if avail is None:
        try:
            avail = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            avail = None
    limit = None
    for p in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        s = _read(p)
        if s and s.strip().isdigit():
            v = int(s.strip())
            if total and v < total:
                limit = v
            break
    return int(total), avail, limit


def host_fingerprint(gpus: list[GpuInfo], cpu: CpuInfo, ram_total_bytes: int) -> str:
    """12 hex chars identifying the hardware: GPU names + memory + driver, else CPU model + RAM (GiB).

    Stable across runs and reboots; changes when a GPU, the driver, the CPU or the RAM size changes.
    """
    if gpus:
        key: Any = [["gpu", g.name, g.memory_total_bytes, g.driver_version] for g in gpus]
    else:
        key = [["cpu", cpu.model, cpu.logical_cores, round(ram_total_bytes / GIB)]]
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]


def other_gpus(run=None, system: Optional[str] = None) -> tuple[list[GpuInfo], str]:
    """AMD, Apple and Intel GPUs (recommender.hardware.detect) as GpuInfo records; ``run`` and ``system`` replace the
    tool runner and platform.system() (tests feed recorded outputs)."""
    kw = {"run": run} if run else {}
    rows, status = probe_other_gpus(system=system, **kw)
    return [GpuInfo(**r) for r in rows], status


class GpuProbe(NamedTuple):
    """This machine's GPUs and how they were found (HostInfo's fields of the same names)."""

    gpus: list[GpuInfo]
    gpu_status: str


def probe_gpus() -> GpuProbe:
    """This machine's GPUs: NVML first; without an NVIDIA GPU, AMD (amd-smi, rocm-smi), Apple (sysctl,
    system_profiler) and Intel (xpu-smi) tools. Never raises on a machine without GPUs (see gpu_status)."""
    gpus, status = _probe_nvml()
    if not gpus:
        others, other_status = other_gpus()
        if others:
            gpus, status = others, other_status
        else:
            status = f"{status}; {other_status}"
    return GpuProbe(gpus, status)


def probe_host() -> HostInfo:
    """Probe this machine: its GPUs (probe_gpus), CPU and memory. Never raises on a machine without GPUs (see
    HostInfo.gpu_status)."""
    gpus, status = probe_gpus()
    cpu = probe_cpu()
    total, avail, limit = probe_ram()
    return HostInfo(
        gpus=gpus,
        cpu=cpu,
        ram_total_bytes=total,
        ram_available_bytes=avail,
        ram_limit_bytes=limit,
        os=platform.platform(),
        python=platform.python_version(),
        gpu_status=status,
        fingerprint=host_fingerprint(gpus, cpu, total),
    )
