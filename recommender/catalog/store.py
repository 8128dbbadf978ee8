"""Reading the layered catalog (shipped, read-only + the user's overlay) and writing the overlay.

Read path: the base catalog is opened read-only; the user overlay, when its file exists, is attached read-only
under the alias ``usr``. A row in the overlay replaces the base row with the same key (model id; model id + quant).
Write path: :class:`UserCatalog` opens the overlay writable, applies pending migrations, and runs each change in one
transaction, so a failure leaves the file as it was.
"""

from __future__ import annotations

import json
import os
import stat
import time
import warnings
import weakref
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, Optional


from recommender.core.errors import UserError
from recommender.core.fuzzy import resolve
from recommender.core.paths import private_cache_dir, user_catalog_path
from recommender.core.records import (ScoreRow, AccuracyRow, check_measurement, Measurement, ModelSpec,
                                      PerplexityRow, Variant)
from recommender.predict.analytical import VariantBytes, seed_variant_source, variant_bytes_key
from recommender.catalog.migrations import LATEST_VERSION, migrate
from recommender.catalog.read_cache import ReadCache


# Catalog writes made by this process (CatalogWriter commits and closes): a Catalog's read cache taken before one is
# fingerprinted again, so a process reads its own writes.
_WRITES = 0


def _wrote() -> None:
    global _WRITES  # noqa: PLW0603
    _WRITES += 1


def _duckdb():
    import duckdb  # noqa: PLC0415  (deferred: keeps `--help` fast)

    return duckdb


# -- opening DuckDB files: one place for the lock wait, special files, foreign code and damaged files ----------------
# Another process holding the file (a writer, or a reader while this one writes) is waited for, with a bounded retry:
# DuckDB takes an exclusive OS lock for a writable connection and a shared one for a read-only one, and fails at once.
LOCK_WAIT_S = 15.0  # default total wait for another process's lock (RECOMMENDER_LOCK_WAIT_S overrides)
LOCK_RETRY_FIRST_S = 0.02  # first pause between tries; doubles up to LOCK_RETRY_MAX_S
LOCK_RETRY_MAX_S = 0.25
_LOCK_MARKERS = ("could not set lock", "conflicting lock")
# Catalogs of this process with a connection open: a writer of a file one of them has attached read-only closes
# that connection first (DuckDB refuses a second, writable handle on a file this process holds: "Unique file handle
# conflict"); the Catalog reopens on its next read and then sees the new rows.
_OPEN_READERS: "weakref.WeakSet[Catalog]" = weakref.WeakSet()


def lock_wait_s() -> float:
    try:
        v = float(os.environ.get("RECOMMENDER_LOCK_WAIT_S", LOCK_WAIT_S))
    except ValueError:
        return LOCK_WAIT_S
    return min(max(v, 0.0), 3600.0) if v == v else LOCK_WAIT_S  # NaN: the default


def _is_lock_error(e: Exception) -> bool:
    return any(m in str(e).lower() for m in _LOCK_MARKERS)


def with_lock_retry(what: Path, fn):
    """``fn()``, retried while another process holds ``what``'s lock, for at most :func:`lock_wait_s` seconds."""
    budget = lock_wait_s()
    t0 = time.monotonic()
    pause = LOCK_RETRY_FIRST_S
    while True:
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - duckdb.IOException; anything else is re-raised at once
            if not _is_lock_error(e):
                raise
            waited = time.monotonic() - t0
            if waited >= budget:
                raise UserError(f"catalog {what} is busy (another recommender process has it open); "
                                f"retried for {waited:.0f} s",
                                hint="wait for the other command to finish, or raise RECOMMENDER_LOCK_WAIT_S "
                                     f"(now {budget:g} s)") from None
            time.sleep(min(pause, max(0.0, budget - waited)))
            pause = min(pause * 2, LOCK_RETRY_MAX_S)


