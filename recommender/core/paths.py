"""Where the shipped data and the user's own catalog live.

- The shipped catalog (``catalog.duckdb``), its text sources (``sources/``) and ``profiles/`` sit at the project root,
  next to the ``recommender`` package. The shipped catalog is opened read-only and never written by user commands.
- Rows a user adds (``catalog add``, probes) go to a per-user overlay catalog, layered over the shipped one:
  ``$RECOMMENDER_USER_CATALOG``, else ``$XDG_DATA_HOME/llm-recommender/user.duckdb``
  (``~/.local/share/llm-recommender/user.duckdb``). Upgrading the tool replaces the shipped file and keeps the overlay.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout (recommender/core/paths.py)
SHIPPED_CATALOG = ROOT / "catalog.duckdb"
SOURCES_DIR = ROOT / "sources"
PROFILES_DIR = ROOT / "profiles"


def base_catalog_path(explicit: str | os.PathLike | None = None) -> Path:
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("RECOMMENDER_CATALOG")
    return Path(env).expanduser() if env else SHIPPED_CATALOG


def user_catalog_path() -> Path:
    env = os.environ.get("RECOMMENDER_USER_CATALOG")
    if env:
        return Path(env).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "llm-recommender" / "user.duckdb"


def cache_root() -> Path:
    """Files the tool can rebuild (synthetic models, benchmark item sets, catalog read cache): ``$RECOMMENDER_CACHE``,
    else ``$XDG_CACHE_HOME/llm-recommender`` (``~/.cache/llm-recommender``)."""
    env = os.environ.get("RECOMMENDER_CACHE")
    return Path(env) if env else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llm-recommender"
