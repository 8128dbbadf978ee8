"""`recommend` / `recommender recommend`: ranked, explained candidates under hard constraints."""

from __future__ import annotations

import typer

from .common import LEGEND, emit_json, info, mark, open_catalog
from .query_opts import (
    NormOpt,
    QueryOptions,
    build_query,
    no_fit_hint,
    query_options,
)


@query_options
def recommend_command(
    opts: QueryOptions,
    normalization: NormOpt = typer.Option(NormOpt.minmax, "--normalization"),
    explain: bool = typer.Option(False, "--explain", help="Say why the strongest excluded candidates were excluded."),
    as_json: bool = typer.Option(False, "--json", help="JSON on stdout."),
) -> None:
    """Rank model x quantization x engine x batch x context for a GPU, under VRAM and latency limits."""
    from ..recommend import recommend  # noqa: PLC0415

    catalog = open_catalog(opts.catalog_path)
    q, notes = build_query(opts, normalization.value, catalog)
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
        info(no_fit_hint(rec.excluded))
        raise typer.Exit(1)


def print_recommendation(rec, explain: bool) -> None:
    from ..units import fmt_bytes, fmt_ms, fmt_tokens  # noqa: PLC0415
    from .common import budget_title, columns_table, stdout_console  # noqa: PLC0415

    q = rec.query
    title = (f"{budget_title(q)} · workload {q.workload.name} "
             f"(prompt {q.workload.prompt_tokens}, output {q.workload.output_tokens})")
    table = columns_table(title, f"score: weighted normalized cost, lower is better "
                                 f"({', '.join(f'{k} {v:.2f}' for k, v in q.weights.items() if v)}; "
                                 f"{q.normalization}) · {LEGEND}",
                          (("#", "right"), ("model", "left"), ("quant", "left"), ("engine", "left"),
                           ("batch", "right"), ("ctx", "right"), ("VRAM", "right"), ("TTFT", "right"),
                           ("tok/s", "right"), ("zh acc", "right"), ("ppl×", "right"), ("score", "right")),
                          {"model", "VRAM", "TTFT"})
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
    stdout_console().print(table)
    n = rec.counts
    info(f"{n['feasible']} of {n['candidates']} candidates ({n['models']} models) fit the limits; "
         f"showing the best {'configuration' if q.per_model == 1 else 'configurations'} per model.")
    if explain or not rec.candidates:
        for c in rec.excluded:
            info(f"excluded {c.model} {c.quant} {c.engine} batch {c.batch} ctx {fmt_tokens(c.context_tokens)}: "
                 + "; ".join(c.excluded))
