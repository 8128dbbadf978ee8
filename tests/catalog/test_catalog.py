"""The shipped catalog, the user overlay, `catalog add|refresh|build`, and transactions."""

import json
import struct

import pytest
from conftest import assert_close, assert_user_error, sha256
from gguf_helpers import TINY, write_gguf


from recommender.core.paths import SHIPPED_CATALOG, SOURCES_DIR
from recommender.core.records import Variant
from recommender.model.arch import spec_from_config
from recommender.catalog.build import build_catalog, sources_digest
from recommender.catalog.store import Catalog, CatalogWriter


def _rows(path, sql):
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    try:
        return sorted(con.execute(sql).fetchall(), key=repr)
    finally:
        con.close()


def test_shipped_catalog_is_up_to_date_with_its_sources(tmp_path):
    """Fails when sources/ or the size rules changed and `recommender catalog build` was not rerun."""
    meta = dict(_rows(SHIPPED_CATALOG, "SELECT key, value FROM catalog_meta"))
    assert meta["sources_sha256"] == sources_digest(SOURCES_DIR), "run `recommender catalog build` and commit"
    fresh = tmp_path / "fresh.duckdb"
    build_catalog(fresh, SOURCES_DIR)
    for sql in ("SELECT id, spec_json, source, license FROM models",
                "SELECT model_id, quant, weights_bytes, embedding_bytes, expert_bytes, basis, output_bytes, ple_bytes, "
                "mtp_bytes, mtp_expert_bytes FROM variants",
                "SELECT * FROM published_scores", "SELECT * FROM measurements"):
        assert_close(_rows(fresh, sql), _rows(SHIPPED_CATALOG, sql), path=sql)
    # the shipped calibration is the one these measured rows give (fitting time aside)
    cal = "SELECT value FROM catalog_meta WHERE key = 'calibration'"
    assert_close(json.loads(_rows(fresh, cal)[0][0])["terms"], json.loads(_rows(SHIPPED_CATALOG, cal)[0][0])["terms"])


def test_catalog_list_has_real_models_with_sources(cli):
    r = cli("catalog", "list", "--json")
    assert r.code == 0, r.err
    models = r.json()
    assert len(models) >= 35
    for m in models:
        assert m["source"] and m["params_total"] > 0 and m["origin"] == "shipped"
        assert len(m["quants"]) >= 7
    ids = {m["id"] for m in models}
    assert {"Qwen/Qwen2.5-7B", "meta-llama/Llama-3.1-8B", "Qwen/Qwen3-30B-A3B"} <= ids
    moe = next(m for m in models if m["id"] == "Qwen/Qwen3-30B-A3B")
    assert moe["params_active"] < moe["params_total"] / 5


def test_show_accepts_short_names_and_suggests(cli):
    r = cli("catalog", "show", "qwen2.5-7b", "--json")
    assert r.code == 0, r.err
    data = r.json()
    assert data["model"]["id"] == "Qwen/Qwen2.5-7B"
    q4 = next(v for v in data["variants"] if v["quant"] == "Q4_K_M")
    assert q4["weights_bytes"] == pytest.approx(4_682_433_632, rel=0.03)  # the public GGUF file
    r = cli("catalog", "show", "qwen2.5-7")
    assert_user_error(r)  # ambiguous: 7B / 72B
    # a name that equals one model's (case-insensitive) wins over the longer names it is part of (-Instruct)
    assert cli("catalog", "show", "llama-3.1-8b", "--json").json()["model"]["id"] == "meta-llama/Llama-3.1-8B"
    r = cli("catalog", "show", "qwen2.5-8b")
    assert_user_error(r)
    assert "did you mean" in r.err and "Qwen/Qwen2.5-7B" in r.err


