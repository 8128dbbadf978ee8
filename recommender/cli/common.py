"""Shared CLI plumbing: the only layer that prints. Data goes to stdout, everything else to stderr."""

from __future__ import annotations

import gc
import importlib
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from pydantic import BaseModel

from recommender.core.errors import UserError
from recommender.core.records import JSON_SCHEMA_VERSION
from recommender.core.redact import printable, redact
from recommender.core.paths import base_catalog_path, cache_root
from recommender.core.units import fmt_bytes, fmt_ms
from recommender.catalog.store import Catalog

PROV_MARK = {"measured": "ᵐ", "calibrated": "ᶜ", "published": "ᵖ", "estimated": "ᵉ", "unknown": "?"}
LEGEND = "ᵐ measured · ᶜ calibrated · ᵖ published · ᵉ estimated · ? unknown"


# Width used when stdout is not a terminal (a pipe or a file): wide enough that tables never squeeze columns.
PIPE_WIDTH = 200


def deferred(module: str):
    """A project module that a command's fast path never needs (`recommend --verify` / `--report`: probes/verify,
    search/report and the page writer, ~40 ms of `recommend`'s start), imported when the option asks for it.
    Only the CLI uses this, always with the module's full name as a literal: tests/house/test_layering.py reads these
    names as imports and holds them to the same rules."""
    return importlib.import_module(module)


def check_report_path(path: str) -> Path:
    """`--report FILE.html`, checked before any work is done."""
    p = Path(path).expanduser()
    if p.suffix.lower() not in (".html", ".htm"):
        raise UserError(f"--report {path!r} is not an .html file", hint="e.g. --report out.html")
    if not p.parent.exists():
        raise UserError(f"--report {path!r}: no folder {str(p.parent)!r}", hint="create the folder first")
    if p.exists() or p.is_symlink():  # a FIFO blocks the write forever; a link to /dev/null "wrote" nothing
        target = p.resolve()
        if p.is_symlink() and (not target.exists() or not target.is_file()):
            raise UserError(f"--report {path!r} is a link to {str(target)!r}, which is not a regular file",
                            hint="give a new file name")
        check_output_file(target, "--report")
    return p


def stdout_console():
    """Rich console for tables. Markup is off: model names come from files (a GGUF's general.name, --id) and a
    '[/]' in one must print as itself, not crash the renderer; styles go through ``bold_lead`` / Text."""
    from rich.console import Console  # noqa: PLC0415

    return Console(soft_wrap=False, width=None if sys.stdout.isatty() else PIPE_WIDTH, markup=False)


def stderr_console():
    from rich.console import Console  # noqa: PLC0415

    return Console(stderr=True, markup=False)


def bold_lead(lead: str, rest: str):
    """'<b>lead</b>rest' as a Rich Text (markup is off on our consoles)."""
    from rich.text import Text  # noqa: PLC0415

    return Text.assemble((printable(lead), "bold"), printable(rest))  # names come from files, servers, the Hub


def emit_json(data: Any) -> None:
    """Plain JSON on stdout, never through Rich (no wrapping, no markup): a record (or dict) with "schema_version"
    first; a list of records as {"schema_version": N, "items": [...]} (docs/json.md)."""
    if isinstance(data, BaseModel):
        data = data.model_dump(mode="json")
    elif isinstance(data, list):
        data = {"items": [d.model_dump(mode="json") if isinstance(d, BaseModel) else d for d in data]}
    data = {"schema_version": JSON_SCHEMA_VERSION, **data}
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def emit_csv(header: list[str], rows: list[list]) -> None:
    """CSV on stdout (RFC 4180, the csv module's excel dialect): a header line, then one line per row; None is an
    empty field. Numbers in base units, as in the JSON (bytes, ms)."""
    import csv  # noqa: PLC0415

    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(header)
    for r in rows:
        w.writerow(["" if v is None else v for v in r])
    sys.stdout.flush()


def emit_csv_dicts(rows: list[dict], drop: tuple[str, ...] = ()) -> None:
    """A list answer as CSV: the JSON items' keys as the header (first item's order), a list as ';'-joined values,
    a nested object as its JSON; ``drop`` leaves keys out (e.g. a row's raw per-repeat data)."""
    keys = [k for k in (rows[0] if rows else {}) if k not in drop]

    def cell(v):
        if isinstance(v, (list, tuple)):
            return ";".join(str(x) for x in v)
        if isinstance(v, dict):
            return json.dumps(v, ensure_ascii=False, default=str)
        return v

    emit_csv(keys, [[cell(r.get(k)) for k in keys] for r in rows])


def check_one_format(as_json: bool, as_csv: bool) -> None:
    if as_json and as_csv:
        raise UserError("--json and --csv are two answers on one stdout", hint="pick one of --json and --csv")


def info(msg: str) -> None:
    sys.stderr.write(printable(redact(msg), lines=True) + "\n")


def columns_table(title: str, caption: str, columns: tuple[tuple[str, str], ...], no_wrap: set[str]):
    """A Rich table with (header, justify) columns; `no_wrap` names the columns that must stay on one line."""
    from rich.table import Table  # noqa: PLC0415

    table = Table(title=title, caption=caption)
    for col, just in columns:
        table.add_column(col, justify=just, no_wrap=col in no_wrap)
    return table


def budget_title(q) -> str:
    """'<GPU>, <VRAM> budget[, TTFT ≤ 800 ms]' for a query's table title."""

    name = q.machine.name if getattr(q, "machine", None) is not None else q.hardware.name
    return f"{name}, {fmt_bytes(q.vram_bytes)} budget{limit_label(q)}"


