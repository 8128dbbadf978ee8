"""What machine are we on, and which GPU are we planning for?

Two halves:

* ``probe_host()`` looks at this machine: NVIDIA GPUs through NVML (``pynvml``, imported lazily so that
  importing this module stays cheap), the CPU from ``/proc/cpuinfo`` and RAM from ``/proc/meminfo``. It
  never raises on a machine without a GPU; ``HostInfo.gpu_status`` says why no GPU was found.
* Hardware profiles: ``profiles/hardware/*.yaml`` describe GPUs a user can plan for. ``load_profiles()``
  reads and strictly validates them (every figure needs a source), ``find_profile()`` resolves a user's
  GPU name, ``profile_from_gpu()`` turns a probed GPU into a profile, ``override_memory()`` applies --vram.

Units: records hold base units (bytes, bytes/s, FLOP/s, W). The YAML files use human units whose names
say the unit (``memory_gib``, ``memory_bandwidth_gb_s``, ``fp16_tflops``...); see
``profiles/hardware/README.md`` for the scheme and how each is converted.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import UserError
from .fuzzy import resolve
from .types import HardwareProfile

GIB = 1024**3
MIB = 1024**2

# --------------------------------------------------------------------------------------------------------
# Probed host records
# --------------------------------------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GpuInfo(_Strict):
    """One NVIDIA GPU as NVML reports it. Fields NVML cannot report on this GPU/driver are None."""

    index: int
    name: str
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


# --------------------------------------------------------------------------------------------------------
# NVML probe
# --------------------------------------------------------------------------------------------------------

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


def _probe_nvml() -> tuple[list[GpuInfo], str]:
    """Return (gpus, gpu_status). Never raises."""
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
    )


def _missing(*_a):
    raise AttributeError("not available in this pynvml")


# --------------------------------------------------------------------------------------------------------
# CPU and RAM probe
# --------------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------------
# Host
# --------------------------------------------------------------------------------------------------------


def host_fingerprint(gpus: list[GpuInfo], cpu: CpuInfo, ram_total_bytes: int) -> str:
    """12 hex chars identifying the hardware: GPU names + memory + driver, else CPU model + RAM (GiB).

    Stable across runs and reboots; changes when a GPU, the driver, the CPU or the RAM size changes.
    """
    if gpus:
        key: Any = [["gpu", g.name, g.memory_total_bytes, g.driver_version] for g in gpus]
    else:
        key = [["cpu", cpu.model, cpu.logical_cores, round(ram_total_bytes / GIB)]]
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]


def probe_host() -> HostInfo:
    """Probe this machine. Never raises on a machine without GPUs (see HostInfo.gpu_status)."""
    gpus, status = _probe_nvml()
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


# --------------------------------------------------------------------------------------------------------
# Hardware profiles
# --------------------------------------------------------------------------------------------------------

# YAML figure key -> (record field, multiplier to base units). Exactly one memory key per profile.
FIGURES: dict[str, tuple[str, float]] = {
    "memory_gib": ("memory_bytes", GIB),
    "memory_mib": ("memory_bytes", MIB),
    "memory_bandwidth_gb_s": ("memory_bandwidth_bytes_per_s", 1e9),
    "fp16_tflops": ("fp16_flops_per_s", 1e12),
    "int8_tops": ("int8_ops_per_s", 1e12),
    "tdp_w": ("tdp_w", 1.0),
    "compute_capability": ("compute_capability", 1.0),  # a string, "8.9"
}
PLAIN_KEYS = {"name", "vendor", "aliases", "backend", "notes", "reliability", "sources"}
ALLOWED_KEYS = PLAIN_KEYS | set(FIGURES)
HINT = "see profiles/hardware/README.md for the keys, units and the source rule"


def default_profiles_dir() -> Path:
    import recommender

    return Path(recommender.__file__).resolve().parent.parent / "profiles" / "hardware"


def _bad(path: Path, field: str, problem: str, hint: str = HINT) -> UserError:
    where = f"{path.name}: {field}" if field else path.name
    return UserError(f"hardware profile {where}: {problem}", hint=hint)


def parse_profile(data: Any, path: Path) -> HardwareProfile:
    """Validate one profile's YAML mapping and convert it to a HardwareProfile in base units."""
    if not isinstance(data, dict):
        raise _bad(path, "", "the file must hold one mapping (key: value lines)")
    unknown = sorted(set(map(str, data)) - ALLOWED_KEYS)
    if unknown:
        close = {k: _closest(k, ALLOWED_KEYS) for k in unknown}
        hint = "; ".join(f"{k!r}: did you mean {v!r}?" for k, v in close.items() if v) or HINT
        raise _bad(path, unknown[0], f"unknown key(s) {', '.join(map(repr, unknown))}", hint=hint)
    for req in ("name", "vendor"):
        if not isinstance(data.get(req), str) or not data[req].strip():
            raise _bad(path, req, "required text field is missing or empty")
    sources = data.get("sources") or {}
    if not isinstance(sources, dict) or not all(isinstance(v, str) and v.strip() for v in sources.values()):
        raise _bad(path, "sources", "must map each figure key to a non-empty source text (URL + note)")
    aliases = data.get("aliases") or []
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a.strip() for a in aliases):
        raise _bad(path, "aliases", "must be a list of names")

    figures = [k for k in FIGURES if data.get(k) is not None]
    for k in figures:
        if k not in sources:
            raise _bad(path, k, f"figure {k} = {data[k]!r} has no source",
                       hint=f"add `sources: {{{k}: \"<URL> - <where on the page>\"}}` or remove the figure; "
                            "never enter a number you cannot source")
    for k in sources:
        if k not in FIGURES:
            raise _bad(path, f"sources.{k}", f"sources may only name figure keys ({', '.join(FIGURES)})")
        if data.get(k) is None:
            raise _bad(path, f"sources.{k}", f"a source is given for {k} but the profile sets no {k}")

    mem_keys = [k for k in ("memory_gib", "memory_mib") if data.get(k) is not None]
    if len(mem_keys) != 1:
        raise _bad(path, "memory_gib", "give exactly one of memory_gib (spec sheet) or memory_mib (NVML total)")
    if data.get("memory_bandwidth_gb_s") is None:
        raise _bad(path, "memory_bandwidth_gb_s", "required figure is missing (with its source)")

    rec: dict[str, Any] = {
        "name": data["name"].strip(),
        "vendor": data["vendor"].strip(),
        "aliases": [a.strip() for a in aliases],
        "sources": {},
    }
    for k in ("backend", "notes", "reliability"):
        if data.get(k) is not None:
            rec[k] = data[k]
    for k in figures:
        field, mult = FIGURES[k]
        v = data[k]
        if k == "compute_capability":
            if not isinstance(v, str) or not re.fullmatch(r"\d+\.\d+", v):
                raise _bad(path, k, f"must be a quoted string like \"8.9\" (got {v!r})",
                           hint="quote it in YAML: compute_capability: \"8.9\" (8.10 would read as 8.1)")
            rec[field] = v
        else:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
                raise _bad(path, k, f"must be a positive number (got {v!r})")
            rec[field] = int(round(v * mult)) if field == "memory_bytes" else float(v) * mult
        rec["sources"][field] = sources[k].strip()
    try:
        return HardwareProfile.model_validate(rec)
    except ValidationError as exc:  # bad backend/reliability value, non-text notes...
        err = exc.errors()[0]
        field = ".".join(str(x) for x in err.get("loc", ()))
        raise _bad(path, field, err.get("msg", "invalid value"))


