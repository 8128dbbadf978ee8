"""`recommend` / `recommender recommend`: ranked, explained candidates under hard constraints."""

from __future__ import annotations

import json
import os
from typing import Optional

from recommender.core.collector import collector_paused, imports_begin, imports_end

_collecting = imports_begin()  # as in recommender/cli/app.py (recommender.core.collector)

import typer

from recommender.core.errors import UserError
from recommender.core.engines import ENGINE_SPECS, engine_spec
from recommender.core.paths import LAST_ANSWER_FILE, base_catalog_path, private_cache_dir, user_catalog_path
from recommender.core.units import fmt_bytes, fmt_ms, fmt_tokens
from recommender.catalog.store import Catalog, UserCatalog
from recommender.rank.recommend import recommend
from recommender.cli.common import (
    budget_title,
    engine_label,
    check_one_format,
    check_report_path,
    columns_table,
    deferred,
    emit_csv,
    emit_json,
    info,
    LEGEND,
    mark,
    run_app,
    state,
    stdout_console,
)
from recommender.cli.query_opts import (build_query, INCLUDE_BASE_HELP, no_fit_hint, NORM_HELP, NormOpt,
                                        query_options, QueryOptions)

imports_end(_collecting)


@query_options
def recommend_command(
    opts: QueryOptions,
    normalization: NormOpt = typer.Option(NormOpt.value, "--normalization", help=NORM_HELP),
    include_base: bool = typer.Option(False, "--include-base", help=INCLUDE_BASE_HELP),
    explain: bool = typer.Option(False, "--explain", help="Say why the strongest excluded candidates were excluded."),
    as_json: bool = typer.Option(False, "--json", help="JSON on stdout."),
    verify: bool = typer.Option(False, "--verify", help="Run the top 3 whose weights are on this machine (a child "
                                                        "process each) and show predicted vs measured; rows are "
                                                        "stored as measured."),
    local_weights: Optional[list[str]] = typer.Option(None, "--local-weights", help="A .gguf file or HF folder "
                                                                                    "on this machine for --verify "
                                                                                    "(repeatable)."),
    verify_timeout: float = typer.Option(600.0, "--verify-timeout", min=5, help="Seconds per verification probe."),
    report: Optional[str] = typer.Option(None, "--report", help="Write one self-contained HTML page: the ranking, "
                                                                "quality vs latency vs memory with the Pareto front, "
                                                                "the weight sensitivity, the exclusions."),
    as_csv: bool = typer.Option(False, "--csv", help="CSV on stdout: one line per ranked candidate, each figure's "
                                                     "value, provenance and interval."),
    installed: bool = typer.Option(False, "--installed", help="Rank only the models already on this machine (the "
                                                              "folders `recommender local` lists)."),
    local_dir: Optional[list[str]] = typer.Option(None, "--local-dir", help="With --installed: another folder to "
                                                                            "look in (repeatable)."),
) -> None:
    """Rank model x quantization x engine x batch x context for a GPU, under VRAM and latency limits."""

    check_one_format(as_json, as_csv)
    report_path = check_report_path(report) if report else None
    q, notes = build_query(opts, normalization.value, include_base)
    base = base_catalog_path(opts.catalog_path or state.catalog)  # --catalog, $RECOMMENDER_CATALOG or the shipped one
    catalog = Catalog.open(base)
    for n in notes:
        info(n)
    local_files = {}
    if installed:
        scan = deferred("recommender.probes.local_scan")
        found = scan.installed_variants(scan.scan_models(catalog, tuple(local_dir or ())))
        if not found:
            raise UserError("no catalog model found on this machine (Hugging Face cache, Ollama, LM Studio"
                            + (", " + ", ".join(local_dir) if local_dir else "") + ")",
                            hint="`recommender local` lists what it found; give --local-dir DIR for another folder")
        formats = {engine_spec(e).file_format for *_rest, e in found}  # every engine that loads those files
        engines = sorted(s.name for s in ENGINE_SPECS if s.file_format in formats)
        q = q.model_copy(update={"models": sorted({m for m, *_rest in found}),
                                 "variants": sorted({(m, qq) for m, qq, *_rest in found}),
                                 "engines": [e for e in engines if not q.engines or e in q.engines]})
        local_files = {(m, qq, engine_spec(e).file_format): p for m, qq, p, e in found}  # their recipes run these
    rec = recommend(catalog, q, local_files)
    # the answer is computed: from here on it is only stored and printed
    dumped = rec.model_dump(mode="json")  # the answer as JSON data, once: stored, and printed with --json
    if rec.candidates:  # kept for `recommender run RANK` (recommender.probes.launcher)
        store_last_answer(dumped)
    hint = None if rec.candidates else no_fit_hint(rec.excluded)
    if report_path is not None:
        deferred("recommender.cli.report_html").write_report(
            rec, deferred("recommender.search.report").report_data(catalog, q), report_path, notes + rec.notes)
        info(f"wrote {report_path}")
    checked = _verify(rec, catalog, local_weights or [], verify_timeout) if verify and rec.candidates else None
    if as_csv:
        emit_csv(CSV_KEYS + [f"{n}{suffix}" for n in CSV_FIGURES for suffix in CSV_FIGURE_PARTS] + ["score"]
                 + CSV_LAUNCH,
                 [_csv_row(c) for c in rec.candidates])
    elif as_json:
        if checked is None:
            emit_json(dumped)
        else:
            emit_json({**rec.model_dump(mode="json"), "verification": [v.to_json() for v in checked]})
    else:
        print_recommendation(rec, explain)
        if checked is not None:
            print_verification(checked)
    for n in rec.notes:
        info(f"note: {n}")
    sib = rec.newer_sibling
    if sib is not None:  # recommender.core.freshness
        info(f"note: {sib.model} (released {sib.released}) has a newer sibling in the catalog: "
             f"{sib.sibling} (released {sib.sibling_released}), not the top pick under these limits and evidence "
             f"(`recommender catalog outdated` lists every such pair)")
    if hint:
        info(hint)
        raise typer.Exit(1)


