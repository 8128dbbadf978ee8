"""The `recommender` command tree (every command group) and its entry point. The `recommend` entry point
(recommender.cli.recommend_cmd:main) does not import this module (start-up time: bench/cold_start.py)."""

from __future__ import annotations

from typing import Optional

import typer


from recommender.cli import catalog_cmd, probe_cmd
from recommender.cli.calibrate_cmd import calibrate_command
from recommender.cli.common import run_app, state
from recommender.cli.estimate_cmd import estimate_command
from recommender.cli.hardware_cmd import hardware_command
from recommender.cli.local_cmd import local_command
from recommender.cli.mcp_cmd import mcp_command
from recommender.cli.recommend_cmd import recommend_command
from recommender.cli.run_cmd import run_command
from recommender.cli.sensitivity_cmd import sensitivity_command
from recommender.cli.tune_cmd import tune_command

app = typer.Typer(help="Which open LLM, quantization, engine, batch and context to run on this machine — ranked, "
                       "explained, and every number with its provenance.",
                  no_args_is_help=True, pretty_exceptions_enable=False, add_completion=True)


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
app.command("run")(run_command)
app.command("local")(local_command)
app.command("mcp")(mcp_command)
app.add_typer(catalog_cmd.app, name="catalog")
app.add_typer(probe_cmd.app, name="probe")


def main(argv: Optional[list[str]] = None) -> None:
    run_app(app, argv)