def check_regular_file(path: Path, what: str) -> None:
    """Refuse a path that exists but is not a regular file (a folder, a FIFO, /dev/zero): reading one hangs or
    fails deep inside DuckDB."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as e:
        raise UserError(f"cannot read {what} {path}: {e.strerror}", hint="check the path and its permissions") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise UserError(f"{what} {path} is {kind}", hint="give the path of a .duckdb catalog file")


# no extension is installed or loaded behind the user's back (an `md:` or `s3://` path would fetch one)
NO_EXTENSIONS = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}


def _connect(path: Path, read_only: bool):
    duckdb = _duckdb()
    return with_lock_retry(path, lambda: duckdb.connect(str(path), read_only=read_only, config=NO_EXTENSIONS))


BASE_ALIAS = "cat"


def _connect_private(path: Path):
    """A read connection on a database instance of its own, with ``path`` attached read-only and in use.

    ``duckdb.connect(path)`` hands every caller in one process the same cached instance, and ATTACH belongs to the
    instance: a second Catalog on the shipped file found the first one's ``usr`` already attached ("database with
    name usr already exists"), and a plain ``duckdb.connect(path, read_only=True)`` elsewhere was refused for its
    different configuration. An in-memory instance per reader shares nothing."""
    duckdb = _duckdb()
    con = duckdb.connect(":memory:", config=NO_EXTENSIONS)
    try:
        with_lock_retry(path, lambda: con.execute(f"ATTACH '{_sql_str(path)}' AS {BASE_ALIAS} (READ_ONLY)"))
        con.execute(f"USE {BASE_ALIAS}")
    except BaseException:
        con.close()
        raise
    return con


def damaged(path: Path, e: Exception, overlay: bool) -> UserError:
    """The one line for a catalog file DuckDB (or the records in it) cannot read: which file, and what to do."""
    first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
    if overlay:
        hint = (f"move {path} away (it holds your added models and probe rows) or set RECOMMENDER_USER_CATALOG; "
                "a new overlay is created on the next write")
    else:
        hint = f"rebuild it with `recommender catalog build --out {path}` or reinstall the shipped catalog"
    return UserError(f"catalog file {path} is damaged or unreadable ({type(e).__name__}: {first})", hint=hint)


def _release_readers(path: Path) -> None:
    """Close this process's read connections that hold ``path`` (see ``_OPEN_READERS``)."""
    try:
        target = path.resolve()
    except OSError:
        return
    for cat in list(_OPEN_READERS):
        paths = [cat.base_path] + ([cat.user_path] if cat.user_path else [])
        if any(_same(p, target) for p in paths):
            cat.close()


def _same(p: Path, target: Path) -> bool:
    try:
        return p.resolve() == target
    except OSError:
        return False


def _is_empty(con, alias: str) -> bool:
    """Whether an attached database holds no table at all."""
    try:
        return con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = ?", [alias]).fetchone()[0] == 0
    except Exception:  # noqa: BLE001
        return False


def _schema_version(con, alias: str = "") -> int:
    prefix = f"{alias}." if alias else ""
    try:
        return con.execute(f"SELECT max(version) FROM {prefix}schema_migrations").fetchone()[0] or 0
    except Exception:  # noqa: BLE001 - any failure here means "not a catalog of ours"
        return -1


_SIBLING_TOKENS = {"instruct", "chat", "it", "pt", "base"}


def sibling_key(model: str) -> str:
    """'google/gemma-3-4b-it' and 'google/gemma-3-4b-pt' -> 'google/gemma-3-4b': checkpoints of one architecture
    (base / instruct / chat) share a key. Quantized repos ('-AWQ', 'GGUF:q4_k_m') keep their suffix and never match."""
    org, _, name = model.lower().rpartition("/")
    kept = [t for t in name.split("-") if t not in _SIBLING_TOKENS]
    return f"{org}/{'-'.join(kept)}"