def test_add_config_goes_to_the_overlay_only(cli, tmp_path, user_catalog):
    before = sha256(SHIPPED_CATALOG)
    folder = tmp_path / "tiny-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY))
    r = cli("catalog", "add", str(folder / "config.json"), "--id", "test/tiny-llama", "--json")
    assert r.code == 0, r.err
    assert r.json()["added"] == "test/tiny-llama"
    assert sha256(SHIPPED_CATALOG) == before  # the shipped file is never written
    assert user_catalog.exists()
    listed = {m["id"]: m for m in cli("catalog", "list", "--json").json()}
    assert listed["test/tiny-llama"]["origin"] == "user"
    assert listed["test/tiny-llama"]["params_total"] == spec_from_config(TINY, "x").params_total
    assert len(listed) >= 39


def test_add_gguf_reads_header_sizes(cli, tmp_path):
    spec = spec_from_config(TINY, "test/tiny")
    path = tmp_path / "tiny-q8.gguf"
    write_gguf(path, spec, "Q8_0")
    r = cli("catalog", "add", str(path), "--id", "test/tiny-gguf", "--json")
    assert r.code == 0, r.err
    shown = cli("catalog", "show", "test/tiny-gguf", "--json").json()
    q8 = next(v for v in shown["variants"] if v["quant"] == "Q8_0")
    from recommender.model.arch import read_gguf_header

    assert q8["weights_bytes_provenance"] == "measured"
    assert q8["weights_bytes"] == read_gguf_header(path).tensor_data_bytes
    assert shown["model"]["num_layers"] == TINY["num_hidden_layers"]


def _write_safetensors(path, tensors: dict[str, tuple[str, list[int]]]):
    header, offset = {}, 0
    sizes = {"BF16": 2, "F16": 2, "F32": 4}
    for name, (dtype, shape) in tensors.items():
        n = sizes[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)
    return offset


def test_add_hf_folder_measures_safetensors(cli, tmp_path):
    folder = tmp_path / "models--acme--tiny" / "snapshots" / "abc123"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({**TINY, "torch_dtype": "bfloat16"}))
    nbytes = _write_safetensors(folder / "model.safetensors", {"model.embed_tokens.weight": ("BF16", [32, 64]),
                                                               "lm_head.weight": ("BF16", [32, 64])})
    r = cli("catalog", "add", str(folder), "--json")
    assert r.code == 0, r.err
    assert r.json()["added"] == "acme/tiny"  # id from the HF cache layout
    bf16 = next(v for v in cli("catalog", "show", "acme/tiny", "--json").json()["variants"] if v["quant"] == "BF16")
    assert bf16["weights_bytes"] == nbytes and bf16["weights_bytes_provenance"] == "measured"


@pytest.mark.parametrize("content", ['{"hidden_size": 64', '[1, 2, 3]', '{"model_type": "llama"}'])
def test_malformed_config_changes_nothing(cli, tmp_path, user_catalog, content):
    bad = tmp_path / "config.json"
    bad.write_text(content)
    assert_user_error(cli("catalog", "add", str(bad)))
    assert not user_catalog.exists()


def test_truncated_gguf_is_rejected(cli, tmp_path, user_catalog):
    spec = spec_from_config(TINY, "test/tiny")
    path = tmp_path / "tiny.gguf"
    write_gguf(path, spec, "F16")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    assert_user_error(cli("catalog", "add", str(path)))
    not_gguf = tmp_path / "fake.gguf"
    not_gguf.write_bytes(b"not a gguf at all" * 10)
    assert_user_error(cli("catalog", "add", str(not_gguf)))
    assert not user_catalog.exists()


def test_refresh_is_all_or_nothing(cli, tmp_path):
    root = tmp_path / "models"
    for name, content in (("good", json.dumps(TINY)), ("bad", "{not json")):
        (root / name).mkdir(parents=True)
        (root / name / "config.json").write_text(content)
    assert_user_error(cli("catalog", "refresh", str(root)))
    ids = {m["id"] for m in cli("catalog", "list", "--json").json()}
    assert "local/good" not in ids
    r = cli("catalog", "refresh", str(root), "--skip-bad", "--json")
    assert r.code == 0, r.err
    assert r.json()["added_or_updated"] == ["local/good"] and len(r.json()["skipped"]) == 1
    assert "local/good" in {m["id"] for m in cli("catalog", "list", "--json").json()}