def engine_label(c, q=None) -> str:
    """'llama.cpp', or with a multi-GPU plan 'llama.cpp ×2 -sm layer' / 'vllm ×4 TP'; on a multi-GPU machine a
    configuration that is not split runs on GPU 0 alone."""
    if getattr(c, "gpu_layers", None) is not None:  # partial offload: the split between GPU and host RAM
        return f"{c.engine} ngl {c.gpu_layers}"
    if getattr(c, "split", None) is None or not c.devices:
        return f"{c.engine} (GPU 0)" if q is not None and getattr(q, "machine", None) is not None else c.engine
    return f"{c.engine} ×{len(c.devices)} {c.split.label}"


def mark(value: str, provenance: str) -> str:
    return value if value == "?" else f"{value}{PROV_MARK.get(provenance, '?')}"


class State:
    catalog: Optional[str] = None


state = State()


def open_catalog(catalog: Optional[str] = None):

    return Catalog.open(base_catalog_path(catalog or state.catalog))


def fail(err: UserError) -> None:
    """One `error:` line and one `hint:` line, credentials redacted and control characters escaped (a message may
    quote what a server or a file sent)."""
    sys.stderr.write(f"error: {printable(redact(err.message))}\n")
    if err.hint:
        sys.stderr.write(f"hint: {printable(redact(err.hint))}\n")
    raise SystemExit(err.exit_code)


MAX_PROBE_TIMEOUT_S = 7 * 24 * 3600.0  # --timeout of a probe: a week at most (1e309 is inf, and waits forever)


def check_seconds(value: float, option: str, high: float = MAX_PROBE_TIMEOUT_S) -> float:
    """A time limit the user gave: finite and within (0, high] seconds (typer's min= lets nan and inf through)."""
    if not math.isfinite(value) or not 0 < value <= high:
        raise UserError(f"{option} {value!r} is not a number of seconds in (0, {high:g}]",
                        hint=f"e.g. {option} 300")
    return value


def check_output_file(p: Path, what: str) -> None:
    """An output path that exists must be a regular file: writing to a FIFO blocks forever, to a device worse."""
    if (p.exists() or p.is_symlink()) and not p.is_file():
        raise UserError(f"{what} {str(p)!r} exists and is not a regular file", hint="give a new file name")


EXIT_CRASH = 3  # an unexpected error (0 ranked, 1 nothing fits, 2 bad input)


def crash(e: BaseException) -> None:
    """Write the traceback to a file under the cache folder, print one line saying where, exit EXIT_CRASH."""
    import tempfile  # noqa: PLC0415
    import traceback  # noqa: PLC0415

    text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    where = None
    for folder in (cache_root() / "crashes", Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, name = tempfile.mkstemp(prefix="recommender-crash-", suffix=".txt", dir=folder)
            with os.fdopen(fd, "w") as fh:
                fh.write(redact(f"argv: {sys.argv!r}\n{text}"))  # a --url may carry a password
            where = name
            break
        except OSError:
            continue
    first = printable(redact((str(e).strip().splitlines() or [""])[0]))[:200]
    sys.stderr.write(f"internal error: {type(e).__name__}: {first}\n")
    sys.stderr.write(f"hint: this is a bug; the traceback is in {where or '(could not be written)'} — "
                     "please report it with that file\n")
    raise SystemExit(EXIT_CRASH) from None


def run_app(app: typer.Typer, argv: Optional[list[str]] = None) -> None:
    """Run a Typer app; user errors — ours and the command line's (unknown option, value out of range, missing
    argument) — become one `error:` line and one `hint:` line and exit 2, never a traceback.

    Run for the process's own command line (``argv`` None: an entry point), the process ends with the command: the
    objects still alive then are put out of the cyclic collector's sight (gc.freeze), so the interpreter's last
    collection at exit does not walk the answer's records and tables again (about 0.07 s of a `recommend`;
    docs/benchmarks.md). Called with an argv (in-process runs, tests) it leaves the collector as it is."""
    try:
        _run_app(app, argv)
    finally:
        if argv is None:
            gc.freeze()


def _run_app(app: typer.Typer, argv: Optional[list[str]]) -> None:
    try:  # Typer >= 0.24 raises the exceptions of its own copy of click
        from typer._click import exceptions as click  # noqa: PLC0415
    except ImportError:
        from click import exceptions as click  # noqa: PLC0415

    import warnings  # noqa: PLC0415

    def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
        sys.stderr.write(f"warning: {printable(redact(str(message)))}\n")  # one line, not Python's file:line form

    warnings.showwarning = show_warning
    try:
        code = app(args=argv, standalone_mode=False)
    except UserError as e:
        fail(e)
    except OSError as e:  # the file system refused a path the user gave (name too long, permission, not a folder)
        what = f"{e.strerror or type(e).__name__}" + (f": {str(e.filename)[:120]}" if e.filename else "")
        fail(UserError(f"cannot use that path ({what})", hint="check the path and its permissions"))
    except RecursionError as e:  # a hostile input nesting deeper than any parser expects
        fail(UserError(f"input nests too deeply to read ({e})"[:300], hint="check the file you gave"))
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
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        raise SystemExit(130) from None
    except (SystemExit, typer.Exit):
        raise
    except Exception as e:  # noqa: BLE001 - a bug: one line, the traceback in a file, its own exit code
        crash(e)
    # standalone_mode=False returns the exit code of typer.Exit / ctx.exit, or the command's own return value
    raise SystemExit(code if isinstance(code, int) and not isinstance(code, bool) else 0)


def limit_label(q) -> str:
    """', TTFT ≤ 800 ms' for a Query with a latency limit, else '': the limit as the result titles show it."""

    return f", {q.latency_metric.upper()} ≤ {fmt_ms(q.max_latency_ms)}" if q.max_latency_ms else ""
