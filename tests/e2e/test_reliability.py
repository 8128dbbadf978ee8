"""Issue 9 (a hostile test pass): nothing lost, no foreign code run, no traceback.

Each test here failed on commit a438577 (before the fixes) and passes after; the ones marked "holds" guard what
already held then (kill -9 leaves the old or the new overlay). Real processes, as a user runs them.
"""

from __future__ import annotations

import json
import math
import os
import signal
import struct
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import BIN, assert_user_error
from gguf_helpers import ARR, STR, U32, llama_kv, raw_gguf

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96, "vocab_size": 32,
        "max_position_embeddings": 256, "tie_word_embeddings": False, "torch_dtype": "float16"}


def _add_tiny(cli, tmp_path: Path, mid: str, env: dict | None = None):
    f = tmp_path / f"{mid.replace('/', '_')}.json"
    f.write_text(json.dumps(TINY))
    return cli("catalog", "add", str(f), "--id", mid, env=env)


def _no_traceback(r) -> None:
    assert "Traceback" not in r.err, r.err[-2000:]
    assert r.code in (0, 1, 2), (r.code, r.err[-2000:])


# ---------------------------------------------------------------------------------------------------------------
# High 1: probe/calibrate rows lost to "Unique file handle conflict" when the overlay already exists
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cache", ["off", "on"])
def test_a_write_after_a_read_of_an_existing_overlay_keeps_the_row(tmp_path, monkeypatch, cache):
    """What probe perf / calibrate do in one process: read the layered catalog (the overlay attached read-only),
    then write a row to that same overlay. Before the fix DuckDB refused the second handle and the row was lost."""
    from recommender.catalog.store import Catalog, UserCatalog
    from recommender.core.paths import SHIPPED_CATALOG

    monkeypatch.setenv("RECOMMENDER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("RECOMMENDER_CATALOG_CACHE", cache)
    user = tmp_path / "user.duckdb"
    UserCatalog(user).close()  # an overlay that already exists
    cat = Catalog(SHIPPED_CATALOG, user)
    assert len(cat.models()) >= 38 and cat.meta_values("k", user_only=True) == []
    for i in range(3):
        with UserCatalog(user) as w:
            w.put_meta({f"k{i}": "v"})
        assert cat.meta_values(f"k{i}", user_only=True) == ["v"]  # read again after the write: reopened, seen
    cat.close()


def test_two_catalogs_open_at_once_on_one_shipped_file(tmp_path, monkeypatch):
    """Two readers in one process, the shipped file and two overlays, both open (the fresh-clone CI of stop 29:
    "database with name usr already exists"; DuckDB hands one cached instance per path, and ATTACH is per instance).
    A plain read-only connection to the shipped file still opens beside them."""
    import duckdb

    from recommender.catalog.store import Catalog, UserCatalog
    from recommender.core.paths import SHIPPED_CATALOG

    monkeypatch.setenv("RECOMMENDER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("RECOMMENDER_CATALOG_CACHE", "off")
    cats = []
    for i in range(2):
        user = tmp_path / f"user{i}.duckdb"
        with UserCatalog(user) as w:
            w.put_meta({"who": f"overlay {i}"})
        cats.append(Catalog(SHIPPED_CATALOG, user))
    assert [c.meta_values("who", user_only=True) for c in cats] == [["overlay 0"], ["overlay 1"]]
    con = duckdb.connect(str(SHIPPED_CATALOG), read_only=True)
    assert con.execute("SELECT count(*) FROM models").fetchone()[0] == len(cats[0].models())
    con.close()
    for c in cats:
        c.close()


def test_two_probes_on_an_existing_overlay_store_both_rows(cli, tmp_path, user_catalog):
    """`probe perf` twice with an overlay that exists and no read cache: both (failed) rows are stored."""
    from conftest import smollm2_gguf_or_skip

    gguf = smollm2_gguf_or_skip()
    assert _add_tiny(cli, tmp_path, "test/existing").code == 0  # the overlay exists before the first probe
    env = {"RECOMMENDER_CATALOG_CACHE": "off"}
    for _ in range(2):  # an impossible context: the child fails fast and the failed row must still be kept
        r = cli("probe", "perf", str(gguf), "--context", "16384K", "--prompt-tokens", "16", "--output-tokens", "4",
                "--repeats", "1", "--timeout", "60", env=env)
        assert r.code == 1 and "Traceback" not in r.err, r.err
        assert "error: probe failed" in r.err
    rows = cli("catalog", "measurements", "--json").json()
    mine = [m for m in rows if m["status"] == "failed" and m["context_tokens"] == 16384 * 1024]
    assert len(mine) == 2


# ---------------------------------------------------------------------------------------------------------------
# High 2: an evaluators/ folder in the current directory replaced the probe worker
# ---------------------------------------------------------------------------------------------------------------
def _hijack_folder(tmp_path: Path) -> Path:
    """An `evaluators/` package where the user stands, whose workers record that they ran."""
    cwd = tmp_path / "unpacked-model-repo"
    pkg = cwd / "evaluators"
    pkg.mkdir(parents=True)
    marker = tmp_path / "HIJACKED"
    code = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    for mod in ("__init__", "worker", "accuracy_worker", "runner", "base"):
        (pkg / f"{mod}.py").write_text(code)
    (cwd / "runpy.py").write_text(code)  # the bootstrap's own import must not be hijacked either
    return cwd


def test_perf_worker_ignores_an_evaluators_folder_in_the_cwd(tmp_path, monkeypatch):
    from evaluators.runner import run_probe
    from conftest import FAKE_ENV, fake_job as _fake_job

    cwd = _hijack_folder(tmp_path)
    monkeypatch.chdir(cwd)
    res = run_probe(_fake_job(batch=2), timeout_s=60, env=FAKE_ENV)
    assert not (tmp_path / "HIJACKED").exists(), "the cwd's evaluators/ ran instead of the worker"
    assert res.status == "ok", res.failure_reason


def test_accuracy_worker_ignores_an_evaluators_folder_in_the_cwd(tmp_path, monkeypatch):
    from evaluators.accuracy_job import AccuracyJob
    from recommender.probes.accuracy.probe import run_job

    cwd = _hijack_folder(tmp_path)
    monkeypatch.chdir(cwd)
    job = AccuracyJob(engine="llama.cpp", model_path=str(tmp_path / "missing.gguf"), tasks={})
    res = run_job(job, timeout_s=120, echo=False)
    assert not (tmp_path / "HIJACKED").exists(), "the cwd's evaluators/ ran instead of the worker"
    # the real worker answered (the hijacked one prints nothing: "printed no result")
    assert "printed no result" not in (res.failure_reason or "") and "exited with code" not in (res.failure_reason
                                                                                                or ""), res


# ---------------------------------------------------------------------------------------------------------------
# High 3: the read cache unpickled whatever sat at its path
# ---------------------------------------------------------------------------------------------------------------
_WARM = ("import sys; sys.argv = ['recommend', '--vram', '24', '--json']\n"
         "from recommender.cli.recommend_cmd import main\nmain()\n")


def _recommend(env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _WARM], capture_output=True, text=True, env=env, timeout=120,
                          cwd=str(ROOT))


def test_read_cache_never_runs_code_and_refuses_files_others_can_write(tmp_path):
    cache = tmp_path / "cache"
    env = {**os.environ, "RECOMMENDER_CACHE": str(cache), "RECOMMENDER_USER_CATALOG": str(tmp_path / "u.duckdb")}
    env.pop("RECOMMENDER_CATALOG", None)
    first = _recommend(env)
    assert first.returncode == 0, first.stderr
    files = [f for f in (cache / "catalog-reads").iterdir() if not f.name.startswith(".")]
    assert len(files) == 1
    ranked = json.loads(first.stdout)

    # 1. a planted pickle that runs code when loaded: never executed, whatever name it has
    marker = tmp_path / "PWNED"
    import pickle

    class Boom:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    files[0].write_bytes(pickle.dumps(Boom()))
    (cache / "catalog-reads" / (files[0].stem + ".pickle")).write_bytes(pickle.dumps(Boom()))
    again = _recommend(env)
    assert again.returncode == 0, again.stderr
    assert not marker.exists(), "the read cache executed a planted pickle"
    assert json.loads(again.stdout) == ranked

    # 2. a cache with the right fingerprint and forged rows, in a file others can write: ignored
    good = json.loads(files[0].read_bytes().partition(b"\n")[0])
    assert good["fingerprint"][2] and len(good["fingerprint"][2]) == 64  # SHA-256 of the shipped catalog
    body = files[0].read_bytes().partition(b"\n")[2]
    forged = body.replace(b"Qwen", b"Fake")
    assert forged != body
    files[0].write_bytes(files[0].read_bytes().partition(b"\n")[0] + b"\n" + forged)
    os.chmod(files[0], 0o666)
    out = _recommend(env)
    assert out.returncode == 0 and b"Fake" not in out.stdout.encode() and json.loads(out.stdout) == ranked
    os.chmod(files[0], 0o600)
    os.chmod(cache / "catalog-reads", 0o777)  # a folder others can write: nothing in it is trusted
    files[0].write_bytes(files[0].read_bytes().partition(b"\n")[0] + b"\n" + forged)
    out = _recommend(env)
    assert out.returncode == 0 and json.loads(out.stdout) == ranked
    os.chmod(cache / "catalog-reads", 0o700)


# ---------------------------------------------------------------------------------------------------------------
# Medium 4: Rich markup and terminal escapes in names; catalog remove
# ---------------------------------------------------------------------------------------------------------------
def test_markup_in_a_model_name_prints_as_itself_and_can_be_removed(cli, tmp_path):
    name = "evil/[/]x[bold]y"
    assert _add_tiny(cli, tmp_path, name).code == 0
    listed = cli("catalog", "list")
    assert listed.code == 0 and "[/]x[bold]y" in listed.out, listed.err[-1500:]
    shown = cli("catalog", "show", name)
    assert shown.code == 0 and "[/]x[bold]y" in shown.out, shown.err[-1500:]
    for args in (("estimate", name, "--gpu", "RTX 4090"), ("--vram", "24", "--max-latency", "5s", "--top", "50")):
        r = cli(*args, prog="recommender" if args[0] == "estimate" else "recommend")
        assert r.code in (0, 1) and "Traceback" not in r.err, r.err[-1500:]
    removed = cli("catalog", "remove", name, "--json")
    assert removed.code == 0 and removed.json()["removed"] == name
    assert name not in {m["id"] for m in cli("catalog", "list", "--json").json()}
    assert_user_error(cli("catalog", "remove", name))  # a second time: nothing to remove
    assert_user_error(cli("catalog", "remove", "Qwen/Qwen3-8B"))  # shipped models stay


def test_terminal_escapes_in_a_name_are_refused(cli, tmp_path, user_catalog):
    assert_user_error(_add_tiny(cli, tmp_path, "evil/\x1b[31mred\x1b[0m"))
    path = tmp_path / "esc.gguf"
    path.write_bytes(raw_gguf(llama_kv(**{"general.name": (STR, "x\x1b]0;owned\x07")})))
    assert_user_error(cli("catalog", "add", str(path)))
    assert not user_catalog.exists() or "owned" not in cli("catalog", "list").out


# ---------------------------------------------------------------------------------------------------------------
# Medium 5 and 8: bounds on counts, malformed model files, impossible architectures
# ---------------------------------------------------------------------------------------------------------------
BAD_CONFIGS = {
    "1e9 layers": {**TINY, "num_hidden_layers": 10**9},
    "NaN": '{"model_type": "llama", "hidden_size": NaN, "num_hidden_layers": 2, "num_attention_heads": 4, '
           '"intermediate_size": 96, "vocab_size": 32}',
    "Infinity": '{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": Infinity, '
                '"num_attention_heads": 4, "intermediate_size": 96, "vocab_size": 32}',
    "beyond BIGINT": {**TINY, "vocab_size": 2**70},
    "0 KV heads": {**TINY, "num_key_value_heads": 0},
    "-5 layers": {**TINY, "num_hidden_layers": -5},
    "KV heads > heads": {**TINY, "num_key_value_heads": 8},
    "hidden % heads": {**TINY, "hidden_size": 65},
    "3000-deep": json.dumps(TINY)[:-1] + ', "rope_scaling": ' + "[" * 3000 + "1" + "]" * 3000 + "}",
    "string heads": {**TINY, "num_attention_heads": "four"},
    "list layers": {**TINY, "num_hidden_layers": []},
}


BAD_GGUFS = {
    "block_count 2^32-1": raw_gguf(llama_kv(**{"llama.block_count": (U32, 2**32 - 1)})),
    "head_count 0": raw_gguf(llama_kv(**{"llama.attention.head_count": (U32, 0)})),
    "head_count string": raw_gguf(llama_kv(**{"llama.attention.head_count": (STR, "4")})),
    "head_count empty array": raw_gguf(llama_kv(**{"llama.attention.head_count": (ARR, (U32, []))})),
    "kv heads > heads": raw_gguf(llama_kv(**{"llama.attention.head_count_kv": (U32, 64)})),
    "2^40 tensors": raw_gguf(llama_kv(), n_tensors=2**40),
    "2^40 keys": raw_gguf(llama_kv(), n_kv=2**40),
    "array of 2^60": raw_gguf(llama_kv(**{"llama.rope.freqs": (ARR, (U32, [], 2**60))})),
    "kept array of 2^24 (64 MB)": raw_gguf(llama_kv(**{"llama.per_layer": (ARR, (U32, [0] * 2**24))})),
    "tensor with 2^31 dims": raw_gguf(llama_kv(), tensors=[("token_embd.weight", (), 0, 0)])[:-32]
    + struct.pack("<Q", 17) + b"token_embd.weight" + struct.pack("<I", 2**31),
}


def _refused(path: Path, model_id: str | None = None) -> None:
    """In process (the CLI wraps exactly this): one UserError, in bounded time, nothing else raised."""
    from recommender.catalog.ingest import from_path
    from recommender.core.errors import UserError

    t0 = time.perf_counter()
    with pytest.raises(UserError) as exc:
        from_path(path, model_id)
    assert exc.value.message and exc.value.hint
    assert time.perf_counter() - t0 < 10


@pytest.mark.parametrize("case", list(BAD_CONFIGS))
def test_malformed_or_impossible_config_is_one_clean_error(tmp_path, case):
    content = BAD_CONFIGS[case]
    f = tmp_path / "config.json"
    f.write_text(content if isinstance(content, str) else json.dumps(content))
    _refused(f, "test/bad")


def test_malformed_files_through_the_cli_write_nothing(cli, tmp_path, user_catalog):
    """As a user sees it: exit 2, one error and one hint line, the overlay untouched."""
    for i, case in enumerate(["1e9 layers", "NaN", "3000-deep", "0 KV heads"]):
        f = tmp_path / f"c{i}.json"
        c = BAD_CONFIGS[case]
        f.write_text(c if isinstance(c, str) else json.dumps(c))
        assert_user_error(cli("catalog", "add", str(f), "--id", "test/bad"))
    g = tmp_path / "big.gguf"
    g.write_bytes(BAD_GGUFS["block_count 2^32-1"])
    assert_user_error(cli("catalog", "add", str(g)))
    assert not user_catalog.exists()


@pytest.mark.parametrize("case", list(BAD_GGUFS))
def test_hostile_gguf_header_is_one_clean_error_in_bounded_time(tmp_path, case):
    path = tmp_path / "model.gguf"
    path.write_bytes(BAD_GGUFS[case])
    _refused(path)


def _safetensors(path: Path, header) -> None:
    raw = json.dumps(header).encode() if not isinstance(header, bytes) else header
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 64)


