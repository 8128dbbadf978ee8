"""`recommender mcp`: a Model Context Protocol server on stdio (the official `mcp` SDK, the `mcp` extra), so an agent
can ask which local model to run without parsing tables.

Tools: `recommend`, `estimate`, `list_models`, `hardware`. Their arguments are named as the CLI's options (`gpu`,
`vram`, `max_latency`, `workload`, ...), and each tool runs the CLI's own command with `--json` in this process: the
result is exactly the JSON record `recommender ... --json` prints (docs/json.md), with no second code path. Bad input
is a tool error with the CLI's `error:` and `hint:` text.
"""

from __future__ import annotations

import contextlib
import io
import json
import threading
from typing import Any, Optional

import typer

from recommender.core.errors import UserError
from recommender.cli import catalog_cmd
from recommender.cli.common import info
from recommender.cli.estimate_cmd import estimate_command
from recommender.cli.hardware_cmd import hardware_command
from recommender.cli.recommend_cmd import recommend_command

_LOCK = threading.Lock()  # one command at a time: each redirects this process's stdout while it runs


def _commands() -> typer.Typer:
    app = typer.Typer(pretty_exceptions_enable=False, add_completion=False)
    app.command("recommend")(recommend_command)
    app.command("estimate")(estimate_command)
    app.command("hardware")(hardware_command)
    app.command("list")(catalog_cmd.list_models)
    return app


def _params(scope: dict) -> dict:
    """A tool's arguments from its locals() (which also hold the closure's free names, here run_json)."""
    return {k: v for k, v in scope.items() if not callable(v)}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def cli_args(command: list[str], options: dict[str, Any]) -> list[str]:
    """argv of a CLI command from tool arguments named as its options: None left out, True a bare flag, a list one
    option per item."""
    argv = list(command)
    for k, v in options.items():
        if v is None or v is False:
            continue
        if v is True:
            argv.append(_flag(k))
        elif isinstance(v, (list, tuple)):
            for x in v:
                argv += [_flag(k), str(x)]
        else:
            argv += [_flag(k), str(v)]
    return argv


def _run_json(argv: list[str]) -> dict:
    """Run one CLI command (with --json) in this process and return the JSON object it printed. A UserError (or a
    usage error) is raised as a ValueError with the CLI's error and hint lines."""
    try:  # Typer >= 0.24 raises the exceptions of its own copy of click
        from typer._click import exceptions as click  # noqa: PLC0415
    except ImportError:
        from click import exceptions as click  # noqa: PLC0415
    out = io.StringIO()
    with _LOCK, contextlib.redirect_stdout(out):
        try:
            _commands()(args=[*argv, "--json"], standalone_mode=False)
        except UserError as e:
            raise ValueError(f"error: {e}\nhint: {e.hint}") from None
        except click.ClickException as e:
            raise ValueError(f"error: {e.format_message()}\nhint: see `recommender {argv[0]} --help`") from None
        except (typer.Exit, SystemExit):
            pass  # exit 1 (nothing fits) still printed its answer
    text = out.getvalue().strip()
    if not text:
        raise ValueError(f"error: `recommender {' '.join(argv)} --json` printed nothing\nhint: run it in a shell")
    return json.loads(text)


def build_server():
    """The MCP server with its four tools (mcp 2: MCPServer; mcp 1.2+: FastMCP, the same decorator API)."""
    try:
        from mcp.server.mcpserver import MCPServer as Server  # noqa: PLC0415
        from mcp.server.mcpserver.exceptions import ToolError  # noqa: PLC0415
    except ImportError:
        from mcp.server.fastmcp import FastMCP as Server  # noqa: PLC0415
        from mcp.server.fastmcp.exceptions import ToolError  # noqa: PLC0415
    server = Server("llm-recommender")

    def run_json(argv: list[str]) -> dict:  # bad input: a tool error with the CLI's error and hint lines
        try:
            return _run_json(argv)
        except ValueError as e:
            raise ToolError(str(e)) from None

    @server.tool()
    def recommend(gpu: Optional[str] = None, vram: Optional[str] = None, max_latency: Optional[str] = None,
                  latency_metric: Optional[str] = None, workload: Optional[str] = None,
                  context: Optional[list[str]] = None, batch: Optional[list[int]] = None,
                  prompt_tokens: Optional[int] = None, output_tokens: Optional[int] = None,
                  weights: Optional[str] = None, model: Optional[list[str]] = None,
                  engine: Optional[list[str]] = None, quant: Optional[list[str]] = None, top: Optional[int] = None,
                  per_model: Optional[int] = None, gpus: Optional[int] = None, link: Optional[str] = None,
                  normalization: Optional[str] = None, include_base: bool = False,
                  installed: bool = False) -> dict:
        """Rank model x quantization x engine x batch x context for a GPU under VRAM and latency limits, as
        `recommend --json` (vram "24" = GiB, max_latency "800ms"; each candidate has its launch recipe)."""
        return run_json(cli_args(["recommend"], _params(locals())))

    @server.tool()
    def estimate(model: str, quant: Optional[str] = None, context: Optional[str] = None, batch: Optional[int] = None,
                 engine: Optional[str] = None, prompt_tokens: Optional[int] = None,
                 output_tokens: Optional[int] = None, kv_dtype: Optional[str] = None,
                 gpu_layers: Optional[int] = None, gpu: Optional[str] = None, gpus: Optional[int] = None,
                 link: Optional[str] = None, vram: Optional[str] = None, slo_ttft: Optional[str] = None,
                 slo_tpot: Optional[str] = None) -> dict:
        """Memory and latency of one configuration, every figure with its provenance, as `estimate --json`."""
        args = _params(locals())
        return run_json(cli_args(["estimate", args.pop("model")], args))

    @server.tool()
    def list_models() -> dict:
        """Every catalog model, as `catalog list --json`."""
        return run_json(["list"])

    @server.tool()
    def hardware(profiles: bool = False) -> dict:
        """This machine's GPUs, CPU and RAM (or, with profiles, the GPU profiles one can plan for), as
        `hardware --json`."""
        return run_json(cli_args(["hardware"], {"profiles": profiles}))

    return server


def mcp_command() -> None:
    """Serve the MCP tools recommend, estimate, list_models and hardware on stdio (for agents; needs the `mcp`
    extra: pip install 'llm-recommender[mcp]')."""
    try:
        server = build_server()
    except ImportError as e:
        raise UserError(f"the MCP SDK is not installed ({e})", hint="pip install 'llm-recommender[mcp]' (mcp>=1.2)")
    info("recommender MCP server on stdio: tools recommend, estimate, list_models, hardware")
    server.run()
