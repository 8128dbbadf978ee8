"""`recommender catalog ...`: list, show, add, refresh, build, measurements."""

from __future__ import annotations

from dataclasses import asdict

from pathlib import Path
from typing import Optional

import typer


from recommender.core.errors import UserError
from recommender.core.freshness import model_family, newer_siblings, parse_since, released_since
from recommender.core.records import CHAT_CHECKPOINTS
from recommender.core.redact import printable, redact
from recommender.core.paths import base_catalog_path, SOURCES_DIR, user_catalog_path
from recommender.core.units import fmt_bytes, fmt_ms
from recommender.hardware.profiles import load_profiles, match_profile
from recommender.catalog.build import build_catalog, check_build_target, remove_stale_build_files
from recommender.catalog.hub import HUB_SOURCE_KIND
from recommender.catalog.ingest import discover, from_path
from recommender.catalog.store import UserCatalog
from recommender.rank.quality import QualityIndex
from recommender.probes.perf import bandwidth_share
from recommender.cli.common import (bold_lead, check_one_format, emit_csv_dicts, emit_json, info, LEGEND, mark,
                                     open_catalog, state, stdout_console)

app = typer.Typer(help="The model catalog: shipped models plus the ones you add.", no_args_is_help=True)


def _human_params(n: int) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.0f}M"


@app.command("list")
def list_models(as_json: bool = typer.Option(False, "--json", help="JSON on stdout."),
                as_csv: bool = typer.Option(False, "--csv", help="CSV on stdout."),
                since: Optional[str] = typer.Option(None, "--since", help="Only models released on or after this "
                                                                          "date (YYYY, YYYY-MM or YYYY-MM-DD); "
                                                                          "models without a date are left out.")
                ) -> None:
    """Every model in the catalog, with where its architecture came from and when it was released."""
    check_one_format(as_json, as_csv)
    from rich.table import Table  # noqa: PLC0415

    since_key = _since(since)
    cat = open_catalog()
    models = cat.models()
    variants = cat.variants()
    rows = []
    for mid, s in models.items():
        if since_key is not None and not released_since(s.release_date, since_key):
            continue
        rows.append({"id": mid, "family": model_family(mid), "architecture": s.architecture,
                     "params_total": s.params_total,
                     "params_active": s.params_active, "max_context_tokens": s.max_position_embeddings,
                     "quants": sorted(q for (m, q) in variants if m == mid), "source": s.source,
                     "source_kind": s.source_kind, "license": s.license, "origin": cat.origin(mid),
                     "checkpoint": s.checkpoint, "modality": s.modality, "release_date": s.release_date,
                     "structure": s.structure})
    if as_json:
        emit_json(rows)
        return
    if as_csv:
        emit_csv_dicts(rows)
        return
    chat = sum(1 for r in rows if r["checkpoint"] in CHAT_CHECKPOINTS)
    families = len({r["family"] for r in rows})
    t = Table(title=f"{len(rows)} models{f' released since {since}' if since else ''} ({chat} instruct / chat / "
                    f"hybrid / reasoning checkpoints; {families} families)")
    for col in ("model", "kind", "released", "architecture", "params", "active", "max ctx", "quants", "origin",
                "source"):
        t.add_column(col, overflow="fold")
    for r in rows:
        t.add_row(*(printable(x) for x in (
            r["id"], r["checkpoint"] or "?", r["release_date"] or "?", r["architecture"],
            _human_params(r["params_total"]),
            _human_params(r["params_active"]) if r["params_active"] != r["params_total"] else "",
            str(r["max_context_tokens"]), str(len(r["quants"])), r["origin"], redact(r["source"] or ""))))
    stdout_console().print(t)


def _since(since: Optional[str]):
    if since is None:
        return None
    try:
        return parse_since(since)
    except ValueError:
        raise UserError(f"--since {since!r} is not a date", hint="write YYYY, YYYY-MM or YYYY-MM-DD, e.g. "
                                                                  "--since 2026-06") from None


