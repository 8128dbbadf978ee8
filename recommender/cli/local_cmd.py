"""`recommender local`: the models already on this machine and the OpenAI-compatible servers on loopback."""

from __future__ import annotations

from typing import Optional

import typer

from recommender.core.units import fmt_bytes
from recommender.probes.local_scan import scan_models, scan_servers
from recommender.cli.common import columns_table, emit_json, info, open_catalog, stdout_console


def local_command(
    local_dir: Optional[list[str]] = typer.Option(None, "--dir", help="Another folder to look in (repeatable)."),
    port: Optional[list[int]] = typer.Option(None, "--port", help="Another loopback port to ask for /v1/models "
                                                                  "(repeatable)."),
    servers: bool = typer.Option(True, "--servers/--no-servers", help="Ask the usual loopback ports (8080, 11434, "
                                                                      "1234, 8000) for a server."),
    as_json: bool = typer.Option(False, "--json", help="JSON on stdout."),
) -> None:
    """GGUF files and HF folders in the Hugging Face cache, Ollama, LM Studio and --dir, matched to the catalog;
    servers answering GET /v1/models on loopback. `recommend --installed` ranks only these."""
    catalog = open_catalog()
    models = scan_models(catalog, tuple(local_dir or ()))
    found = scan_servers(tuple(port or ())) if servers else []
    if as_json:
        emit_json({"models": [m.to_json() for m in models], "servers": [s.to_json() for s in found]})
        return
    table = columns_table("models on this machine", "catalog model and quant matched from the GGUF header / config",
                          (("source", "left"), ("name", "left"), ("catalog model", "left"), ("quant", "left"),
                           ("size", "right")), {"name", "catalog model"})
    for m in models:
        table.add_row(m.source, m.name, m.model or f"? ({m.note})", m.quant or "?", fmt_bytes(m.size_bytes))
    stdout_console().print(table)
    for s in found:
        print(f"server {s.url} ({s.kind}): {', '.join(s.models) or 'no models listed'}")
    info(f"{len(models)} model file(s), {sum(1 for m in models if m.model)} in the catalog; {len(found)} server(s)"
         + ("" if servers else " (not asked)"))
