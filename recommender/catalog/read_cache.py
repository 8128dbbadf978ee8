"""The catalog's read results, kept between runs so that a ranking does not open DuckDB at all.

Opening the catalog costs about 0.1 s before the first row (importing duckdb, connecting, checking the schema,
attaching the overlay): a fifth of `recommend`'s cold start. The rows a read returns depend only on the bytes of the
two files, so :class:`Catalog` keeps each layered query's rows (``Catalog._rows``) in one pickle per (shipped, overlay)
pair of paths under ``cache_root()/catalog-reads``, valid for a fingerprint of both files:

- each file's size and CRC-32 of its content (about 5 ms for the shipped 3.4 MB file; the content, not its mtime,
  so two writes within one clock tick cannot leave a stale entry),
- whether the overlay exists, the schema version this code reads, and this module's format version.

Any change to either file changes the fingerprint and the whole entry is dropped. A file with a DuckDB write-ahead
log beside it (writes not yet checkpointed into the file) is never cached: its bytes are not what DuckDB reads.
The cache is an optimization only: an unreadable, foreign or unwritable cache is ignored (debug log), and
``RECOMMENDER_CATALOG_CACHE=off`` turns it off.

The folder does not grow without bound: a file's modification time is its last use (a hit touches it), and each
write keeps the ``MAX_FILES`` most recently used files younger than ``MAX_AGE_S``, deleting the rest (a pair of paths
used once, such as a test's temporary catalog, is gone after a month or after sixteen newer pairs).
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import pickle
import zlib
from pathlib import Path
from typing import Optional


from recommender.core.paths import cache_root

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
_CHUNK_BYTES = 1 << 20
MAX_FILES = 16  # (shipped, overlay) pairs kept; one is ~1 MB
MAX_AGE_S = 30 * 24 * 3600  # a pair unused for a month is dropped
STALE_TMP_S = 3600  # a half-written file of a process that died while flushing


def _file_digest(path: Path) -> Optional[tuple[int, int]]:
    """(size, CRC-32) of a file; None when it does not exist."""
    try:
        crc, size = 0, 0
        with open(path, "rb") as fh:
            while chunk := fh.read(_CHUNK_BYTES):
                crc = zlib.crc32(chunk, crc)
                size += len(chunk)
        return size, crc
    except FileNotFoundError:
        return None


def _touch(file: Path) -> None:
    """Mark a cache file as used now (pruning keeps the most recently used); a read-only cache is still read."""
    try:
        os.utime(file)
    except OSError:
        pass


def _has_wal(path: Path) -> bool:
    return Path(f"{path}.wal").exists()


class ReadCache:
    """Rows of the layered queries of one (shipped, overlay) pair, loaded once per :class:`Catalog`."""

    def __init__(self, file: Path, fingerprint: tuple, rows: dict) -> None:
        self.file = file
        self.fingerprint = fingerprint
        self.rows = rows
        self._dirty = False

    @classmethod
    def open(cls, base: Path, user: Optional[Path], schema_version: int) -> Optional[ReadCache]:
        """The cache of this pair, or None when caching is off or the files cannot be fingerprinted."""
        if os.environ.get("RECOMMENDER_CATALOG_CACHE", "").lower() in ("0", "off", "no", "false"):
            return None
        if _has_wal(base) or (user is not None and _has_wal(user)):
            return None
        base_digest = _file_digest(base)
        if base_digest is None:
            return None  # the catalog's own open reports the missing file
        user_digest = _file_digest(user) if user is not None else None
        fingerprint = (FORMAT_VERSION, schema_version, base_digest, user_digest)
        key = hashlib.sha1(f"{base.resolve()}\0{user.resolve() if user else ''}".encode()).hexdigest()[:16]
        file = cache_root() / "catalog-reads" / f"{key}.pickle"
        rows: dict = {}
        try:
            with open(file, "rb") as fh:
                stored = pickle.load(fh)
            if stored.get("fingerprint") == fingerprint:
                rows = stored["rows"]
                _touch(file)
        except FileNotFoundError:
            pass
        except Exception as e:  # noqa: BLE001 - a corrupt or foreign cache file is rebuilt
            log.debug("ignoring the catalog read cache %s: %s", file, e)
        return cls(file, fingerprint, rows)

    def get(self, key: tuple) -> Optional[list[tuple]]:
        return self.rows.get(key)

    def put(self, key: tuple, rows: list[tuple]) -> None:
        """Remember one query's rows; the file is written once, when the process exits (``flush``)."""
        self.rows[key] = rows
        if not self._dirty:
            self._dirty = True
            atexit.register(self.flush)

    def flush(self) -> None:
        """Write the file if rows were added (atomically: a reader sees the old file or the new one)."""
        if not self._dirty:
            return
        self._dirty = False
        tmp = self.file.with_name(f".{self.file.name}.{os.getpid()}.tmp")
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as fh:
                pickle.dump({"fingerprint": self.fingerprint, "rows": self.rows}, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, self.file)
        except OSError as e:
            log.debug("cannot write the catalog read cache %s: %s", self.file, e)
            tmp.unlink(missing_ok=True)
            return
        prune(self.file.parent)


def prune(folder: Path, now: Optional[float] = None) -> list[Path]:
    """Delete all but the ``MAX_FILES`` most recently used cache files younger than ``MAX_AGE_S``, and temporary
    files older than ``STALE_TMP_S``. Returns what was deleted."""
    import time  # noqa: PLC0415

    now = time.time() if now is None else now
    aged: list[tuple[float, Path]] = []
    for f in folder.iterdir():
        try:
            aged.append((f.stat().st_mtime, f))
        except OSError:
            continue  # deleted by another process meanwhile
    aged.sort(reverse=True)
    caches = [(t, f) for t, f in aged if f.suffix == ".pickle" and not f.name.startswith(".")]
    doomed = [f for i, (t, f) in enumerate(caches) if i >= MAX_FILES or now - t > MAX_AGE_S]
    doomed += [f for t, f in aged if f.name.endswith(".tmp") and now - t > STALE_TMP_S]
    for f in doomed:
        try:
            f.unlink()
        except OSError as e:
            log.debug("cannot prune %s: %s", f, e)
    return doomed