class Catalog:
    """Read access to the layered catalog. Cheap to construct; opens DuckDB on first use."""

    @classmethod
    def open(cls, base_path: Path) -> "Catalog":
        """The catalog at ``base_path`` with this user's overlay (core.paths.user_catalog_path) over it."""
        return cls(base_path, user_catalog_path())

    def __init__(self, base_path: Path, user_path: Optional[Path] = None) -> None:
        self.base_path = Path(base_path)
        self.user_path = Path(user_path) if user_path else None
        self._con = None
        self.has_user = False
        self._models: Optional[dict[str, ModelSpec]] = None
        self._variants: Optional[dict[tuple[str, str], Variant]] = None
        self._cache = None
        self._cache_writes = -1  # _WRITES when self._cache was opened

    # -- connection -------------------------------------------------------------------------------------------
    @property
    def con(self):
        if self._con is None:
            self._con = self._open()
        return self._con

    def _open(self):
        check_regular_file(self.base_path, "catalog")
        if not self.base_path.is_file():
            raise UserError(f"catalog file not found: {self.base_path}",
                            hint="run `recommender catalog build`, or pass --catalog PATH / set RECOMMENDER_CATALOG")
        if self.user_path:
            check_regular_file(self.user_path, "user catalog")
        try:
            con = _connect_private(self.base_path)
        except UserError:
            raise
        except Exception as e:  # noqa: BLE001
            raise UserError(f"cannot open catalog {self.base_path}: {str(e).splitlines()[0]}",
                            hint="the file is not a DuckDB catalog; rebuild it with `recommender catalog build`") from None
        version = _schema_version(con)
        if version != LATEST_VERSION:
            con.close()
            what = "is not a recommender catalog" if version < 0 else f"has schema v{version}, this tool needs v{LATEST_VERSION}"
            raise UserError(f"catalog {self.base_path} {what}",
                            hint="rebuild it with `recommender catalog build` (user rows live in the overlay and are kept)")
        self.has_user = False
        if self.user_path and self.user_path.is_file():
            try:
                with_lock_retry(self.user_path,
                                lambda: con.execute(f"ATTACH '{_sql_str(self.user_path)}' AS usr (READ_ONLY)"))
            except UserError:
                con.close()
                raise
            except Exception as e:  # noqa: BLE001
                con.close()
                raise UserError(f"cannot open user catalog {self.user_path}: {str(e).splitlines()[0]}",
                                hint="move the file away or set RECOMMENDER_USER_CATALOG to another path") from None
            uv = _schema_version(con, "usr")
            if uv < 0 and _is_empty(con, "usr"):
                # an overlay whose first write was killed before its schema committed: no rows, nothing to read
                con.execute("DETACH usr")
                _OPEN_READERS.add(self)
                return con
            if uv < 0:
                con.close()
                raise UserError(f"user catalog {self.user_path} is not a recommender catalog",
                                hint="move the file away or set RECOMMENDER_USER_CATALOG to another path")
            if uv > LATEST_VERSION:
                con.close()
                raise UserError(f"user catalog {self.user_path} has an unknown schema (v{uv})",
                                hint="it was written by a newer recommender; upgrade, or set RECOMMENDER_USER_CATALOG")
            if uv < LATEST_VERSION:  # older overlay: migrate it (writable), then take the snapshot of the new state
                con.execute("DETACH usr")
                UserCatalog(self.user_path).close()
                with_lock_retry(self.user_path,
                                lambda: con.execute(f"ATTACH '{_sql_str(self.user_path)}' AS usr (READ_ONLY)"))
            snap = self._snapshot_overlay()  # while the shared lock is held: no writer is between two pages
            con.execute("DETACH usr")
            con.execute(f"ATTACH '{_sql_str(snap)}' AS usr (READ_ONLY)")
            self.has_user = True
        _OPEN_READERS.add(self)
        return con

    def _snapshot_overlay(self) -> Path:
        """A private copy of the overlay (and its WAL), read for the rest of this Catalog's life. DuckDB locks a
        file for as long as it is attached: a `recommend` that kept the overlay attached for its whole run made
        writers wait (and reattaching per query mixed two versions in one answer). The overlay is small."""
        import shutil  # noqa: PLC0415
        import tempfile  # noqa: PLC0415

        # In the user's private cache folder, not TMPDIR: a kill -9 leaves the copy behind, and the overlay is the
        # user's own data; copies older than STALE_SNAPSHOT_S (their reader is gone) are removed here.
        home = private_cache_dir("overlay-snapshots")
        if home is not None:
            _remove_stale_snapshots(home)
        folder = Path(tempfile.mkdtemp(prefix="recommender-overlay-", dir=home))
        self._snapshot_dir = folder
        weakref.finalize(self, shutil.rmtree, str(folder), True)
        snap = folder / "user.duckdb"
        shutil.copyfile(self.user_path, snap)
        wal = Path(f"{self.user_path}.wal")
        if wal.is_file():
            shutil.copyfile(wal, Path(f"{snap}.wal"))
        return snap


    def close(self) -> None:
        """Release the files (reads afterwards reopen them). Kept rows (models, variants ...) stay loaded."""
        if self._con is not None:
            self._con.close()
            self._con = None
        _OPEN_READERS.discard(self)
        folder = getattr(self, "_snapshot_dir", None)
        if folder is not None:
            import shutil  # noqa: PLC0415

            shutil.rmtree(folder, ignore_errors=True)
            self._snapshot_dir = None

    def _read_cache(self):
        """recommender.catalog.read_cache: rows of earlier runs on the same bytes, or None (cache off)."""
        if self._cache_writes != _WRITES:
            check_regular_file(self.base_path, "catalog")  # a FIFO or device is refused, cached rows or not
            if self.user_path:
                check_regular_file(self.user_path, "user catalog")

            user = self.user_path if self.user_path and self.user_path.is_file() else None
            self._cache = ReadCache.open(self.base_path, user, LATEST_VERSION)
            self._cache_writes = _WRITES
        return self._cache

    def _rows(self, columns: str, table: str, tail: str = "", params: list | None = None) -> list[tuple]:
        """``SELECT columns FROM table tail`` over the overlay (first, when attached) and the base."""
        key = (columns, table, tail, tuple(params or ()))
        cache = self._read_cache()
        hit = cache.get(key) if cache is not None else None
        if hit is not None:
            return list(hit)
        con = self.con
        schemas = (["usr."] if self.has_user else []) + [""]
        out = []
        for schema in schemas:
            try:
                out += con.execute(f"SELECT {columns} FROM {schema}{table} {tail}", params or []).fetchall()
            except Exception as e:  # noqa: BLE001 - a damaged file passes connect and fails here
                overlay = schema == "usr."
                raise damaged(self.user_path if overlay else self.base_path, e, overlay) from None
        if cache is not None:
            cache.put(key, out)
        return out

    # -- models -----------------------------------------------------------------------------------------------
    def models(self) -> dict[str, ModelSpec]:
        if self._models is None:
            models: dict[str, ModelSpec] = {}
            origin: dict[str, str] = {}
            for mid, spec_json, org in self._rows("id, spec_json, origin", "models", "ORDER BY id"):
                if mid not in models:  # overlay rows come first and win
                    try:
                        models[mid] = ModelSpec.model_validate_json(spec_json)
                    except ValueError as e:  # a flipped byte in a stored record, or an impossible architecture
                        overlay = org == "user" and self.user_path is not None
                        if overlay and "impossible architecture" in str(e):
                            raise UserError(f"model {mid!r} in your overlay {self.user_path} is invalid: "
                                            f"{_first_line(e)}",
                                            hint=f"remove it: recommender catalog remove {mid!r}") from None
                        raise damaged(self.user_path if overlay else self.base_path, e, overlay=overlay) from None
                    origin[mid] = org
            self._models = models
            self._origin = origin
        return self._models

    def origin(self, model_id: str) -> str:
        self.models()
        return self._origin.get(model_id, "shipped")

    def resolve_model(self, name: str) -> ModelSpec:
        models = self.models()
        mid = resolve(name, models.keys(), "model", hint_cmd="see `recommender catalog list` for the models known")
        return models[mid]

    # -- variants ---------------------------------------------------------------------------------------------
    def variants(self) -> dict[tuple[str, str], Variant]:
        if self._variants is None:
            out: dict[tuple[str, str], Variant] = {}
            validate = Variant.model_validate  # one dict per row: ~25 % less than keyword construction, same record
            for row in self._rows("model_id, quant, weights_bytes, embedding_bytes, expert_bytes, bits_per_weight, "
                                  f"provenance, basis, {', '.join(_VARIANT_SUMS)}", "variants",
                                  "ORDER BY model_id, quant"):
                key = (row[0], row[1])
                if key not in out:
                    out[key] = validate(dict(zip(_VARIANT_FIELDS, row)))
            self._variants = out
            self.models()  # _stored_sums reads the specs and their origin
            self._seed_byte_sums()
        return self._variants

    def _seed_byte_sums(self) -> None:
        """Offer the stored per-tensor byte sums to the predictor (analytical.seed_variant_source, asked when a
        variant's sums are first needed), so it does not type every tensor again."""
        seed_variant_source(weakref.WeakMethod(self._stored_sums))

    def _stored_sums(self, spec: ModelSpec, quant: str) -> Optional[VariantBytes]:
        """The sums ``catalog build`` stored for this variant of exactly ``spec``. Only the shipped models'
        rule-sized rows: a measured row's total is the file's, not the rules', and an overlay model may shadow a
        shipped one of the same id."""
        own = self._models.get(spec.id)
        v = self._variants.get((spec.id, quant))
        if (own is None or v is None or self._origin.get(spec.id) != "shipped"
                or v.weights_bytes_provenance != "estimated" or v.output_bytes is None
                or (own is not spec and variant_bytes_key(own, quant) != variant_bytes_key(spec, quant))):
            return None
        return VariantBytes(v.weights_bytes, v.embedding_bytes, v.expert_bytes, v.output_bytes, v.ple_bytes,
                            v.mtp_bytes, v.mtp_expert_bytes)

    def variant_file(self, model_id: str, quant: str) -> Optional[str]:
        """The file or folder a variant was added from (`catalog add`), or None."""
        rows = self._rows("file_path", "variants", "WHERE model_id = ? AND quant = ? AND file_path IS NOT NULL",
                          params=[model_id, quant])
        return rows[0][0] if rows else None

    def variants_of(self, model_id: str) -> list[Variant]:
        return [v for (m, _), v in self.variants().items() if m == model_id]

    # -- published scores ------------------------------------------------------------------------------------
    def all_scores(self) -> list[tuple]:
        if not hasattr(self, "_scores"):
            self._scores = self._rows("source_model, benchmark, shots, score, source_url, source_note, flags",
                                      "published_scores")
        return self._scores

    def scores_for(self, model_id: str) -> list[ScoreRow]:
        """Published scores of this checkpoint ('same') or of a base/instruct sibling of it ('sibling')."""
        if not hasattr(self, "_scores_by_key"):
            by_key: dict[str, list[tuple]] = {}
            for row in self.all_scores():
                by_key.setdefault(sibling_key(row[0]), []).append(row)
            self._scores_by_key = by_key
        out = []
        for sm, bench, shots, score, url, note, flags in self._scores_by_key.get(sibling_key(model_id), []):
            rel = "same" if sm.lower() == model_id.lower() else "sibling"
            out.append(ScoreRow(sm, bench, shots or None, score, url, note,
                                tuple(f for f in flags.split(",") if f), rel))
        return out

    # -- comparable quality (docs/quality-method.md) ------------------------------------------------------------
    def model_quality(self) -> dict[tuple[str, str], dict]:
        """(model id, group) -> row of the comparable-accuracy table (overlay first, then shipped)."""
        if not hasattr(self, "_model_quality"):
            cols = ["model_id", "grp", "value_points", "interval_low", "interval_high", "sd_points", "provenance",
                    "kind", "method", "sources", "flags"]
            out: dict[tuple[str, str], dict] = {}
            for r in self._rows(", ".join(cols), "model_quality"):
                out.setdefault((r[0], r[1]), dict(zip(cols, r)))
            self._model_quality = out
        return self._model_quality

    def quant_quality(self) -> dict[str, dict]:
        """quant -> row of the quantization-cost table (accuracy points at 8B, size exponent, basis)."""
        if not hasattr(self, "_quant_quality"):
            cols = ["quant", "bits_per_weight", "points_8b", "points_low", "points_high", "size_exponent",
                    "provenance", "basis", "sources"]
            out: dict[str, dict] = {}
            for r in self._rows(", ".join(cols), "quant_quality"):
                out.setdefault(r[0], dict(zip(cols, r)))
            self._quant_quality = out
        return self._quant_quality

    # -- measurements ----------------------------------------------------------------------------------------
    def measured_hardware(self, status: Optional[str] = "ok") -> list[str]:
        """The hardware names (as NVML or the CPU reported them) that have measured rows."""
        tail = "WHERE status = ?" if status else ""
        return sorted({n for (n,) in self._rows("DISTINCT hardware_name", "measurements", tail,
                                                params=[status] if status else [])})

    def measurements(self, model_id: Optional[str] = None, hardware: Optional[str] = None,
                     status: Optional[str] = None, hardware_names: Optional[list[str]] = None,
                     include_invalid: bool = False) -> list[Measurement]:
        """Rows of the overlay first, then the shipped ones; newest first within each. ``hardware`` matches part of a
        name or a fingerprint; ``hardware_names`` exact names. Rows with impossible figures (a TPOT of 0 an earlier
        version stored; records.measurement_problems) are left out with a warning, unless ``include_invalid`` (the
        listing, so they can be seen and removed)."""
        cols = ", ".join(_MEASUREMENT_COLS)
        where, params = [], []
        if hardware_names is not None:
            if not hardware_names:
                return []
            where.append(f"hardware_name IN ({', '.join('?' for _ in hardware_names)})")
            params += list(hardware_names)
        if model_id:
            where.append("model_id = ?")
            params.append(model_id)
        if hardware:
            where.append("(lower(hardware_name) LIKE ? OR hardware_fingerprint = ?)")
            params += [f"%{hardware.lower()}%", hardware]
        if status:
            where.append("status = ?")
            params.append(status)
        clause = (" WHERE " + " AND ".join(where)) if where else ""
        rows = self._rows(cols, "measurements", f"{clause} ORDER BY measured_at DESC", params=params)
        seen, out = set(), []
        for row in rows:
            d = dict(zip(_MEASUREMENT_COLS, row))
            if d["id"] in seen:
                continue
            seen.add(d["id"])
            try:
                d["raw"] = json.loads(d.pop("raw_json") or "{}")
                m = Measurement(**d)
            except ValueError as e:  # a row no version of this code writes (a damaged or hand-edited overlay)
                warnings.warn(f"skipping measurement {d['id']}: unreadable ({str(e).splitlines()[0][:120]})",
                              stacklevel=2)
                continue
            if not include_invalid and (problems := m.problems):
                warnings.warn(f"skipping measurement {m.id} ({m.model_id} {m.quant} on {m.hardware_name}): "
                              f"{'; '.join(problems)} (remove it: recommender catalog measurements --remove {m.id})",
                              stacklevel=2)
                continue
            out.append(m)
        return out

    # -- accuracy / perplexity ----------------------------------------------------------------------------------
    def accuracy_rows(self, model_id: Optional[str] = None, run_id: Optional[str] = None,
                      status: Optional[str] = None) -> list[AccuracyRow]:
        """Overlay rows first, then shipped ones; newest first within each."""
        return [AccuracyRow(**_decode(d, {"flags": "flags", "per_subject_json": "per_subject"}))
                for d in self._filtered(_ACCURACY_COLS, "accuracy_scores", model_id, run_id, status)]

    def measured_quality(self) -> tuple[list[dict], list[dict]]:
        """Light rows (no per-item data) of every ok accuracy and perplexity measurement, newest first."""
        if not hasattr(self, "_mq"):
            acols = ["id", "model_id", "quant", "variant", "engine", "engine_version", "task", "shots", "items_file",
                     "items_sha256", "n", "accuracy", "ci_low", "ci_high", "flags", "hardware_name", "measured_at"]
            pcols = ["id", "model_id", "quant", "variant", "engine", "text_file", "text_sha256", "tokens", "nll_nats",
                     "hardware_name", "measured_at"]
            acc = [dict(zip(acols, r)) for r in self._rows(", ".join(acols), "accuracy_scores",
                                                           "WHERE status = 'ok' ORDER BY measured_at DESC")]
            ppl = [dict(zip(pcols, r)) for r in self._rows(", ".join(pcols), "perplexity_scores",
                                                           "WHERE status = 'ok' ORDER BY measured_at DESC")]
            self._mq = (acc, ppl)
        return self._mq

    def perplexity_rows(self, model_id: Optional[str] = None, run_id: Optional[str] = None,
                        status: Optional[str] = None) -> list[PerplexityRow]:
        return [PerplexityRow(**_decode(d, {})) for d in
                self._filtered(_PERPLEXITY_COLS, "perplexity_scores", model_id, run_id, status)]

    def _filtered(self, cols: list[str], table: str, model_id, run_id, status) -> list[dict]:
        where, params = [], []
        for col, val in (("model_id", model_id), ("run_id", run_id), ("status", status)):
            if val:
                where.append(f"{col} = ?")
                params.append(val)
        clause = (" WHERE " + " AND ".join(where)) if where else ""
        rows = self._rows(", ".join(cols), table, f"{clause} ORDER BY measured_at DESC", params=params)
        seen, out = set(), []
        for row in rows:
            d = dict(zip(cols, row))
            if d["id"] not in seen:
                seen.add(d["id"])
                out.append(d)
        return out

    def meta(self) -> dict[str, str]:
        try:
            return dict(self.con.execute("SELECT key, value FROM catalog_meta").fetchall())
        except UserError:
            raise
        except Exception as e:  # noqa: BLE001
            raise damaged(self.base_path, e, overlay=False) from None

    def meta_values(self, key: str, user_only: bool = False) -> list[str]:
        """One meta key's values, the user overlay's first (e.g. machine calibrations before the shipped one);
        ``user_only``: the overlay's alone."""
        if user_only:
            con = self.con  # opening attaches the overlay when there is one
            if not self.has_user:
                return []
            try:
                return [r[0] for r in con.execute("SELECT value FROM usr.catalog_meta WHERE key = ?", [key]).fetchall()]
            except Exception as e:  # noqa: BLE001
                raise damaged(self.user_path, e, overlay=True) from None
        return [r[0] for r in self._rows("value", "catalog_meta", "WHERE key = ?", [key])]


