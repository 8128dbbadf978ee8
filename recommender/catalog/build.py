"""Build ``catalog.duckdb`` reproducibly from the text sources in ``sources/``.

sources/configs/*.json + sources/configs/sources.csv   -> models (architecture read from real config.json files)
  (every model x every catalog quantization)           -> variants (per-tensor size rules, recommender.model.quant)
sources/published_scores.csv                           -> published_scores (with THIRD-PARTY / SECONDARY flags)
sources/measurements/*.jsonl                           -> measurements (probe rows committed as sources)
sources/quality/model_quality.csv, quant_quality.csv   -> model_quality, quant_quality (docs/quality-method.md)
sources/quality/models.csv `kind`                      -> ModelSpec.checkpoint (else sources.csv `checkpoint`, else the name)

The catalog records ``sources_sha256`` (over the source files and the size-rule version); a test rebuilds the
catalog and compares, so a stale ``catalog.duckdb`` fails CI.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Optional, get_args


from recommender.core.errors import UserError
from recommender.core.records import Checkpoint, Measurement, ModelSpec, Variant, checkpoint_from_name
from recommender.model.arch import spec_from_config, UnsupportedArchitecture
from recommender.model.quant import quants_for, RULES_VERSION
from recommender.hardware.profiles import load_profiles
from recommender.predict.analytical import variant_byte_sums
from recommender.predict.calibrated import CALIBRATION_VERSION, META_KEY
from recommender.predict.fit import fit_catalog_rows
from recommender.catalog.store import CatalogWriter
from recommender import __version__

SCORE_FLAGS = ("THIRD-PARTY", "SECONDARY", "INFERRED")
QUALITY_FILES = ("model_quality.csv", "quant_quality.csv", "models.csv")
CHECKPOINTS = get_args(Checkpoint)
CHECKPOINT_SYNONYMS = {"chat": "instruct", "it": "instruct", "sft": "instruct", "pretrained": "base",
                       "thinking": "reasoning"}


def source_files(sources: Path) -> list[Path]:
    """The files the build reads (and so the ones whose change makes the shipped catalog stale)."""
    files = [*sorted((sources / "configs").glob("*.json")), sources / "configs" / "sources.csv",
             sources / "configs" / SUPPLEMENTS_FILE,
             sources / "published_scores.csv", *sorted((sources / "measurements").glob("*.jsonl")),
             *(sources / "quality" / f for f in QUALITY_FILES)]
    return [p for p in files if p.is_file()]


def sources_digest(sources: Path) -> str:

    h = hashlib.sha256()
    h.update(f"rules={RULES_VERSION}\ncalibration={CALIBRATION_VERSION}\n".encode())
    for p in source_files(sources):
        h.update(str(p.relative_to(sources)).encode() + b"\0")
        h.update(p.read_bytes() + b"\0")
    return h.hexdigest()


def catalog_variants(spec: ModelSpec) -> list[Variant]:
    """Every catalog quantization of one model, sized tensor by tensor (see recommender.model.quant)."""

    out = []
    for q in quants_for(spec):
        sums = variant_byte_sums(spec, q)
        nbytes = sums.total_bytes
        out.append(Variant(model_id=spec.id, quant=q, weights_bytes=nbytes, embedding_bytes=sums.embedding_bytes,
                           expert_bytes=sums.expert_bytes, output_bytes=sums.output_bytes, ple_bytes=sums.ple_bytes,
                           mtp_bytes=sums.mtp_bytes, mtp_expert_bytes=sums.mtp_expert_bytes,
                           bits_per_weight=round(8 * nbytes / spec.params_total, 4) if spec.params_total else 0.0,
                           weights_bytes_provenance="estimated",
                           basis=f"per-tensor size rules {RULES_VERSION} (recommender.quant)"))
    return out


SUPPLEMENTS_FILE = "supplements.csv"


def load_supplements(sources: Path) -> dict[str, list[dict]]:
    """sources/configs/supplements.csv: config keys a stored config.json lacks, each with its value (JSON) and the
    published evidence for it (sources/configs/README.md, "Supplemented keys"). Keyed by model id."""
    path = sources / "configs" / SUPPLEMENTS_FILE
    out: dict[str, list[dict]] = {}
    if path.is_file():
        with path.open(newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                out.setdefault(row["model"], []).append(row)
    return out


def supplemented(config: dict, rows: list[dict], model_id: str) -> tuple[dict, str]:
    """``config`` with the supplement rows' keys added (into text_config for a multimodal wrapper) and a note naming
    them. A supplement only adds a key the file lacks: one the file states is an error (the file's value stands)."""
    text = config.get("text_config")
    wrapped = isinstance(text, dict) and "hidden_size" not in config
    target = dict(text) if wrapped else dict(config)
    added = []
    for row in rows:
        key = row["key"]
        if key in target:
            raise ValueError(f"sources/configs/{SUPPLEMENTS_FILE}: {model_id}'s config already states {key!r}")
        target[key] = json.loads(row["value_json"])
        added.append(f"{key}={row['value_json']} ({row['evidence']})")
    note = "config keys absent from the stored file, supplemented (sources/configs/supplements.csv): " + "; ".join(added)
    return ({**config, "text_config": target} if wrapped else target), note


REFUSED_META_KEY = "refused_models"  # meta: JSON [{"model": id, "reason": ...}] of configs left out of the build


def load_models(sources: Path, refused: list[dict] | None = None) -> list[ModelSpec]:
    """Every config in sources.csv as a ModelSpec. A config whose architecture cannot be sized correctly is left out
    (and appended to ``refused`` as {"model", "reason"} when a list is given)."""

    index = sources / "configs" / "sources.csv"
    kinds = quality_kinds(sources)
    supplements = load_supplements(sources)
    specs = []
    with index.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            cfg_path = sources / row["config_file"]
            config = json.loads(cfg_path.read_text(encoding="utf-8"))
            source = (f"{row['source_repo']}@{row['source_commit'][:12]}:{row['source_path']}"
                      if row.get("source_repo") else str(cfg_path.relative_to(sources)))
            notes = "; ".join(x for x in (row.get("notes"), row.get("license_basis")) if x) or None
            if row["model"] in supplements:
                config, extra = supplemented(config, supplements[row["model"]], row["model"])
                notes = f"{notes}; {extra}" if notes else extra
            try:
                spec = spec_from_config(config, model_id=row["model"], source=source,
                                        source_kind=row.get("source_kind", ""),
                                        license=row.get("model_license") or None, notes=notes)
            except UnsupportedArchitecture as e:
                if refused is not None:
                    refused.append({"model": row["model"], "reason": e.message})
                continue
            checkpoint, inferred = row_checkpoint(row, kinds.get(spec.id), index)
            if inferred:
                notes = "; ".join(x for x in (notes, f"checkpoint kind {checkpoint} {inferred}") if x)
            facts = {k: (row.get(k) or None) for k in ("modality", "release_date", "structure")}
            specs.append(spec.model_copy(update={**facts, "checkpoint": checkpoint, "notes": notes}))
    return specs


def row_checkpoint(row: dict, curated: Optional[str], index: Path) -> tuple[str, Optional[str]]:
    """(checkpoint kind, how it was inferred or None when stated) of one sources.csv row. sources/quality/models.csv
    ``kind`` comes first: it is curated per model and tells a hybrid thinking checkpoint (Qwen3, DeepSeek-V3.1) from
    a plain instruct one, which sources.csv does not; then sources.csv ``checkpoint`` as stated; then its
    "X (inferred)" values; then the Hub naming convention (checkpoint_from_name). "unstated" counts as absent."""
    stated = (row.get("checkpoint") or "").strip().lower()
    inferred = stated.endswith("(inferred)")
    stated = stated.removesuffix("(inferred)").strip()
    stated = "" if stated == "unstated" else CHECKPOINT_SYNONYMS.get(stated, stated)
    if stated and stated not in CHECKPOINTS:
        raise UserError(f"{index}: model {row['model']}: unknown checkpoint {stated!r}",
                        hint=f"use one of {', '.join(CHECKPOINTS)}")
    if curated:
        return curated, None
    if stated:
        return stated, "(inferred in sources/configs/sources.csv)" if inferred else None
    return checkpoint_from_name(row["model"]), "(inferred from the name)"


def quality_kinds(sources: Path) -> dict[str, str]:
    """model id -> checkpoint kind of sources/quality/models.csv (base / instruct / hybrid / reasoning / classifier)."""
    path = sources / "quality" / "models.csv"
    if not path.is_file():
        return {}
    with path.open(newline="", encoding="utf-8") as f:
        return {r["model_id"]: r["kind"] for r in csv.DictReader(f) if r.get("kind")}


def load_quality(sources: Path) -> tuple[list[tuple], list[tuple]]:
    """(model_quality rows, quant_quality rows) of sources/quality/ (built by sources/quality/build_quality.py)."""
    mq, qq = [], []
    path = sources / "quality" / "model_quality.csv"
    if path.is_file():
        with path.open(newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                if not r["value_points"]:  # provenance none: no figure and no basis to estimate one (no size known)
                    continue
                mq.append((r["model_id"], r["group"], float(r["value_points"]), float(r["interval_low"]),
                           float(r["interval_high"]), float(r["sd_points"]), r["provenance"], r["kind"], r["method"],
                           r["sources"], r["flags"]))
    path = sources / "quality" / "quant_quality.csv"
    if path.is_file():
        with path.open(newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                qq.append((r["quant"], float(r["bpw"]) if r["bpw"] else None, float(r["points_8b"]),
                           float(r["points_low"]), float(r["points_high"]), float(r["size_exponent"]),
                           r["provenance"], r["basis"], r["sources"]))
    return mq, qq


def load_scores(sources: Path) -> list[tuple]:
    rows = []
    with (sources / "published_scores.csv").open(newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            flags = ",".join(fl for fl in SCORE_FLAGS if fl in r["source_note"])
            rows.append((r["model"], r["benchmark"], r["shots"] or None, float(r["score"]), r["source_url"],
                         r["source_note"], flags))
    return rows


def load_measurements(sources: Path) -> list[Measurement]:
    out = []
    for p in sorted((sources / "measurements").glob("*.jsonl")):
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    out.append(Measurement.model_validate_json(line))
                except ValueError as e:
                    raise UserError(f"{p}:{i}: bad measurement row: {str(e).splitlines()[0]}",
                                    hint="fix the row; each line must be one recommender Measurement JSON") from None
    return out


def shipped_calibration(models: list[ModelSpec], measurements: list[Measurement]):
    """The calibration fitted on the shipped measured rows (scikit-learn: the `tune` extra)."""

    try:
        import sklearn  # noqa: F401, PLC0415
    except ImportError:
        raise UserError("building the catalog fits the calibration, which needs scikit-learn",
                        hint="pip install -e '.[tune]'") from None
    return fit_catalog_rows(measurements, {m.id: m for m in models}, load_profiles())


def build_catalog(out_path: Path, sources: Path) -> dict:
    """Write a fresh catalog to ``out_path`` (atomically: a temp file renamed into place). Returns counts."""
    out_path = Path(out_path)
    refused: list[dict] = []
    models = load_models(sources, refused)
    items = [(m, catalog_variants(m), None) for m in models]
    scores = load_scores(sources)
    measurements = load_measurements(sources)
    model_quality, quant_quality = load_quality(sources)
    # the builder's pid in the name: a later build removes the file of a build that is no longer running
    fd, tmp = tempfile.mkstemp(prefix=f".catalog-{os.getpid()}-", suffix=".duckdb", dir=out_path.parent)
    os.close(fd)
    os.unlink(tmp)  # DuckDB wants to create the file itself
    try:
        with CatalogWriter(Path(tmp), origin="shipped") as w:
            w.put_models(items)
            w.put_scores(scores)
            w.put_measurements(measurements)
            w.put_quality(model_quality, quant_quality)
            w.put_meta({"sources_sha256": sources_digest(sources), "built_by": f"llm-recommender {__version__}",
                        REFUSED_META_KEY: json.dumps(refused),
                        META_KEY: shipped_calibration(models, measurements).model_dump_json()})
        os.replace(tmp, out_path)
    finally:
        for p in (tmp, tmp + ".wal"):
            if os.path.exists(p):
                os.unlink(p)
    return {"models": len(models), "refused": refused, "variants": sum(len(v) for _, v, _ in items),
            "published_scores": len(scores), "measurements": len(measurements),
            "model_quality": len(model_quality), "quant_quality": len(quant_quality), "path": str(out_path)}


STALE_BUILD_S = 3600  # a temporary file of a build killed an hour ago or more


def check_build_target(out_path: Path) -> None:
    """`catalog build --out` writes only where a catalog may go: an existing folder, and a path that is absent or
    already a DuckDB file (the build replaces it; anything else there is the user's and is kept)."""
    out_path = Path(out_path)
    if not out_path.parent.is_dir():
        raise UserError(f"folder {out_path.parent} does not exist", hint="create it first, or give another --out")
    if out_path.exists() or out_path.is_symlink():
        if not out_path.is_file():
            raise UserError(f"{out_path} exists and is not a regular file", hint="give a .duckdb file path for --out")
        with open(out_path, "rb") as fh:
            head = fh.read(12)
        if head[8:12] != b"DUCK":
            raise UserError(f"{out_path} exists and is not a DuckDB catalog: not replacing it",
                            hint="move it away, or give another --out")


def _builder_running(p: Path) -> bool:
    """Whether the build that made temporary file ``p`` (``.catalog-PID-*.duckdb``) still runs on this machine; a
    name without a pid (an older build's) counts as running, so only its age removes it."""
    pid = p.name[len(".catalog-"):].split("-", 1)[0]
    if not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: it exists
        return True
    return True


def remove_stale_build_files(folder: Path, now: Optional[float] = None) -> list[Path]:
    """Temporary files (``.catalog-*.duckdb`` and their ``.wal``) that a killed build left in ``folder``."""
    import time  # noqa: PLC0415

    now = time.time() if now is None else now
    gone = []
    for p in Path(folder).glob(".catalog-*.duckdb*"):
        try:
            if p.is_file() and (not _builder_running(p) or now - p.stat().st_mtime > STALE_BUILD_S):
                p.unlink()
                gone.append(p)
        except OSError:
            continue
    return gone
