"""Which GPU are we planning for? (This machine itself: recommender.hardware.host.)

Hardware profiles: ``profiles/hardware/*.yaml`` describe GPUs a user can plan for. ``load_profiles()``
  reads and strictly validates them (every figure needs a source), ``find_profile()`` resolves a user's
  GPU name, ``profile_from_gpu()`` turns a probed GPU into a profile, ``override_memory()`` applies --vram.

Units: records hold base units (bytes, bytes/s, FLOP/s, W). The YAML files use human units whose names
say the unit (``memory_gib``, ``memory_bandwidth_gb_s``, ``fp16_tflops``...); see
``profiles/hardware/README.md`` for the scheme and how each is converted.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from pathlib import Path
from typing import Any, Optional

from pydantic import ValidationError

from recommender.core.errors import UserError
from recommender.core.paths import PROFILES_DIR, caches_off, private_cache_dir, read_private_json, write_private_json
from recommender.core.records import HardwareProfile
from recommender.core.units import GIB, MIB, parse_bandwidth, parse_memory
from recommender.hardware import cpu_bench
from recommender.hardware.host import DDR_FACTOR, GpuInfo, GpuProbe, HostInfo, probe_gpus, probe_host, probe_ram

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
    "fp32_tflops": ("fp32_flops_per_s", 1e12),  # FP32 vector (no tensor cores): the prefill peak of GPUs without them
    "tdp_w": ("tdp_w", 1.0),
    "compute_capability": ("compute_capability", 1.0),  # a string, "8.9"
}
PLAIN_KEYS = {"name", "vendor", "aliases", "backend", "notes", "reliability", "sources"}
ALLOWED_KEYS = PLAIN_KEYS | set(FIGURES)
HINT = "see profiles/hardware/README.md for the keys, units and the source rule"


def default_profiles_dir() -> Path:
    return PROFILES_DIR / "hardware"


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
    Read once per process for an unchanged directory (records are immutable in use; callers copy to change), and
    kept between processes in a private JSON cache keyed by every file's name, size and modification time (parsing
    a few hundred YAML files costs more than the rest of a warm `recommend`)."""
    d = Path(directory) if directory is not None else default_profiles_dir()
    key = (str(d.resolve()), tuple((p.name, st.st_size, st.st_mtime_ns) for p in sorted(d.glob("*.yaml"))
                                   for st in (p.stat(),))) if d.is_dir() else None
    if key in _PROFILE_CACHE:
        return list(_PROFILE_CACHE[key])
    profiles = _cached_profiles(key) if key else None
    if profiles is None:
        profiles = _read_profiles(d)
        if key:
            _store_profiles(key, profiles)
    _PROFILE_CACHE[key] = profiles
    return list(profiles)


PROFILE_CACHE_VERSION = 1  # of the cached layout; the records' schema is checked again on every read


def _profile_cache_file(key: tuple) -> Optional[Path]:
    if caches_off():
        return None
    d = private_cache_dir("profiles")
    if d is None:
        return None
    digest = hashlib.sha256(json.dumps([PROFILE_CACHE_VERSION, key]).encode()).hexdigest()[:24]
    return d / f"{digest}.json"


def _cached_profiles(key: tuple) -> Optional[list[HardwareProfile]]:
    """The profiles of an unchanged directory as parsed by an earlier run, validated again (JSON: data, never
    code); None when absent, unreadable or not this user's own file."""
    data = read_private_json(_profile_cache_file(key))
    try:
        if not isinstance(data, dict) or data.get("key") != json.loads(json.dumps(key)):
            return None
        return [HardwareProfile.model_validate(p) for p in data["profiles"]]
    except (ValueError, KeyError, TypeError, ValidationError):
        return None


def _store_profiles(key: tuple, profiles: list[HardwareProfile]) -> None:
    f = _profile_cache_file(key)
    if f is not None:
        write_private_json(f, json.dumps({"key": key, "profiles": [p.model_dump(mode="json") for p in profiles]}))


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


# GPU names are matched against every profile's name and aliases several times a run (the planned GPU, each
# measured row's hardware): their compact forms and words are pure functions of the name, kept once computed
NAME_FORMS_KEPT = 8192


