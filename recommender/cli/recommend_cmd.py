"""`recommend` / `recommender recommend`: ranked, explained candidates under hard constraints."""

from __future__ import annotations

from enum import Enum
from typing import Optional

import typer

from .common import LEGEND, emit_json, info, mark, open_catalog, planning_hardware


class LatencyMetricOpt(str, Enum):
    ttft = "ttft"
    tpot = "tpot"
    e2e = "e2e"


class NormOpt(str, Enum):
    minmax = "minmax"
    zscore = "zscore"


class MissingOpt(str, Enum):
    worst = "worst"
    mean = "mean"


def build_query(vram: Optional[str], max_latency: Optional[str], latency_metric: str, workload: str,
                context: Optional[list[str]], batch: Optional[list[int]], prompt_tokens: Optional[int],
                output_tokens: Optional[int], weights: Optional[str], normalization: str, missing: str,
                gpu: Optional[str], model: Optional[list[str]], engine: Optional[list[str]],
                quant: Optional[list[str]], top: int, per_model: int, catalog):
    """Turn CLI options into a validated Query (raises UserError on bad input)."""
    from ..engines import resolve_engine  # noqa: PLC0415
    from ..errors import UserError  # noqa: PLC0415
    from ..quant import resolve_quant  # noqa: PLC0415
    from ..recommend import Query  # noqa: PLC0415
    from ..score import parse_weights  # noqa: PLC0415
    from ..units import parse_latency_ms, parse_memory, parse_tokens  # noqa: PLC0415
    from ..workloads import get_workload  # noqa: PLC0415

    vram_bytes = parse_memory(vram) if vram is not None else None
    max_ms = parse_latency_ms(max_latency) if max_latency is not None else None
    w = parse_weights(weights)
    wl = get_workload(workload)
    upd = {}
    if context:
        upd["contexts"] = sorted({parse_tokens(c) for c in context})
    if batch:
        if any(b < 1 or b > 4096 for b in batch):
            raise UserError(f"--batch {batch} out of range", hint="batch is the number of concurrent sequences, 1-4096")
        upd["batches"] = sorted(set(batch))
    for name, val in (("prompt_tokens", prompt_tokens), ("output_tokens", output_tokens)):
        if val is not None:
            if val < 1:
                raise UserError(f"--{name.replace('_', '-')} must be >= 1", hint="give a token count, e.g. 512")
            upd[name] = val
    if upd:
        wl = wl.model_copy(update=upd)
    hw, notes = planning_hardware(gpu, vram_bytes)
    if vram_bytes is None:
        vram_bytes = hw.memory_bytes
    models = [catalog.resolve_model(m).id for m in (model or [])]
    q = Query(vram_bytes=vram_bytes, max_latency_ms=max_ms, latency_metric=latency_metric, workload=wl,
              hardware=hw, weights=w, normalization=normalization, missing=missing, models=models,
              engines=[resolve_engine(e) for e in (engine or [])], quants=[resolve_quant(x) for x in (quant or [])],
              top=top, per_model=per_model)
    return q, notes