BAD_SAFETENSORS = {
    "header is a list": [1, 2, 3],
    "header is a string": "x",
    "negative size": {"w": {"dtype": "F16", "shape": [2], "data_offsets": [64, 0]}},
    "offsets past the file": {"w": {"dtype": "F16", "shape": [2], "data_offsets": [0, 2**62]}},
    "offsets are strings": {"w": {"dtype": "F16", "shape": [2], "data_offsets": ["0", "4"]}},
    "entry is a number": {"w": 5},
    "3000-deep": b"[" * 3000 + b"]" * 3000,
}


@pytest.mark.parametrize("case", list(BAD_SAFETENSORS))
def test_malformed_safetensors_header_is_one_clean_error(tmp_path, case):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY))
    _safetensors(folder / "model.safetensors", BAD_SAFETENSORS[case])
    _refused(folder, "test/st")


def test_refresh_skip_bad_skips_every_malformed_model_and_duplicate_ids(cli, tmp_path):
    root = tmp_path / "models"
    (root / "good").mkdir(parents=True)
    (root / "good" / "config.json").write_text(json.dumps(TINY))
    (root / "dup").mkdir()
    (root / "dup" / "config.json").write_text(json.dumps({**TINY, "_name_or_path": "x"}))
    for i, case in enumerate(["NaN", "3000-deep", "0 KV heads"]):
        (root / f"bad{i}").mkdir()
        c = BAD_CONFIGS[case]
        (root / f"bad{i}" / "config.json").write_text(c if isinstance(c, str) else json.dumps(c))
    (root / "bad.gguf").write_bytes(BAD_GGUFS["head_count 0"])
    deep = root / "deep"
    deep.mkdir()
    p = deep
    for _ in range(40):  # deeper than discover goes: one clean error, never a RecursionError
        p = p / "d"
    p.mkdir(parents=True)
    assert_user_error(cli("catalog", "refresh", str(root)))
    import shutil

    shutil.rmtree(deep)
    stop = cli("catalog", "refresh", str(root))
    assert_user_error(stop)
    assert "--skip-bad" in stop.err
    r = cli("catalog", "refresh", str(root), "--skip-bad", "--json")
    assert r.code == 0, r.err
    out = r.json()
    assert sorted(out["added_or_updated"]) == ["local/dup", "local/good"]
    assert len(out["skipped"]) == 4
    listed = {m["id"] for m in cli("catalog", "list", "--json").json()}
    assert set(out["added_or_updated"]) <= listed


