"""Machines with several GPUs: which cards (``--gpu "2x RTX 3090"``, ``--gpu "RTX 4090,RTX 3090"``, ``--gpus N``),
and the link between them (PCIe generation and lanes, NVLink where the machine has it), every figure with a source.

A single GPU stays a plain ``HardwareProfile`` (``recommender.hardware.profiles``); a ``MultiGpu`` is the record of a
machine with two or more, the per-device profiles in device order (CUDA0 first) plus the link. Names are resolved by
``profiles.find_profile``, one card at a time.

PCIe bandwidth per lane and direction after 128b/130b line coding (PCI-SIG base specifications 3.0/4.0/5.0, as
tabulated at https://en.wikipedia.org/wiki/PCI_Express#Comparison_table): 8, 16, 32 GT/s x 128/130.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, Optional

from pydantic import Field

from recommender.core.errors import UserError
from recommender.core.paths import PROFILES_DIR
from recommender.core.records import HardwareProfile, Strict
from recommender.core.units import parse_bandwidth, parse_memory
from recommender.hardware.host import GpuInfo, probe_gpus
from recommender.hardware.profiles import (OFFLOAD_BACKENDS, find_profile, load_profiles, match_profile,
                                           offload_ram_budget, planning_hardware, profile_from_gpu)

# GB/s (10^9 B/s) per lane and direction: transfer rate (GT/s) x 128/130 line coding / 8 bits
PCIE_GT_PER_S = {3: 8.0, 4: 16.0, 5: 32.0}
PCIE_LINE_CODING = 128 / 130
PCIE_SOURCE = ("PCI-SIG base specifications (gen 3/4/5: 8/16/32 GT/s, 128b/130b coding), "
               "https://en.wikipedia.org/wiki/PCI_Express#Comparison_table")
MAX_GPUS = 16  # llama.cpp's GGML_CUDA_MAX_DEVICES is 16 (ggml/include/ggml-cuda.h)
LINKS_FILE = PROFILES_DIR / "links" / "links.yaml"
LINK_HINT = 'give the link as "pcie4 x16", "pcie3 x8", "pcie5 x16" or "nvlink"'


def pcie_bytes_per_s(generation: int, lanes: int) -> float:
    """One direction of a PCIe link, bytes/s, after line coding."""
    return PCIE_GT_PER_S[generation] * 1e9 * PCIE_LINE_CODING / 8 * lanes


class Link(Strict):
    """The GPU-to-GPU path: PCIe through the host (or a switch), or NVLink. ``bytes_per_s`` is one direction."""

    kind: Literal["pcie", "nvlink"]
    pcie_generation: Optional[int] = None
    pcie_lanes: Optional[int] = None
    bytes_per_s: float
    source: str

    @property
    def label(self) -> str:
        if self.kind == "nvlink":
            return f"NVLink {self.bytes_per_s / 1e9:.0f} GB/s per direction"
        return f"PCIe {self.pcie_generation}.0 x{self.pcie_lanes} ({self.bytes_per_s / 1e9:.1f} GB/s per direction)"


class MultiGpu(Strict):
    """A machine with two or more GPUs, in device order, and the link between them."""

    name: str
    devices: list[HardwareProfile]
    link: Link
    notes: list[str] = Field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.devices)

    @property
    def memory_bytes(self) -> int:
        return sum(d.memory_bytes for d in self.devices)

    @property
    def homogeneous(self) -> bool:
        return len({d.name for d in self.devices}) == 1


def _load_links(path: Path = LINKS_FILE) -> dict[str, dict]:
    import yaml  # lazy: only multi-GPU planning reads it

    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise UserError(f"{path.name}: must map GPU profile names to link figures", hint="see profiles/links/README.md")
    allowed = {"pcie_generation", "pcie_lanes", "nvlink_gb_s", "nvlink_default", "sources"}
    for name, rec in data.items():
        bad = set(rec or {}) - allowed
        if bad:
            raise UserError(f"{path.name}: {name}: unknown key(s) {', '.join(sorted(bad))}",
                            hint="see profiles/links/README.md")
        src = rec.get("sources") or {}
        if "pcie_generation" in rec and not src.get("pcie"):
            raise UserError(f"{path.name}: {name}: pcie figures have no source", hint="add sources.pcie")
        if "nvlink_gb_s" in rec and not src.get("nvlink"):
            raise UserError(f"{path.name}: {name}: nvlink_gb_s has no source", hint="add sources.nvlink")
    return data


def default_link(devices: list[HardwareProfile], links: Optional[dict] = None) -> Link:
    """The link a machine of these cards has: NVLink when every card's boards always carry it (SXM), else PCIe at the
    slowest card's generation and lane count (a slot that gives fewer lanes needs ``--link``)."""
    links = _load_links() if links is None else links
    recs = [links.get(d.name) for d in devices]
    missing = [d.name for d, r in zip(devices, recs) if not r or "pcie_generation" not in r]
    if not missing and all(r.get("nvlink_default") for r in recs) and len({d.name for d in devices}) == 1:
        r = recs[0]
        return Link(kind="nvlink", bytes_per_s=float(r["nvlink_gb_s"]) * 1e9, source=r["sources"]["nvlink"])
    if missing:
        # no sourced interface for this card: PCIe 4.0 x16 is the interface of every NVIDIA card since Ampere
        # except the gen-5 Hopper/Blackwell ones, which have entries; label it as an assumption
        gen, lanes = 4, 16
        src = (f"assumption: PCIe 4.0 x16 (no entry for {', '.join(missing)} in profiles/links/links.yaml); "
               + PCIE_SOURCE)
    else:
        gen = min(int(r["pcie_generation"]) for r in recs)
        lanes = min(int(r["pcie_lanes"]) for r in recs)
        src = "; ".join(sorted({r["sources"]["pcie"] for r in recs})) + "; " + PCIE_SOURCE
    return Link(kind="pcie", pcie_generation=gen, pcie_lanes=lanes, bytes_per_s=pcie_bytes_per_s(gen, lanes),
                source=src)


