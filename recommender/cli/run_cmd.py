"""`recommender run`: start a row of the last recommend on this machine; with --probe, measure it and compare."""

from __future__ import annotations

import signal
import tempfile
from pathlib import Path
from typing import Optional

import typer

from recommender.core.errors import UserError
from recommender.core.paths import user_catalog_path
from recommender.core.units import fmt_ms
from recommender.catalog.store import UserCatalog
from recommender.rank.launch import launch_recipe, PORTS
from recommender.rank.query import Query
from recommender.hardware.host import probe_cpu
from recommender.probes.launcher import (engine_tool, load_last_answer, pick, port_free, Server, with_port,
                                        without_extra_bufts)
from recommender.probes.serve import run_serve_probe, ServeSettings
from recommender.probes.perf import resolve_target
from recommender.probes.verify import local_target
from recommender.cli.common import info, mark, open_catalog

COMPARED = (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"))


def run_command(
    rank: Optional[int] = typer.Argument(None, min=1, help="A rank of the last `recommend` answer."),
    model: Optional[str] = typer.Option(None, "--model", help="Instead of a rank: the first row of this catalog "
                                                              "model in the last answer."),
    quant: Optional[str] = typer.Option(None, "--quant", "-q", help="With --model: its quantization."),
    file: Optional[str] = typer.Option(None, "--file", help="A local .gguf / HF folder to run (its model and quant "
                                                            "pick the row when no rank is given)."),
    port: Optional[int] = typer.Option(None, "--port", min=1, max=65535, help="Port (default: the engine's)."),
    probe: bool = typer.Option(False, "--probe", help="Measure it with `probe serve` at the planned concurrency, "
                                                      "store the rows, print predicted vs measured, then stop it."),
    prompt_tokens: Optional[int] = typer.Option(None, "--prompt-tokens", min=1, help="--probe prompt (default: "
                                                                                     "the plan's)."),
    output_tokens: Optional[int] = typer.Option(None, "--output-tokens", min=2, help="--probe output (default: "
                                                                                     "the plan's)."),
    repeats: int = typer.Option(2, "--repeats", min=1, max=50, help="--probe requests per client."),
    timeout: float = typer.Option(300.0, "--timeout", min=5, help="Seconds for the server to answer (and for the "
                                                                   "probe)."),
) -> None:
    """Start a planned candidate on the engine installed here (llama-server or llama-cpp-python's server for
    llama.cpp, vllm), wait until it answers and print its URL; Ctrl-C stops it."""
    answer = load_last_answer()
    catalog = open_catalog()
    target = None
    if file is not None:
        p = Path(file).expanduser()
        if not p.exists():
            raise UserError(f"weights file {file} does not exist", hint="give the path of a .gguf file or HF folder")
        target = resolve_target(str(p), "llama.cpp" if p.suffix.lower() == ".gguf" else "vllm", None, False, catalog)
        model, quant = model or target.model_id, quant or target.quant
    if rank is None and model is None:
        raise UserError("nothing to run", hint="give a rank of the last recommend, --model MODEL --quant QUANT, "
                                               "or --file PATH")
    if model is not None and rank is None:
        model = catalog.resolve_model(model).id
    plan = pick(answer, rank, model, quant)
    if target is not None and (target.model_id, target.quant) != (plan.model, plan.quant):
        raise UserError(f"{file} is {target.model_id} {target.quant}, but #{plan.rank} is {plan.model} {plan.quant}",
                        hint="give the file of that row, or leave out the rank to run the file's own row")
    tool = engine_tool(plan.engine)
    if tool is None:
        want = {"llama.cpp": "llama-server on PATH, or pip install 'llama-cpp-python[server]'",
                "vllm": "vllm on PATH (pip install vllm)"}.get(plan.engine, "a server for this engine")
        raise UserError(f"no {plan.engine} engine installed here to run #{plan.rank} {plan.model} {plan.quant}",
                        hint=f"install {want}")
    if target is None:
        target = local_target(plan, catalog, [])
    local = str(target.path) if target is not None and not getattr(target, "synthetic", False) else None
    q = Query.model_validate(answer["query"])
    launch = launch_recipe(plan, q.hardware, q.machine, local_weights=local, load_mode=q.load_mode)
    cmd = next(c for c in launch.commands if c.tool == tool)
    if local is None and not launch.weights:
        raise UserError(f"no weights of {plan.model} at {plan.quant} on this machine, and {launch.weights_note}",
                        hint="give --file PATH (a .gguf file or HF folder)")
    port = port or PORTS[tool]
    if not port_free(port):
        raise UserError(f"port {port} on 127.0.0.1 is in use", hint="give --port N (a free port), or stop what "
                                                                     "listens there")
    argv, amx_note = without_extra_bufts(with_port(cmd, port), probe_cpu().flags)
    if amx_note:
        info(amx_note)
    url = f"http://127.0.0.1:{port}/v1"
    log = Path(tempfile.mkstemp(prefix="recommender-run-", suffix=".log")[1])
    info(f"starting #{plan.rank} {plan.model} {plan.quant} on {tool}"
         f"{'' if local else ' (downloading ' + launch.weights[0].repo + ')'}: {' '.join(argv)}")
    # Ctrl-C stops the server: a process started in the background by a non-interactive shell (`cmd &`, nohup, a CI
    # script) inherits SIGINT ignored, and Python then leaves it ignored; take the default handler back
    signal.signal(signal.SIGINT, signal.default_int_handler)
    server = Server(argv, log, env=cmd.env)
    try:
        server.wait_ready(url, timeout)
        info(f"ready: {url} (log {log})")
        print(url, flush=True)
        if probe:
            _probe(plan, url, catalog, prompt_tokens, output_tokens, repeats, timeout)
        else:
            catalog.close()  # the overlay stays free for other commands while the server runs
            info("Ctrl-C stops it")
            server.proc.wait()
    except KeyboardInterrupt:
        info("stopping ...")
    finally:
        code = server.stop()
        info(f"stopped (exit {code})")


def _probe(plan, url: str, catalog, prompt_tokens, output_tokens, repeats: int, timeout: float) -> None:
    out_t = output_tokens or plan.output_tokens
    prompt = min(prompt_tokens or plan.prompt_tokens, max(plan.context_tokens - out_t, 1))
    s = ServeSettings(url=url, prompt_tokens=prompt, output_tokens=out_t, concurrency=(plan.batch,),
                      repeats=repeats, timeout_s=timeout)
    out = run_serve_probe(s, catalog, model_id=plan.model, quant=plan.quant, engine=plan.engine,
                          context_tokens=plan.context_tokens, kv_dtype=plan.kv_dtype)
    catalog.close()
    for n in out.notes:
        info(f"warning: {n}")
    if out.rows:
        with UserCatalog(user_catalog_path()) as w:
            w.put_measurements(out.rows)
        info(f"stored {len(out.rows)} measured row(s) in your overlay")
    print(f"#{plan.rank} {plan.model} {plan.quant} {plan.engine} batch {plan.batch} (predicted → measured; probe "
          f"prompt {prompt}, output {out_t}):")
    for r in out.rows:
        parts = []
        for name, label in COMPARED:
            f = plan.figures.get(name)
            m = getattr(r, name)
            err = "" if f is None or f.value is None or m is None else f" ({100 * (m - f.value) / f.value:+.0f} %)"
            parts.append(f"{label} {mark(fmt_ms(f.value) if f and f.value is not None else '?', f.provenance if f else 'unknown')}"
                         f" → {'?' if m is None else fmt_ms(m)}ᵐ{err}")
        print("  " + " · ".join(parts) + f" · measurement {r.id}")
