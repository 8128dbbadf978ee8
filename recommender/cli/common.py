"""Shared CLI plumbing: the only layer that prints. Data goes to stdout, everything else to stderr."""

from __future__ import annotations

import json
import sys
from typing import Any, Optional

import typer

from ..errors import UserError

PROV_MARK = {"measured": "ᵐ", "calibrated": "ᶜ", "published": "ᵖ", "estimated": "ᵉ", "unknown": "?"}
LEGEND = "ᵐ measured · ᶜ calibrated · ᵖ published · ᵉ estimated · ? unknown"


# Width used when stdout is not a terminal (a pipe or a file): wide enough that tables never squeeze columns.
PIPE_WIDTH = 200


def stdout_console():
    from rich.console import Console  # noqa: PLC0415

    return Console(soft_wrap=False, width=None if sys.stdout.isatty() else PIPE_WIDTH)


def stderr_console():
    from rich.console import Console  # noqa: PLC0415

    return Console(stderr=True)


def emit_json(data: Any) -> None:
    """Plain JSON on stdout, never through Rich (no wrapping, no markup)."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def info(msg: str) -> None:
    sys.stderr.write(msg + "\n")


def columns_table(title: str, caption: str, columns: tuple[tuple[str, str], ...], no_wrap: set[str]):
    """A Rich table with (header, justify) columns; `no_wrap` names the columns that must stay on one line."""
    from rich.table import Table  # noqa: PLC0415

    table = Table(title=title, caption=caption)
    for col, just in columns:
        table.add_column(col, justify=just, no_wrap=col in no_wrap)
    return table


def budget_title(q) -> str:
    """'<GPU>, <VRAM> budget[, TTFT ≤ 800 ms]' for a query's table title."""
    from ..units import fmt_bytes  # noqa: PLC0415
    from .query_opts import limit_label  # noqa: PLC0415

    return f"{q.hardware.name}, {fmt_bytes(q.vram_bytes)} budget{limit_label(q)}"


def mark(value: str, provenance: str) -> str:
    return value if value == "?" else f"{value}{PROV_MARK.get(provenance, '?')}"


class State:
    catalog: Optional[str] = None


state = State()


def open_catalog(catalog: Optional[str] = None):
    from ..catalog.store import Catalog  # noqa: PLC0415
    from ..paths import base_catalog_path, user_catalog_path  # noqa: PLC0415

    return Catalog(base_catalog_path(catalog or state.catalog), user_catalog_path())


def fail(err: UserError) -> None:
    sys.stderr.write(f"error: {err.message}\n")
    if err.hint:
        sys.stderr.write(f"hint: {err.hint}\n")
    raise SystemExit(err.exit_code)


def run_app(app: typer.Typer, argv: Optional[list[str]] = None) -> None:
    """Run a Typer app; user errors — ours and the command line's (unknown option, value out of range, missing
    argument) — become one `error:` line and one `hint:` line and exit 2, never a traceback."""
    try:  # Typer >= 0.24 raises the exceptions of its own copy of click
        from typer._click import exceptions as click  # noqa: PLC0415
    except ImportError:
        from click import exceptions as click  # noqa: PLC0415

    try:
        code = app(args=argv, standalone_mode=False)
    except UserError as e:
        fail(e)
    except click.NoArgsIsHelpError as e:  # a bare command group: its help, as Typer prints it
        e.show()
        raise SystemExit(e.exit_code) from None
    except click.ClickException as e:
        path = e.ctx.command_path if isinstance(e, click.UsageError) and e.ctx is not None else "recommender"
        sys.stderr.write(f"error: {e.format_message()}\nhint: see `{path} --help`\n")
        raise SystemExit(e.exit_code) from None
    except typer.Abort:
        sys.stderr.write("aborted\n")
        raise SystemExit(1) from None
    # standalone_mode=False returns the exit code of typer.Exit / ctx.exit, or the command's own return value
    raise SystemExit(code if isinstance(code, int) and not isinstance(code, bool) else 0)


def planning_hardware(gpu: Optional[str], vram_bytes: Optional[int]):
    """The GPU to plan for: --gpu NAME (a shipped profile; `cpu` = this machine's CPU and RAM), else the first GPU
    found, else the default reference.

    Returns (profile, notes)."""
    from .. import hardware as hwmod  # noqa: PLC0415

    notes = []
    profiles = hwmod.load_profiles()
    if gpu and gpu.strip().lower() in hwmod.CPU_PLANNING_NAMES:
        prof = hwmod.cpu_profile(hwmod.probe_host())
        notes.append(f"planning for this machine's CPU ({prof.name}, {prof.memory_bytes / 1024**3:.1f} GiB RAM)")
    elif gpu:
        prof = hwmod.find_profile(gpu, profiles)
    else:
        host = hwmod.probe_host()
        if host.gpus:
            prof = hwmod.profile_from_gpu(host.gpus[0], profiles)
            notes.append(f"planning for the GPU found here: {prof.name}")
        else:
            prof = hwmod.find_profile(DEFAULT_PLANNING_GPU, profiles)
            notes.append(f"no GPU found here ({host.gpu_status}); planning for a {prof.name} — "
                         f"use --gpu NAME to plan for another GPU")
    if vram_bytes is not None:
        prof = hwmod.override_memory(prof, vram_bytes)
    return prof, notes


# A GPU-less machine plans for this reference card (the most common 24 GB card in the llama.cpp CUDA scoreboard).
DEFAULT_PLANNING_GPU = "RTX 4090"

