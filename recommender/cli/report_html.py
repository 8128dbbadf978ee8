"""`recommend --report out.html`: one self-contained page (inline CSS, inline SVG drawn here, no external resource):
the ranked table with provenance marks and intervals, quality vs latency vs memory of every feasible candidate with
the Pareto front marked, the weight-sensitivity tornado, and what was excluded and why."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Optional

from recommender.core.errors import UserError
from recommender.core.units import fmt_bytes, fmt_ms, fmt_tokens
from recommender.search.report import ReportData
from recommender.cli.common import PROV_MARK

esc = html.escape
PROV_COLOR = {"measured": "#1a7f37", "calibrated": "#0969da", "published": "#8250df", "estimated": "#9a6700",
              "unknown": "#6e7781"}
FRONT_COLOR, OTHER_COLOR, TOP_COLOR = "#d62728", "#8c9bb0", "#111111"
# chart geometry (px)
W, H, ML, MR, MT, MB = 920, 520, 70, 190, 20, 50
R_MIN, R_MAX = 3.0, 14.0


def _num(name: str, v) -> str:
    if v is None:
        return "?"
    if name.endswith("_bytes"):
        return fmt_bytes(v)
    if name.endswith("_ms"):
        return fmt_ms(v)
    if name == "ppl_ratio":
        return f"{v:.3f}"
    if name.endswith("accuracy"):
        return f"{v:.1f}"
    return f"{v:.0f}" if abs(v) >= 10 else f"{v:.2f}"


def _cell(c, name: str) -> str:
    f = c.figures.get(name)
    if f is None:
        return "<td>?</td>"
    mark = PROV_MARK.get(f.provenance, "?")
    iv = ""
    if f.interval:
        iv = f"<br><small>[{esc(_num(name, f.interval[0]))}–{esc(_num(name, f.interval[1]))}]</small>"
    title = esc(f"{f.provenance}: {f.basis}" if f.basis else f.provenance)
    color = PROV_COLOR.get(f.provenance, "#000")
    return (f"<td title=\"{title}\">{esc(_num(name, f.value))}"
            f"<span style=\"color:{color}\">{mark if f.value is not None else ''}</span>{iv}</td>")


COLUMNS = (("VRAM", "total_vram_bytes"), ("TTFT", "ttft_ms"), ("TPOT", "tpot_ms"), ("E2E", "e2e_ms"),
           ("tok/s", "throughput_tokens_per_s"), ("task acc", "task_accuracy"), ("ranked acc", "task_accuracy_ranked"),
           ("zh acc", "zh_accuracy"), ("en acc", "en_accuracy"), ("ppl×", "ppl_ratio"))


def _ranked_table(rec) -> str:
    rows = ["<table id='ranked'><tr><th>#</th><th>model</th><th>quant</th><th>engine</th><th>batch</th><th>ctx</th>"
            + "".join(f"<th>{esc(h)}</th>" for h, _ in COLUMNS) + "<th>score</th></tr>"]
    for c in rec.candidates:
        rows.append(f"<tr><td>{c.rank}</td><td>{esc(c.model)}</td><td>{esc(c.quant)}</td><td>{esc(c.engine)}</td>"
                    f"<td>{c.batch}</td><td>{esc(fmt_tokens(c.context_tokens))}</td>"
                    + "".join(_cell(c, n) for _, n in COLUMNS)
                    + f"<td>{'?' if c.score is None else f'{c.score:.3f}'}</td></tr>")
    rows.append("</table>")
    return "\n".join(rows)


def _launch_table(rec) -> str:
    """How to run each ranked row: its engine's command with every flag the plan assumes, and the weights."""
    rows = ["<table id='launch'><tr><th>#</th><th>command</th><th>weights</th></tr>"]
    for c in rec.candidates:
        ln = c.launch
        if ln is None or ln.primary is None:
            continue
        w = "<br>".join(f"{esc(x.repo)}{'/' + esc(x.file) if x.file else ''} ({esc(x.kind)}; {esc(x.source)}"
                        f"{'; ' + esc(x.size_check) if x.size_check else ''})" for x in ln.weights) \
            or esc(ln.weights_note)
        rows.append(f"<tr><td>{c.rank}</td><td><code>{esc(ln.primary.command)}</code></td><td>{w}</td></tr>")
    rows.append("</table>")
    return "\n".join(rows)


