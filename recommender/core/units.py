"""Parsing and formatting of user-facing quantities.

Conventions (documented in docs/scoring.md and the README):
- Memory: ``GB``/``MB`` are SI (10^9, 10^6 bytes); ``GiB``/``MiB`` are binary (2^30, 2^20). A bare number is GiB,
  because GPU memory is sold in binary units: a "24 GB" RTX 4090 has 24 GiB of memory (NVML reports 24,564 MiB).
- Latency: ``ms``, ``s``, ``us``; a bare number is milliseconds.
"""

from __future__ import annotations

import re


from recommender.core.errors import UserError

KIB = 1024
MIB = 1024**2
GIB = 1024**3
TIB = 1024**4

_MEM_UNITS = {
    "": GIB,  # bare number: GiB (see module docstring)
    "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": KIB, "mib": MIB, "gib": GIB, "tib": TIB,
    "k": KIB, "m": MIB, "g": GIB, "t": TIB,
}
# Largest memory we accept as a planning budget: 64 TiB (beyond any single node today; a typo guard).
MAX_PLAUSIBLE_MEMORY_BYTES = 64 * TIB

_LAT_UNITS = {"": 1.0, "ms": 1.0, "s": 1000.0, "sec": 1000.0, "us": 1e-3, "µs": 1e-3, "min": 60_000.0}
MAX_PLAUSIBLE_LATENCY_MS = 24 * 3600 * 1000.0

_NUM_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Zµ]*)\s*$")


def parse_memory(text: str | float | int, what: str = "--vram") -> int:
    """Parse '24', '24GB', '24GiB', '24576MiB' into bytes."""
    raw = str(text).strip()
    if raw.startswith("-"):
        raise UserError(f"{what} must be positive, got {raw!r}", hint="give the GPU memory, e.g. 24 (GiB) or 24GB")
    m = _NUM_RE.match(raw)
    if not m or m.group(2).lower() not in _MEM_UNITS:
        raise UserError(f"cannot read {what} value {raw!r}",
                        hint="use a number with an optional unit: 24, 24GiB, 24GB, 24576MiB (bare number = GiB)")
    value = float(m.group(1)) * _MEM_UNITS[m.group(2).lower()]
    if value <= 0:
        raise UserError(f"{what} must be positive, got {raw!r}", hint="give the GPU memory, e.g. 24 (GiB)")
    if value > MAX_PLAUSIBLE_MEMORY_BYTES:
        raise UserError(f"{what} {raw!r} is implausibly large ({value / TIB:.0f} TiB)",
                        hint="units: a bare number is GiB; write e.g. 24 or 80GB")
    if value < 64 * MIB:
        raise UserError(f"{what} {raw!r} is too small to hold any model ({value / MIB:.1f} MiB)",
                        hint="units: a bare number is GiB; write e.g. 24 or 8GiB")
    return int(value)


def _parse_scaled(text: str | float | int, what: str, units: dict[str, float], maximum: float, hint: str,
                  range_hint: str) -> float:
    """A positive number with an optional unit from ``units`` (factors to the result's unit), at most ``maximum``."""
    raw = str(text).strip()
    m = _NUM_RE.match(raw)
    if raw.startswith("-") or not m or m.group(2).lower() not in units:
        raise UserError(f"cannot read {what} value {raw!r}", hint=hint)
    value = float(m.group(1)) * units[m.group(2).lower()]
    if value <= 0 or value > maximum:
        raise UserError(f"{what} {raw!r} is out of range", hint=range_hint)
    return value


def parse_latency_ms(text: str | float | int, what: str = "--max-latency") -> float:
    """Parse '800ms', '0.8s', '800' (ms) into milliseconds."""
    return _parse_scaled(text, what, _LAT_UNITS, MAX_PLAUSIBLE_LATENCY_MS,
                         hint="use e.g. 800ms, 0.8s or 800 (milliseconds)",
                         range_hint="give a positive latency below a day, e.g. 800ms")


_DURATION_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
MAX_DURATION_S = 7 * 24 * 3600.0  # a week: a typo guard for run budgets


def parse_duration_s(text: str | float | int, what: str = "--budget") -> float:
    """Parse '10m', '90s', '1h', '600' (seconds) into seconds."""
    return _parse_scaled(text, what, _DURATION_UNITS, MAX_DURATION_S,
                         hint="use e.g. 10m, 90s, 1h or 600 (seconds)",
                         range_hint="give a positive duration up to a week, e.g. 10m")


_BW_UNITS = {"": 1e9, "gb/s": 1e9, "gbps": 1e9, "gbs": 1e9, "tb/s": 1e12, "tbs": 1e12, "mb/s": 1e6,
             "gib/s": float(GIB), "tib/s": float(TIB)}
MAX_PLAUSIBLE_BANDWIDTH_BYTES_PER_S = 100e12  # beyond any memory system today (a typo guard)


def parse_bandwidth(text: str | float | int, what: str = "--bandwidth") -> float:
    """Parse '100GB/s', '1.8TB/s', '100' (GB/s, as spec sheets give memory bandwidth) into bytes/s."""
    raw = str(text).strip()
    m = re.match(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z/]*)\s*$", raw)
    hint = "use e.g. 100GB/s, 1.8TB/s or 100 (GB/s)"
    if raw.startswith("-") or not m or m.group(2).lower() not in _BW_UNITS:
        raise UserError(f"cannot read {what} value {raw!r}", hint=hint)
    value = float(m.group(1)) * _BW_UNITS[m.group(2).lower()]
    if value < 1e8 or value > MAX_PLAUSIBLE_BANDWIDTH_BYTES_PER_S:
        raise UserError(f"{what} {raw!r} is out of range", hint="give a memory bandwidth between 0.1 GB/s and "
                                                                 "100 TB/s, e.g. 100GB/s")
    return value


def parse_tokens(text: str | int, what: str = "--context") -> int:
    """Parse '4096', '4K', '32k', '128K' into a token count (K = 1024, as model cards use it)."""
    raw = str(text).strip()
    m = re.match(r"^\s*([0-9]{1,12})\s*([kK]?)\s*$", raw)  # 12 digits: beyond any context, a length guard
    if not m:
        shown = raw if len(raw) <= 40 else f"{raw[:40]}... ({len(raw)} characters)"
        raise UserError(f"cannot read {what} value {shown!r}", hint="use a token count such as 4096 or 32K")
    n = int(m.group(1)) * (1024 if m.group(2) else 1)
    if n <= 0 or n > 16 * 1024 * 1024:
        raise UserError(f"{what} {raw!r} is out of range", hint="use a token count between 1 and 16M")
    return n


def fmt_bytes(n: float | None) -> str:
    """Binary units, labelled as such (GiB, never 'GB' for 2^30)."""
    if n is None:
        return "?"
    for unit, size in (("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def fmt_ms(ms: float | None) -> str:
    if ms is None:
        return "?"
    if ms >= 10_000:
        return f"{ms / 1000:.1f} s"
    if ms >= 100:
        return f"{ms:.0f} ms"
    return f"{ms:.1f} ms"


def fmt_tokens(n: int) -> str:
    return f"{n // 1024}K" if n >= 1024 and n % 1024 == 0 else str(n)
