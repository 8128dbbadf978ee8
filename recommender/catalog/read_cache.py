"""The catalog's read results, kept between runs so that a ranking does not open DuckDB at all.

Opening the catalog costs about 0.1 s before the first row (importing duckdb, connecting, checking the schema,
attaching the overlay): a fifth of `recommend`'s cold start. The rows a read returns depend only on the bytes of the
two files, so :class:`Catalog` keeps each layered query's rows (``Catalog._rows``) in one file per (shipped, overlay)
pair of paths under ``cache_root()/catalog-reads``, valid for a fingerprint of both files:

- each file's SHA-256 (about 2 ms for the shipped 3.6 MB file; the content, not its mtime, so two writes within one
  clock tick cannot leave a stale entry, and no other content can be made to match it),
- whether the overlay exists, the schema version this code reads, and this module's format version.

What is read back can only be data: the file is JSON (a header line with the fingerprint and where each query's rows
sit, then one JSON array per query, parsed only when that query is asked), never a pickle, so a planted file cannot
run code. A cache file or folder that another user could have written (not owned by this user, or writable by group
or others), a symlink, or a non-regular file is ignored and never written into; files are created 0600 in a 0700
folder. Rows of a type JSON does not keep exactly (a timestamp) are not cached: that query goes to DuckDB.

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
import json
import logging
import os
import stat
from pathlib import Path
from typing import Optional


from recommender.core.paths import cache_root

log = logging.getLogger(__name__)

FORMAT_VERSION = 2  # 2: JSON with a per-query index, SHA-256 fingerprints (1 was a pickle with CRC-32s)
SUFFIX = ".json"
_CHUNK_BYTES = 1 << 20
MAX_FILES = 16  # (shipped, overlay) pairs kept; one is ~1 MB
MAX_AGE_S = 30 * 24 * 3600  # a pair unused for a month is dropped
STALE_TMP_S = 3600  # a half-written file of a process that died while flushing
MAX_CACHE_BYTES = 256 << 20  # a larger cache file is not ours: not read
MAX_CATALOG_BYTES = 16 << 30  # catalogs larger than this are not hashed on every run (no cache)
_JSON_SCALARS = (str, int, float, bool, type(None))


def _file_digest(path: Path) -> Optional[str]:
    """SHA-256 of a regular file's content; None when it does not exist, is not a regular file or is too large."""
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_CATALOG_BYTES:
                return None
            if hasattr(hashlib, "file_digest"):  # Python >= 3.11: hashed without a copy into Python
                return hashlib.file_digest(fh, "sha256").hexdigest()
            h = hashlib.sha256()
            while chunk := fh.read(_CHUNK_BYTES):
                h.update(chunk)
            return h.hexdigest()
    except OSError:
        return None


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _touch(file: Path) -> None:
    """Mark a cache file as used now (pruning keeps the most recently used); a read-only cache is still read."""
    try:
        os.utime(file)
    except OSError:
        pass


def _has_wal(path: Path) -> bool:
    return Path(f"{path}.wal").exists()


def _trusted(st: os.stat_result) -> bool:
    """Owned by this user and writable by nobody else."""
    uid = os.getuid() if hasattr(os, "getuid") else st.st_uid
    return st.st_uid == uid and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def trusted_folder(folder: Path, create: bool = False) -> bool:
    """The cache folder is a real folder (not a symlink) that only this user can write; created 0700 if asked."""
    try:
        if create:
            folder.parent.mkdir(parents=True, exist_ok=True)
            try:
                folder.mkdir(mode=0o700)
            except FileExistsError:
                pass
        st = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and _trusted(st)