# The columns of the probe-row tables, in the records' field order (core/records.py): a dict field ``x`` is stored as
# JSON text in ``x_json``. Derived, not spelled out, so a field added to a record cannot be dropped by _encode;
# tests/catalog/test_schema.py checks them against the tables the migrations make.
JSON_FIELDS = ("raw", "per_subject")
# the variants table: the columns of migration 1, then migration 4's byte sums (the Variant fields of the same names)
_VARIANT_SUMS = ("output_bytes", "ple_bytes", "mtp_bytes", "mtp_expert_bytes")
_VARIANT_FIELDS = ("model_id", "quant", "weights_bytes", "embedding_bytes", "expert_bytes", "bits_per_weight",
                   "weights_bytes_provenance", "basis", *_VARIANT_SUMS)  # Variant's fields of a variants() row
_VARIANT_COLS = ("model_id", "quant", "weights_bytes", "embedding_bytes", "expert_bytes", "bits_per_weight",
                 "provenance", "basis", "file_path", *_VARIANT_SUMS)
_VARIANT_INSERT = (f"INSERT INTO variants ({', '.join(_VARIANT_COLS)}) "
                   f"VALUES ({', '.join('?' * len(_VARIANT_COLS))})")


def record_columns(record) -> list[str]:
    """The table columns of a row record (Measurement, AccuracyRow, PerplexityRow)."""
    return [f"{name}_json" if name in JSON_FIELDS else name for name in record.model_fields]


