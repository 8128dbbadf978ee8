"""`recommender hardware`: what this machine has (NVML GPUs, CPU, RAM) and the GPU profiles one can plan for."""

from __future__ import annotations

import typer


from recommender.core.errors import UserError
from recommender.core.units import fmt_bytes
from recommender.hardware import profiles as hw
from recommender.hardware.multi import local_machine
from recommender.cli.common import bold_lead, check_one_format, emit_csv_dicts, emit_json, stdout_console


def hardware_command(as_json: bool = typer.Option(False, "--json", help="JSON on stdout."),
                     profiles: bool = typer.Option(False, "--profiles", help="List the shipped GPU profiles."),
                     as_csv: bool = typer.Option(False, "--csv", help="CSV on stdout (with --profiles).")) -> None:
    """Probe GPUs via NVML, CPU and RAM. Exit 0 also when no GPU is present."""
    check_one_format(as_json, as_csv)
    if as_csv and not profiles:
        raise UserError("--csv lists the GPU profiles", hint="use --csv with --profiles, or --json for this machine")

    if profiles:
        profs = hw.load_profiles()
        if as_json or as_csv:
            items = [p.model_dump(mode="json") for p in profs]
            emit_json(items) if as_json else emit_csv_dicts(items)
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
    profs = hw.load_profiles()
    planned = {g.index: hw.shipped_profile(g, profs) for g in host.gpus}
    if as_json:
        data = host.model_dump(mode="json")
        # which shipped profile each GPU is planned with (its FLOP/s, TDP); null: none has its name
        data["planning_profiles"] = {str(i): (p.name if p else None) for i, p in planned.items()}
        emit_json(data)
        return
    con = stdout_console()
    con.print(bold_lead("GPU", f": {host.gpu_status}"), highlight=False)
    for g in host.gpus:
        bw = "?" if g.memory_bandwidth_bytes_per_s is None else f"{g.memory_bandwidth_bytes_per_s / 1e9:.0f} GB/s"
        con.print(f"  [{g.index}] {g.name}: {fmt_bytes(g.memory_total_bytes)} total, "
                  f"{fmt_bytes(g.memory_free_bytes)} free, compute capability {g.compute_capability or '?'}, "
                  f"memory bandwidth {bw} (clock × bus width), power limit "
                  f"{'?' if g.power_limit_w is None else f'{g.power_limit_w:.0f} W'}, driver {g.driver_version}"
                  + (f", PCIe {g.pcie_link_generation}.0 x{g.pcie_link_width}" if g.pcie_link_generation else "")
                  + (f", NVLink {g.nvlink_active_links} links" if g.nvlink_active_links else ""),
                  highlight=False)
        p = planned[g.index]
        con.print(f"      planned as profile {p.name!r} (memory and bandwidth as measured here)" if p else
                  "      no shipped profile has this name: FLOP/s unknown (plan with --gpu NAME)", highlight=False)
    if len(host.gpus) > 1:
        try:
            m = local_machine(host.gpus)
            con.print(f"[bold]multi-GPU[/]: {m.name}, {fmt_bytes(m.memory_bytes)} in all, linked by {m.link.label}; "
                      f"recommend/estimate plan for all {m.count} (--gpu NAME plans for one)", highlight=False)
        except UserError as e:
            con.print(f"[bold]multi-GPU[/]: {len(host.gpus)} GPUs, not plannable together: {e.message}",
                      highlight=False)
    c = host.cpu
    con.print(bold_lead("CPU", f": {c.model} ({c.arch}), {c.physical_cores} cores / {c.logical_cores} threads; "
                               f"ISA: {', '.join(c.flags) or 'none of interest'}"), highlight=False)
    con.print(bold_lead("RAM", f": {fmt_bytes(host.ram_total_bytes)} total"
                        + (f", {fmt_bytes(host.ram_available_bytes)} available" if host.ram_available_bytes else "")),
              highlight=False)
    con.print(f"fingerprint {host.fingerprint} · {host.os} · Python {host.python}", highlight=False)
