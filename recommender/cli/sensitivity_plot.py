"""Tornado chart of a Sensitivity report: PNG (matplotlib, Agg) or a self-contained HTML page (inline SVG + tables).

Per normalization, one panel; per criterion, one row. The left bar is the weight lowered to its lowest grid value
(base - span, or 0), the right bar raised to its highest (base + span, or 1); each bar's length is the ranking change
1 - Kendall tau against the base ranking. A hatched bar means the top pick changed there. Rows are sorted by the
larger of their two bars, the most sensitive weight on top. matplotlib is imported only here, only when a plot is
asked for."""

from __future__ import annotations

import html
import io
from pathlib import Path
from typing import Optional


from recommender.core.errors import UserError
from recommender.search.sensitivity import CriterionSensitivity, Point, Sensitivity
from recommender.cli.common import check_output_file

PLOT_FORMATS = (".png", ".html")


def check_plot_path(path: str) -> Path:
    p = Path(path)
    if p.suffix.lower() not in PLOT_FORMATS:
        raise UserError(f"--plot {path!r}: cannot tell the format from the file name",
                        hint="name a .png file (the chart) or a .html file (chart and tables, self-contained)")
    if not p.parent.is_dir():
        raise UserError(f"--plot {path!r}: folder {str(p.parent)!r} does not exist", hint="create it first")
    check_output_file(p, "--plot")
    import importlib.util  # noqa: PLC0415

    if importlib.util.find_spec("matplotlib") is None:
        raise UserError("--plot needs matplotlib, which is not installed", hint="pip install 'llm-recommender[tune]'")
    return p


def _ends(c: CriterionSensitivity) -> tuple[Optional[Point], Optional[Point]]:
    low = [p for p in c.points if p.delta < 0]
    high = [p for p in c.points if p.delta > 0]
    return (min(low, key=lambda p: p.delta) if low else None, max(high, key=lambda p: p.delta) if high else None)


def _change(p: Optional[Point]) -> float:
    return 0.0 if p is None or p.tau is None else 1.0 - p.tau


def tornado_rows(report: Sensitivity) -> dict[str, list[tuple[CriterionSensitivity, Optional[Point], Optional[Point]]]]:
    """Per normalization: (criterion, lowest point, highest point), most sensitive first."""
    out = {}
    for res in report.results:
        rows = [(c, *_ends(c)) for c in res.criteria if c.points]
        rows.sort(key=lambda r: max(_change(r[1]), _change(r[2])), reverse=True)
        out[res.normalization] = rows
    return out