@app.command("outdated")
def outdated(model: Optional[str] = typer.Argument(None, help="Only this model (HF id or a unique part of it)."),
             as_json: bool = typer.Option(False, "--json", help="JSON on stdout.")) -> None:
    """Models that have a newer sibling in the catalog: same publisher and line, released later, similar size
    (recommender.core.freshness)."""
    cat = open_catalog()
    models = cat.models()
    sibs = newer_siblings(models.values())
    if model is not None:
        mid = cat.resolve_model(model).id
        sibs = {mid: sibs[mid]} if mid in sibs else {}
    rows = [{"model": mid, "release_date": models[mid].release_date, "newer": s.id,
             "newer_release_date": s.release_date, "params_total": models[mid].params_total,
             "newer_params_total": s.params_total} for mid, s in sorted(sibs.items())]
    if as_json:
        emit_json(rows)
        return
    if not rows:
        info("no model has a newer sibling in the catalog" if model is None else
             f"{model}: no newer sibling in the catalog (same line, similar size, later release date)")
        return
    from rich.table import Table  # noqa: PLC0415

    t = Table(title=f"{len(rows)} models with a newer sibling in the catalog")
    for col in ("model", "released", "params", "newer sibling", "released", "params"):
        t.add_column(col, overflow="fold")
    for r in rows:
        t.add_row(r["model"], r["release_date"], _human_params(r["params_total"]), r["newer"],
                  r["newer_release_date"], _human_params(r["newer_params_total"]))
    stdout_console().print(t)


@app.command("show")
def show(model: str = typer.Argument(..., help="HF id or a unique part of its name."),
         as_json: bool = typer.Option(False, "--json", help="JSON on stdout.")) -> None:
    """One model: architecture, variants with their sizes, quality figures with sources."""
    from rich.table import Table  # noqa: PLC0415


    cat = open_catalog()
    spec = cat.resolve_model(model)
    qi = QualityIndex(cat)
    variants = cat.variants_of(spec.id)
    data = {"model": spec.model_dump(mode="json"), "origin": cat.origin(spec.id),
            # per variant: measured accuracy / perplexity of that file where `probe accuracy` stored some, else the
            # model's published figures (the same precedence `recommend` uses)
            "variants": [v.model_dump(mode="json") | {"ppl_ratio": asdict(qi.ppl_ratio(v.quant, spec.id)),
                                                      "quality": {"zh": asdict(qi.zh(spec.id, v.quant)),
                                                                  "en": asdict(qi.en(spec.id, v.quant))}}
                         for v in variants],
            "quality": {"zh": asdict(qi.zh(spec.id)), "en": asdict(qi.en(spec.id))},
            "published_scores": [r.__dict__ for r in cat.scores_for(spec.id)]}
    if as_json:
        emit_json(data)
        return
    con = stdout_console()
    con.print(bold_lead(spec.id, f" — {spec.architecture}, {_human_params(spec.params_total)} parameters"
                        + (f" ({_human_params(spec.params_active)} active)" if spec.is_moe else "")
                        + f", {spec.num_layers} layers, {spec.num_attention_heads} heads / {spec.num_kv_heads} KV "
                          f"heads, max context {spec.max_position_embeddings}"), highlight=False)
    con.print(printable(f"source: {redact(spec.source or '')} ({spec.source_kind})"
                        + (f" · license {spec.license}" if spec.license else "")), highlight=False)
    t = Table(title="variants", caption=LEGEND)
    for col in ("quant", "weights", "bits/weight", "provenance", "ppl ratio", "zh acc", "en acc"):
        t.add_column(col)
    for v in data["variants"]:
        pr, zh, en = v["ppl_ratio"], v["quality"]["zh"], v["quality"]["en"]
        t.add_row(printable(v["quant"]), fmt_bytes(v["weights_bytes"]), f"{v['bits_per_weight']:.2f}",
                  printable(v["weights_bytes_provenance"]),
                  *(mark("?" if m["value"] is None else f"{m['value']:{fmt}}", m["provenance"])
                    for m, fmt in ((pr, ".3f"), (zh, ".1f"), (en, ".1f"))))
    con.print(t)
    for v in data["variants"]:  # where a variant's own measurement replaced the model's published figure
        for k in ("zh", "en"):
            if v["quality"][k]["provenance"] == "measured":
                con.print(printable(f"{v['quant']} {k} accuracy (measured): {v['quality'][k]['basis']}"),
                          highlight=False)
    for k in ("zh", "en"):
        m = data["quality"][k]
        con.print(printable(f"{k} accuracy: {m['value'] if m['value'] is not None else 'unknown'} — {m['basis']}"),
                  highlight=False)


@app.command("add")
def add(path: str = typer.Argument(..., help="A config.json, an HF model folder, a .gguf file, or hf:ORG/NAME "
                                          "(config.json and card metadata from the Hub; endpoint HF_ENDPOINT)."),
        model_id: Optional[str] = typer.Option(None, "--id", help="Catalog id to use (default: from the files)."),
        as_json: bool = typer.Option(False, "--json")) -> None:
    """Add (or update) one model in your own catalog overlay; the shipped catalog is never modified."""

    spec, variants, paths = from_path(path, model_id)  # validates before anything is written
    with UserCatalog(user_catalog_path()) as w:
        w.put_model(spec, variants, paths)
    out = {"added": spec.id, "variants": len(variants), "user_catalog": str(user_catalog_path())}
    if as_json:
        emit_json(out)
    else:
        info(f"added {spec.id} ({spec.architecture}, {_human_params(spec.params_total)} parameters, "
             f"{len(variants)} variants) to {user_catalog_path()}")