def _closest(key: str, choices) -> Optional[str]:
    import difflib

    m = difflib.get_close_matches(key, sorted(choices), n=1, cutoff=0.6)
    return m[0] if m else None


def _yaml_loader(yaml):  # libyaml's C loader when present (10x faster), else the pure-Python one
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


_PROFILE_CACHE: dict[tuple, list[HardwareProfile]] = {}


def load_profiles(directory: Path | str | None = None) -> list[HardwareProfile]:
    """Read and validate every ``*.yaml`` in ``directory`` (default: the repo's profiles/hardware).
    Read once per process for an unchanged directory (records are immutable in use; callers copy to change)."""
    d = Path(directory) if directory is not None else default_profiles_dir()
    key = (str(d.resolve()), tuple((p.name, p.stat().st_mtime_ns) for p in sorted(d.glob("*.yaml")))) \
        if d.is_dir() else None
    if key in _PROFILE_CACHE:
        return list(_PROFILE_CACHE[key])
    profiles = _read_profiles(d)
    _PROFILE_CACHE[key] = profiles
    return list(profiles)


def _read_profiles(d: Path) -> list[HardwareProfile]:
    import yaml  # lazy: only needed when profiles are read

    if not d.is_dir():
        raise UserError(f"hardware profile directory not found: {d}",
                        hint="run from a checkout that has profiles/hardware, or pass the directory")
    profiles: list[HardwareProfile] = []
    seen: dict[str, str] = {}
    for path in sorted(d.glob("*.yaml")):
        try:
            data = yaml.load(path.read_text(encoding="utf-8"), Loader=_yaml_loader(yaml))
        except yaml.YAMLError as exc:
            raise _bad(path, "", f"not valid YAML ({str(exc).splitlines()[0]})")
        prof = parse_profile(data, path)
        for n in [prof.name, *prof.aliases]:
            k = _compact(n)
            if k in seen and seen[k] != prof.name:
                raise _bad(path, "aliases", f"name/alias {n!r} is already used by {seen[k]!r}",
                           hint="names and aliases must be unique across profiles (case, spaces and dashes ignored)")
            seen[k] = prof.name
        profiles.append(prof)
    return profiles