def test_user_rows_survive_a_rebuilt_shipped_catalog(cli, tmp_path):
    import shutil

    base = tmp_path / "base.duckdb"
    shutil.copyfile(SHIPPED_CATALOG, base)  # the shipped file as built (test_shipped_catalog_is_up_to_date_...)
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    env = {"RECOMMENDER_CATALOG": str(base)}
    assert cli("catalog", "add", str(tmp_path / "config.json"), "--id", "test/keep", env=env).code == 0
    r = cli("--catalog", str(base), "catalog", "build")  # an upgrade replaces the shipped file
    assert r.code == 0, r.err
    assert "test/keep" in {m["id"] for m in cli("catalog", "list", "--json", env=env).json()}


def test_unreadable_catalog(cli, tmp_path):
    junk = tmp_path / "junk.duckdb"
    junk.write_bytes(b"\0garbage" * 100)
    assert_user_error(cli("--catalog", str(junk), "catalog", "list"))
    assert_user_error(cli("--catalog", str(tmp_path / "missing.duckdb"), "catalog", "list"))
    r = cli("--vram", "24", prog="recommend", env={"RECOMMENDER_CATALOG": str(junk)})
    assert_user_error(r)


def test_failed_write_leaves_no_half_written_rows(tmp_path):
    path = tmp_path / "u.duckdb"
    spec = spec_from_config(TINY, "test/a")
    good = (spec, [Variant(model_id="test/a", quant="F16", weights_bytes=1)], None)
    dup = Variant(model_id="test/b", quant="F16", weights_bytes=1)
    bad = (spec.model_copy(update={"id": "test/b"}), [dup, dup], None)  # duplicate primary key mid-way
    with CatalogWriter(path, origin="user") as w:
        with pytest.raises(Exception):
            w.put_models([good, bad])
    cat = Catalog(SHIPPED_CATALOG, path)
    ids = set(cat.models())
    assert "test/a" not in ids and "test/b" not in ids
    cat.close()


_WARM_RUN = """
import sys
from recommender.cli.recommend_cmd import main as recommend_main
sys.argv = ["recommend", "--vram", "24", "--json"]
try:
    recommend_main()
finally:
    print("duckdb imported:", "duckdb" in sys.modules, file=sys.stderr)
"""


def test_reads_are_cached_between_runs_and_follow_every_write(cli, tmp_path, user_catalog):
    """The second run of a question reads the rows of the first without opening DuckDB (recommend's cold start), gives
    the same answer, and any write to the overlay (or a broken cache file) is seen by the next run."""
    import os
    import subprocess
    import sys

    env = {"RECOMMENDER_CACHE": str(tmp_path / "cache")}
    first = cli("--vram", "24", "--json", prog="recommend", env=env)
    assert first.code == 0, first.err
    cached = list((tmp_path / "cache" / "catalog-reads").glob("*.json"))
    assert len(cached) == 1

    def warm() -> tuple[str, str]:
        e = {**os.environ, "RECOMMENDER_USER_CATALOG": str(user_catalog), **env}
        e.pop("RECOMMENDER_CATALOG", None)
        p = subprocess.run([sys.executable, "-c", _WARM_RUN], capture_output=True, text=True, env=e, timeout=120)
        assert p.returncode == 0, p.stderr
        return p.stdout, p.stderr

    out, err = warm()
    assert json.loads(out) == first.json() and "duckdb imported: False" in err

    (tmp_path / "config.json").write_text(json.dumps(TINY))
    assert cli("catalog", "add", str(tmp_path / "config.json"), "--id", "test/cached", env=env).code == 0
    assert "test/cached" in {m["id"] for m in cli("catalog", "list", "--json", env=env).json()}
    # a second write to an overlay whose rows are now cached
    assert cli("catalog", "add", str(tmp_path / "config.json"), "--id", "test/cached-2", env=env).code == 0
    assert {"test/cached", "test/cached-2"} <= {m["id"] for m in cli("catalog", "list", "--json", env=env).json()}
    r = cli("--vram", "24", "--json", prog="recommend", env=env)
    assert r.code == 0, r.err
    assert r.json()["counts"]["models"] == first.json()["counts"]["models"] + 2  # the new models are ranked

    cached[0].write_bytes(b"not a cache file")  # a broken cache is rebuilt, never trusted
    again = cli("--vram", "24", "--json", prog="recommend", env=env)
    assert again.code == 0, again.err
    off = cli("--vram", "24", "--json", prog="recommend", env={**env, "RECOMMENDER_CATALOG_CACHE": "off"})
    assert again.json() == off.json() == r.json()