@functools.lru_cache(maxsize=NAME_FORMS_KEPT)
def _compact(s: str) -> str:
    return re.sub(r"[\s\-_]+", "", s.strip().lower())



# --- name resolution -------------------------------------------------------------------------------------
# A GPU name is matched exactly (name or alias, ignoring case, spaces, dashes and underscores), else by its words:
# a profile answers to a name when the name's words are the profile's (its name or one alias) except for words that
# only tell variants apart: a memory size (which must then equal the profile's), a form factor or memory type, a
# GPU core count. Brand words (NVIDIA, GeForce, AMD, Radeon, Apple, Intel, Graphics, (R), (TM)) are ignored, so the
# names NVML ("NVIDIA GeForce RTX 4090"), rocm-smi ("AMD Radeon RX 7900 XTX") and macOS ("Apple M3 Max") report are
# understood. One profile: that one. Several: refused with the choices. None: refused with the closest names. A
# nearest match is never used.
BRAND_WORDS = frozenset({"nvidia", "geforce", "amd", "radeon", "apple", "intel", "graphics", "(r)", "(tm)", "corporation",
                         "gpu", "tesla"})
# Words that tell variants of one GPU apart without naming another GPU (a "Ti", "Super", "XT", "Max", "Pro",
# "Ultra", "Laptop", "Mobile" or "Nano" names another GPU and is never ignored).
VARIANT_WORDS = frozenset({"pcie", "sxm", "sxm2", "sxm4", "sxm5", "nvl", "hbm2", "hbm2e", "hbm3", "hbm3e",
                           "gddr6", "gddr6x", "gddr7", "edition", "workstation", "server", "maxq"})
# Apple computers' names around the chip's ("Mac Studio M3 Ultra 512GB", "MacBook Pro M4 Pro 24GB"): dropped before the
# chip's words are read ("Pro" in "MacBook Pro" names no chip)
_MAC_WORDS = re.compile(r"\b(mac\s*studio|macbook\s*pro|macbook\s*air|macbook|mac\s*mini|mac\s*pro|imac)\b")
_MEM_WORD = re.compile(r"^(\d+(?:\.\d+)?)(gb|gib|g)$")
_CORE_WORD = re.compile(r"^\d+c$")


@functools.lru_cache(maxsize=NAME_FORMS_KEPT)
def _words(name: str) -> tuple[str, ...]:
    """A GPU name as words: lower case, '(R)'/'(TM)' and brand words dropped, '16 GB' -> '16gb', '38-core GPU'
    -> '38c', 'Max-Q' -> 'maxq'."""
    s = name.lower().replace("(r)", " ").replace("(tm)", " ").replace("max-q", "maxq")
    s = _MAC_WORDS.sub(" ", s)  # "Mac Studio M3 Ultra", "MacBook Pro M4 Max": the computer, not the chip
    s = re.sub(r"[,/_]+", " ", s)
    s = re.sub(r"(\d+(?:\.\d+)?)\s*(gb|gib)\b", r"\1gb", s)
    s = re.sub(r"(\d+)[\s-]*core(s)?(\s+gpu)?\b", r"\1c", s)
    s = s.replace("-", " ")
    return tuple(w for w in s.split() if w not in BRAND_WORDS)


def _mem_gb(word: str) -> Optional[float]:
    m = _MEM_WORD.match(word)
    return float(m.group(1)) if m else None


def _memory_agrees(stated_gb: float, memory_bytes: int) -> bool:
    """A stated '12GB' names a card of 12 GiB (spec sheets) or 12 GB (decimal); NVML totals are a little less (the
    H200's 143,771 MiB is sold as 141 GB): within 3 %."""
    return any(abs(memory_bytes - stated_gb * unit) <= 0.03 * stated_gb * unit for unit in (GIB, 1e9))


def _answers_to(query: tuple[str, ...], p: HardwareProfile) -> bool:
    q_mem = [_mem_gb(w) for w in query if _mem_gb(w) is not None]
    if any(not _memory_agrees(gb, p.memory_bytes) for gb in q_mem):
        return False
    q_rest = {w for w in query if _mem_gb(w) is None}
    for n in [p.name, *p.aliases]:
        words = _words(n)
        rest = {w for w in words if _mem_gb(w) is None}
        # a bare "SXM" names any SXM generation of the card ("A100 80GB SXM" = the SXM4 board)
        q_want = {w for w in q_rest if not (w == "sxm" and any(re.fullmatch(r"sxm\d", r) for r in rest))}
        extra = rest - q_rest
        if q_want <= rest and all(w in VARIANT_WORDS or _CORE_WORD.match(w) for w in extra):
            return True
    return False


