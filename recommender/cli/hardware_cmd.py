"""`recommender hardware`: what this machine has (NVML GPUs, CPU, RAM) and the GPU profiles one can plan for."""

from __future__ import annotations

import typer


from recommender.core.units import fmt_bytes
from recommender.hardware import profiles as hw
from recommender.cli.common import bold_lead, emit_json, stdout_console


def hardware_command(as_json: bool = typer.Option(False, "--json", help="JSON on stdout."),
                     profiles: bool = typer.Option(False, "--profiles", help="List the shipped GPU profiles.")) -> None:
    """Probe GPUs via NVML, CPU and RAM. Exit 0 also when no GPU is present."""

    if profiles:
        profs = hw.load_profiles()
        if as_json:
            emit_json([p.model_dump(mode="json") for p in profs])
            return
        from rich.table import Table  # noqa: PLC0415

        t = Table(title=f"{len(profs)} GPU profiles (plan with --gpu NAME)")
        for col in ("name", "memory", "bandwidth", "FP16 dense", "cc", "reliability"):
            t.add_column(col)
        for p in profs:
            t.add_row(p.name, fmt_bytes(p.memory_bytes), f"{p.memory_bandwidth_bytes_per_s / 1e9:.0f} GB/s",
                      "?" if p.fp16_flops_per_s is None else f"{p.fp16_flops_per_s / 1e12:.0f} TFLOP/s",
                      p.compute_capability or "?", p.reliability)
        stdout_console().print(t)
        return
    host = hw.probe_host()
    if as_json:
        emit_json(host.model_dump(mode="json"))
        return
    con = stdout_console()
    con.print(bold_lead("GPU", f": {host.gpu_status}"), highlight=False)
    for g in host.gpus:
        bw = "?" if g.memory_bandwidth_bytes_per_s is None else f"{g.memory_bandwidth_bytes_per_s / 1e9:.0f} GB/s"
        con.print(f"  [{g.index}] {g.name}: {fmt_bytes(g.memory_total_bytes)} total, "
                  f"{fmt_bytes(g.memory_free_bytes)} free, compute capability {g.compute_capability or '?'}, "
                  f"memory bandwidth {bw} (clock × bus width), power limit "
                  f"{'?' if g.power_limit_w is None else f'{g.power_limit_w:.0f} W'}, driver {g.driver_version}",
                  highlight=False)
    c = host.cpu
    con.print(bold_lead("CPU", f": {c.model} ({c.arch}), {c.physical_cores} cores / {c.logical_cores} threads; "
                               f"ISA: {', '.join(c.flags) or 'none of interest'}"), highlight=False)
    con.print(bold_lead("RAM", f": {fmt_bytes(host.ram_total_bytes)} total"
                        + (f", {fmt_bytes(host.ram_available_bytes)} available" if host.ram_available_bytes else "")),
              highlight=False)
    con.print(f"fingerprint {host.fingerprint} · {host.os} · Python {host.python}", highlight=False)