def _evidence_table(rec) -> str:
    """The top rows' accuracy evidence (rank.quality.evidence_rows): each group's figure, class, date and source."""
    if not rec.evidence:
        return ""
    rows = ["<table id='evidence'><tr><th>#</th><th>model</th><th>task acc</th><th>ranked on</th><th>evidence</th>"
            "<th>mode</th><th>group</th><th>figure</th><th>class</th><th>date</th><th>source</th></tr>"]
    for e in rec.evidence:
        iv = f" [{e['interval'][0]:.1f}–{e['interval'][1]:.1f}]" if e["interval"] else ""
        a = "?" if e["task_accuracy"] is None else f"{e['task_accuracy']:.1f}{iv}"
        r = "?" if e["ranked_accuracy"] is None else f"{e['ranked_accuracy']:.1f}"
        for i, g in enumerate(e["groups"]):
            giv = f" [{g['interval'][0]:.1f}–{g['interval'][1]:.1f}]" if g["interval"] else ""
            v = "?" if g["value"] is None else f"{g['value']:.1f}{giv}"
            head = (f"<td>{e['rank']}</td><td>{esc(e['model'])} {esc(e['quant'])}</td><td>{esc(a)}</td>"
                    f"<td>{esc(r)}</td><td>{esc(e['evidence'])}</td><td>{esc(e['mode'])}</td>") if i == 0 else \
                "<td></td>" * 6
            rows.append(f"<tr class='ev-{esc(g['class'])}'>{head}<td>{esc(g['group'])}</td><td>{esc(v)}</td>"
                        f"<td>{esc(g['class'])}</td><td>{esc(g['date'])}</td>"
                        f"<td><small>{esc(g['source'][:300])}</small></td></tr>")
    rows.append("</table>")
    return "\n".join(rows)


def _log_ticks(lo: float, hi: float) -> list[float]:
    out = []
    for k in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            v = m * 10 ** k
            if lo <= v <= hi:
                out.append(v)
    return out


def _lin_ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    span = hi - lo or 1.0
    step = 10 ** math.floor(math.log10(span / n))
    for m in (1, 2, 5, 10):
        if span / (step * m) <= n:
            step *= m
            break
    start = math.ceil(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 1)]