_MEASUREMENT_COLS = record_columns(Measurement)
_ACCURACY_COLS = record_columns(AccuracyRow)
_PERPLEXITY_COLS = record_columns(PerplexityRow)


def _decode(d: dict, renames: dict[str, str]) -> dict:
    d = dict(d)
    d["raw"] = json.loads(d.pop("raw_json") or "{}")
    if "flags" in renames:
        d["flags"] = [f for f in (d["flags"] or "").split(",") if f]
    if "per_subject_json" in renames:
        d["per_subject"] = json.loads(d.pop("per_subject_json") or "{}")
    return d


def _encode(row, cols: list[str]) -> list:
    d = row.model_dump()
    d["raw_json"] = json.dumps(d.pop("raw"), sort_keys=True, ensure_ascii=False)
    if "per_subject" in d:
        d["per_subject_json"] = json.dumps(d.pop("per_subject"), sort_keys=True, ensure_ascii=False)
    if isinstance(d.get("flags"), list):
        d["flags"] = ",".join(d["flags"])
    return [d[c] for c in cols]


def _first_line(e: Exception) -> str:
    for ln in str(e).splitlines():
        if "impossible architecture" in ln:
            return ln.strip()[:300]
    return (str(e).splitlines() or [""])[0][:300]


def _sql_str(p: Path) -> str:
    return str(p).replace("'", "''")


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


