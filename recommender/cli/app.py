"""The `recommender` command tree (every command group). Built on demand by recommender.cli.main, so that the
`recommend` entry point imports only its own command (start-up time: bench/cold_start.py)."""

from __future__ import annotations

from typing import Optional

import typer

from . import catalog_cmd, probe_cmd
from .calibrate_cmd import calibrate_command
from .common import state
from .estimate_cmd import estimate_command
from .hardware_cmd import hardware_command
from .recommend_cmd import recommend_command
from .sensitivity_cmd import sensitivity_command
from .tune_cmd import tune_command

app = typer.Typer(help="Which open LLM, quantization, engine, batch and context to run on this machine — ranked, "
                       "explained, and every number with its provenance.",
                  no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)


@app.callback()
def _global(catalog: Optional[str] = typer.Option(None, "--catalog", envvar="RECOMMENDER_CATALOG",
                                                  help="Catalog file (default: the shipped catalog.duckdb).")) -> None:
    state.catalog = catalog


app.command("recommend")(recommend_command)
app.command("estimate")(estimate_command)
app.command("hardware")(hardware_command)
app.command("calibrate")(calibrate_command)
app.command("sensitivity")(sensitivity_command)
app.command("tune")(tune_command)
app.add_typer(catalog_cmd.app, name="catalog")
app.add_typer(probe_cmd.app, name="probe")
