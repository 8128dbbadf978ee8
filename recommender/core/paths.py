"""Where the shipped data and the user's own catalog live.

- The shipped catalog (``catalog.duckdb``), its text sources (``sources/``) and ``profiles/`` sit at the project root,
  next to the ``recommender`` package. The shipped catalog is opened read-only and never written by user commands.
- Rows a user adds (``catalog add``, probes) go to a per-user overlay catalog, layered over the shipped one:
  ``$RECOMMENDER_USER_CATALOG``, else ``$XDG_DATA_HOME/llm-recommender/user.duckdb``
  (``~/.local/share/llm-recommender/user.duckdb``). Upgrading the tool replaces the shipped file and keeps the overlay.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from recommender.core.errors import UserError

ROOT = Path(__file__).resolve().parents[2]  # the checkout (recommender/core/paths.py)
SHIPPED_CATALOG = ROOT / "catalog.duckdb"
SOURCES_DIR = ROOT / "sources"
PROFILES_DIR = ROOT / "profiles"
LAST_ANSWER_FILE = "last_recommend.json"  # the last recommend answer (cache_root()), for `recommender run RANK`


def _no_nul(value: str, what: str) -> str:
    """A path the user gave; a NUL byte in it (which no file system takes) is one UserError, not a ValueError."""
    if "\0" in value:
        raise UserError(f"{what} contains a NUL byte", hint="give a file path")
    return value


def base_catalog_path(explicit: str | os.PathLike | None = None) -> Path:
    if explicit:
        return Path(_no_nul(os.fspath(explicit), "--catalog")).expanduser()
    env = os.environ.get("RECOMMENDER_CATALOG")
    return Path(_no_nul(env, "RECOMMENDER_CATALOG")).expanduser() if env else SHIPPED_CATALOG


def user_catalog_path() -> Path:
    env = os.environ.get("RECOMMENDER_USER_CATALOG")
    if env:
        return Path(_no_nul(env, "RECOMMENDER_USER_CATALOG")).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "llm-recommender" / "user.duckdb"


def cache_root() -> Path:
    """Files the tool can rebuild (synthetic models, benchmark item sets, catalog read cache): ``$RECOMMENDER_CACHE``,
    else ``$XDG_CACHE_HOME/llm-recommender`` (``~/.cache/llm-recommender``)."""
    env = os.environ.get("RECOMMENDER_CACHE")
    return Path(env) if env else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llm-recommender"


def private_cache_dir(name: str) -> "Path | None":
    """``cache_root()/name``, created for this user alone (0700), or None where it cannot be trusted: not ours, or
    writable by others (another user could plant what we would read back as our own data)."""
    d = cache_root() / name
    try:
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = d.stat()
    except OSError:
        return None
    if (hasattr(os, "getuid") and st.st_uid != os.getuid()) or st.st_mode & 0o022:
        return None
    return d


PRIVATE_CACHE_FILES = 8  # files kept per private cache folder (checkouts, versions), newest first


def read_private_json(f: "Path | None"):
    """The JSON an earlier run stored in ``f`` (data, never code), or None when absent, unreadable, not valid JSON or
    not this user's own file (owned by another user, or writable by others)."""
    if f is None or not f.is_file():
        return None
    try:
        st = f.stat()
        if (hasattr(os, "getuid") and st.st_uid != os.getuid()) or st.st_mode & 0o022:
            return None
        return json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_private_json(f: Path, text: str) -> None:
    """Store ``text`` (JSON) in ``f`` for this user alone (0600), atomically (a temporary file replaced into place),
    keeping the newest PRIVATE_CACHE_FILES files of its folder; a cache that cannot be written is skipped."""
    tmp = f.with_name(f"{f.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.chmod(tmp, 0o600)
        os.replace(tmp, f)
        for old in sorted(f.parent.glob("*.json"), key=lambda p: p.stat().st_mtime)[:-PRIVATE_CACHE_FILES]:
            old.unlink(missing_ok=True)
    except OSError:
        tmp.unlink(missing_ok=True)


def caches_off() -> bool:
    """``RECOMMENDER_CATALOG_CACHE=off`` turns every read cache off (catalog rows, GPU profiles)."""
    return os.environ.get("RECOMMENDER_CATALOG_CACHE", "").lower() in ("0", "off", "no", "false")