def _user_models():
    """The models of the user's overlay (origin 'user') in the catalog the CLI opens."""
    cat = open_catalog()
    return [s for mid, s in cat.models().items() if cat.origin(mid) == "user"]


@app.command("refresh")
def refresh(directory: Optional[Path] = typer.Argument(None, help="Folder holding model folders and/or .gguf "
                                                                   "files."),
            hub: bool = typer.Option(False, "--hub", help="Re-read every model of your catalog that came from the "
                                                          "Hub (hf:ORG/NAME) from the Hub."),
            skip_bad: bool = typer.Option(False, "--skip-bad", help="Skip unreadable models instead of stopping."),
            as_json: bool = typer.Option(False, "--json")) -> None:
    """Add or update every model found under a folder (or, with --hub, re-read the Hub's), in one transaction."""

    if (directory is None) == (not hub):
        raise UserError("give a folder or --hub (not both)", hint="recommender catalog refresh ~/models, or "
                                                                  "recommender catalog refresh --hub")
    if hub:
        # source is "<endpoint>/<ORG>/<NAME>@<commit>:config.json" (recommender.catalog.ingest.from_hub)
        # (rsplit: the endpoint may hold a user@, stored as ***@)
        refs = sorted(("hf:" + "/".join(s.source.rsplit("@", 1)[0].split("/")[-2:]), s.id) for s in _user_models()
                      if s.source_kind == HUB_SOURCE_KIND)
        if not refs:
            raise UserError("your catalog has no model added from the Hub", hint="add one: recommender catalog add "
                                                                                  "hf:ORG/NAME")
    else:
        refs = [(p, None) for p in discover(directory)]
    items, skipped, where = [], [], {}
    for p, keep_id in refs:
        try:
            item = from_path(p, keep_id)
        except Exception as e:  # noqa: BLE001 - one unreadable model must not stop --skip-bad (OSError, ...)
            msg = e.message if isinstance(e, UserError) else f"cannot read it ({type(e).__name__}: {e})"[:300]
            if not skip_bad:
                raise UserError(f"{msg} (nothing was added)", hint=f"fix or remove {p}, or pass --skip-bad") from None
            skipped.append({"path": str(p), "error": msg})
            info(f"skipped {p}: {msg}")
            continue
        mid = item[0].id
        if mid in where:  # two folders, one id: the later one would silently replace the earlier in one write
            skipped.append({"path": str(p), "error": f"same id {mid} as {where[mid]}"})
            info(f"skipped {p}: it has the same id {mid} as {where[mid]} (add it with `catalog add PATH --id ...`)")
            continue
        where[mid] = p
        items.append(item)
    if items:
        with UserCatalog(user_catalog_path()) as w:
            w.put_models(items)
    out = {"added_or_updated": [s.id for s, _, _ in items], "skipped": skipped}
    if as_json:
        emit_json(out)
    else:
        info(f"{len(items)} models added or updated, {len(skipped)} skipped")


@app.command("remove")
def remove(model: str = typer.Argument(..., help="Id of a model in your overlay (exact id, as `catalog list` shows)."),
           as_json: bool = typer.Option(False, "--json")) -> None:
    """Remove one model (its variants and catalog row) from your overlay; shipped models cannot be removed, and
    measured rows of it are kept."""
    n = 0
    if user_catalog_path().is_file():
        with UserCatalog(user_catalog_path()) as w:
            n = w.remove_model(model)
    if not n:
        raise UserError(f"no model {model!r} in your overlay {user_catalog_path()}",
                        hint="give the exact id as `recommender catalog list` shows it (origin: user); "
                             "shipped models cannot be removed")
    out = {"removed": model, "user_catalog": str(user_catalog_path())}
    if as_json:
        emit_json(out)
    else:
        info(f"removed {model} from {user_catalog_path()}")


