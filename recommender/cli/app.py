"""The `recommender` command tree (every command group) and its entry point. The `recommend` entry point
(recommender.cli.recommend_cmd:main) does not import this module (start-up time: bench/cold_start.py).

A command line that names one command (`recommender tune ...`, `recommender catalog build`) is run by a tree that
holds that command alone, so only its module is imported (the other eleven cost a fresh process about 0.1 s:
docs/benchmarks.md, issue 26); the command parses, helps and fails exactly as in the whole tree. Anything else - no
command, --help, a name that is not a command, shell completion - gets the whole tree (``app``)."""

from __future__ import annotations

import os
import sys
from typing import Callable, Optional

from recommender.core.collector import collector_paused, imports_begin, imports_end

_collecting = imports_begin()  # what these imports build stays as long as the process (recommender.core.collector)

import typer

from recommender.cli.common import deferred, run_app, state

imports_end(_collecting)


# name -> its command function, imported when asked for (recommender.cli.common.deferred: the module's name a
# literal, so tests/house/test_layering.py reads it as an import): the commands in the order `recommender --help`
# lists them
COMMANDS: dict[str, Callable[[], Callable]] = {
    "recommend": lambda: deferred("recommender.cli.recommend_cmd").recommend_command,
    "estimate": lambda: deferred("recommender.cli.estimate_cmd").estimate_command,
    "hardware": lambda: deferred("recommender.cli.hardware_cmd").hardware_command,
    "calibrate": lambda: deferred("recommender.cli.calibrate_cmd").calibrate_command,
    "sensitivity": lambda: deferred("recommender.cli.sensitivity_cmd").sensitivity_command,
    "tune": lambda: deferred("recommender.cli.tune_cmd").tune_command,
    "run": lambda: deferred("recommender.cli.run_cmd").run_command,
    "local": lambda: deferred("recommender.cli.local_cmd").local_command,
    "mcp": lambda: deferred("recommender.cli.mcp_cmd").mcp_command,
}
# name -> its Typer group, then the groups
GROUPS: dict[str, Callable[[], typer.Typer]] = {
    "catalog": lambda: deferred("recommender.cli.catalog_cmd").app,
    "probe": lambda: deferred("recommender.cli.probe_cmd").app,
}
GLOBAL_VALUE_OPTIONS = ("--catalog",)  # the tree's own options that take a value (``_global``)
# commands that compute one answer in memory and end: run with the cyclic collector paused (recommender.core.
# collector; `tune --measure` turns it back on for its probes)
ONE_SHOT = ("recommend", "estimate", "sensitivity", "tune")


def _global(catalog: Optional[str] = typer.Option(None, "--catalog", envvar="RECOMMENDER_CATALOG",
                                                  help="Catalog file (default: the shipped catalog.duckdb).")) -> None:
    state.catalog = catalog


def build_app(only: Optional[str] = None) -> typer.Typer:
    """The command tree: every command and group, or with ``only`` that one alone (its module alone imported)."""
    tree = typer.Typer(help="Which open LLM, quantization, engine, batch and context to run on this machine — ranked, "
                            "explained, and every number with its provenance.",
                       no_args_is_help=True, pretty_exceptions_enable=False, add_completion=True)
    tree.callback()(_global)
    with collector_paused():  # the modules' objects all stay: the collector's passes over them find nothing
        for name, command in COMMANDS.items():
            if only is None or only == name:
                tree.command(name)(command())
        for name, group in GROUPS.items():
            if only is None or only == name:
                tree.add_typer(group(), name=name)
    return tree


def command_of(args: list[str]) -> Optional[str]:
    """The command a command line names (its first word after the tree's own options), or None: none named, help
    or completion asked of the tree, or a word that is not a command (the whole tree says so)."""
    if any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ):  # shell completion: the whole tree
        return None
    i = 0
    while i < len(args):
        a = args[i]
        if a in GLOBAL_VALUE_OPTIONS:
            i += 2
            continue
        if a.startswith("-"):
            if not any(a.startswith(o + "=") for o in GLOBAL_VALUE_OPTIONS):
                return None  # --help, --install-completion, or an option the tree refuses
            i += 1
            continue
        return a if a in COMMANDS or a in GROUPS else None
    return None


def __getattr__(name: str):
    if name == "app":  # the whole tree, for whoever imports it (built on first use)
        globals()["app"] = tree = build_app()
        return tree
    raise AttributeError(name)


def main(argv: Optional[list[str]] = None) -> None:
    only = command_of(sys.argv[1:] if argv is None else list(argv))
    if only not in ONE_SHOT:
        run_app(build_app(only), argv)
        return
    with collector_paused():
        run_app(build_app(only), argv)
