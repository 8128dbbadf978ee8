"""`recommender run`: a row of the last recommend started on llama-cpp-python's OpenAI server with the real SmolLM2
GGUF, measured with `probe serve` (--probe: rows stored, predicted vs measured printed), stopped cleanly (also on
Ctrl-C), and the refusals (port in use, no engine, no weights) as one error line and a hint."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import smollm2_gguf_or_skip

from recommender.probes.launcher import NO_EXTRA_BUFTS_SERVER


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def procs_with(token: str) -> list[int]:
    """Processes whose command line holds ``token`` (the port a server was given)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            line = b" ".join(cmd)
            if (b"llama_cpp.server" in line or NO_EXTRA_BUFTS_SERVER.encode() in line) and token.encode() in cmd:
                out.append(int(d.name))
    return out


@pytest.fixture
def env(tmp_path):
    e = {k: v for k, v in os.environ.items() if k != "RECOMMENDER_CATALOG"}
    e.update(RECOMMENDER_CACHE=str(tmp_path / "cache"), RECOMMENDER_USER_CATALOG=str(tmp_path / "user.duckdb"))
    return e


def rec(env, *args):
    return subprocess.run([sys.executable, "-m", "recommender", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def smollm2_answer(env, quant: str = "Q4_1") -> dict:
    p = rec(env, "recommend", "--gpu", "cpu", "--model", "SmolLM2-135M-Instruct", "--quant", quant, "--engine",
            "llama.cpp", "--context", "1K", "--batch", "2", "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_run_probe_starts_measures_and_stops(env):
    pytest.importorskip("llama_cpp.server.app", reason="pip install 'llama-cpp-python[server]'")
    gguf = smollm2_gguf_or_skip()
    answer = smollm2_answer(env)
    top = answer["candidates"][0]
    port = free_port()
    p = rec(env, "run", "1", "--file", str(gguf), "--port", str(port), "--probe", "--prompt-tokens", "32",
            "--output-tokens", "8", "--repeats", "1", "--timeout", "240")
    assert p.returncode == 0, p.stderr[-2000:]
    assert f"http://127.0.0.1:{port}/v1" in p.stdout
    assert "llama_cpp.server" in p.stderr and f"--n_ctx {top['context_tokens']}" in p.stderr
    line = next(x for x in p.stdout.splitlines() if "→" in x and "TTFT" in x)
    assert "TPOT" in line and "measurement" in line
    assert "stopped" in p.stderr and not procs_with(str(port))
    mid = line.rsplit("measurement ", 1)[1].strip()
    rows = json.loads(rec(env, "catalog", "measurements", "--json").stdout)["items"]
    mine = [r for r in rows if r["id"] == mid]  # stored in the overlay, at the planned batch (the concurrency)
    assert len(mine) == 1 and mine[0]["model_id"] == top["model"] and mine[0]["quant"] == "Q4_1"
    assert mine[0]["batch"] == top["batch"] == 2 and mine[0]["provenance"] == "measured"
    assert mine[0]["ttft_ms"] > 0 and mine[0]["tpot_ms"] > 0


def test_run_stops_cleanly_on_ctrl_c(env):
    pytest.importorskip("llama_cpp.server.app", reason="pip install 'llama-cpp-python[server]'")
    gguf = smollm2_gguf_or_skip()
    smollm2_answer(env)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "recommender", "run", "1", "--file", str(gguf), "--port",
                             str(port), "--timeout", "240"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    url = proc.stdout.readline().strip()  # printed once the server answers
    assert url == f"http://127.0.0.1:{port}/v1", proc.stderr.read()[-2000:] if proc.poll() is not None else url
    assert procs_with(str(port))
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert "stopped" in err, err[-2000:]
    for _ in range(20):
        if not procs_with(str(port)):
            break
        time.sleep(0.25)
    assert not procs_with(str(port))


def test_run_refusals_are_one_error_and_a_hint(env):
    smollm2_answer(env, "Q8_0")  # no Q8_0 file of SmolLM2 here and no known public one
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        p = rec(env, "run", "1", "--port", str(busy))
    if "no llama.cpp engine" not in p.stderr:
        assert p.returncode == 2
        assert p.stderr.startswith("error: no weights of HuggingFaceTB/SmolLM2-135M-Instruct at Q8_0"), p.stderr
        assert "\nhint: " in p.stderr
    # vLLM not on PATH: a vLLM row cannot be run
    p = rec(env, "recommend", "--gpu", "RTX 4090", "--engine", "vllm", "--model", "Qwen2.5-7B-Instruct", "--json")
    assert p.returncode == 0, p.stderr
    p = rec({**env, "PATH": "/usr/bin:/bin"}, "run", "1")
    assert p.returncode == 2 and p.stderr.startswith("error: no vllm engine installed here"), p.stderr
    assert "\nhint: install vllm" in p.stderr
    p = rec(env, "run", "7")
    assert p.returncode == 2 and p.stderr.startswith("error: the last recommend answer has no rank 7"), p.stderr
    gguf = smollm2_gguf_or_skip()
    smollm2_answer(env)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        p = rec(env, "run", "1", "--file", str(gguf), "--port", str(busy))
    if "no llama.cpp engine" not in p.stderr:
        assert p.returncode == 2 and p.stderr.startswith(f"error: port {busy} on 127.0.0.1 is in use"), p.stderr
        assert "\nhint: give --port" in p.stderr