def _figure(report: Sensitivity):
    import matplotlib  # noqa: PLC0415  (check_plot_path made sure it is installed)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    from matplotlib.patches import Patch  # noqa: PLC0415

    rows_by_norm = tornado_rows(report)
    n_rows = max((len(r) for r in rows_by_norm.values()), default=1)
    fig, axes = plt.subplots(1, len(rows_by_norm), figsize=(6.5 * len(rows_by_norm), 1.0 + 0.7 * n_rows),
                             squeeze=False)
    reach = max([max(_change(lo), _change(hi)) for rows in rows_by_norm.values() for _, lo, hi in rows] + [0.05])
    reach = min(2.0, reach * 1.25)
    low_color, high_color = "#4C72B0", "#DD8452"
    for ax, res in zip(axes[0], report.results):
        rows = rows_by_norm[res.normalization]
        ys = list(range(len(rows)))[::-1]
        for y, (c, lo, hi) in zip(ys, rows):
            for p, sign, color in ((lo, -1, low_color), (hi, 1, high_color)):
                if p is None:
                    continue
                width = sign * _change(p)
                ax.barh(y, width, color=color, edgecolor="black", linewidth=0.5,
                        hatch="//" if p.top_changed else None)
                ax.text(width + sign * 0.02 * reach, y, f"w={p.weight:.2f}", va="center",
                        ha="right" if sign < 0 else "left", fontsize=8)
        ax.set_yticks(ys)
        ax.set_yticklabels([f"{c.criterion} {c.base_weight:.2f}\nstable "
                            f"[{c.stability_interval[0]:.3f}, {c.stability_interval[1]:.3f}]" for c, _, _ in rows],
                           fontsize=8)
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_xlim(-reach, reach)
        ticks = ax.get_xticks()
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"{abs(t):.2g}" for t in ticks])
        ax.set_xlim(-reach, reach)
        ax.set_xlabel("1 − Kendall τ vs base ranking  (← weight lowered | weight raised →)", fontsize=8)
        flip = "n/a" if res.top1_flip_rate is None else f"{res.top1_flip_rate:.0%}"
        ax.set_title(f"{res.normalization}: top pick {res.base_top.model} {res.base_top.quant} "
                     f"{res.base_top.engine}\ntop-1 flip rate {flip} of {res.vectors} weight vectors", fontsize=9)
    handles = [Patch(facecolor=low_color, label="weight lowered"), Patch(facecolor=high_color, label="weight raised"),
               Patch(facecolor="white", edgecolor="black", hatch="//", label="top pick changed")]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle(f"Weight sensitivity (step {report.step:g}, up to ±{report.span:g}; "
                 f"τ over the base top {len(report.results[0].base_ranking) if report.results else 0})", fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig, plt


def write_plot(report: Sensitivity, path: str) -> Path:
    """Write the tornado chart: .png, or .html (inline SVG and the numbers, no external resources)."""
    p = check_plot_path(path)
    fig, plt = _figure(report)
    try:
        if p.suffix.lower() == ".png":
            fig.savefig(p, format="png", dpi=120)
        else:
            buf = io.StringIO()
            fig.savefig(buf, format="svg")
            svg = buf.getvalue()
            svg = svg[svg.index("<svg"):]
            p.write_text(_html(report, svg), encoding="utf-8")
    except OSError as e:
        raise UserError(f"cannot write {str(p)!r}: {e.strerror}", hint="check the path and its permissions") from None
    finally:
        plt.close(fig)
    return p


def _html(report: Sensitivity, svg: str) -> str:
    q = report.query
    esc = html.escape
    parts = [
        "<!DOCTYPE html>", "<html><head><meta charset='utf-8'><title>recommender sensitivity</title>",
        "<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;margin:0.5em 0 1.5em}"
        "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}th{background:#f4f4f4}"
        "td:first-child,th:first-child{text-align:left}</style></head><body>",
        "<h1>Weight sensitivity</h1>",
        f"<p>{esc(q.hardware.name)}, budget {q.vram_bytes / 1024**3:.1f} GiB"
        + (f", {q.latency_metric.upper()} ≤ {q.max_latency_ms:g} ms" if q.max_latency_ms else "")
        + f", workload {esc(q.workload.name)}; {report.counts.get('feasible', 0)} of "
          f"{report.counts.get('candidates', 0)} candidates feasible. Base weights: "
        + esc(", ".join(f"{k} {v:.2f}" for k, v in q.weights.items())) + ".</p>",
        f"<p>Each weight moved by ±{report.step:g} steps up to ±{report.span:g} (others rescaled to keep their "
        "proportions); see docs/sensitivity.md.</p>",
        svg,
    ]
    for res in report.results:
        parts.append(f"<h2>{esc(res.normalization)}</h2><p>Base top pick: {esc(res.base_top.model)} "
                     f"{esc(res.base_top.quant)} {esc(res.base_top.engine)}, batch {res.base_top.batch}, context "
                     f"{res.base_top.context_tokens}. Top-1 flip rate {_fmt(res.top1_flip_rate)}, model flip rate "
                     f"{_fmt(res.top1_model_flip_rate)}, mean τ {_fmt(res.tau_mean)}, min τ {_fmt(res.tau_min)} "
                     f"over {res.vectors} weight vectors.</p>")
        parts.append("<table><tr><th>criterion</th><th>base</th><th>stable from</th><th>stable to</th>"
                     "<th>top changes</th><th>τ at lowest</th><th>τ at highest</th><th>takes over below</th>"
                     "<th>takes over above</th></tr>")
        for c in res.criteria:
            lo, hi = _ends(c)
            parts.append(f"<tr><td>{esc(c.criterion)}</td><td>{c.base_weight:.3f}</td>"
                         f"<td>{c.stability_interval[0]:.4f}</td><td>{c.stability_interval[1]:.4f}</td>"
                         f"<td>{c.top_changes}/{len(c.points)}</td><td>{_fmt(lo and lo.tau)}</td>"
                         f"<td>{_fmt(hi and hi.tau)}</td><td>{_name(c.below)}</td><td>{_name(c.above)}</td></tr>")
        parts.append("</table>")
    if report.comparison:
        cmp_ = report.comparison
        parts.append(f"<p>min-max vs z-score base rankings: τ {_fmt(cmp_.tau)}, same top pick: "
                     f"{'yes' if cmp_.same_top else 'no'}.</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _name(p) -> str:
    return "—" if p is None else html.escape(f"{p.model} {p.quant} {p.engine}")


def _fmt(v) -> str:
    if v is None:
        return "n/a"
    return f"{v:.4g}"