def store_last_answer(dumped: dict) -> None:
    """Keep the answer (``dumped``: the Recommendation's JSON data) in the cache folder for `recommender run RANK`
    (recommender.probes.launcher); skipped where the cache folder is not this user's alone."""
    d = private_cache_dir(".")
    if d is None:
        return
    tmp = d / f"{LAST_ANSWER_FILE}.{os.getpid()}.tmp"
    try:
        tmp.write_text(json.dumps(dumped), encoding="utf-8")
        os.replace(tmp, d / LAST_ANSWER_FILE)
    except OSError:
        tmp.unlink(missing_ok=True)


def print_recommendation(rec, explain: bool) -> None:
    """The table of the ranked rows (stdout), then on stderr the counts and, with --explain, the accuracy evidence,
    the launch recipes and the strongest excluded candidates (shown without --explain too when nothing fits)."""
    q = rec.query
    evidence = evidence_lines(rec) if explain and rec.evidence else []
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
                          (("#", "right"), ("model", "left"), ("released", "left"), ("quant", "left"),
                           ("engine", "left"),
                           ("batch", "right"), ("ctx", "right"), ("VRAM", "right"),
                           ("TTFT load" if serve else "TTFT", "right"),
                           *((("goodput/s", "right"), ("out tok/s", "right")) if serve else (("tok/s", "right"),)),
                           ("acc" if value else "zh acc", "right"), ("q-cost" if value else "ppl×", "right"),
                           ("score", "right")),
                          {"model", "VRAM", "TTFT"})
    for c in rec.candidates:
        p, engine = c.provenance, engine_label(c, q)
        ttft = mark(fmt_ms(c.ttft_ms), p["ttft_ms"])
        if serve:  # the figures under load of `batch` clients (recommender.predict.serving)
            out = c.figures["output_throughput_tokens_per_s"]
            ttft = mark(fmt_ms(c.figures["serve_ttft_ms"].value), p["serve_ttft_ms"])
            speed = (mark("?" if c.goodput_per_s is None else f"{c.goodput_per_s:.2f}", p["goodput_requests_per_s"]),
                     mark("?" if out.value is None else f"{out.value:.0f}", out.provenance))
        else:
            speed = (mark("?" if c.throughput_tokens_per_s is None else f"{c.throughput_tokens_per_s:.0f}",
                          p["throughput_tokens_per_s"]),)
        if value:
            acc = mark("?" if c.task_accuracy is None else f"{c.task_accuracy:.1f}", p["task_accuracy"])
            qc = c.figures["quant_cost_points"]
            qcost = mark("?" if qc.value is None else f"{qc.value:.2f}", qc.provenance)
        else:
            acc = mark("?" if c.zh_accuracy is None else f"{c.zh_accuracy:.1f}", p["zh_accuracy"])
            qcost = mark("?" if c.ppl_ratio is None else f"{c.ppl_ratio:.3f}", p["ppl_ratio"])
        table.add_row(
            str(c.rank), c.model, rec.released.get(c.model) or "?", c.quant, engine, str(c.batch),
            fmt_tokens(c.context_tokens),
            mark(fmt_bytes(c.total_vram_bytes), p["total_vram_bytes"]),
            ttft, *speed, acc, qcost, f"{c.score:.3f}")
    stdout_console().print(table)
    n = rec.counts
    shown = f"showing the best {'configuration' if q.per_model == 1 else 'configurations'} per model."
    total = n["candidates"] + n.get("offload", 0)
    off = f" (+ {n['offload']} with partial offload)" if n.get("offload") else ""
    if n["predicted"] == total:
        info(f"{n['feasible']} of {n['candidates']} candidates{off} ({n['models']} models) fit the limits; {shown}")
    else:
        info(f"{n['candidates']} candidates{off} ({n['models']} models); the {n['predicted']} that could be shown "
             f"were predicted, {n['feasible']} of them fit the limits; {shown}")
    for line in evidence:
        info(line)
    if explain:
        info("how to run each (every flag the plan assumes):")
        for c in rec.candidates:
            print_launch(c)
    if explain or not rec.candidates:
        for c in rec.excluded:
            info(f"excluded {c.model} {c.quant} {c.engine} batch {c.batch} ctx {fmt_tokens(c.context_tokens)}: "
                 + "; ".join(c.excluded))