def _chart(d: ReportData, top_key: Optional[tuple]) -> str:
    pts = d.points
    if not pts:
        why = ", ".join(f"{n} {k}" for k, n in d.unplotted.items()) or "no feasible candidate"
        return f"<p id='chart-empty'>No candidate can be placed on the chart ({esc(why)}).</p>"
    lat = [p.latency_ms for p in pts]
    qual = [p.quality for p in pts] + [v for p in pts if p.interval for v in p.interval]
    mem = [p.memory_bytes for p in pts]
    x_lo, x_hi = min(lat) / 1.25, max(lat) * 1.25
    q_pad = (max(qual) - min(qual)) * 0.08 or abs(max(qual)) * 0.05 or 1.0
    y_lo, y_hi = min(qual) - q_pad, max(qual) + q_pad
    m_lo, m_hi = min(mem), max(mem)
    pw, ph = W - ML - MR, H - MT - MB

    def x(v: float) -> float:
        return ML + pw * (math.log10(v) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo))

    def y(v: float) -> float:  # higher quality up; a lower-is-better figure (ppl ratio) is drawn flipped
        f = (v - y_lo) / (y_hi - y_lo)
        return MT + ph * ((1 - f) if d.quality_higher_better else f)

    def r(v: float) -> float:  # circle area grows with memory
        f = 0.0 if m_hi == m_lo else (v - m_lo) / (m_hi - m_lo)
        return math.sqrt(R_MIN ** 2 + f * (R_MAX ** 2 - R_MIN ** 2))

    out = [f"<svg id='pareto' data-quality-figure='{esc(d.quality_figure)}' data-latency-figure='{d.latency_figure}' "
           f"xmlns='http://www.w3.org/2000/svg' width='{W}' height='{H}' viewBox='0 0 {W} {H}' "
           "role='img' aria-label='quality vs latency vs memory'>",
           f"<rect x='{ML}' y='{MT}' width='{pw}' height='{ph}' fill='#fafafa' stroke='#999'/>"]
    for t in _log_ticks(x_lo, x_hi):
        out.append(f"<line x1='{x(t):.1f}' x2='{x(t):.1f}' y1='{MT}' y2='{MT + ph}' stroke='#e5e5e5'/>"
                   f"<text x='{x(t):.1f}' y='{MT + ph + 16}' font-size='11' text-anchor='middle'>"
                   f"{esc(fmt_ms(t))}</text>")
    for t in _lin_ticks(y_lo, y_hi):
        out.append(f"<line x1='{ML}' x2='{ML + pw}' y1='{y(t):.1f}' y2='{y(t):.1f}' stroke='#e5e5e5'/>"
                   f"<text x='{ML - 6}' y='{y(t) + 4:.1f}' font-size='11' text-anchor='end'>{t:g}</text>")
    metric = d.latency_figure.removesuffix("_ms").upper()
    out.append(f"<text x='{ML + pw / 2}' y='{H - 8}' font-size='12' text-anchor='middle'>{esc(metric)} "
               "(log scale; lower is better)</text>")
    qlabel = f"{d.quality_figure} ({d.quality_unit}; {'higher' if d.quality_higher_better else 'lower'} is better)"
    out.append(f"<text transform='translate(16,{MT + ph / 2}) rotate(-90)' font-size='12' text-anchor='middle'>"
               f"{esc(qlabel)}</text>")
    # the dominated ones first, so the front is drawn on top, and the top pick last
    def is_top(p) -> bool:
        c = p.candidate
        return (c.model, c.quant, c.engine, c.batch, c.context_tokens) == top_key

    for p in sorted(pts, key=lambda p: (is_top(p), p.on_front)):
        c = p.candidate
        key = (c.model, c.quant, c.engine, c.batch, c.context_tokens)
        fill = FRONT_COLOR if p.on_front else OTHER_COLOR
        stroke = TOP_COLOR if key == top_key else ("#7a0000" if p.on_front else "none")
        tip = (f"{c.model} {c.quant} {c.engine} batch {c.batch} ctx {fmt_tokens(c.context_tokens)}: "
               f"{d.quality_figure} {p.quality:.4g}, {metric} {fmt_ms(p.latency_ms)}, memory "
               f"{fmt_bytes(p.memory_bytes)}" + (" · Pareto front" if p.on_front else ""))
        if p.interval:  # the quality figure's 95 % interval, the estimate's uncertainty the ranking pays for
            out.append(f"<line class='interval' x1='{x(p.latency_ms):.1f}' x2='{x(p.latency_ms):.1f}' "
                       f"y1='{y(p.interval[0]):.1f}' y2='{y(p.interval[1]):.1f}' stroke='{fill}' "
                       f"stroke-opacity='0.35'/>")
        out.append(f"<circle class='{'front' if p.on_front else 'dominated'}' data-quality='{p.quality!r}' "
                   f"data-latency-ms='{p.latency_ms!r}' data-memory-bytes='{p.memory_bytes!r}' "
                   f"cx='{x(p.latency_ms):.1f}' "
                   f"cy='{y(p.quality):.1f}' r='{r(p.memory_bytes):.1f}' fill='{fill}' "
                   f"fill-opacity='{0.85 if p.on_front else 0.45}' stroke='{stroke}' "
                   f"stroke-width='{2.5 if key == top_key else 1}'><title>{esc(tip)}</title></circle>")
        if key == top_key:
            out.append(f"<text x='{x(p.latency_ms) + r(p.memory_bytes) + 3:.1f}' y='{y(p.quality) - 3:.1f}' "
                       "font-size='12' font-weight='bold'>#1</text>")
    lx = ML + pw + 16
    out.append(f"<circle cx='{lx + 6}' cy='{MT + 10}' r='6' fill='{FRONT_COLOR}'/><text x='{lx + 18}' "
               f"y='{MT + 14}' font-size='11'>Pareto front ({sum(p.on_front for p in pts)})</text>")
    out.append(f"<circle cx='{lx + 6}' cy='{MT + 30}' r='6' fill='{OTHER_COLOR}' fill-opacity='0.45'/>"
               f"<text x='{lx + 18}' y='{MT + 34}' font-size='11'>dominated ({sum(not p.on_front for p in pts)})"
               "</text>")
    out.append(f"<circle cx='{lx + 6}' cy='{MT + 50}' r='6' fill='none' stroke='{TOP_COLOR}' stroke-width='2'/>"
               f"<text x='{lx + 18}' y='{MT + 54}' font-size='11'>top pick</text>")
    out.append(f"<text x='{lx}' y='{MT + 80}' font-size='11'>circle area: memory</text>"
               f"<text x='{lx}' y='{MT + 95}' font-size='11'>{esc(fmt_bytes(m_lo))} – {esc(fmt_bytes(m_hi))}</text>")
    out.append("</svg>")
    return "\n".join(out)


def _ends(crit):
    low = [p for p in crit.points if p.delta < 0]
    high = [p for p in crit.points if p.delta > 0]
    return (min(low, key=lambda p: p.delta) if low else None, max(high, key=lambda p: p.delta) if high else None)


