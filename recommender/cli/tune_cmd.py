"""`recommender tune`: search the configuration space with Optuna instead of ranking every candidate."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


from recommender.core.engines import engine_spec, resolve_engine
from recommender.core.errors import UserError
from recommender.core.units import fmt_bytes, fmt_ms, fmt_tokens, parse_duration_s, parse_latency_ms
from recommender.hardware.host import probe_host
from recommender.search.tune import check_storage, run_tune, Slo
from recommender.hardware.profiles import cpu_profile
from recommender.search.tune_measure import MeasuredEvaluator, resolve_measured_target
from recommender.cli.common import (
    budget_title,
    check_output_file,
    columns_table,
    emit_json,
    info,
    LEGEND,
    mark,
    open_catalog,
    stdout_console,
)
from recommender.cli.query_opts import (build_query, INCLUDE_BASE_HELP, LatencyMetricOpt, MissingOpt, NormOpt,
                                         QueryOptions)
from recommender.cli.tune_plot import plot_front


def tune_command(
    models: Optional[list[str]] = typer.Argument(None, help="Catalog models to tune over (default: every model). "
                                                            "With --measure: one .gguf file on this machine."),
    vram: Optional[str] = typer.Option(None, "--vram", help="Memory budget: 24 (GiB), 24GiB, 24GB (SI). GPU memory; "
                                                            "with --measure on a CPU, the buffers llama.cpp "
                                                            "allocates (weights, KV, compute)."),
    max_latency: Optional[str] = typer.Option(None, "--max-latency", help="Latency limit: 800ms, 0.8s, 800 (ms)."),
    latency_metric: LatencyMetricOpt = typer.Option(LatencyMetricOpt.ttft, "--latency-metric",
                                                    help="Which latency the limit applies to."),
    workload: str = typer.Option("chat", "--workload", "-w", help="Workload preset (profiles/workloads)."),
    context: Optional[list[str]] = typer.Option(None, "--context", help="Context window(s) to consider, e.g. 8K."),
    batch: Optional[list[int]] = typer.Option(None, "--batch", help="Concurrent sequences to consider."),
    prompt_tokens: Optional[int] = typer.Option(None, "--prompt-tokens", help="Prompt length (tokens)."),
    output_tokens: Optional[int] = typer.Option(None, "--output-tokens", help="Output length (tokens)."),
    weights: Optional[str] = typer.Option(None, "--weights",
                                          help="latency=0.3,vram=0.25,ppl=0.2,zh=0.25 (en=0 by default)."),
    normalization: NormOpt = typer.Option(NormOpt.value, "--normalization"),
    missing: MissingOpt = typer.Option(MissingOpt.worst, "--missing", help="Rule for a metric with no data."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="Plan for this GPU (a profile name) instead of this machine; "
                                                          "several: \"2x RTX 3090\", \"RTX 4090,RTX 3090\"."),
    gpus: Optional[int] = typer.Option(None, "--gpus", min=1, help="How many of the --gpu card."),
    link: Optional[str] = typer.Option(None, "--link", help="Link between the GPUs: pcie4 x16, pcie3 x8, nvlink."),
    goodput: bool = typer.Option(False, "--goodput", help="Maximize goodput (requests/s meeting --slo-ttft and "
                                                          "--slo-tpot, as vLLM's bench serve counts them) instead "
                                                          "of the weighted score."),
    slo_ttft: Optional[str] = typer.Option(None, "--slo-ttft", help="With --goodput: TTFT limit, e.g. 2s, 500ms."),
    slo_tpot: Optional[str] = typer.Option(None, "--slo-tpot", help="With --goodput: TPOT limit, e.g. 50ms."),
    engine: Optional[list[str]] = typer.Option(None, "--engine", "-e", help="Only these engines."),
    quant: Optional[list[str]] = typer.Option(None, "--quant", "-q", help="Only these quantizations."),
    kv_dtype: Optional[list[str]] = typer.Option(None, "--kv-dtype", help="Only these KV-cache dtypes (f16, q8_0, "
                                                                          "q4_0, bf16, fp8; 'default' = each "
                                                                          "engine's default). Default: all."),
    include_base: bool = typer.Option(False, "--include-base", help=INCLUDE_BASE_HELP),
    offload: bool = typer.Option(True, "--offload/--no-offload",
                                 help="Try llama.cpp partial offload (75/50/25 % of the layers on the GPU)."),
    trials: int = typer.Option(100, "--trials", min=1, max=100_000, help="Trials this process runs."),
    seed: Optional[int] = typer.Option(None, "--seed", min=0, max=2**32 - 1,
                                       help="Sampler seed (default 0; with --storage, derived from the process id so "
                                            "workers differ)."),
    n_startup: int = typer.Option(10, "--startup-trials", min=1, help="Random trials before TPE models the space."),
    measure: bool = typer.Option(False, "--measure", help="Run a real probe per trial (child process) on this "
                                                          "machine; rows are cached in your catalog overlay."),
    budget: str = typer.Option("10m", "--budget", help="Wall-clock budget for measuring: 10m, 90s, 1h."),
    repeats: int = typer.Option(1, "--repeats", min=1, max=20, help="Measured repeats per probe (after warm-up)."),
    probe_timeout: float = typer.Option(300.0, "--probe-timeout", min=5, help="Seconds before one probe is killed."),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, help="CPU threads of a probe (default: all)."),
    pareto: bool = typer.Option(False, "--pareto", help="NSGA-II over (latency, memory, quality) instead of the "
                                                        "weighted score; prints the front."),
    plot: Optional[str] = typer.Option(None, "--plot", help="With --pareto: write the front as a PNG to this file."),
    storage: Optional[str] = typer.Option(None, "--storage", help="Optuna RDB URL shared by several workers, e.g. "
                                                                  "sqlite:///tune.db or postgresql://u:p@host/db."),
    study_name: Optional[str] = typer.Option(None, "--study-name", help="Study name (default: derived from the "
                                                                        "query, so equal queries share a study)."),
    show: int = typer.Option(5, "--show", min=0, help="Best distinct configurations to list."),
    as_json: bool = typer.Option(False, "--json", help="JSON on stdout."),
    catalog_path: Optional[str] = typer.Option(None, "--catalog", help="Catalog file (default: $RECOMMENDER_CATALOG, "
                                                                       "else the shipped catalog.duckdb)."),
) -> None:
    """Optuna over quantization x engine x batch x context x KV dtype (x GPU layers), under VRAM/latency limits."""
    import os  # noqa: PLC0415


    if plot and not pareto:
        raise UserError("--plot draws the Pareto front", hint="add --pareto, or drop --plot")
    if plot and not plot.lower().endswith(".png"):
        raise UserError(f"--plot {plot!r} is not a .png file name", hint="e.g. --plot front.png")
    if plot:
        check_output_file(Path(plot).expanduser(), "--plot")
    if storage:
        check_storage(storage)  # before the grid is evaluated; open_study checks a sqlite file again
    budget_s = parse_duration_s(budget)
    slo = None
    if slo_ttft or slo_tpot:
        if not goodput:
            raise UserError("--slo-ttft/--slo-tpot are the limits of --goodput", hint="add --goodput")
    if goodput:
        if not (slo_ttft or slo_tpot):
            raise UserError("--goodput counts the requests that meet SLOs: give --slo-ttft and/or --slo-tpot",
                            hint="e.g. --goodput --slo-ttft 2s --slo-tpot 50ms")
        if pareto or measure:
            raise UserError("--goodput is a predicted, single-objective search", hint="drop --pareto / --measure")
        slo = Slo(ttft_ms=parse_latency_ms(slo_ttft, "--slo-ttft") if slo_ttft else None,
                  tpot_ms=parse_latency_ms(slo_tpot, "--slo-tpot") if slo_tpot else None)
    catalog = open_catalog(catalog_path)
    if seed is None:
        seed = (os.getpid() % 100_000) if storage else 0

    if measure:
        import gc  # noqa: PLC0415

        gc.enable()  # probes for minutes: the collector as usual (app.main pauses it for a one-shot command)
        if not models or len(models) != 1:
            raise UserError("--measure tunes one model file", hint="give one .gguf file, e.g. "
                                                                  "recommender tune model.gguf --measure")
        if engine and any(engine_spec(resolve_engine(e)).file_format != "gguf" for e in engine):
            raise UserError("--measure runs llama.cpp on a GGUF file", hint="drop --engine")
        if gpu or gpus or link:
            raise UserError("--measure runs on this machine", hint="drop --gpu (it plans for another GPU)")
        target = resolve_measured_target(models[0], catalog)
        q, notes = build_query(QueryOptions(vram, max_latency, latency_metric, workload, context, batch,
                                            prompt_tokens, output_tokens, weights, missing, gpu, None, None, None,
                                            10, 1, catalog_path), normalization.value)
        if q.machine is not None:  # a probe runs on one device: GPU 0 of this machine
            gpus_here = q.machine.count
            q = q.model_copy(update={"machine": None, "vram_bytes": q.hardware.memory_bytes})
            notes.append(f"measuring on GPU 0 ({q.hardware.name}) of the {gpus_here} GPUs here: a probe runs on one")
        host = probe_host()
        if not host.gpus:
            cpu = cpu_profile(host)  # memory applied below (with_memory)
            q = q.model_copy(update={"hardware": cpu.with_memory(q.vram_bytes) if vram else cpu})
            if not vram:
                q = q.model_copy(update={"vram_bytes": q.hardware.memory_bytes})
            notes = [f"no GPU here: measuring on the CPU ({q.hardware.name}); the memory budget applies to the "
                     f"buffers llama.cpp allocates"]
        q = q.model_copy(update={"models": [target.model_id]})
        ev = MeasuredEvaluator(catalog, q, target, host, kv_dtypes=kv_dtype, offload=offload, repeats=repeats,
                               budget_s=budget_s, probe_timeout_s=probe_timeout, threads=threads)
        res = run_tune(None, q, trials=trials, seed=seed, pareto=pareto, storage=storage, study_name=study_name,
                       n_startup=n_startup, measured=ev, progress=info, opened=lambda: [info(n) for n in notes])
        res.notes.append(f"probes run {ev.probed}, reused from the catalog {ev.reused}, not run (predicted memory "
                         f"over budget) {ev.skipped}; measuring budget {budget_s:.0f} s")
    else:
        q, notes = build_query(QueryOptions(vram, max_latency, latency_metric, workload, context, batch,
                                            prompt_tokens, output_tokens, weights, missing, gpu, models, engine, quant,
                                            10, 1, catalog_path, gpus, link), normalization.value, include_base)
        res = run_tune(catalog, q, trials=trials, seed=seed, pareto=pareto, storage=storage, study_name=study_name,
                       kv_dtypes=kv_dtype, offload=offload and q.machine is None, n_startup=n_startup, slo=slo,
                       progress=_every(PROGRESS_EVERY_S, trials), opened=lambda: [info(n) for n in notes])
    if plot:

        plot_front(res, plot)
        info(f"wrote {plot}")
    if as_json:
        emit_json(res.model_dump(mode="json"))
    else:
        print_result(res, show)
    for n in res.notes:
        info(f"note: {n}")
    if res.best is None and not res.pareto_front:
        info("hint: no trial satisfied the limits: raise --vram or --max-latency, run more --trials, or widen "
             "the space (--context, --quant)")
        raise typer.Exit(1)


def _cfg(c) -> str:
    ngl = "all" if c.gpu_layers is None else str(c.gpu_layers)
    return f"{c.model} {c.quant} {c.engine} ctx {c.context_tokens} batch {c.batch} kv {c.kv_dtype} ngl {ngl}"


def print_result(res, show: int) -> None:

    q = res.query
    title = f"tune ({res.mode}, {res.objective}) · {budget_title(q)} · workload {q.workload.name} · study {res.study_name}"
    rows = res.pareto_front if res.objective == "pareto" else _best_distinct(res.trials, show)
    cap = ("Pareto front over (latency, memory, quality cost) of the feasible trials" if res.objective == "pareto"
           else f"score: -goodput (requests/s meeting TTFT <= {fmt_ms(res.slo.ttft_ms)}, TPOT <= "
                f"{fmt_ms(res.slo.tpot_ms)}), lower is better" if res.objective == "goodput"
           else "score: weighted normalized cost against the feasible grid's ranges, lower is better")
    table = columns_table(title, f"{cap} · {LEGEND}",
                          (("trial", "right"), ("model", "left"), ("quant", "left"), ("engine", "left"),
                           ("ctx", "right"), ("batch", "right"), ("KV", "left"), ("GPU layers", "right"),
                           ("memory", "right"), (q.latency_metric.upper(), "right"),
                           ("goodput req/s" if res.objective == "goodput" else "quality cost", "right"),
                           ("score", "right")),
                          {"model", "memory"})
    for r in rows:
        c = r.config
        table.add_row(str(r.number), c.model, c.quant, c.engine, fmt_tokens(c.context_tokens), str(c.batch),
                      c.kv_dtype, "all" if c.gpu_layers is None else str(c.gpu_layers),
                      mark(fmt_bytes(r.memory_bytes), r.provenance.get("memory", "estimated")),
                      mark(fmt_ms(r.latency_ms), r.provenance.get("latency", "unknown")),
                      (("?" if r.goodput_rps is None else f"{r.goodput_rps:.3f}") if res.objective == "goodput"
                       else "?" if r.quality_cost is None else f"{r.quality_cost:.3f}"),
                      "?" if r.score is None else f"{r.score:.4f}")
    stdout_console().print(table)
    g = res.grid
    by = {}
    for r in res.trials:
        by[r.status] = by.get(r.status, 0) + 1
    info(f"{res.n_trials} trials ({res.n_distinct} distinct configurations; "
         + ", ".join(f"{k} {v}" for k, v in sorted(by.items())) + f") in {res.elapsed_s:.1f} s")
    if res.mode == "measured":
        info(f"space: {g.size} configurations, {g.feasible} predicted to fit the limits")
    elif g.optimum_score is not None:
        opt = g.optimum[0]
        info(f"predicted grid: {g.size} configurations, {g.feasible} feasible; optimum score {g.optimum_score:.4f} "
             f"({_cfg(opt)}{f' and {len(g.optimum) - 1} tied' if len(g.optimum) > 1 else ''})")
    if res.objective in ("score", "goodput") and res.mode == "predicted":
        if res.regret is None:
            info("regret: no feasible trial")
        else:
            reach = (f"reached after {res.trials_to_optimum} trials ({res.distinct_to_optimum} distinct) = "
                     f"{100 * res.trials_to_optimum / g.size:.1f} % of the grid"
                     if res.trials_to_optimum else "not reached")
            info(f"regret {res.regret:.4f} (best found {res.best.score:.4f}); optimum {reach}")
    if res.objective == "pareto" and res.grid_front_size is not None:
        info(f"front: {len(res.pareto_front)} configurations, {res.front_on_grid_front} of them on the grid's true "
             f"front of {res.grid_front_size}")


PROGRESS_EVERY_S = 5.0  # a long predicted study (--trials 7784 ran past 60 s silently) says where it is this often


def _every(seconds: float, total: int):
    """A progress printer (stderr) that lets one trial line through every ``seconds``."""
    import time  # noqa: PLC0415

    last = [time.monotonic()]

    def show(msg: str) -> None:
        now = time.monotonic()
        if now - last[0] >= seconds:
            last[0] = now
            info(f"{msg} (of {total} trials)")

    return show


def _best_distinct(trials, n: int):
    out, seen = [], set()
    for r in sorted((t for t in trials if t.status == "feasible" and t.score is not None),
                    key=lambda t: (t.score, t.number)):
        if r.config.key() not in seen:
            seen.add(r.config.key())
            out.append(r)
        if len(out) >= n:
            break
    return out