def parse_link(text: str, devices: list[HardwareProfile], links: Optional[dict] = None) -> Link:
    """``--link``: "pcie4 x8" (a slot's generation and lanes), "nvlink" (the cards' NVLink bridge or board)."""
    t = re.sub(r"[\s._-]+", "", text.strip().lower())
    if t == "nvlink":
        links = _load_links() if links is None else links
        recs = [links.get(d.name) or {} for d in devices]
        if not all(r.get("nvlink_gb_s") for r in recs):
            lacking = sorted({d.name for d, r in zip(devices, recs) if not r.get("nvlink_gb_s")})
            raise UserError(f"--link nvlink: {', '.join(lacking)} has no NVLink",
                            hint="plan over PCIe (" + LINK_HINT + ")")
        bw = min(float(r["nvlink_gb_s"]) for r in recs) * 1e9
        return Link(kind="nvlink", bytes_per_s=bw, source="; ".join(sorted({r["sources"]["nvlink"] for r in recs})))
    m = re.fullmatch(r"pcie(?:gen)?([345])(?:x(\d+))?", t)
    if not m:
        raise UserError(f"unknown link {text!r}", hint=LINK_HINT)
    gen, lanes = int(m.group(1)), int(m.group(2) or 16)
    if lanes not in (1, 2, 4, 8, 16):
        raise UserError(f"--link {text!r}: PCIe lanes must be 1, 2, 4, 8 or 16", hint=LINK_HINT)
    return Link(kind="pcie", pcie_generation=gen, pcie_lanes=lanes, bytes_per_s=pcie_bytes_per_s(gen, lanes),
                source=f"user: --link {text} (PCIe {gen}.0 x{lanes}); {PCIE_SOURCE}")


_COUNT = re.compile(r"^\s*(\d+)\s*[x×*]\s*(.+)$", re.I)