def _read_trusted(file: Path) -> Optional[bytes]:
    """The bytes of a cache file that this user owns and nobody else can write; None otherwise (or missing)."""
    try:
        fd = os.open(file, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not _trusted(st) or st.st_size > MAX_CACHE_BYTES:
            log.debug("ignoring the catalog read cache %s: not a private regular file of this user", file)
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(MAX_CACHE_BYTES + 1)
    finally:
        os.close(fd)


def _key_text(key: tuple) -> str:
    return json.dumps(key, ensure_ascii=False, separators=(",", ":"))


def _plain(rows: list[tuple]) -> bool:
    """Rows JSON keeps exactly (strings, ints, floats, booleans, nulls)."""
    return all(type(v) in _JSON_SCALARS for r in rows for v in r)


class ReadCache:
    """Rows of the layered queries of one (shipped, overlay) pair, loaded once per :class:`Catalog`."""

    def __init__(self, file: Path, fingerprint: list, rows: dict, blob: bytes = b"",
                 index: Optional[dict] = None) -> None:
        self.file = file
        self.fingerprint = fingerprint
        self.rows = rows  # key text -> rows (parsed or added by this process)
        self._blob = blob  # the file's bytes after the header line; a query's rows are parsed on first use
        self._index = index or {}  # key text -> [offset, length] in _blob
        self._dirty = False

    @classmethod
    def open(cls, base: Path, user: Optional[Path], schema_version: int) -> Optional[ReadCache]:
        """The cache of this pair, or None when caching is off or the files cannot be fingerprinted."""
        if os.environ.get("RECOMMENDER_CATALOG_CACHE", "").lower() in ("0", "off", "no", "false"):
            return None
        if not _is_regular(base) or (user is not None and not _is_regular(user)):
            return None  # a FIFO or a device is never read here; the catalog's own open reports it
        if _has_wal(base) or (user is not None and _has_wal(user)):
            return None
        base_digest = _file_digest(base)
        if base_digest is None:
            return None  # the catalog's own open reports the missing file
        user_digest = _file_digest(user) if user is not None else None
        fingerprint = [FORMAT_VERSION, schema_version, base_digest, user_digest]
        key = hashlib.sha256(f"{base.resolve()}\0{user.resolve() if user else ''}".encode()).hexdigest()[:16]
        folder = cache_root() / "catalog-reads"
        file = folder / f"{key}{SUFFIX}"
        if not trusted_folder(folder):
            return cls(file, fingerprint, {})  # missing (written on flush, 0700) or foreign: not read
        data = _read_trusted(file)
        if data:
            try:
                head, _, blob = data.partition(b"\n")
                header = json.loads(head)
                if header.get("fingerprint") == fingerprint and isinstance(header.get("index"), dict):
                    _touch(file)
                    return cls(file, fingerprint, {}, blob, header["index"])
            except (ValueError, AttributeError) as e:  # a corrupt or foreign cache file is rebuilt
                log.debug("ignoring the catalog read cache %s: %s", file, e)
        return cls(file, fingerprint, {})

    def get(self, key: tuple) -> Optional[list[tuple]]:
        k = _key_text(key)
        hit = self.rows.get(k)
        if hit is None and k in self._index:
            try:
                off, n = self._index[k]
                hit = [tuple(r) for r in json.loads(self._blob[off:off + n])]
            except (ValueError, TypeError) as e:
                log.debug("ignoring a damaged entry of the catalog read cache %s: %s", self.file, e)
                return None
            self.rows[k] = hit
        return hit

    def put(self, key: tuple, rows: list[tuple]) -> None:
        """Remember one query's rows; the file is written once, when the process exits (``flush``)."""
        if not _plain(rows):
            return
        self.rows[_key_text(key)] = rows
        if not self._dirty:
            self._dirty = True
            atexit.register(self.flush)

    def _entries(self) -> list[tuple[str, bytes]]:
        """Every query's rows as JSON bytes: those parsed or added now, and the stored ones never parsed."""
        out = {k: json.dumps(v, ensure_ascii=False, separators=(",", ":")).encode() for k, v in self.rows.items()}
        for k, (off, n) in self._index.items():
            if k not in out:
                out[k] = self._blob[off:off + n]
        return list(out.items())

    def flush(self) -> None:
        """Write the file if rows were added (atomically: a reader sees the old file or the new one)."""
        if not self._dirty:
            return
        self._dirty = False
        folder = self.file.parent
        if not trusted_folder(folder, create=True):
            log.debug("not writing the catalog read cache: %s is not a private folder of this user", folder)
            return
        index, parts, off = {}, [], 0
        for k, b in self._entries():
            index[k] = [off, len(b)]
            parts.append(b)
            off += len(b)
        header = json.dumps({"fingerprint": self.fingerprint, "index": index}, ensure_ascii=False).encode()
        tmp = folder / f".{self.file.name}.{os.getpid()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(header + b"\n" + b"".join(parts))
            os.replace(tmp, self.file)
        except OSError as e:
            log.debug("cannot write the catalog read cache %s: %s", self.file, e)
            try:
                tmp.unlink()
            except OSError:
                pass
            return
        prune(folder)


def prune(folder: Path, now: Optional[float] = None) -> list[Path]:
    """Delete all but the ``MAX_FILES`` most recently used cache files younger than ``MAX_AGE_S``, temporary
    files older than ``STALE_TMP_S``, and the pickles of format 1 (never read again). Returns what was deleted."""
    import time  # noqa: PLC0415

    now = time.time() if now is None else now
    aged: list[tuple[float, Path]] = []
    for f in folder.iterdir():
        try:
            aged.append((f.lstat().st_mtime, f))
        except OSError:
            continue  # deleted by another process meanwhile
    aged.sort(reverse=True)
    caches = [(t, f) for t, f in aged if f.suffix == SUFFIX and not f.name.startswith(".")]
    doomed = [f for i, (t, f) in enumerate(caches) if i >= MAX_FILES or now - t > MAX_AGE_S]
    doomed += [f for t, f in aged if f.name.endswith(".tmp") and now - t > STALE_TMP_S]
    doomed += [f for t, f in aged if f.suffix == ".pickle"]
    for f in doomed:
        try:
            f.unlink()
        except OSError as e:
            log.debug("cannot prune %s: %s", f, e)
    return doomed