# ---------------------------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------------------------
class CatalogWriter:
    """Writes into one DuckDB file (the overlay, or a catalog being built). Every public method is one transaction."""

    def __init__(self, path: Path, origin: str) -> None:
        self.path = Path(path)
        self.origin = origin
        check_writable_path(self.path)
        check_regular_file(self.path, "catalog")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"cannot create the folder of catalog {self.path}: {e.strerror}",
                            hint="check the path and its permissions, or set RECOMMENDER_USER_CATALOG") from None
        _release_readers(self.path)  # this process's own read-only handle would refuse the writable one
        try:
            if not self.path.exists():
                _create_whole(self.path)
            self.con = _connect(self.path, read_only=False)
        except UserError:
            raise
        except Exception as e:  # noqa: BLE001
            raise UserError(f"cannot open catalog {self.path} for writing: {str(e).splitlines()[0]}",
                            hint="the file may be damaged or not a DuckDB file: move it away, or set "
                                 "RECOMMENDER_USER_CATALOG to another path") from None
        version = _schema_version(self.con)
        if version > LATEST_VERSION:
            self.con.close()
            raise UserError(f"catalog {self.path} has schema v{version}, newer than this tool (v{LATEST_VERSION})",
                            hint="upgrade llm-recommender")
        migrate(self.con)

    def close(self) -> None:
        self.con.close()
        _wrote()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")
        _wrote()

    # rows ----------------------------------------------------------------------------------------------------
    def _put_model(self, spec: ModelSpec, variants: list[Variant], file_paths: dict[str, str] | None = None) -> None:
        self.con.execute("DELETE FROM variants WHERE model_id = ?", [spec.id])
        self.con.execute("DELETE FROM models WHERE id = ?", [spec.id])
        self.con.execute(
            "INSERT INTO models VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [spec.id, spec.architecture, spec.model_type, spec.params_total, spec.params_active,
             spec.max_position_embeddings, spec.source, spec.source_kind, spec.license, spec.notes, self.origin,
             _now(), spec.model_dump_json()])
        for v in variants:
            self.con.execute(_VARIANT_INSERT,
                             [v.model_id, v.quant, v.weights_bytes, v.embedding_bytes, v.expert_bytes,
                              v.bits_per_weight, v.weights_bytes_provenance, v.basis, (file_paths or {}).get(v.quant),
                              *(getattr(v, c) for c in _VARIANT_SUMS)])

    def put_model(self, spec: ModelSpec, variants: list[Variant], file_paths: dict[str, str] | None = None) -> None:
        with self.transaction():
            self._put_model(spec, variants, file_paths)

    def put_models(self, items: list[tuple[ModelSpec, list[Variant], dict[str, str] | None]]) -> None:
        """All or nothing: used by `catalog refresh` and the build."""
        with self.transaction():
            for spec, variants, paths in items:
                self._put_model(spec, variants, paths)

    def remove_model(self, model_id: str) -> int:
        """Delete one model and its variants (one transaction); how many model rows went (0 or 1)."""
        with self.transaction():
            n = self.con.execute("SELECT count(*) FROM models WHERE id = ?", [model_id]).fetchone()[0]
            self.con.execute("DELETE FROM variants WHERE model_id = ?", [model_id])
            self.con.execute("DELETE FROM models WHERE id = ?", [model_id])
        return int(n)

    def put_scores(self, rows: list[tuple]) -> None:
        with self.transaction():
            _insert_many(self.con, "INSERT INTO published_scores VALUES (?, ?, ?, ?, ?, ?, ?)", rows)

    def remove_measurements(self, ids: list[str] = (), model_id: Optional[str] = None) -> int:
        """Delete measured rows by id, or every row of one model; how many went (one transaction)."""
        with self.transaction():
            n = 0
            for i in ids:
                n += self.con.execute("SELECT count(*) FROM measurements WHERE id = ?", [i]).fetchone()[0]
                self.con.execute("DELETE FROM measurements WHERE id = ?", [i])
            if model_id is not None:
                n += self.con.execute("SELECT count(*) FROM measurements WHERE model_id = ?", [model_id]).fetchone()[0]
                self.con.execute("DELETE FROM measurements WHERE model_id = ?", [model_id])
        return int(n)

    def put_measurements(self, rows: list[Measurement]) -> None:
        """Store probe rows: all or nothing. A plain INSERT: every row's id is unique (the probes add a random part),
        so two probes of one configuration in the same second both land (INSERT OR REPLACE kept one of them). A row
        with impossible figures (records.measurement_problems) is refused, not stored."""
        for m in rows:
            check_measurement(m)
        with self.transaction():
            for m in rows:
                d = m.model_dump()
                d["raw_json"] = json.dumps(d.pop("raw"), sort_keys=True)
                self.con.execute(f"INSERT INTO measurements ({', '.join(_MEASUREMENT_COLS)}) "
                                 f"VALUES ({', '.join('?' * len(_MEASUREMENT_COLS))})",
                                 [d[c] for c in _MEASUREMENT_COLS])

    def put_scores_measured(self, acc: list[AccuracyRow], ppl: list[PerplexityRow]) -> None:
        """Accuracy and perplexity rows of one probe run: all or nothing."""
        with self.transaction():
            for table, cols, rows in (("accuracy_scores", _ACCURACY_COLS, acc),
                                      ("perplexity_scores", _PERPLEXITY_COLS, ppl)):
                for r in rows:
                    self.con.execute(f"INSERT OR REPLACE INTO {table} ({', '.join(cols)}) "
                                     f"VALUES ({', '.join('?' * len(cols))})", _encode(r, cols))

    def put_quality(self, model_rows: list[tuple], quant_rows: list[tuple]) -> None:
        """The comparable accuracy and quantization-cost tables (catalog build): all or nothing."""
        with self.transaction():
            _insert_many(self.con, "INSERT INTO model_quality VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", model_rows)
            _insert_many(self.con, "INSERT INTO quant_quality VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", quant_rows)

    def put_meta(self, items: dict[str, str]) -> None:
        with self.transaction():
            for k, v in items.items():
                self.con.execute("INSERT OR REPLACE INTO catalog_meta VALUES (?, ?)", [k, v])


