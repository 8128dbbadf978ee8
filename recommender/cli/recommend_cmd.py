"""`recommend` / `recommender recommend`: ranked, explained candidates under hard constraints."""

from __future__ import annotations

from typing import Optional

import typer

from recommender.core.units import fmt_bytes, fmt_ms, fmt_tokens
from recommender.rank.recommend import recommend
from recommender.cli.common import (
    budget_title,
    columns_table,
    emit_json,
    info,
    LEGEND,
    mark,
    open_catalog,
    run_app,
    stdout_console,
)
from recommender.cli.query_opts import (build_query, INCLUDE_BASE_HELP, no_fit_hint, NORM_HELP, NormOpt,
                                        query_options, QueryOptions)


@query_options
def recommend_command(
    opts: QueryOptions,
    normalization: NormOpt = typer.Option(NormOpt.value, "--normalization", help=NORM_HELP),
    include_base: bool = typer.Option(False, "--include-base", help=INCLUDE_BASE_HELP),
    explain: bool = typer.Option(False, "--explain", help="Say why the strongest excluded candidates were excluded."),
    as_json: bool = typer.Option(False, "--json", help="JSON on stdout."),
) -> None:
    """Rank model x quantization x engine x batch x context for a GPU, under VRAM and latency limits."""

    catalog = open_catalog(opts.catalog_path)
    q, notes = build_query(opts, normalization.value, include_base)
    for n in notes:
        info(n)
    rec = recommend(catalog, q)
    hint = None if rec.candidates else no_fit_hint(rec.excluded)
    if as_json:
        emit_json(rec)
    else:
        print_recommendation(rec, explain)
    for n in rec.notes:
        info(f"note: {n}")
    if hint:
        info(hint)
        raise typer.Exit(1)


def print_recommendation(rec, explain: bool) -> None:

    q = rec.query
    title = (f"{budget_title(q)} · workload {q.workload.name} "
             f"(prompt {q.workload.prompt_tokens}, output {q.workload.output_tokens})")
    value = q.normalization == "value"
    serve = q.workload.rank_by == "goodput"
    tasks = "+".join(q.workload.accuracy_tasks)
    table = columns_table(title, f"score: weighted cost, lower is better "
                                 f"({', '.join(f'{k} {v:.2f}' for k, v in q.weights.items() if v)}; "
                                 f"{q.normalization}"
                                 + (f"; acc = task accuracy ({tasks}) in points, q-cost = points lost to "
                                    f"quantization" if value else "") + f") · {LEGEND}",
                          (("#", "right"), ("model", "left"), ("quant", "left"), ("engine", "left"),
                           ("batch", "right"), ("ctx", "right"), ("VRAM", "right"), ("TTFT", "right"),
                           ("req/s" if serve else "tok/s", "right"),
                           ("acc" if value else "zh acc", "right"), ("q-cost" if value else "ppl×", "right"),
                           ("score", "right")),
                          {"model", "VRAM", "TTFT"})
    for c in rec.candidates:
        p = c.provenance
        if serve:
            speed = mark("?" if c.goodput_per_s is None else f"{c.goodput_per_s:.2f}", p["goodput_requests_per_s"])
        else:
            speed = mark("?" if c.throughput_tokens_per_s is None else f"{c.throughput_tokens_per_s:.0f}",
                         p["throughput_tokens_per_s"])
        if value:
            acc = mark("?" if c.task_accuracy is None else f"{c.task_accuracy:.1f}", p["task_accuracy"])
            qc = c.figures["quant_cost_points"]
            qcost = mark("?" if qc.value is None else f"{qc.value:.2f}", qc.provenance)
        else:
            acc = mark("?" if c.zh_accuracy is None else f"{c.zh_accuracy:.1f}", p["zh_accuracy"])
            qcost = mark("?" if c.ppl_ratio is None else f"{c.ppl_ratio:.3f}", p["ppl_ratio"])
        table.add_row(
            str(c.rank), c.model, c.quant, c.engine, str(c.batch), fmt_tokens(c.context_tokens),
            mark(fmt_bytes(c.total_vram_bytes), p["total_vram_bytes"]),
            mark(fmt_ms(c.ttft_ms), p["ttft_ms"]), speed, acc, qcost, f"{c.score:.3f}")
    stdout_console().print(table)
    n = rec.counts
    info(f"{n['feasible']} of {n['candidates']} candidates ({n['models']} models) fit the limits; "
         f"showing the best {'configuration' if q.per_model == 1 else 'configurations'} per model.")
    if explain or not rec.candidates:
        for c in rec.excluded:
            info(f"excluded {c.model} {c.quant} {c.engine} batch {c.batch} ctx {fmt_tokens(c.context_tokens)}: "
                 + "; ".join(c.excluded))


def main(argv: Optional[list[str]] = None) -> None:
    """The `recommend` entry point: this command alone (nothing else of the command tree is imported)."""
    app = typer.Typer(pretty_exceptions_enable=False, add_completion=False)
    app.command()(recommend_command)
    run_app(app, argv)