def test_read_cache_folder_keeps_only_recently_used_pairs(cli, tmp_path):
    """Each catalog pair a user ever opened leaves a ~1 MB cache file; the folder is pruned when one is written, so
    it stays at MAX_FILES files, keeps the most recently used ones (a hit counts as a use) and drops month-old ones."""
    import os
    import time

    from recommender.catalog.read_cache import MAX_AGE_S, MAX_FILES

    folder = tmp_path / "cache" / "catalog-reads"
    folder.mkdir(parents=True)
    now = time.time()
    others = []
    for i in range(MAX_FILES + 3):  # other pairs used 1..19 hours ago
        f = folder / f"other{i:02d}.json"
        f.write_bytes(b"x")
        os.utime(f, (now - 3600 * (i + 1),) * 2)
        others.append(f)
    month_old = folder / "month-old.json"
    month_old.write_bytes(b"x")
    os.utime(month_old, (now - MAX_AGE_S - 60,) * 2)
    dead_tmp = folder / ".abc.json.123.tmp"
    dead_tmp.write_bytes(b"x")
    os.utime(dead_tmp, (now - 2 * 3600,) * 2)

    env = {"RECOMMENDER_CACHE": str(tmp_path / "cache")}
    assert cli("--vram", "24", "--json", prog="recommend", env=env).code == 0  # writes this pair's cache: prunes
    kept = {f.name for f in folder.iterdir()}
    assert len(kept) == MAX_FILES
    mine = kept - {f.name for f in others}
    assert len(mine) == 1  # this run's file
    assert kept - mine == {f.name for f in others[:MAX_FILES - 1]}  # the most recently used of the others

    # a hit refreshes a file's use: age ours, read it again, and it is the newest file in the folder
    ours = folder / mine.pop()
    os.utime(ours, (now - 3600 * 50,) * 2)
    assert cli("--vram", "24", "--json", prog="recommend", env=env).code == 0
    assert ours.stat().st_mtime > now - 60