def parse_gpu_list(text: str, gpus: Optional[int] = None,
                   profiles: Optional[list[HardwareProfile]] = None) -> list[HardwareProfile]:
    """The cards ``--gpu`` names: "2x RTX 3090", "RTX 4090,RTX 3090", "RTX 3090" (with ``--gpus N``: N of them)."""
    profiles = load_profiles() if profiles is None else profiles
    out: list[HardwareProfile] = []
    parts = [p for p in text.split(",")]
    if any(not p.strip() for p in parts):
        raise UserError(f"--gpu {text!r}: an empty GPU name", hint='e.g. --gpu "2x RTX 3090" or "RTX 4090,RTX 3090"')
    for part in parts:
        m = _COUNT.match(part)
        n, name = (int(m.group(1)), m.group(2)) if m else (1, part)
        if n < 1:
            raise UserError(f"--gpu {part.strip()!r}: the count must be at least 1", hint='e.g. --gpu "2x RTX 3090"')
        out.extend([find_profile(name.strip(), profiles)] * n)
    if gpus is not None:
        if gpus < 1:
            raise UserError(f"--gpus {gpus}: must be at least 1", hint="the number of GPUs, e.g. --gpus 2")
        if len(out) == 1:
            out = out * gpus
        elif len(out) != gpus:
            raise UserError(f"--gpus {gpus} does not match --gpu {text!r} ({len(out)} GPUs)",
                            hint="give the count once: --gpu \"2x RTX 3090\" or --gpu \"RTX 3090\" --gpus 2")
    if len(out) > MAX_GPUS:
        raise UserError(f"{len(out)} GPUs: at most {MAX_GPUS} are planned for",
                        hint=f"llama.cpp supports up to {MAX_GPUS} CUDA devices (GGML_CUDA_MAX_DEVICES)")
    if len({d.backend for d in out}) > 1 or (len(out) > 1 and out[0].backend not in ("cuda", "rocm")):
        raise UserError(f"--gpu {text!r}: multi-GPU planning covers CUDA/ROCm cards of one backend",
                        hint="Apple and CPU profiles are single devices")
    return out


def machine_name(devices: list[HardwareProfile]) -> str:
    """"2x GeForce RTX 3090", "GeForce RTX 4090 + GeForce RTX 3090"."""
    groups: list[list] = []
    for d in devices:
        if groups and groups[-1][0] == d.name:
            groups[-1][1] += 1
        else:
            groups.append([d.name, 1])
    return " + ".join(f"{n}x {name}" if n > 1 else name for name, n in groups)


def build_machine(devices: list[HardwareProfile], link: Optional[str] = None) -> MultiGpu:
    """The MultiGpu record of these cards (two or more) with the default link or ``--link``."""
    if len(devices) < 2:
        raise ValueError("a multi-GPU machine has at least two GPUs")
    lk = parse_link(link, devices) if link else default_link(devices)
    notes = [f"{len(devices)} GPUs linked by {lk.label}"]
    return MultiGpu(name=machine_name(devices), devices=devices, link=lk, notes=notes)


def local_machine(gpus: list[GpuInfo], profiles: Optional[list[HardwareProfile]] = None) -> Optional[MultiGpu]:
    """This machine's GPUs as NVML lists them (every device), when there are two or more; the link from NVML's
    current PCIe generation and width where it reports them, else the cards' default."""
    if len(gpus) < 2:
        return None
    profiles = load_profiles() if profiles is None else profiles
    devices = [profile_from_gpu(g, profiles) for g in gpus]
    shipped = [match_profile(g.name, profiles) for g in gpus]
    gens = [g.pcie_link_generation for g in gpus]
    widths = [g.pcie_link_width for g in gpus]
    nvlinked = all(g.nvlink_active_links for g in gpus)
    if nvlinked and all(shipped) and default_link(shipped).kind == "nvlink":
        lk = default_link(shipped)
    elif nvlinked and all(shipped):
        lk = parse_link("nvlink", shipped)
    elif all(gens) and all(widths) and min(gens) in PCIE_GT_PER_S:
        gen, lanes = min(gens), min(widths)
        lk = Link(kind="pcie", pcie_generation=gen, pcie_lanes=lanes, bytes_per_s=pcie_bytes_per_s(gen, lanes),
                  source=f"measured: NVML max PCIe link generation {gen}, width x{lanes}; {PCIE_SOURCE}")
    elif all(shipped):
        lk = default_link(shipped)
    else:
        lk = default_link(devices)
    return MultiGpu(name=machine_name(devices), devices=devices, link=lk,
                    notes=[f"{len(devices)} GPUs found here (NVML), linked by {lk.label}"])


