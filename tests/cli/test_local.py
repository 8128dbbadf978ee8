"""`recommender local` and `recommend --installed`: the model files in a test Hugging Face cache, an Ollama folder
and a --dir (small header-only GGUFs, tests/gguf_helpers.py), matched to the catalog by their header and file type,
and an OpenAI-compatible server on a loopback port."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading

import pytest

from gguf_helpers import llama_kv, raw_gguf, STR, U32

# SmolLM2-135M-Instruct's architecture (sources/configs/HuggingFaceTB__SmolLM2-135M-Instruct.json) in GGUF keys
SMOLLM2 = dict(**{"general.name": (STR, "SmolLM2 135M Instruct"), "llama.block_count": (U32, 30),
                  "llama.embedding_length": (U32, 576), "llama.feed_forward_length": (U32, 1536),
                  "llama.attention.head_count": (U32, 9), "llama.attention.head_count_kv": (U32, 3),
                  "llama.context_length": (U32, 8192), "llama.vocab_size": (U32, 49152)})
FILE_TYPE = {"Q8_0": 7, "F16": 1}  # llama_ftype (llama.h): MOSTLY_Q8_0 = 7, MOSTLY_F16 = 1


def gguf(path, quant: str, **kv) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw_gguf(llama_kv(**kv, **{"general.file_type": (U32, FILE_TYPE[quant])})))


@pytest.fixture
def machine(tmp_path):
    """A home with an HF hub cache (SmolLM2 Q8_0), an Ollama store (an unknown tiny model) and a --dir (SmolLM2
    F16)."""
    hub = tmp_path / "hf" / "hub"
    gguf(hub / "models--HuggingFaceTB--SmolLM2-135M-Instruct-GGUF" / "snapshots" / "0123abc"
         / "smollm2-135m-instruct-q8_0.gguf", "Q8_0", **SMOLLM2)
    ollama = tmp_path / "ollama"
    gguf(ollama / "blobs" / "sha256-abcd", "F16")
    man = ollama / "manifests" / "registry.ollama.ai" / "library" / "tiny" / "latest"
    man.parent.mkdir(parents=True)
    man.write_text(json.dumps({"layers": [{"mediaType": "application/vnd.ollama.image.model",
                                           "digest": "sha256:abcd"}]}))
    extra = tmp_path / "mine"
    gguf(extra / "SmolLM2-135M-Instruct-F16.gguf", "F16", **SMOLLM2)
    env = {k: v for k, v in os.environ.items() if k not in ("RECOMMENDER_CATALOG", "HF_HOME")}
    env.update(HOME=str(tmp_path / "home"), HF_HUB_CACHE=str(hub), OLLAMA_MODELS=str(ollama),
               RECOMMENDER_USER_CATALOG=str(tmp_path / "user.duckdb"))
    return env, extra


def run(env, *args):
    return subprocess.run([sys.executable, "-m", "recommender", *args], capture_output=True, text=True, env=env,
                          timeout=120)


class Models(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        body = json.dumps({"object": "list", "data": [{"id": "served-model"}]}).encode()
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def test_local_lists_the_files_and_a_loopback_server(machine):
    env, extra = machine
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        p = run(env, "local", "--json", "--dir", str(extra), "--port", str(srv.server_address[1]))
    finally:
        srv.shutdown()
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    got = {(m["source"], m["model"], m["quant"]) for m in out["models"]}
    assert ("hf-cache", "HuggingFaceTB/SmolLM2-135M-Instruct", "Q8_0") in got
    assert ("dir", "HuggingFaceTB/SmolLM2-135M-Instruct", "F16") in got
    tiny = next(m for m in out["models"] if m["source"] == "ollama")
    assert tiny["name"] == "tiny:latest" and tiny["model"] is None and tiny["quant"] == "F16"
    mine = [s for s in out["servers"] if s["port"] == srv.server_address[1]]
    assert mine and mine[0]["models"] == ["served-model"]


def test_recommend_installed_ranks_only_what_is_here(machine):
    env, extra = machine
    p = run(env, "recommend", "--installed", "--local-dir", str(extra), "--gpu", "RTX 4090", "--json",
            "--per-model", "5")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["candidates"]
    assert {(c["model"], c["quant"]) for c in out["candidates"]} <= {
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "Q8_0"), ("HuggingFaceTB/SmolLM2-135M-Instruct", "F16")}
    for c in out["candidates"]:  # its recipe runs the file found here
        srv = c["launch"]["commands"][0]["argv"]
        assert srv[srv.index("-m") + 1].endswith((".gguf",))


def test_recommend_installed_with_nothing_here_is_one_error(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RECOMMENDER_CATALOG", "HF_HOME", "HF_HUB_CACHE",
                                                            "OLLAMA_MODELS")}
    env["HOME"] = str(tmp_path)
    p = run(env, "recommend", "--installed", "--gpu", "RTX 4090")
    assert p.returncode == 2
    err = [x for x in p.stderr.splitlines() if x.startswith(("error:", "hint:"))]
    assert len(err) == 2 and err[0].startswith("error: no catalog model found on this machine") and \
        err[1].startswith("hint: ")
