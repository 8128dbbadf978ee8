"""The workload presets' read cache (recommender.core.workloads): a warm read gives the records the YAML gives."""

from __future__ import annotations

import os
import shutil

from recommender.core import workloads
from recommender.core.paths import PROFILES_DIR


def test_cached_workloads_equal_the_yaml(tmp_path, monkeypatch):
    monkeypatch.setenv("RECOMMENDER_CACHE", str(tmp_path / "cache"))
    d = tmp_path / "workloads"
    shutil.copytree(PROFILES_DIR / "workloads", d)
    monkeypatch.setenv("RECOMMENDER_CATALOG_CACHE", "off")
    reference = workloads.load_workloads(d)  # the YAML, parsed, no cache
    assert not (tmp_path / "cache" / "workloads").exists()
    monkeypatch.delenv("RECOMMENDER_CATALOG_CACHE")
    first = workloads.load_workloads(d)  # parses and stores
    assert len(list((tmp_path / "cache" / "workloads").glob("*.json"))) == 1
    warm = workloads.load_workloads(d)  # from the cache
    assert first == reference and warm == reference and list(warm) == list(reference)
    # a changed file is read again, not served from the old entry
    p = d / "chat.yaml"
    p.write_text(p.read_text(encoding="utf-8").replace("name: chat\n", "name: chat-edited\n"), encoding="utf-8")
    os.utime(p, ns=(p.stat().st_atime_ns, p.stat().st_mtime_ns + 10**9))
    changed = workloads.load_workloads(d)
    assert "chat-edited" in changed and "chat" not in changed