def _tornado(d: ReportData) -> str:
    """1 − Kendall τ against the base ranking at the farthest weight change each way, per criterion
    (recommender.search.sensitivity; the same bars as `recommender sensitivity --plot`)."""
    if not d.sensitivity:
        return "<p id='tornado-empty'>Sensitivity needs at least two feasible candidates.</p>"
    res = d.sensitivity[0]

    def change(p) -> float:
        return 0.0 if p is None or p.tau is None else 1.0 - p.tau

    rows = [(c, *_ends(c)) for c in res.criteria if c.points]
    rows.sort(key=lambda r: max(change(r[1]), change(r[2])), reverse=True)
    reach = min(2.0, max([max(change(lo), change(hi)) for _, lo, hi in rows] + [0.05]) * 1.25)
    bw, row_h, left = 640, 34, 380
    h = 40 + row_h * len(rows)
    mid = left + bw / 2
    out = [f"<svg id='tornado' xmlns='http://www.w3.org/2000/svg' width='{left + bw + 40}' height='{h + 30}' "
           "role='img' aria-label='weight sensitivity tornado'>",
           f"<line x1='{mid}' x2='{mid}' y1='20' y2='{h}' stroke='#000'/>"]
    for i, (c, lo, hi) in enumerate(rows):
        yy = 24 + i * row_h
        out.append(f"<text x='{left - 8}' y='{yy + 13}' font-size='11' text-anchor='end'>{esc(c.criterion)} "
                   f"{c.base_weight:.2f} · stable [{c.stability_interval[0]:.3f}, {c.stability_interval[1]:.3f}]"
                   "</text>")
        for p, sign, color in ((lo, -1, "#4C72B0"), (hi, 1, "#DD8452")):
            if p is None:
                continue
            wpx = change(p) / reach * (bw / 2)
            x0 = mid - wpx if sign < 0 else mid
            out.append(f"<rect class='bar' x='{x0:.1f}' y='{yy}' width='{max(wpx, 0.5):.1f}' height='{row_h - 10}' "
                       f"fill='{color}' stroke='#000' stroke-width='{2 if p.top_changed else 0.5}'>"
                       f"<title>{esc(c.criterion)} weight {p.weight:.2f}: τ {p.tau}, top pick "
                       f"{'changes' if p.top_changed else 'stays'}</title></rect>")
            tx = x0 - 4 if sign < 0 else x0 + wpx + 4
            out.append(f"<text x='{tx:.1f}' y='{yy + 16}' font-size='10' text-anchor='{'end' if sign < 0 else 'start'}'>"
                       f"w={p.weight:.2f}{' (top changes)' if p.top_changed else ''}</text>")
    out.append(f"<text x='{mid}' y='{h + 20}' font-size='11' text-anchor='middle'>1 − Kendall τ vs the base ranking "
               "(← weight lowered | weight raised →; thick outline: the top pick changes)</text></svg>")
    flip = "n/a" if res.top1_flip_rate is None else f"{res.top1_flip_rate:.0%}"
    return (f"<p>{esc(res.normalization)} normalization; each weight moved ±{d.sensitivity_step:g} steps up to "
            f"±{d.sensitivity_span:g}, the others rescaled. Top-1 flip rate {flip} of {res.vectors} weight vectors "
            f"(docs/sensitivity.md).</p>" + "\n".join(out))


def _excluded(rec, d: ReportData) -> str:
    parts = [f"<p>{d.total - d.feasible} of {d.total} candidates break a limit.</p>"]
    if d.exclusion_reasons:
        parts.append("<table id='exclusion-reasons'><tr><th>reason (numbers as #)</th><th>candidates</th></tr>"
                     + "".join(f"<tr><td>{esc(k)}</td><td>{n}</td></tr>" for k, n in d.exclusion_reasons)
                     + "</table>")
    if rec.excluded:
        parts.append("<p>The strongest excluded candidates:</p><table id='excluded'><tr><th>model</th><th>quant</th>"
                     "<th>engine</th><th>batch</th><th>ctx</th><th>why</th></tr>")
        for c in rec.excluded:
            parts.append(f"<tr><td>{esc(c.model)}</td><td>{esc(c.quant)}</td><td>{esc(c.engine)}</td>"
                         f"<td>{c.batch}</td><td>{esc(fmt_tokens(c.context_tokens))}</td>"
                         f"<td>{esc('; '.join(c.excluded))}</td></tr>")
        parts.append("</table>")
    return "\n".join(parts)