@app.command("build")
def build(out: Optional[Path] = typer.Option(None, "--out", help="Where to write (default: the shipped file)."),
          sources: Optional[Path] = typer.Option(None, "--sources", help="Sources folder (default: sources/).")) -> None:
    """Rebuild the catalog (default: the --catalog file, else the shipped catalog.duckdb) from sources/."""

    target = out or base_catalog_path(state.catalog)
    check_build_target(target)
    remove_stale_build_files(target.parent)
    counts = build_catalog(target, sources or SOURCES_DIR)
    info(f"built {counts['path']}: {counts['models']} models, {counts['variants']} variants, "
         f"{counts['published_scores']} published scores, {counts['measurements']} measurements")
    if counts["refused"]:
        info(f"{len(counts['refused'])} configs left out (their architecture is not modelled; "
             "recorded in the catalog's refused_models):")
        for r in counts["refused"]:
            info(f"  {r['model']}: {r['reason']}")


@app.command("measurements")
def measurements(hardware: Optional[str] = typer.Option(None, "--hardware", help="GPU name (substring)."),
                 model: Optional[str] = typer.Option(None, "--model", help="Model (HF id or unique part)."),
                 as_json: bool = typer.Option(False, "--json"),
                 as_csv: bool = typer.Option(False, "--csv", help="CSV on stdout (every field but raw)."),
                 remove: Optional[list[str]] = typer.Option(None, "--remove", help="Delete this measured row (an id "
                                                            "from the listing) from your overlay; repeatable."),
                 remove_model: bool = typer.Option(False, "--remove-all", help="With --model: delete every measured "
                                                   "row of that model from your overlay.")) -> None:
    """Measured probe rows in the catalog (rows with impossible figures are listed as INVALID; the predictor skips
    them). --remove / --remove-all delete rows from your overlay."""
    check_one_format(as_json, as_csv)
    from rich.table import Table  # noqa: PLC0415

    if remove or remove_model:
        _remove_measurements(remove or [], model if remove_model else None, remove_model, as_json)
        return
    cat = open_catalog()
    mid = cat.resolve_model(model).id if model else None
    rows = cat.measurements(model_id=mid, hardware=hardware, include_invalid=True)
    profiles, models = load_profiles(), cat.models()
    shares = [bandwidth_share(m, models[m.model_id], match_profile(m.hardware_name, profiles))
              if m.model_id in models else None for m in rows]
    if as_json or as_csv:
        items = [m.model_dump(mode="json") | {"bandwidth_utilization": b} for m, b in zip(rows, shares)]
        emit_json(items) if as_json else emit_csv_dicts(items, drop=("raw",))
        return
    t = Table(title=f"{len(rows)} measurements (all measured; BW % = decode bytes/token x tok/s / bandwidth)")
    for col in ("hardware", "engine", "model", "quant", "batch", "ctx", "prompt", "TTFT", "TPOT", "tok/s", "BW %",
                "peak VRAM", "synthetic", "status"):
        t.add_column(col)
    for m, b in zip(rows, shares):
        problems = m.problems
        status = (f"INVALID {m.id}: {'; '.join(problems)}" if problems else
                  m.status + (f" ({m.failure_reason})" if m.failure_reason else ""))
        t.add_row(*(printable(x) for x in (
            m.hardware_name, f"{m.engine} {m.engine_version}", m.model_id, m.quant, str(m.batch),
            str(m.context_tokens), str(m.prompt_tokens), fmt_ms(m.ttft_ms), fmt_ms(m.tpot_ms),
            "?" if m.decode_tokens_per_s is None else f"{m.decode_tokens_per_s:.1f}",
            "?" if b is None else f"{100 * b:.0f}", fmt_bytes(m.peak_vram_bytes), "yes" if m.synthetic else "no",
            status)))
    stdout_console().print(t)


def _remove_measurements(ids: list[str], model: Optional[str], every: bool, as_json: bool) -> None:
    """Delete measured rows from the overlay: by id, or every row of one model (--remove-all --model M)."""
    if every and not model:
        raise UserError("--remove-all needs --model", hint="e.g. recommender catalog measurements --model M "
                                                           "--remove-all")
    path = user_catalog_path()
    if not path.is_file():
        raise UserError(f"there is no overlay at {path}, so no measured row to remove",
                        hint="shipped measurements cannot be removed")
    with UserCatalog(path) as w:
        n = w.remove_measurements(ids=ids, model_id=model if every else None)
    if not n:
        raise UserError(f"no such measured row in your overlay {path}: "
                        f"{printable(', '.join(ids) if ids else str(model))[:200]}",
                        hint="give an id as `recommender catalog measurements` shows it (only rows you measured "
                             "can be removed), or the exact model id with --remove-all")
    if as_json:
        emit_json({"removed": n, "user_catalog": str(path)})
    else:
        info(f"removed {n} measured row{'s' if n != 1 else ''} from {path}")