STALE_SNAPSHOT_S = 24 * 3600.0  # an overlay snapshot this old belongs to a process that is gone


def _remove_stale_snapshots(home: Path) -> None:
    import shutil  # noqa: PLC0415

    now = time.time()
    try:
        for d in home.iterdir():
            try:
                if d.name.startswith("recommender-overlay-") and now - d.stat().st_mtime > STALE_SNAPSHOT_S:
                    shutil.rmtree(d, ignore_errors=True)
            except OSError:
                continue
    except OSError:
        pass


def _insert_many(con, sql: str, rows: list) -> None:
    """executemany, which DuckDB refuses for an empty list (a sources folder without sources/quality/ made
    `catalog build --sources DIR` an internal error)."""
    if rows:
        con.executemany(sql, rows)


def _create_whole(path: Path) -> None:
    """A new catalog file appears whole, its schema in place: made under a temporary name beside it, then linked to
    ``path`` only if no other process got there first (os.link refuses an existing name; that process's file is used).
    A second writer starting while the first was still creating the file read it half-made and called it damaged:
    1 of 144 concurrent `catalog add` runs on a new overlay (bench/hostile.py --scale 9)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.new")
    try:
        con = _duckdb().connect(str(tmp), config=NO_EXTENSIONS)
        try:
            migrate(con)
        finally:
            con.close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links: the rename can only lose to a writer as quick as this
            if not path.exists():
                os.replace(tmp, path)
    finally:
        for p in (tmp, tmp.with_name(tmp.name + ".wal")):
            try:
                p.unlink()
            except FileNotFoundError:
                pass


def check_writable_path(path: Path) -> None:
    """A catalog to write must be a file path DuckDB keeps on disk: not ':memory:' (nothing would be kept), not a
    remote or extension path ('md:', 's3://'), and no component longer than the file system allows."""
    s = str(path)
    if s == ":memory:" or s.startswith(":memory:") or (":" in s.split("/")[0] and not os.path.isabs(s)) \
            or "://" in s:
        raise UserError(f"catalog path {s!r} is not a file on this machine",
                        hint="set RECOMMENDER_USER_CATALOG to a file path, e.g. ~/.local/share/llm-recommender/user.duckdb")
    try:
        name_max = os.pathconf(path.parent if path.parent.exists() else "/", "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    if any(len(os.fsencode(part)) > name_max for part in path.parts):
        raise UserError(f"catalog path {s[:80]}... has a name longer than {name_max} bytes",
                        hint="use a shorter file name")


class UserCatalog(CatalogWriter):
    def __init__(self, path: Path) -> None:
        super().__init__(path, origin="user")