CSS = ("body{font-family:system-ui,sans-serif;margin:1.5em;color:#111}table{border-collapse:collapse;margin:.5em 0 "
       "1.5em}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right;vertical-align:top;white-space:nowrap}th{background:#f4f4f4}"
       "td:nth-child(-n+4),th:nth-child(-n+4){text-align:left}#exclusion-reasons td:first-child,#excluded td:last-child"
       "{text-align:left}small{color:#555}h2{margin-top:1.5em}")

# Runs in the browser: counts what was drawn and marks the page, so a headless browser can tell it rendered.
SCRIPT = ("document.addEventListener('DOMContentLoaded',function(){var n=document.querySelectorAll("
          "'#pareto circle.front,#pareto circle.dominated').length;var b=document.querySelectorAll('#tornado rect.bar')"
          ".length;var s=document.getElementById('pareto');var w=s?s.getBoundingClientRect().width:0;"
          "document.body.setAttribute('data-rendered',n+' points, '+b+' bars, chart '+Math.round(w)+' px');});")


def render(rec, d: ReportData, notes: list[str]) -> str:
    q = rec.query
    top = rec.candidates[0] if rec.candidates else None
    top_key = (top.model, top.quant, top.engine, top.batch, top.context_tokens) if top else None
    limits = [f"memory ≤ {fmt_bytes(q.vram_bytes)}"]
    if q.max_latency_ms:
        limits.append(f"{q.latency_metric.upper()} ≤ {fmt_ms(q.max_latency_ms)}")
    weights = ", ".join(f"{k} {v:.2f}" for k, v in q.weights.items() if v)
    head = (f"<p>{esc(q.hardware.name)} · {esc('; '.join(limits))} · workload {esc(q.workload.name)} (prompt "
            f"{q.workload.prompt_tokens}, output {q.workload.output_tokens}) · weights {esc(weights)} "
            f"({esc(q.normalization)}) · {d.feasible} of {d.total} candidates feasible</p>")
    legend = " · ".join(f"<span style='color:{PROV_COLOR[k]}'>{PROV_MARK[k]}</span> {k}" for k in PROV_COLOR)
    body = [
        "<!DOCTYPE html>", "<html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        "<title>recommender: ranked configurations</title>", f"<style>{CSS}</style>",
        f"<script>{SCRIPT}</script></head><body>",
        "<h1>Which configuration to run</h1>", head,
        "<h2>Ranked</h2>",
        f"<p>Score: weighted normalized cost, lower is better. Marks: {legend}. "
        "Brackets: the 10–90 % interval of a calibrated figure's held-out errors. Hover a cell for its basis.</p>",
        _ranked_table(rec),
        "<h2>How to run each</h2>",
        "<p>Every flag the plan assumes (context, slots, GPU layers, flash attention, KV type, split); "
        "`recommend --json` has the other engines' commands.</p>",
        _launch_table(rec),
        "<h2>Accuracy evidence of the top rows</h2>",
        f"<p>The score ranks on the task accuracy at --risk {esc(q.risk)} (a lower quantile of its interval), so an "
        "estimate with a wide interval does not outrank a published figure inside it. Classes: measured (probe "
        "accuracy), published (the checkpoint's own figure on the backbone), bridged (its own figure elsewhere, "
        "mapped by a fit), estimated (a sibling's, a text base's or a regression's).</p>",
        _evidence_table(rec),
        "<h2>Quality, latency and memory of every feasible candidate</h2>",
        "<p>A candidate is on the Pareto front when no other feasible one is at least as good on quality, latency "
        "and memory and better on one. Vertical lines: the quality figure's 95 % interval. Hover a circle for its "
        "configuration.</p>",
        _chart(d, top_key),
    ]
    if d.unplotted:
        body.append("<p>Not on the chart: " + esc(", ".join(f"{n} with {k}" for k, n in d.unplotted.items()))
                    + ".</p>")
    body += ["<h2>How much the ranking hangs on the weights</h2>", _tornado(d),
             "<h2>Excluded, and why</h2>", _excluded(rec, d)]
    if notes:
        body.append("<h2>Notes</h2><ul>" + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>")
    body.append("</body></html>")
    return "\n".join(body)


def write_report(rec, d: ReportData, path: Path, notes: list[str]) -> Path:
    try:
        path.write_text(render(rec, d, notes), encoding="utf-8")
    except OSError as e:
        raise UserError(f"cannot write {str(path)!r}: {e.strerror}", hint="check the path and its permissions") from None
    return path