def profile_candidates(name: str, profiles: list[HardwareProfile]) -> list[HardwareProfile]:
    """Every profile ``name`` can designate: the one with that exact name or alias, else every profile that answers
    to its words (see above). An empty list: no profile has that name."""
    key = _compact(name)
    for p in profiles:
        if any(_compact(n) == key for n in [p.name, *p.aliases]):
            return [p]
    query = _words(name)
    if not query or all(_mem_gb(w) is not None for w in query):
        return []
    return [p for p in profiles if _answers_to(query, p)]


def find_profile(name: str, profiles: list[HardwareProfile]) -> HardwareProfile:
    """The profile a user's GPU name designates (:func:`profile_candidates`); an ambiguous or unknown name raises
    UserError with the choices. Never a nearest match."""
    if not name or not name.strip():
        raise UserError("empty GPU name", hint="give a GPU name, e.g. --gpu 'RTX 4090'; `recommender hardware "
                                               "--list` shows every profile")
    found = profile_candidates(name, profiles)
    if len(found) == 1:
        return found[0]
    if found:
        names = sorted(p.name for p in found)
        shown = ", ".join(repr(n) for n in names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        raise UserError(f"GPU {name!r} is ambiguous: it names {len(names)} profiles ({shown})",
                        hint=f"give the variant, e.g. --gpu {names[0]!r} (memory size, core count or form factor)")
    import difflib

    pool = {}
    for p in profiles:
        for n in [p.name, *p.aliases]:
            pool.setdefault(n.lower(), p.name)
    close = []
    for c in difflib.get_close_matches(name.strip().lower(), list(pool), n=6, cutoff=0.6):
        if pool[c] not in close:
            close.append(pool[c])
    guess = f"; did you mean {', '.join(repr(c) for c in close[:3])}?" if close else ""
    raise UserError(f"unknown GPU {name!r}: no hardware profile has this name{guess}",
                    hint="`recommender hardware --profiles` lists every profile; for an unlisted GPU pick a profile "
                         "and give --vram")


# Variants that plan alike: the same memory and decode bandwidths within this fraction of each other (RTX PRO 6000
# Server 1597 vs Workstation 1792 GB/s: 12 %; A100 80GB PCIe vs SXM4: 5 %); otherwise only the prompt rate differs
# (10-27 % between core counts or power limits). A name that designates several of them plans for the slowest, with
# a note; variants that differ in memory need --vram to choose.
VARIANT_BANDWIDTH_SPREAD = 0.15


def _shares_memory(found: list[HardwareProfile]) -> bool:
    return max(p.memory_bytes for p in found) <= 1.03 * min(p.memory_bytes for p in found)


def resolve_profile(name: str, profiles: list[HardwareProfile], memory_bytes: Optional[int] = None
                    ) -> tuple[HardwareProfile, Optional[str]]:
    """The profile a user's GPU name designates for planning, and a note when the name fits several variants: the
    variants whose memory agrees with ``memory_bytes`` (--vram) when given; several left that share their memory and
    decode bandwidth (within VARIANT_BANDWIDTH_SPREAD): the slowest (lowest bandwidth, then lowest prompt peak), said
    in the note. Otherwise as :func:`find_profile` (ambiguous or unknown names raise UserError with the choices)."""
    found = profile_candidates(name, profiles) if name and name.strip() else []
    if len(found) > 1 and memory_bytes:
        fit = [p for p in found if abs(p.memory_bytes - memory_bytes) <= 0.06 * p.memory_bytes]
        found = fit or found
    if len(found) > 1 and _shares_memory(found):
        bws = [p.memory_bandwidth_bytes_per_s for p in found]
        if max(bws) <= (1 + VARIANT_BANDWIDTH_SPREAD) * min(bws):
            def speed(p):
                return (p.memory_bandwidth_bytes_per_s, p.fp16_flops_per_s or p.fp32_flops_per_s or 0.0)
            slow = min(found, key=speed)
            others = sorted(p.name for p in found if p is not slow)
            peaks = [p.fp16_flops_per_s for p in found if p.fp16_flops_per_s]
            spread = (f"; prompt peaks differ {min(peaks) / 1e12:.0f}-{max(peaks) / 1e12:.0f} TFLOPS"
                      if len(peaks) > 1 and max(peaks) > min(peaks) else "")
            bw = (f", bandwidth {min(bws) / 1e9:.0f}-{max(bws) / 1e9:.0f} GB/s" if max(bws) > min(bws) else "")
            return slow, (f"{name!r} names {len(found)} variants of one memory size{bw}{spread}: planning for the "
                          f"slowest, {slow.name!r} (others: {', '.join(repr(o) for o in others)}; name one to plan "
                          f"for it)")
    if len(found) == 1:
        return found[0], None
    if len(found) > 1 and memory_bytes is None and not _shares_memory(found):
        names = sorted(p.name for p in found)
        sizes = sorted({round(p.memory_bytes / GIB) for p in found})
        raise UserError(f"GPU {name!r} is ambiguous: it names {len(names)} profiles with "
                        f"{', '.join(f'{g} GiB' for g in sizes)} ({', '.join(repr(n) for n in names[:8])})",
                        hint=f"give the memory, e.g. --gpu {name!r} --vram {sizes[-1]}, or the variant's name")
    if not found and name and name.strip():
        wider = _wider_candidates(name, profiles)
        if len(wider) > 1:
            names = sorted(p.name for p in wider)
            raise UserError(f"GPU {name!r} names a family of {len(names)} profiles: "
                            f"{', '.join(repr(n) for n in names[:12])}" + (" ..." if len(names) > 12 else ""),
                            hint=f"give one of them, e.g. --gpu {names[0]!r}")
    return find_profile(name, profiles), None


def _wider_candidates(name: str, profiles: list[HardwareProfile]) -> list[HardwareProfile]:
    """Profiles whose name holds every word of ``name`` and more ("Jetson Orin": the AGX, NX and Nano boards): the
    choices a family name offers, never resolved to one."""
    query = set(_words(name))
    if not query:
        return []
    out = []
    for p in profiles:
        if any(query <= set(_words(n)) for n in [p.name, *p.aliases]):
            out.append(p)
    return out


def match_profile(gpu_name: str, profiles: list[HardwareProfile],
                  memory_bytes: Optional[int] = None) -> Optional[HardwareProfile]:
    """The shipped profile of a device name as NVML / rocm-smi / macOS report it, else None. A name several profiles
    answer to ("NVIDIA GeForce RTX 3060": 8 or 12 GB) is settled by the device's memory when given (within 6 %:
    drivers report a little less than the spec sheet); still ambiguous, None: a guess may be another variant."""
    found = profile_candidates(gpu_name, profiles)
    if len(found) > 1 and memory_bytes:
        found = [p for p in found if abs(p.memory_bytes - memory_bytes) <= 0.06 * p.memory_bytes]
    return found[0] if len(found) == 1 else None


def shipped_profile(gpu: GpuInfo, profiles: list[HardwareProfile]) -> Optional[HardwareProfile]:
    """The shipped profile of a probed GPU: its reported name (Apple: with the GPU core count, 'Apple M3 Max 40-core
    GPU') settled by its memory; None when no profile, or several, fit."""
    query = f"{gpu.name} {gpu.gpu_cores}-core GPU" if gpu.vendor == "Apple" and gpu.gpu_cores else gpu.name
    return match_profile(query, profiles, gpu.memory_total_bytes)


MEASURED = "measured: NVML on this machine"


def profile_from_gpu(gpu: GpuInfo, profiles: list[HardwareProfile]) -> HardwareProfile:
    """A profile for planning on a probed GPU: memory and bandwidth as NVML measures them here; FLOPS,
    INT8 and TDP from the shipped profile of the same name (with its sources), else None."""
    shipped = shipped_profile(gpu, profiles)
    if gpu.source != "NVML":
        return _profile_from_tool(gpu, shipped)
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


def _profile_from_tool(gpu: GpuInfo, shipped: Optional[HardwareProfile]) -> HardwareProfile:
    """A GPU reported by amd-smi / rocm-smi / macOS / xpu-smi: its memory as the tool measured it, every other figure
    from the shipped profile its name and memory designate (the tools report no bandwidth)."""
    if shipped is None:
        raise UserError(f"cannot plan for GPU {gpu.index} ({gpu.name}, {gpu.source}): no hardware profile has this "
                        f"name and {gpu.memory_total_bytes / GIB:.0f} GiB, and {gpu.source} reports no bandwidth",
                        hint="pick a profile with --gpu NAME (`recommender hardware --profiles`), or add "
                             "profiles/hardware/<gpu>.yaml with sourced figures")
    data = shipped.model_dump()
    data["name"], data["aliases"] = shipped.name, []
    data["memory_bytes"] = gpu.memory_total_bytes
    data["sources"] = {**{k: f"from profile {shipped.name!r}: {v}" for k, v in shipped.sources.items()},
                       "memory_bytes": f"measured: {gpu.source} on this machine ({gpu.memory_total_bytes / MIB:.0f} MiB)"}
    data["notes"] = f"probed GPU {gpu.index} ({gpu.source}: {gpu.name}); bandwidth and FLOP/s from profile {shipped.name!r}"
    return HardwareProfile.model_validate(data)


# --- Apple: the Metal GPU working set -------------------------------------------------------------------
# macOS lets the GPU wire only part of unified memory: Metal's MTLDevice.recommendedMaxWorkingSetSize, which llama.cpp
# prints at start (ggml_metal_init) and warns past ("current allocated size is greater than the recommended max working
# set size"). Measured defaults, in MiB of 2^20 bytes as llama.cpp printed them:
#   16 GiB M1 Pro: 10922.67 = 2/3 x 16384 (github.com/abetlen/llama-cpp-python/issues/687)
#   32 GiB M1 Max: 21845.34 = 2/3 x 32768 (github.com/ggml-org/llama.cpp/pull/2011, EliasOenal's log)
#   32 GiB M2 Max: 21845.34 = 2/3 x 32768 (github.com/ollama/ollama/issues/434)
#   64 GiB M2 Max: "around 47GB or higher" fails, = 3/4 x 64 GiB (github.com/ggml-org/llama.cpp/issues/1870)
#   96 GiB M2 Max: 73728.00 = 3/4 x 98304 (github.com/ggml-org/llama.cpp/issues/3213)
# so 2/3 of RAM up to 32 GiB and 3/4 from 64 GiB; where 36 and 48 GiB machines fall is not measured here (assumed: 2/3
# up to METAL_SMALL_MAX_GIB). Newer macOS releases report more on some machines (128 GiB M5 Max on macOS 26: 107.52 GiB,
# github.com/antirez/ds4/pull/893): the rule is the conservative default. `sudo sysctl iogpu.wired_limit_mb=N` raises it
# (Metal then reports N MiB; github.com/AlexsJones/llmfit/pull/754); --vram states it.
METAL_WORKING_SET_SMALL = 2 / 3
METAL_WORKING_SET_LARGE = 3 / 4
METAL_SMALL_MAX_GIB = 36
METAL_WORKING_SET_SOURCE = ("Metal recommendedMaxWorkingSetSize default as llama.cpp logs it: 2/3 of RAM at 16 and 32 "
                            "GiB (github.com/ggml-org/llama.cpp/pull/2011, github.com/ollama/ollama/issues/434), 3/4 "
                            "at 64 and 96 GiB (github.com/ggml-org/llama.cpp/issues/3213); 2/3 assumed up to 36 GiB")


def metal_working_set(memory_bytes: int, wired_limit_mb: Optional[int] = None) -> tuple[int, str]:
    """(bytes, basis) the GPU of an Apple silicon Mac with ``memory_bytes`` of unified memory may wire by default;
    ``wired_limit_mb``: the machine's `sysctl iogpu.wired_limit_mb` when set (0 or None: the default)."""
    if wired_limit_mb:
        return int(wired_limit_mb) * MIB, f"measured: sysctl iogpu.wired_limit_mb = {wired_limit_mb} on this Mac"
    frac = METAL_WORKING_SET_SMALL if memory_bytes <= METAL_SMALL_MAX_GIB * GIB else METAL_WORKING_SET_LARGE
    return int(memory_bytes * frac), f"{'2/3' if frac < 0.7 else '3/4'} of {memory_bytes / GIB:.0f} GiB [{METAL_WORKING_SET_SOURCE}]"


def under_metal_working_set(profile: HardwareProfile, wired_limit_mb: Optional[int] = None
                            ) -> tuple[HardwareProfile, str]:
    """An Apple (Metal) profile planned under its GPU working set (memory = what Metal lets the GPU wire), and the
    one-line note that says so."""
    ws, basis = metal_working_set(profile.memory_bytes, wired_limit_mb)
    data = profile.model_dump()
    data["memory_bytes"] = ws
    data["sources"] = {**profile.sources, "memory_bytes": f"GPU working set: {basis}; unified memory: "
                                                          f"{profile.sources.get('memory_bytes', '')}"}
    note = (f"planning under the Metal GPU working set: {ws / GIB:.1f} of {profile.memory_bytes / GIB:.0f} GiB "
            f"({'iogpu.wired_limit_mb' if wired_limit_mb else 'macOS default, 2/3 up to 36 GiB, 3/4 above'}); "
            f"--vram raises it (after `sudo sysctl iogpu.wired_limit_mb=N`)")
    data["notes"] = f"{profile.notes}; {note}" if profile.notes else note
    return HardwareProfile.model_validate(data), note


# Host RAM that llama.cpp partial offload may fill: the RAM (this machine's, or --ram) less what the OS and the
# user's other programs keep. Assumption (no source measures a typical desktop's resident set): the larger of 10 %
# and 4 GiB.
HOST_RAM_RESERVE_SHARE = 0.10
HOST_RAM_RESERVE_MIN_BYTES = 4 * GIB


# llama.cpp partial offload (n_gpu_layers below all) is planned on these backends: discrete GPUs with host RAM behind
# PCIe (llama.cpp -ngl); Apple and integrated GPUs share one memory
OFFLOAD_BACKENDS = ("cuda", "rocm")


def offload_ram_budget(stated: Optional[str] = None) -> tuple[int, str]:
    """(bytes, basis) of host RAM a partial-offload plan may use: --ram as typed, else this machine's RAM (its cgroup
    limit when lower), less the reserve."""
    if stated is not None:
        total, where = parse_memory(stated, "--ram"), f"--ram {stated}"
    else:
        t, _avail, limit = probe_ram()
        total, where = min(x for x in (t, limit) if x), "this machine's RAM (/proc/meminfo)"
    reserve = max(HOST_RAM_RESERVE_SHARE * total, HOST_RAM_RESERVE_MIN_BYTES)
    usable = max(int(total - reserve), 0)
    return usable, (f"host RAM for partial offload: {usable / GIB:.1f} GiB usable of {total / GIB:.1f} GiB ({where}, "
                    f"less max(10 %, 4 GiB) for the OS and other programs); --ram states it")


CPU_PLANNING_NAMES = ("cpu", "host", "this-cpu")


def cpu_profile(host: HostInfo, measure: bool = True) -> HardwareProfile:
    """Plan for this machine's CPU: RAM as the memory budget (the cgroup limit when lower). No sourced bandwidth or
    FLOP/s figure exists for an arbitrary CPU and its RAM, so they are measured here (recommender.hardware.cpu_bench:
    a few seconds once, then cached per host) unless ``measure`` is False or measuring is turned off; then latency
    is unknown (bandwidth 0 = unknown to the estimator) until `recommender calibrate` or --bandwidth."""
    ram = min(x for x in (host.ram_total_bytes, host.ram_limit_bytes) if x)
    sources = {"memory_bytes": "measured: /proc/meminfo (and the cgroup memory limit) on this machine",
               "memory_bandwidth_bytes_per_s": "unknown (no sourced figure for this CPU): run `recommender "
                                               "calibrate`, or give --bandwidth"}
    bw, fp32 = 0.0, None
    bench = cpu_bench.cached_or_measure(host.fingerprint, host.cpu.physical_cores) if measure else None
    if bench:
        bw, fp32 = bench["memory_bandwidth_bytes_per_s"], bench["fp32_flops_per_s"]
        sources["memory_bandwidth_bytes_per_s"] = f"measured: {bench['basis']} ({bench['measured_at']})"
        sources["fp32_flops_per_s"] = f"measured: {bench['basis']} ({bench['measured_at']})"
    return HardwareProfile(
        name=host.cpu.model or "this CPU", vendor="host", memory_bytes=ram, memory_bandwidth_bytes_per_s=bw,
        fp32_flops_per_s=fp32, backend="cpu", sources=sources,
        notes=f"this machine's CPU ({host.cpu.logical_cores} logical cores)")


def override_memory(profile: HardwareProfile, memory_bytes: int) -> HardwareProfile:
    """The same profile with the user's memory figure (--vram), recorded as the memory source."""
    return profile.with_memory(memory_bytes)


def hardware_key(name: str, profiles: list[HardwareProfile]) -> str:
    """One name per GPU model: a shipped profile's name when NVML's name matches one ('NVIDIA H200' -> 'h200 sxm'),
    so rows measured here are found whether one plans with --gpu or on this machine."""

    prof = match_profile(name, profiles)
    return (prof.name if prof else name).lower()


def has_hardware_key(name: str, key: str, profiles: list[HardwareProfile]) -> bool:
    """Whether ``hardware_key(name, profiles) == key``, without matching ``name`` against every profile when it
    cannot be: a name that the profile named ``key`` does not answer to (exactly or by its words) maps to another
    profile, or to itself, and so to another key."""
    target = next((p for p in profiles if p.name.lower() == key), None)
    if target is not None:
        k = _compact(name)
        if not any(_compact(n) == k for n in [target.name, *target.aliases]) \
                and not _answers_to(_words(name), target):
            return False
    return hardware_key(name, profiles) == key


def planning_hardware(gpu: Optional[str], vram: Optional[str | int] = None, found: Optional[GpuProbe] = None,
                      bandwidth: Optional[str] = None):
    """The GPU to plan for: --gpu NAME (a shipped profile; `cpu` = this machine's CPU and RAM), else the first GPU
    found, else the default reference; ``vram`` (--vram as typed, or bytes) overrides its memory. ``found``: this
    machine's GPUs as the caller probed them already (else they are probed here when needed).

    Returns (profile, notes)."""

    notes = []
    profiles = load_profiles()
    if gpu and gpu.strip().lower() in CPU_PLANNING_NAMES:
        prof = cpu_profile(probe_host())  # measured once per host (cached); --bandwidth replaces its bandwidth
        src = prof.sources.get("memory_bandwidth_bytes_per_s", "")
        bw = (f", {prof.memory_bandwidth_bytes_per_s / 1e9:.1f} GB/s measured"
              + (" per CPU-second: the machine was busy, the probe ran a share of the time" if "is busy" in src else "")
              if src.startswith("measured") else "")
        notes.append(f"planning for this machine's CPU ({prof.name}, {prof.memory_bytes / 1024**3:.1f} GiB RAM{bw})")
    elif gpu:
        prof, note = resolve_profile(gpu, profiles, (parse_memory(vram) if isinstance(vram, str) else vram)
                                     if vram is not None else None)
        if note:
            notes.append(note)
        if prof.backend == "metal" and vram is None:
            prof, note = under_metal_working_set(prof)
            notes.append(note)
    else:
        found = found or probe_gpus()
        if found.gpus:
            prof = profile_from_gpu(found.gpus[0], profiles)
            notes.append(f"planning for the GPU found here: {prof.name}")
            if prof.backend == "metal" and vram is None:
                prof, note = under_metal_working_set(prof, found.gpus[0].wired_limit_mb)
                notes.append(note)
        else:
            prof = find_profile(DEFAULT_PLANNING_GPU, profiles)
            notes.append(f"no GPU found here ({found.gpu_status}); planning for a {prof.name} — "
                         f"use --gpu NAME to plan for another GPU")
    if vram is not None:
        prof = prof.with_memory(parse_memory(vram) if isinstance(vram, str) else vram)
    if bandwidth is not None:
        prof = prof.with_bandwidth(parse_bandwidth(bandwidth), str(bandwidth))
    return prof, notes


# A GPU-less machine plans for this reference card (the most common 24 GB card in the llama.cpp CUDA scoreboard).
DEFAULT_PLANNING_GPU = "RTX 4090"
