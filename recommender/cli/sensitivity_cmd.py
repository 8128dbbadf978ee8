"""`recommender sensitivity`: how much the ranking depends on the weights (docs/sensitivity.md)."""

from __future__ import annotations

from enum import Enum
from typing import Optional

import typer


from recommender.core.errors import UserError
from recommender.search.sensitivity import check_grid, sensitivity
from recommender.cli.common import budget_title, emit_json, info, open_catalog, stdout_console
from recommender.cli.query_opts import build_query, INCLUDE_BASE_HELP, no_fit_hint, query_options, QueryOptions
from recommender.cli.sensitivity_plot import check_plot_path, write_plot


class SensNormOpt(str, Enum):
    value = "value"
    both = "both"
    minmax = "minmax"
    zscore = "zscore"


def parse_fraction(text: str, option: str, example: str) -> float:
    """'0.05' or '5%' -> 0.05 (UserError otherwise)."""

    t = text.strip()
    try:
        return float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise UserError(f"{option} {text!r} is not a number", hint=f"a weight change, e.g. {option} {example}") from None


@query_options(top_help="Entries of the base ranking Kendall's tau is computed over.")
def sensitivity_command(
    opts: QueryOptions,
    normalization: SensNormOpt = typer.Option(SensNormOpt.value, "--normalization",
                                              help="value (the default score), minmax, zscore, or both (min-max "
                                                   "and z-score compared, seed 003 §4.4)."),
    include_base: bool = typer.Option(False, "--include-base", help=INCLUDE_BASE_HELP),
    step: str = typer.Option("0.05", "--step", help="Weight step: 0.05 or 5% (absolute, in weight units)."),
    span: str = typer.Option("0.2", "--span", help="Farthest change of a weight each way (a multiple of --step)."),
    plot: Optional[str] = typer.Option(None, "--plot", help="Write the tornado chart: FILE.png, or FILE.html "
                                                            "(chart and tables, self-contained)."),
    as_json: bool = typer.Option(False, "--json", help="JSON on stdout."),
) -> None:
    """Perturb each weight in steps, under min-max and z-score: Kendall tau against the base ranking, how often the
    top pick changes, and the interval of each weight over which it stays the same."""

    step_v = parse_fraction(step, "--step", "0.05")
    span_v = parse_fraction(span, "--span", "0.2")
    check_grid(step_v, span_v)
    if plot:

        check_plot_path(plot)
    catalog = open_catalog(opts.catalog_path)
    norms = ["minmax", "zscore"] if normalization == SensNormOpt.both else [normalization.value]
    q, notes = build_query(opts, norms[0], include_base)
    for n in notes:
        info(n)
    report = sensitivity(catalog, q, step_v, span_v, norms)
    written = None
    if plot and report.results:

        written = write_plot(report, plot)
    if as_json:
        emit_json(report.model_dump(mode="json"))
    elif report.results:
        print_sensitivity(report)
    for n in report.notes:
        info(f"note: {n}")
    if not report.results:
        info(no_fit_hint([]))
        raise typer.Exit(1)
    if written:
        info(f"wrote {written}")


def print_sensitivity(report) -> None:
    from rich.table import Table  # noqa: PLC0415


    q = report.query
    con = stdout_console()
    con.print(f"{budget_title(q)} · workload {q.workload.name} · "
              f"{report.counts['feasible']} of {report.counts['candidates']} candidates fit · weights "
              f"{', '.join(f'{k} {v:.2f}' for k, v in q.weights.items())} · step {report.step:g}, "
              f"up to ±{report.span:g}", markup=False)
    for res in report.results:
        t = res.base_top
        con.print(f"\n{res.normalization}: top pick {t.model} {t.quant} {t.engine} batch {t.batch} ctx "
                  f"{t.context_tokens} · top-1 flip rate {_pct(res.top1_flip_rate)} (top model "
                  f"{_pct(res.top1_model_flip_rate)}) over {res.vectors} weight vectors · Kendall τ against the base "
                  f"top {len(res.base_ranking)}: mean {_num(res.tau_mean)}, min {_num(res.tau_min)}", markup=False)
        table = Table(caption="stable: the values of the weight for which the top pick stays the same; "
                              "τ lowest / highest: at the weight's lowest / highest grid value")
        for col, just in (("weight", "left"), ("base", "right"), ("stable", "right"), ("top changes", "right"),
                          ("τ lowest", "right"), ("τ highest", "right"), ("takes over below", "left"),
                          ("takes over above", "left")):
            table.add_column(col, justify=just, no_wrap=True)
        for c in res.criteria:
            low = min((p for p in c.points if p.delta < 0), key=lambda p: p.delta, default=None)
            high = max((p for p in c.points if p.delta > 0), key=lambda p: p.delta, default=None)
            table.add_row(
                c.criterion, f"{c.base_weight:.3f}",
                f"[{c.stability_interval[0]:.3f}, {c.stability_interval[1]:.3f}]",
                f"{c.top_changes}/{len(c.points)}",
                "—" if low is None else f"{_num(low.tau)} @{low.weight:.2f}",
                "—" if high is None else f"{_num(high.tau)} @{high.weight:.2f}",
                "—" if c.below is None else f"{c.below.model} {c.below.quant} {c.below.engine}",
                "—" if c.above is None else f"{c.above.model} {c.above.quant} {c.above.engine}")
        con.print(table)
    if report.comparison:
        cmp_ = report.comparison
        con.print(f"\nmin-max vs z-score base rankings: Kendall τ {_num(cmp_.tau)}, same top pick: "
                  f"{'yes' if cmp_.same_top else 'no'}", markup=False)


def _pct(v) -> str:
    return "n/a" if v is None else f"{v:.0%}"


def _num(v) -> str:
    return "n/a" if v is None else f"{v:.3f}"