def test_two_folders_with_one_id_are_reported_not_silently_merged(cli, tmp_path):
    root = tmp_path / "models"
    for name in ("a", "b"):
        (root / name).mkdir(parents=True)
        (root / name / "config.json").write_text(json.dumps({**TINY, "_name_or_path": "org/same"}))
    r = cli("catalog", "refresh", str(root), "--skip-bad", "--json")
    assert r.code == 0, r.err
    assert r.json()["added_or_updated"] == ["org/same"] and len(r.json()["skipped"]) == 1


# ---------------------------------------------------------------------------------------------------------------
# Medium 6: special files never read
# ---------------------------------------------------------------------------------------------------------------
def test_special_files_are_refused_not_read(cli, tmp_path, user_catalog):
    fifo = tmp_path / "fifo.duckdb"
    os.mkfifo(fifo)
    for args, prog in (((f"--catalog={fifo}", "recommend", "--vram", "24"), "recommender"),
                       (("--catalog=/dev/zero", "recommend", "--vram", "24"), "recommender"),
                       ((f"--catalog={tmp_path}", "recommend", "--vram", "24"), "recommender")):
        t0 = time.perf_counter()
        assert_user_error(cli(*args, prog=prog))
        assert time.perf_counter() - t0 < 30
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY))
    os.mkfifo(folder / "model.safetensors")
    assert_user_error(cli("catalog", "add", str(folder), "--id", "test/fifo"))
    os.mkfifo(tmp_path / "config.json")
    assert_user_error(cli("catalog", "add", str(tmp_path / "config.json")))
    os.mkfifo(tmp_path / "fifo.gguf")
    assert_user_error(cli("catalog", "add", str(tmp_path / "fifo.gguf")))
    os.mkfifo(tmp_path / "plot.png")
    assert_user_error(cli("sensitivity", "--vram", "24", "--plot", str(tmp_path / "plot.png")))
    ufifo = tmp_path / "user-fifo.duckdb"
    os.mkfifo(ufifo)
    assert_user_error(cli("--vram", "24", prog="recommend", env={"RECOMMENDER_USER_CATALOG": str(ufifo)}))