def evidence_lines(rec) -> list[str]:
    """--explain: the accuracy evidence of the top rows (rec.evidence), one line per row and group."""
    q = rec.query
    out = [f"accuracy evidence of the top {len(rec.evidence)} (ranked on --risk {q.risk}; measured / published / "
           f"bridged / estimated):"]
    for e in rec.evidence:
        iv = f" [{e['interval'][0]:.1f}, {e['interval'][1]:.1f}]" if e["interval"] else ""
        a = "?" if e["task_accuracy"] is None else f"{e['task_accuracy']:.1f}"
        r = "?" if e["ranked_accuracy"] is None else f"{e['ranked_accuracy']:.1f}"
        out.append(f"  #{e['rank']} {e['model']} {e['quant']}: A {a}{iv}, ranked on {r}, {e['evidence']}; mode "
                   f"{e['mode']}" + (f" ({e['thinking_tokens']} reasoning tokens)" if e["thinking_tokens"] else ""))
        for g in e["groups"]:
            v = "?" if g["value"] is None else f"{g['value']:.1f}"
            giv = f" [{g['interval'][0]:.1f}, {g['interval'][1]:.1f}]" if g["interval"] else ""
            out.append(f"      {g['group']} {v}{giv} {g['class']} · {g['date']} · {g['source'][:240]}")
    return out


CSV_KEYS = ["rank", "model", "quant", "engine", "hardware", "batch", "context_tokens", "prompt_tokens", "output_tokens",
            "kv_dtype"]
CSV_FIGURES = ["total_vram_bytes", "ttft_ms", "tpot_ms", "e2e_ms", "decode_tokens_per_s", "throughput_tokens_per_s",
               "zh_accuracy", "en_accuracy", "ppl_ratio"]
CSV_FIGURE_PARTS = ("", "_provenance", "_low", "_high")


def _csv_row(c) -> list:
    row = [getattr(c, k) for k in CSV_KEYS]
    for n in CSV_FIGURES:
        f = c.figures.get(n)
        row += [None, "unknown", None, None] if f is None else \
            [f.value, f.provenance, *(f.interval if f.interval else (None, None))]
    return row + [c.score] + launch_cells(c.launch)


