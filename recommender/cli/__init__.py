"""Command-line entry points: `recommender` (command groups, recommender.cli.app) and `recommend` (the recommend
command alone: it imports nothing else, so it starts fast)."""

from __future__ import annotations

from typing import Optional


def main(argv: Optional[list[str]] = None) -> None:
    from .app import app  # noqa: PLC0415
    from .common import run_app  # noqa: PLC0415

    run_app(app, argv)


def recommend_main(argv: Optional[list[str]] = None) -> None:
    import typer  # noqa: PLC0415

    from .common import run_app  # noqa: PLC0415
    from .recommend_cmd import recommend_command  # noqa: PLC0415

    recommend_app = typer.Typer(pretty_exceptions_enable=False, add_completion=False)
    recommend_app.command()(recommend_command)
    run_app(recommend_app, argv)