def recommend_command(
    vram: Optional[str] = typer.Option(None, "--vram", help="GPU memory budget: 24 (GiB), 24GiB, 24GB (SI), 24576MiB. "
                                                            "Default: the planned GPU's memory."),
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
    normalization: NormOpt = typer.Option(NormOpt.minmax, "--normalization"),
    missing: MissingOpt = typer.Option(MissingOpt.worst, "--missing", help="Rule for a metric with no data."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="Plan for this GPU (a profile name) instead of this machine."),
    model: Optional[list[str]] = typer.Option(None, "--model", "-m", help="Only these models."),
    engine: Optional[list[str]] = typer.Option(None, "--engine", "-e", help="Only these engines."),
    quant: Optional[list[str]] = typer.Option(None, "--quant", "-q", help="Only these quantizations."),
    top: int = typer.Option(10, "--top", min=1, help="How many to show."),
    per_model: int = typer.Option(1, "--per-model", min=0,
                                  help="Best configurations kept per model (0 = all)."),
    explain: bool = typer.Option(False, "--explain", help="Say why the strongest excluded candidates were excluded."),
    as_json: bool = typer.Option(False, "--json", help="JSON on stdout."),
    catalog_path: Optional[str] = typer.Option(None, "--catalog", help="Catalog file (default: $RECOMMENDER_CATALOG, "
                                                                       "else the shipped catalog.duckdb)."),
) -> None:
    """Rank model x quantization x engine x batch x context for a GPU, under VRAM and latency limits."""
    from ..recommend import recommend  # noqa: PLC0415

    catalog = open_catalog(catalog_path)
    q, notes = build_query(vram, max_latency, latency_metric.value, workload, context, batch, prompt_tokens,
                           output_tokens, weights, normalization.value, missing.value, gpu, model, engine, quant,
                           top, per_model, catalog)
    for n in notes:
        info(n)
    rec = recommend(catalog, q)
    if as_json:
        emit_json(rec.model_dump(mode="json"))
    else:
        print_recommendation(rec, explain)
    for n in rec.notes:
        info(f"note: {n}")
    if not rec.candidates:
        unknown_only = rec.excluded and all(any("unknown" in r for r in c.excluded) and len(c.excluded) == 1
                                            for c in rec.excluded)
        info("hint: this GPU profile has no peak FLOP/s figure, so TTFT is unknown: use --latency-metric tpot"
             if unknown_only else "hint: raise --vram or --max-latency, pick a smaller --context, or see --explain")
        raise typer.Exit(1)


def print_recommendation(rec, explain: bool) -> None:
    from rich.table import Table  # noqa: PLC0415

    from ..units import fmt_bytes, fmt_ms, fmt_tokens  # noqa: PLC0415
    from .common import stdout_console  # noqa: PLC0415

    q = rec.query
    con = stdout_console()
    lim = f", {q.latency_metric.upper()} ≤ {fmt_ms(q.max_latency_ms)}" if q.max_latency_ms else ""
    title = (f"{q.hardware.name}, {fmt_bytes(q.vram_bytes)} budget{lim} · workload {q.workload.name} "
             f"(prompt {q.workload.prompt_tokens}, output {q.workload.output_tokens})")
    table = Table(title=title, caption=f"score: weighted normalized cost, lower is better "
                                       f"({', '.join(f'{k} {v:.2f}' for k, v in q.weights.items() if v)}; "
                                       f"{q.normalization}) · {LEGEND}")
    for col, just in (("#", "right"), ("model", "left"), ("quant", "left"), ("engine", "left"), ("batch", "right"),
                      ("ctx", "right"), ("VRAM", "right"), ("TTFT", "right"), ("tok/s", "right"),
                      ("zh acc", "right"), ("ppl×", "right"), ("score", "right")):
        table.add_column(col, justify=just, no_wrap=col in {"model", "VRAM", "TTFT"})
    for c in rec.candidates:
        p = c.provenance
        table.add_row(
            str(c.rank), c.model, c.quant, c.engine, str(c.batch), fmt_tokens(c.context_tokens),
            mark(fmt_bytes(c.total_vram_bytes), p["total_vram_bytes"]),
            mark(fmt_ms(c.ttft_ms), p["ttft_ms"]),
            mark("?" if c.throughput_tokens_per_s is None else f"{c.throughput_tokens_per_s:.0f}",
                 p["throughput_tokens_per_s"]),
            mark("?" if c.zh_accuracy is None else f"{c.zh_accuracy:.1f}", c.quality["zh"].provenance),
            mark("?" if c.ppl_ratio is None else f"{c.ppl_ratio:.3f}", c.quality["ppl"].provenance),
            f"{c.score:.3f}")
    con.print(table)
    n = rec.counts
    info(f"{n['feasible']} of {n['candidates']} candidates ({n['models']} models) fit the limits; "
         f"showing the best {'configuration' if q.per_model == 1 else 'configurations'} per model.")
    if explain or not rec.candidates:
        for c in rec.excluded:
            info(f"excluded {c.model} {c.quant} {c.engine} batch {c.batch} ctx {fmt_tokens(c.context_tokens)}: "
                 + "; ".join(c.excluded))