def _compact(s: str) -> str:
    return re.sub(r"[\s\-_]+", "", s.strip().lower())


def _spaced(s: str) -> str:
    return re.sub(r"[\s\-_]+", " ", s.strip().lower())


def find_profile(name: str, profiles: list[HardwareProfile]) -> HardwareProfile:
    """The profile a user's GPU name designates: case-, space- and dash-insensitive, by name or alias,
    else a unique substring; ambiguous or unknown names raise UserError with the candidates."""
    by_name = {p.name: p for p in profiles}
    compact = {}
    aliases: dict[str, str] = {}
    for p in profiles:
        for n in [p.name, *p.aliases]:
            compact[_compact(n)] = p.name
            aliases[_spaced(n)] = p.name
    key = _compact(name)
    if key in compact:
        return by_name[compact[key]]
    hint = ("known GPUs are the names and aliases in profiles/hardware/*.yaml; "
            "for an unlisted GPU pick the closest profile and give --vram")
    query = re.sub(r"[\s\-_]+", " ", name).strip() or name
    chosen = resolve(query, list(by_name), kind="GPU", aliases=aliases, hint_cmd=hint)
    return by_name[chosen]


def match_profile(gpu_name: str, profiles: list[HardwareProfile]) -> Optional[HardwareProfile]:
    """The shipped profile whose name or alias equals an NVML device name (ignoring case, spaces,
    dashes and a leading "NVIDIA"), else None. Exact only: a near match may be another variant."""
    want = {_compact(gpu_name), _compact(re.sub(r"^\s*nvidia\s+", "", gpu_name, flags=re.I))}
    for p in profiles:
        names = {_compact(n) for n in [p.name, *p.aliases]}
        names |= {_compact(re.sub(r"^\s*nvidia\s+", "", n, flags=re.I)) for n in [p.name, *p.aliases]}
        if want & names:
            return p
    return None


MEASURED = "measured: NVML on this machine"


