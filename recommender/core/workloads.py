"""Workload presets (profiles/workloads/*.yaml), strictly validated."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Optional


from recommender.core.errors import UserError
from recommender.core.fuzzy import resolve
from recommender.core.paths import (PROFILES_DIR, caches_off, private_cache_dir, read_private_json,
                                    write_private_json)
from recommender.core.records import Workload

DEFAULT_WORKLOAD = "chat"


WORKLOAD_CACHE_VERSION = 1  # of the cached layout (each file's parsed YAML, validated again on every read)


def load_workloads(directory: Optional[Path] = None) -> dict[str, Workload]:
    """Every ``*.yaml`` of ``directory`` (default profiles/workloads), validated. The parsed YAML of an unchanged
    directory (every file's name, size and modification time) is kept between runs in a private JSON cache, as
    hardware profiles are (recommender.hardware.profiles): importing and running the YAML parser cost ~20 ms of
    `recommend`'s start. What is read back is validated by ``Workload`` like the YAML it came from."""
    directory = directory or PROFILES_DIR / "workloads"
    paths = sorted(directory.glob("*.yaml"))
    cache = _cache_file(directory, paths)
    datas = _cached(cache)
    if datas is not None and len(datas) == len(paths):
        try:
            out = {}
            for data in datas:
                wl = Workload.model_validate(data)
                out[wl.name] = wl
            return out
        except (ValueError, TypeError):  # a cache that no longer validates: read the YAML (its error messages)
            pass
    return _read_workloads(paths, cache)


def _cache_file(directory: Path, paths: list[Path]) -> tuple[Optional[Path], Any]:
    if caches_off():
        return None, None
    try:
        key = [str(directory.resolve()), [[p.name, st.st_size, st.st_mtime_ns] for p in paths for st in (p.stat(),)]]
    except OSError:
        return None, None
    d = private_cache_dir("workloads")
    if d is None:
        return None, None
    digest = hashlib.sha256(json.dumps([WORKLOAD_CACHE_VERSION, key]).encode()).hexdigest()[:24]
    return d / f"{digest}.json", key


def _cached(cache: tuple[Optional[Path], Any]) -> Optional[list]:
    """The parsed files of an unchanged directory as an earlier run stored them (JSON: data, never code); None when
    absent, unreadable, not this user's own file or for another key."""
    f, key = cache
    data = read_private_json(f)
    if not isinstance(data, dict) or data.get("key") != key or not isinstance(data.get("files"), list):
        return None
    return data["files"]


def _store(cache: tuple[Optional[Path], Any], datas: list) -> None:
    f, key = cache
    if f is None:
        return
    try:
        text = json.dumps({"key": key, "files": datas})
        if json.loads(text)["files"] != datas:  # only YAML that JSON keeps exactly is cached
            return
    except (TypeError, ValueError):
        return
    write_private_json(f, text)


def _read_workloads(paths: list[Path], cache: tuple[Optional[Path], Any]) -> dict[str, Workload]:
    import yaml  # noqa: PLC0415
    from pydantic import ValidationError  # noqa: PLC0415

    out = {}
    datas = []
    for p in paths:
        try:
            data = yaml.load(p.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
            wl = Workload.model_validate(data)
            datas.append(data)
        except (yaml.YAMLError, ValidationError, TypeError) as e:
            first = str(e).splitlines()
            raise UserError(f"invalid workload profile {p}: {' '.join(first[:3])}",
                            hint="fix the YAML; fields: name, prompt_tokens, output_tokens, contexts, batches") from None
        out[wl.name] = wl
    _store(cache, datas)
    return out


def get_workload(name: str, directory: Optional[Path] = None) -> Workload:
    wls = load_workloads(directory)
    key = resolve(name, wls.keys(), "workload", hint_cmd=f"workloads: {', '.join(sorted(wls))}")
    return wls[key]