# -- freshness: release dates, model lines, newer siblings (recommender.core.freshness) -------------------------------
def test_model_line_groups_versions_and_keeps_variants_apart():
    from recommender.core.freshness import model_family, model_line

    assert model_line("Qwen/Qwen3-30B-A3B-Instruct-2507") == model_line("Qwen/Qwen3.6-35B-A3B") == ("qwen", ("qwen",))
    assert model_line("Qwen/Qwen3-Coder-30B-A3B-Instruct") == ("qwen", ("qwen", "coder"))
    assert model_line("meta-llama/Meta-Llama-3-8B-Instruct") == model_line("meta-llama/Llama-3.1-8B-Instruct")
    assert model_line("google/gemma-3-27b-it") == model_line("google/gemma-4-31B-it")
    assert model_line("MiniMaxAI/MiniMax-M2.5") == model_line("MiniMaxAI/MiniMax-M3")
    assert model_line("deepseek-ai/DeepSeek-V4-Flash") != model_line("deepseek-ai/DeepSeek-V3.2")
    ids = ("zai-org/GLM-5", "moonshotai/Kimi-K2.6", "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
    assert {model_family(m) for m in ids} == {"glm", "kimi", "nemotron"}


def test_newer_sibling_is_same_line_later_similar_size():
    from recommender.core.freshness import Dated, newer_sibling

    q3 = Dated("Qwen/Qwen3-32B", "2025-04-29", 32_800_000_000, False, True)
    others = [q3, Dated("Qwen/Qwen3.5-27B", "2026-02-24", 27_800_000_000, False, True),
              Dated("Qwen/Qwen3.6-27B", "2026-04-22", 27_800_000_000, False, True),
              Dated("Qwen/Qwen3.6-35B-A3B", "2026-04-16", 36_000_000_000, True, True),  # MoE: another size class
              Dated("Qwen/Qwen3.5-9B", "2026-03-02", 9_700_000_000, False, True),  # too small
              Dated("Qwen/Qwen3-Coder-Next", "2026-05-01", 30_000_000_000, False, True),  # another line
              Dated("Qwen/Qwen3.8-27B", None, 27_800_000_000, False, True),  # no date: not newer
              Dated("Qwen/Qwen3.7-27B-Base", "2026-09-01", 27_800_000_000, False, False)]  # base: another group
    assert newer_sibling(q3, others).id == "Qwen/Qwen3.6-27B"
    assert newer_sibling(others[2], others) is None
    assert newer_sibling(Dated("Qwen/Qwen3-32B", None, 32_800_000_000, False, True), others) is None
    unknown_kind = Dated("Qwen/Qwen3-32B", "2025-04-29", 32_800_000_000, False, None)  # a Hub model, kind unknown
    assert newer_sibling(unknown_kind, others).id == "Qwen/Qwen3.7-27B-Base"


def test_release_dates_compare_at_their_precision():
    from recommender.core.freshness import parse_since, released_since

    since = parse_since("2026-06")
    assert released_since("2026-06", since) and released_since("2026-06-01", since)
    assert not released_since("2026-05-31", since) and not released_since(None, since)
    assert released_since("2026-06", parse_since("2026-06-15"))
    for bad in ("June", "2026-13", "2026/06"):
        with pytest.raises(ValueError):
            parse_since(bad)


def test_sources_release_dates_are_iso_with_a_basis():
    """sources.csv release_date is YYYY[-MM[-DD]] and every dated row says where the date comes from."""
    import csv
    import re

    with (SOURCES_DIR / "configs" / "sources.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    dated = [r for r in rows if r["release_date"]]
    assert dated
    for r in dated:
        assert re.fullmatch(r"\d{4}(-\d{2}(-\d{2})?)?", r["release_date"]), r["model"]
        assert r["release_date_basis"].strip(), r["model"]


def test_catalog_list_since_and_outdated(cli):
    r = cli("catalog", "list", "--since", "2026-06", "--json")
    assert r.code == 0, r.err
    rows = r.json()
    assert rows and all(m["release_date"] >= "2026-06" for m in rows)
    assert all(m["family"] for m in rows)
    assert_user_error(cli("catalog", "list", "--since", "last june"))
    r = cli("catalog", "outdated", "--json")
    assert r.code == 0, r.err
    for pair in r.json():
        assert pair["newer_release_date"] > pair["release_date"]


def test_a_question_reads_the_stored_byte_sums_instead_of_typing_tensors(monkeypatch):
    """`catalog build` stores each variant's per-tensor byte sums (migration 4); reading the variants hands them to the
    predictor, so a ranking over the shipped models never applies llama.cpp's tensor-type rules (issue 26)."""
    import recommender.predict.analytical as analytical

    cat = Catalog(SHIPPED_CATALOG)
    variants = cat.variants()
    spec = cat.models()["Qwen/Qwen3.6-35B-A3B"]  # an MoE with an MTP block: every sum is non-zero
    v = variants[(spec.id, "Q4_K_M")]
    assert v.output_bytes > 0 and v.mtp_bytes > v.mtp_expert_bytes > 0

    def no_typing(*_a, **_k):
        raise AssertionError("tensor types computed for a shipped variant")

    monkeypatch.setattr(analytical, "weights_breakdown", no_typing)
    assert analytical.output_bytes(spec, "Q4_K_M") == v.output_bytes
    assert analytical.mtp_bytes(spec, "Q4_K_M") == (v.mtp_bytes, v.mtp_expert_bytes)
    assert analytical.variant_bytes(spec, "Q4_K_M") == (v.weights_bytes, v.embedding_bytes, v.expert_bytes)