# ---------------------------------------------------------------------------------------------------------------
# Medium 7: concurrent writers wait for the lock; a reader never fails while they write
# ---------------------------------------------------------------------------------------------------------------
def test_eight_writers_and_a_reader_on_one_overlay_every_row_lands(tmp_path, user_catalog):
    env = {**os.environ, "RECOMMENDER_USER_CATALOG": str(user_catalog), "RECOMMENDER_CACHE": str(tmp_path / "c")}
    env.pop("RECOMMENDER_CATALOG", None)
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(TINY))
    writers = [subprocess.Popen([str(BIN / "recommender"), "catalog", "add", str(cfg), "--id", f"test/w{i}"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
               for i in range(8)]
    reads = []
    while any(w.poll() is None for w in writers):
        r = subprocess.run([str(BIN / "recommend"), "--vram", "24", "--json"], capture_output=True, text=True,
                           env=env, timeout=120)
        reads.append((r.returncode, r.stderr))
    results = [(w.wait(), w.stderr.read()) for w in writers]
    assert all(code == 0 for code, _ in results), [e for c, e in results if c]
    assert reads and all(code == 0 for code, _ in reads), [e for c, e in reads if c]
    listed = subprocess.run([str(BIN / "recommender"), "catalog", "list", "--json"], capture_output=True, text=True,
                            env=env, timeout=120)
    ids = {m["id"] for m in json.loads(listed.stdout)["items"]}
    assert {f"test/w{i}" for i in range(8)} <= ids


def test_a_new_overlay_appears_whole_and_a_second_creator_keeps_the_first(tmp_path, monkeypatch):
    """The overlay file is made under a temporary name and linked into place complete, schema included: a writer
    that starts while another is creating it never opens a half-made file (bench/hostile.py --scale 9 saw one of 144
    concurrent `catalog add` runs call the new overlay damaged and lose its row). When another process linked its
    file first, that one is kept."""
    import duckdb

    from recommender.catalog import store
    from recommender.catalog.migrations import LATEST_VERSION
    from recommender.catalog.store import UserCatalog

    seen = []
    real_link = os.link

    def link(src, dst):
        con = duckdb.connect(str(src), read_only=True)  # what appears at dst is already a whole catalog
        seen.append(con.execute("SELECT max(version) FROM schema_migrations").fetchone()[0])
        con.close()
        assert not Path(dst).exists()
        real_link(src, dst)

    monkeypatch.setattr(store.os, "link", link)
    path = tmp_path / "user.duckdb"
    UserCatalog(path).close()
    assert seen == [LATEST_VERSION] and [p.name for p in tmp_path.iterdir()] == ["user.duckdb"]

    first = tmp_path / "other.duckdb"
    UserCatalog(first).close()
    with UserCatalog(first) as w:  # the file another process linked, with something in it
        w.put_meta({"marker": "first"})
    monkeypatch.setattr(store.os, "link", lambda src, dst: (_ for _ in ()).throw(FileExistsError(dst)))
    store._create_whole(first)  # lost the race: the existing file stays as it was
    con = duckdb.connect(str(first), read_only=True)
    assert con.execute("SELECT value FROM catalog_meta WHERE key = 'marker'").fetchone()[0] == "first"
    con.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.duckdb", "user.duckdb"]


def test_a_writer_that_cannot_get_the_lock_says_busy_and_how_long(tmp_path, user_catalog):
    from recommender.catalog.store import UserCatalog

    UserCatalog(user_catalog).close()
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
                               "print('held', flush=True); time.sleep(30)", str(user_catalog)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        env = {**os.environ, "RECOMMENDER_USER_CATALOG": str(user_catalog), "RECOMMENDER_LOCK_WAIT_S": "1.5"}
        cfg = tmp_path / "config.json"
        cfg.write_text(json.dumps(TINY))
        t0 = time.perf_counter()
        r = subprocess.run([str(BIN / "recommender"), "catalog", "add", str(cfg), "--id", "test/late"],
                           capture_output=True, text=True, env=env, timeout=60)
        assert 1.4 < time.perf_counter() - t0 < 20
        assert r.returncode == 2 and "busy" in r.stderr and "retried for" in r.stderr, r.stderr
        assert "permission" not in r.stderr.lower()
    finally:
        holder.kill()
        holder.wait()


# ---------------------------------------------------------------------------------------------------------------
# holds: kill -9 during a write leaves the overlay in the old or the new state
# ---------------------------------------------------------------------------------------------------------------
def test_kill_9_during_refresh_leaves_the_old_or_the_new_overlay(tmp_path, user_catalog):
    env = {**os.environ, "RECOMMENDER_USER_CATALOG": str(user_catalog), "RECOMMENDER_CATALOG_CACHE": "off"}
    env.pop("RECOMMENDER_CATALOG", None)
    root = tmp_path / "models"
    for i in range(6):
        (root / f"m{i}").mkdir(parents=True)
        (root / f"m{i}" / "config.json").write_text(json.dumps({**TINY, "_name_or_path": f"k9/m{i}"}))
    new = {f"k9/m{i}" for i in range(6)}

    def user_ids() -> set[str]:
        r = subprocess.run([str(BIN / "recommender"), "catalog", "list", "--json"], capture_output=True, text=True,
                           env=env, timeout=120)
        assert r.returncode == 0, r.stderr
        return {m["id"] for m in json.loads(r.stdout)["items"] if m["origin"] == "user"}

    for delay in (0.4, 0.9, 1.4):
        before = user_ids()
        p = subprocess.Popen([str(BIN / "recommender"), "catalog", "refresh", str(root)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        p.wait()
        after = user_ids()
        assert after in (before, before | new), (delay, before, after)
        if after == before | new:  # start again from an empty overlay so the next kill can land mid-write
            for f in user_catalog.parent.glob(user_catalog.name + "*"):
                f.unlink()


# ---------------------------------------------------------------------------------------------------------------
# Medium 10: a corrupted catalog or overlay: one line naming the file
# ---------------------------------------------------------------------------------------------------------------
def _corrupt(src: Path, dst: Path, how: str, at: float) -> None:
    data = bytearray(src.read_bytes())
    if how == "truncate":
        data = data[:max(4096 * 3, int(len(data) * at))]
    else:
        off = max(4096 * 3, int(len(data) * at))
        for i in range(off, min(len(data), off + 4096)):
            data[i] ^= 0xFF
    dst.write_bytes(bytes(data))


@pytest.mark.parametrize("how,at", [("truncate", 0.3), ("truncate", 0.7), ("flip", 0.2), ("flip", 0.5),
                                    ("flip", 0.8)])
def test_corrupted_catalog_is_one_line_naming_the_file(cli, tmp_path, how, at):
    bad = tmp_path / "damaged.duckdb"
    _corrupt(ROOT / "catalog.duckdb", bad, how, at)
    r = cli(f"--catalog={bad}", "recommend", "--vram", "24", "--json", env={"RECOMMENDER_CATALOG_CACHE": "off"})
    if r.code == 0:
        return  # the flipped bytes fell in pages this query does not read
    assert_user_error(r)
    assert str(bad) in r.err


def test_corrupted_overlay_is_one_line_naming_it(cli, tmp_path, user_catalog):
    assert _add_tiny(cli, tmp_path, "test/a").code == 0
    data = bytearray(user_catalog.read_bytes())
    for i in range(4096 * 2, len(data)):
        data[i] ^= 0x5A
    user_catalog.write_bytes(bytes(data))
    r = cli("--vram", "24", prog="recommend", env={"RECOMMENDER_CATALOG_CACHE": "off"})
    assert_user_error(r)
    assert str(user_catalog) in r.err


# ---------------------------------------------------------------------------------------------------------------
# Medium 9: probe accuracy --timeout fires
# ---------------------------------------------------------------------------------------------------------------
def test_accuracy_probe_timeout_fires_while_the_child_hangs(tmp_path, monkeypatch):
    from evaluators.accuracy_job import AccuracyJob
    from recommender.probes.accuracy.probe import run_job

    hang = tmp_path / "hang"
    hang.mkdir()
    # a child that hangs before it prints anything: sitecustomize runs at interpreter start
    (hang / "sitecustomize.py").write_text("import os, time\nif os.environ.get('TEST_HANG'):\n    time.sleep(25)\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(hang), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("TEST_HANG", "1")
    job = AccuracyJob(engine="llama.cpp", model_path=str(tmp_path / "m.gguf"), tasks={})
    t0 = time.perf_counter()
    res = run_job(job, timeout_s=2, echo=False)
    assert time.perf_counter() - t0 < 12, "the timeout did not fire: the parent waited for the child"
    assert res.status == "failed" and "timed out" in res.failure_reason


# ---------------------------------------------------------------------------------------------------------------
# Medium 11: an unexpected error exits 3 with one line and where the traceback went
# ---------------------------------------------------------------------------------------------------------------
def test_an_unexpected_error_exits_3_with_the_traceback_in_a_file(tmp_path, monkeypatch, capsys):
    import typer

    from recommender.cli.common import EXIT_CRASH, run_app

    monkeypatch.setenv("RECOMMENDER_CACHE", str(tmp_path / "cache"))
    app = typer.Typer()

    @app.command()
    def boom() -> None:
        raise RuntimeError("a bug")

    with pytest.raises(SystemExit) as exc:
        run_app(app, [])
    assert exc.value.code == EXIT_CRASH == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("internal error: RuntimeError: a bug")
    where = err.split("the traceback is in ", 1)[1].split(" ")[0]
    assert "Traceback" in Path(where).read_text() and "a bug" in Path(where).read_text()


# ---------------------------------------------------------------------------------------------------------------
# Low: option and path inputs that gave tracebacks or were accepted as nonsense
# ---------------------------------------------------------------------------------------------------------------
LOW_CASES = [
    (("recommend", "--vram", "24", "--context", "9" * 4301), "recommender"),
    (("tune", "--vram", "24", "--seed", "-1", "--trials", "2"), "recommender"),
    (("catalog", "build", "--out", "/nonexistent/folder/c.duckdb"), "recommender"),
    (("estimate", "_", "--gpu", "RTX 4090"), "recommender"),
    (("--vram", "24", "--engine", "-"), "recommend"),
    (("probe", "perf", "x" * 300 + ".gguf", "--timeout", "1e309"), "recommender"),
    (("probe", "accuracy", "m.gguf", "--timeout", "1e309"), "recommender"),
]


@pytest.mark.parametrize("args,prog", LOW_CASES, ids=[" ".join(a)[:40] for a, _ in LOW_CASES])
def test_low_option_inputs_are_clean_errors(cli_inproc, args, prog):
    assert_user_error(cli_inproc(*args, prog=prog))


def test_huge_weights_do_not_zero_every_score(cli):
    # min-max spreads every criterion over the candidates, so the scores must differ; the value normalization (the
    # default) prices latency and memory at 0 far inside the limits, so equal scores are right there: finite ones
    for norm, spread in (("minmax", True), ("value", False)):
        r = cli("--vram", "24", "--weights", "latency=1e308,vram=1e308", "--normalization", norm, "--json",
                prog="recommend")
        assert r.code == 0, r.err
        scores = [c["score"] for c in r.json()["candidates"]]
        assert scores and all(isinstance(s, (int, float)) and math.isfinite(s) for s in scores)
        assert len(set(scores)) > 1 or not spread


def test_memory_overlay_and_remote_paths_are_refused(cli, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(TINY))
    for path in (":memory:", "md:x", "s3://bucket/u.duckdb"):
        assert_user_error(cli("catalog", "add", str(cfg), "--id", "t/m", env={"RECOMMENDER_USER_CATALOG": path}))


def test_build_out_never_replaces_a_foreign_file_and_cleans_stale_temps(cli, tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("mine")
    assert_user_error(cli("catalog", "build", "--out", str(other)))
    assert other.read_text() == "mine"
    from recommender.catalog.build import STALE_BUILD_S, remove_stale_build_files

    stale = tmp_path / ".catalog-abc.duckdb"
    stale.write_bytes(b"x")
    os.utime(stale, (time.time() - STALE_BUILD_S - 5,) * 2)
    fresh = tmp_path / ".catalog-new.duckdb"
    fresh.write_bytes(b"x")
    assert remove_stale_build_files(tmp_path) == [stale] and fresh.exists()


def test_tune_storage_refuses_a_foreign_sqlite_file_and_hides_query_passwords(tmp_path):
    import sqlite3

    from recommender.core.errors import UserError
    from recommender.search.tune import _redact, check_sqlite_storage

    db = tmp_path / "app.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE invoices (id INTEGER)")
    con.commit()
    con.close()
    with pytest.raises(UserError):
        check_sqlite_storage(f"sqlite:///{db}")
    check_sqlite_storage(f"sqlite:///{tmp_path / 'new.db'}")  # a new file is fine
    assert "hunter2" not in _redact("postgresql://u@h/db?password=hunter2&sslmode=require")
    assert "hunter2" not in _redact("postgresql://u:hunter2@h/db")


def test_workers_start_isolated(tmp_path):
    """The command line itself: -P (or the bootstrap on 3.10) and no relative sys.path entry."""
    from evaluators.spawn import worker_argv, worker_env

    argv = worker_argv("evaluators.worker")
    assert "-m" not in argv and argv[-1] == "evaluators.worker"
    env = worker_env({"PYTHONPATH": os.pathsep.join(["", ".", "rel", str(tmp_path)])})
    assert env["PYTHONPATH"] == str(tmp_path) and env["PYTHONSAFEPATH"] == "1"
    p = subprocess.run(argv[:-1] + ["json.tool"], input="{}", capture_output=True, text=True, cwd=str(tmp_path),
                       env=env, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "{}"


def test_build_from_a_sources_folder_without_quality_tables(cli, tmp_path):
    """A sources folder of one's own need not hold sources/quality/ (nor published scores): `catalog build --sources`
    builds the models and their variants (it was an internal error: DuckDB refuses an empty executemany)."""
    from recommender.core.paths import SOURCES_DIR

    src = tmp_path / "sources"
    (src / "configs").mkdir(parents=True)
    with (SOURCES_DIR / "configs" / "sources.csv").open(encoding="utf-8") as f:
        header, *rows = f.read().splitlines()
    keep = [r for r in rows if r.startswith("Qwen/Qwen2.5-7B,")]
    (src / "configs" / "sources.csv").write_text("\n".join([header, *keep]) + "\n", encoding="utf-8")
    shutil.copy(SOURCES_DIR / "configs" / "Qwen__Qwen2.5-7B.json", src / "configs")
    (src / "published_scores.csv").write_text(
        (SOURCES_DIR / "published_scores.csv").read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    out = tmp_path / "c.duckdb"
    r = cli("catalog", "build", "--sources", str(src), "--out", str(out))
    assert r.code == 0, r.err
    listed = cli("--catalog", str(out), "catalog", "list", "--json").json()
    assert [m["id"] for m in listed] == ["Qwen/Qwen2.5-7B"] and "Q4_K_M" in listed[0]["quants"]


def test_a_killed_builds_temporary_is_removed_by_the_next_build_at_once(tmp_path):
    """kill -9 of `catalog build` left `.catalog-*.duckdb` that the next builds kept for an hour: the file names its
    builder's pid, and a pid that no longer runs frees it at once; a running builder's file is kept."""
    import subprocess
    import sys

    from recommender.catalog.build import remove_stale_build_files

    gone_proc = subprocess.Popen([sys.executable, "-c", "pass"])
    gone_proc.wait()  # a pid that ran and ended (the kernel does not hand it out again this soon)
    dead = tmp_path / f".catalog-{gone_proc.pid}-abc.duckdb"
    dead.write_bytes(b"x")
    (tmp_path / f".catalog-{gone_proc.pid}-abc.duckdb.wal").write_bytes(b"x")
    live = tmp_path / f".catalog-{os.getpid()}-def.duckdb"
    live.write_bytes(b"x")
    gone = remove_stale_build_files(tmp_path)
    assert sorted(p.name for p in gone) == sorted([dead.name, dead.name + ".wal"])
    assert live.exists()


def test_tune_storage_that_is_damaged_is_one_error_line(cli, tmp_path):
    """A SQLite file whose header reads but whose pages are torn was an internal error (exit 3) mid-run."""
    import sqlite3

    path = tmp_path / "tune.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE studies (study_id INTEGER PRIMARY KEY, study_name TEXT)")
    con.executemany("INSERT INTO studies (study_name) VALUES (?)", [("s" * 200,)] * 400)
    con.commit()
    con.close()
    data = bytearray(path.read_bytes())
    data[4096 * 2:4096 * 2 + 64] = b"\xff" * 64  # a table page's header overwritten
    path.write_bytes(bytes(data))
    r = cli("tune", "--vram", "24", "--trials", "2", "--storage", f"sqlite:///{path}")
    assert_user_error(r)
    assert "damaged" in r.err