CSV_LAUNCH = ["launch", "launch_weights"]  # the primary command, the first known weights (or why none)


def launch_cells(launch) -> list:
    if launch is None:
        return [None, None]
    w = launch.weights[0] if launch.weights else None
    return [launch.primary.command if launch.primary else None,
            (f"{w.repo}/{w.file}" if w.file else w.repo) if w else launch.weights_note]


def print_launch(c) -> None:
    """The recipe of a shown row (--explain): its commands and where the weights come from."""
    ln = c.launch
    if ln is None:
        return
    info(f"  run #{c.rank} {c.model} {c.quant} {c.engine}:")
    for w in ln.weights:
        size = f"; {w.size_check}" if w.size_check else ""
        info(f"    weights ({w.kind}): {w.repo}{'/' + w.file if w.file else ''} [{w.source}{size}]")
    if not ln.weights:
        info(f"    weights: {ln.weights_note}")
    for cmd in ln.commands:
        for s in cmd.setup:
            info(f"    {cmd.tool}: {' '.join(s)}")
        for name, text in cmd.files.items():
            info(f"    {cmd.tool} {name}: " + text.strip().replace(chr(10), " | "))
        info(f"    {cmd.tool}: {cmd.command}")
        for n in cmd.notes:
            info(f"      ({n})")


def _verify(rec, catalog, weights: list[str], timeout_s: float):
    """Probe the top candidates with local weights; store their rows in the overlay."""
    def progress(v) -> None:
        info(f"verifying #{v.rank} {v.model} {v.quant} {v.engine} batch {v.batch} ctx {fmt_tokens(v.context_tokens)}"
             f" with {v.weights}{' (synthetic weights)' if v.synthetic else ''} ...")

    checked = deferred("recommender.probes.verify").verify_top(rec, catalog, weights, timeout_s=timeout_s,
                                                                progress=progress)
    rows = [v.row for v in checked if v.row is not None]
    catalog.close()  # the overlay is attached read-only to this connection: release it before writing
    if rows:
        with UserCatalog(user_catalog_path()) as w:
            w.put_measurements(rows)
        info(f"stored {len(rows)} measured row(s) in your overlay: `recommend` uses them for these configurations, "
             f"and `recommender calibrate` fits them")
    return checked


def print_verification(checked) -> None:
    def fmt(name: str, v) -> str:
        if v is None:
            return "?"
        return fmt_bytes(v) if name == "peak_memory_bytes" else fmt_ms(v)

    print("verified on this machine (predicted → measured):")
    for v in checked:
        head = f"  #{v.rank} {v.model} {v.quant} {v.engine} batch {v.batch} ctx {fmt_tokens(v.context_tokens)}"
        if v.skipped:
            print(f"{head}: not verified: {v.skipped}")
            continue
        if v.row.status != "ok":
            print(f"{head}: probe failed: {v.row.failure_reason}")
            continue
        parts = []
        for c in v.checks:
            err = "" if c.error is None else f" ({100 * c.error:+.0f} %)"
            inside = "" if c.in_interval is None else (" in interval" if c.in_interval else " outside interval")
            label = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_ms": "E2E", "peak_memory_bytes": "peak memory"}[c.name]
            parts.append(f"{label} {mark(fmt(c.name, c.predicted), c.provenance)} → "
                         f"{fmt(c.name, c.measured)}ᵐ{err}{inside}")
        held = ", ".join(f"{k} {'held' if ok else 'BROKEN' if ok is False else 'not measured'}"
                         for k, ok in v.limits.items())
        print(f"{head}{' (synthetic weights)' if v.synthetic else ''}:")
        print(f"      {' · '.join(parts)}")
        print(f"      limits: {held} · measurement {v.row.id}")


def main(argv: Optional[list[str]] = None) -> None:
    """The `recommend` entry point: this command alone (nothing else of the command tree is imported)."""
    app = typer.Typer(pretty_exceptions_enable=False, add_completion=True)
    app.command()(recommend_command)
    with collector_paused():  # a one-shot command (recommender.cli.app ONE_SHOT)
        run_app(app, argv)