def _counted(gpu: str) -> bool:
    """Whether --gpu names several cards ("2x RTX 3090", "RTX 4090,RTX 3090")."""
    if "," in gpu:
        return True
    m = _COUNT.match(gpu)
    return bool(m) and int(m.group(1)) != 1


def planning_machine(gpu: Optional[str], gpus: Optional[int] = None, vram=None, link: Optional[str] = None,
                     bandwidth: Optional[str] = None, ram: Optional[str] = None):
    """What to plan for: (profile, machine, host RAM bytes for partial offload, notes). ``machine`` is a MultiGpu for
    several GPUs (``--gpu "2x RTX 3090"``, ``--gpu "RTX 4090,RTX 3090"``, ``--gpu NAME --gpus N``, or this machine's
    GPUs when NVML finds two or more), else None and ``profile`` is the one GPU (``profiles.planning_hardware``). With
    a machine, ``profile`` is its first device and ``--vram`` overrides every card's memory, ``--bandwidth`` every
    card's memory bandwidth. Host RAM (``--ram`` as typed, else this machine's: profiles.offload_ram_budget) is
    planned for one GPU of an OFFLOAD_BACKENDS backend, else None (a --ram given is still checked)."""
    notes: list[str] = []
    machine: Optional[MultiGpu] = None
    found = None  # this machine's GPUs, once probed (planning_hardware needs them again for one GPU or none)
    if gpu and (_counted(gpu) or (gpus or 1) > 1):
        devices = parse_gpu_list(gpu, gpus)
        if len(devices) > 1:
            machine = build_machine(devices, link)
        else:
            gpu = devices[0].name  # "1x RTX 3090": one card
    elif not gpu:
        if gpus is not None and gpus > 1:
            raise UserError(f"--gpus {gpus} needs --gpu NAME (which card)", hint='e.g. --gpu "RTX 3090" --gpus 2')
        found = probe_gpus()
        if len(found.gpus) > 1:
            machine = local_machine(found.gpus)
            if link:
                machine = machine.model_copy(update={"link": parse_link(link, machine.devices)})
            notes.append(f"planning for the {machine.count} GPUs found here: {machine.name} ({machine.link.label})")
    prof = None
    if machine is None:
        if link:
            raise UserError("--link describes the link between several GPUs",
                            hint='name several cards: --gpu "2x RTX 3090" (or --gpu NAME --gpus 2)')
        prof, more = planning_hardware(gpu, vram=vram, found=found, bandwidth=bandwidth)  # --vram applied there
        notes += more
    host_ram = None
    if machine is None and prof.backend in OFFLOAD_BACKENDS:
        host_ram, ram_note = offload_ram_budget(ram)
        notes.append(ram_note)
    elif ram is not None:
        parse_memory(ram, "--ram")  # checked, unused: no partial offload on this hardware
    if vram is not None:  # --vram last, on the card or on every card of the machine
        mem = parse_memory(vram) if isinstance(vram, str) else vram
        if machine is not None:
            machine = machine.model_copy(update={"devices": [d.with_memory(mem) for d in machine.devices]})
            notes.append(f"--vram {vram} applies to each of the {machine.count} GPUs")
    if machine is not None and bandwidth is not None:
        bw = parse_bandwidth(bandwidth)
        machine = machine.model_copy(update={"devices": [d.with_bandwidth(bw, str(bandwidth))
                                                         for d in machine.devices]})
    if machine is None:
        return prof, None, host_ram, notes
    notes.append(f"{machine.name}: {machine.memory_bytes / 1024**3:.0f} GiB in all, linked by {machine.link.label}")
    return machine.devices[0], machine, host_ram, notes