def profile_from_gpu(gpu: GpuInfo, profiles: list[HardwareProfile]) -> HardwareProfile:
    """A profile for planning on a probed GPU: memory and bandwidth as NVML measures them here; FLOPS,
    INT8 and TDP from the shipped profile of the same name (with its sources), else None."""
    shipped = match_profile(gpu.name, profiles)
    sources: dict[str, str] = {
        "memory_bytes": f"{MEASURED} (nvmlDeviceGetMemoryInfo total = {gpu.memory_total_bytes / MIB:.0f} MiB)",
    }
    if gpu.memory_bandwidth_bytes_per_s:
        bw = gpu.memory_bandwidth_bytes_per_s
        sources["memory_bandwidth_bytes_per_s"] = (
            f"{MEASURED} (max memory clock {gpu.memory_clock_mhz} MHz x {gpu.memory_bus_width_bits}-bit bus "
            f"/ 8 x {DDR_FACTOR} (double data rate); theoretical peak)")
    elif shipped is not None:
        bw = shipped.memory_bandwidth_bytes_per_s
        sources["memory_bandwidth_bytes_per_s"] = (
            f"from profile {shipped.name!r} (NVML gave no memory clock/bus width): "
            f"{shipped.sources.get('memory_bandwidth_bytes_per_s', '')}")
    else:
        raise UserError(
            f"cannot plan for GPU {gpu.index} ({gpu.name}): NVML reports no memory clock or bus width, "
            "and no hardware profile has this name",
            hint="pick a profile with --gpu NAME, or add profiles/hardware/<gpu>.yaml with sourced figures")
    rec: dict[str, Any] = {
        "name": gpu.name,
        "vendor": "NVIDIA",
        "aliases": [],
        "memory_bytes": gpu.memory_total_bytes,
        "memory_bandwidth_bytes_per_s": bw,
        "backend": "cuda",
        "sources": sources,
        "reliability": "ok",
    }
    if gpu.compute_capability:
        rec["compute_capability"] = gpu.compute_capability
        sources["compute_capability"] = f"{MEASURED} (nvmlDeviceGetCudaComputeCapability)"
    notes = [f"probed GPU {gpu.index}"]
    if gpu.power_limit_w:
        notes.append(f"power limit {gpu.power_limit_w:.0f} W (NVML)")
    if shipped is not None:
        notes.append(f"FLOPS/INT8/TDP from profile {shipped.name!r}")
        for field in ("fp16_flops_per_s", "int8_ops_per_s", "tdp_w"):
            v = getattr(shipped, field)
            if v is not None:
                rec[field] = v
                sources[field] = f"from profile {shipped.name!r}: {shipped.sources.get(field, '')}"
        if shipped.compute_capability and not gpu.compute_capability:
            rec["compute_capability"] = shipped.compute_capability
            sources["compute_capability"] = (f"from profile {shipped.name!r}: "
                                             f"{shipped.sources.get('compute_capability', '')}")
    else:
        notes.append("no shipped profile has this name: FLOPS unknown")
    rec["notes"] = "; ".join(notes)
    return HardwareProfile.model_validate(rec)


CPU_PLANNING_NAMES = ("cpu", "host", "this-cpu")


def cpu_profile(host: "HostInfo") -> HardwareProfile:
    """Plan for this machine's CPU: RAM as the memory budget (the cgroup limit when lower). No sourced bandwidth or
    FLOP/s figure exists for an arbitrary CPU, so latency is unknown until `recommender calibrate` has measured
    this CPU (bandwidth 0 = unknown to the estimator)."""
    ram = min(x for x in (host.ram_total_bytes, host.ram_limit_bytes) if x)
    return HardwareProfile(
        name=host.cpu.model or "this CPU", vendor="host", memory_bytes=ram, memory_bandwidth_bytes_per_s=0.0,
        backend="cpu",
        sources={"memory_bytes": "measured: /proc/meminfo (and the cgroup memory limit) on this machine",
                 "memory_bandwidth_bytes_per_s": "unknown (no sourced figure for this CPU): run `recommender calibrate`"},
        notes=f"this machine's CPU ({host.cpu.logical_cores} logical cores)")


def override_memory(profile: HardwareProfile, memory_bytes: int) -> HardwareProfile:
    """The same profile with the user's memory figure (--vram), recorded as the memory source."""
    if isinstance(memory_bytes, bool) or not isinstance(memory_bytes, int) or memory_bytes <= 0:
        raise UserError(f"invalid GPU memory size {memory_bytes!r}", hint="give a positive size, e.g. --vram 24GiB")
    data = profile.model_dump()
    data["memory_bytes"] = memory_bytes
    data["sources"] = {**profile.sources,
                       "memory_bytes": f"user override (--vram {memory_bytes / GIB:.2f} GiB)"}
    note = f"memory overridden by the user ({memory_bytes / GIB:.2f} GiB; profile said {profile.memory_bytes / GIB:.2f} GiB)"
    data["notes"] = f"{profile.notes}; {note}" if profile.notes else note
    return HardwareProfile.model_validate(data)
