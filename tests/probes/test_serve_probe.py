"""`recommender probe serve` against real servers on 127.0.0.1: llama-cpp-python's OpenAI server (its `[server]`
extra) with the real SmolLM2-135M GGUF, and optionally vLLM's CPU OpenAI server (RECOMMENDER_TEST_VLLM_SERVE=1).

The reference for the timings is the server's own account: llama.cpp prints `llama_perf_context_print` lines per
request (prompt eval time over N tokens, eval time over M runs) on the server's stderr."""

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.conftest import assert_user_error, smollm2_gguf_or_skip

from recommender.hardware.host import probe_cpu
from recommender.probes.launcher import without_extra_bufts

pytest.importorskip("llama_cpp")

PROMPT_EVAL = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
EVAL = re.compile(r"\beval time =\s*([\d.]+) ms /\s*(\d+) runs")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, proc: subprocess.Popen, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError(f"the server exited with {proc.returncode}")
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"{url} did not come up in {seconds} s")


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    """python -m llama_cpp.server with SmolLM2 on a free loopback port; its stderr (llama.cpp's own timings) in a
    file. interrupt_requests off: by default a new request cuts the one streaming (the probe reports that as short
    outputs), and a concurrency sweep should queue them as llama-server does."""
    try:
        import llama_cpp.server.app  # noqa: F401
    except ImportError as e:
        if os.environ.get("CI"):
            pytest.fail(f"llama-cpp-python's server extra is missing ({e}): .ci/run installs '.[llama,server]'")
        pytest.skip(f"pip install 'llama-cpp-python[server]' ({e})")
    gguf = smollm2_gguf_or_skip()
    port = free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    fh = open(log, "w")
    argv, _ = without_extra_bufts([sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--n_ctx", "1024",
                                   "--host", "127.0.0.1", "--port", str(port), "--n_threads", "2",
                                   "--interrupt_requests", "False"], probe_cpu().flags)  # as `recommender run` does
    proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT)
    try:
        wait_up(f"http://127.0.0.1:{port}/v1/models", proc, 90)
        yield f"http://127.0.0.1:{port}/v1", log
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        fh.close()


def server_timings(log) -> list[tuple[float, int, float, int]]:
    """(prompt ms, prompt tokens, eval ms, eval runs) per request, in order, from llama.cpp's log lines."""
    text = log.read_text(errors="replace")
    prompts = PROMPT_EVAL.findall(text)
    evals = [m for m in EVAL.findall(text)]
    return [(float(p[0]), int(p[1]), float(e[0]), int(e[1])) for p, e in zip(prompts, evals)]


def test_probe_serve_measures_a_real_llama_cpp_server(cli, llama_server, user_catalog):
    url, log = llama_server
    before = len(server_timings(log))
    r = cli("probe", "serve", "--url", url, "--context", "1024", "--prompt-tokens", "64", "--output-tokens", "16",
            "--concurrency", "1,2", "--repeats", "2", "--slo", "ttft:60000,tpot:1", "--json")
    assert r.code == 0, r.err
    out = r.json()
    assert out["server"]["kind"] == "llama-cpp-python"
    rows = out["items"]
    assert [x["batch"] for x in rows] == [1, 2]
    seen = server_timings(log)[before:]
    assert len(seen) == 1 + 2 + 4, seen  # warm-up + 1x2 + 2x2 requests, each one llama.cpp perf report
    for x in rows:
        # filed under the catalog model and quant of the file the server reports, measured on this machine
        assert (x["model_id"], x["quant"], x["engine"], x["provenance"]) == \
            ("HuggingFaceTB/SmolLM2-135M-Instruct", "Q4_1", "llama.cpp", "measured")
        assert x["status"] == "ok" and x["raw"]["metrics"]["completed"] == 2 * x["batch"]
        # the fixed lengths, as the server itself counted them: 64 prompt tokens, 16 outputs = 15 decode runs
        assert x["prompt_tokens"] == 64 and x["output_tokens"] == 16
    assert {p[1] for p in seen} == {64} and {p[3] for p in seen} == {15}
    # concurrency 1: no queueing, so the client's TTFT covers the server's prompt eval (plus HTTP and the first
    # sample) and its TPOT the server's per-token eval time (plus streaming each token)
    c1, srv = rows[0], seen[1:3]
    srv_prompt_ms = sorted(p[0] for p in srv)[0]
    srv_tpot_ms = [p[2] / p[3] for p in srv]
    assert srv_prompt_ms <= c1["ttft_ms"] <= 1.5 * max(p[0] for p in srv) + 250, (c1["ttft_ms"], srv)
    assert 0.9 * min(srv_tpot_ms) <= c1["tpot_ms"] <= 1.5 * max(srv_tpot_ms) + 5, (c1["tpot_ms"], srv_tpot_ms)
    # concurrency 2 on a server that runs one request at a time: the second request waits for the whole of the
    # first (its prompt eval and its 15 decode runs, as the server logged them at that moment) before its own
    # prompt eval, so its client TTFT covers all three (server figures of the same requests: robust to load)
    c2, srv2 = rows[1]["raw"]["metrics"], seen[3:7]
    waited_ms = min(p[0] + p[2] for p in srv2) + min(p[0] for p in srv2)
    assert c2["ttft_ms"]["max"] >= 0.95 * waited_ms, (c2["ttft_ms"], srv2)
    # goodput: a 1 ms TPOT SLO no request meets
    assert c2["request_goodput_per_s"] == 0 and c2["slo_ms"] == {"ttft": 60000.0, "tpot": 1.0}
    # stored as measured rows in the overlay
    listed = cli("catalog", "measurements", "--json").json()
    mine = {m["id"] for m in rows}
    assert mine <= {m["id"] for m in listed}


def test_probe_serve_dead_and_wrong_endpoints_are_one_error(cli, tmp_path, user_catalog):
    port = free_port()  # nothing listens there
    r = cli("probe", "serve", "--url", f"http://127.0.0.1:{port}/v1")
    assert_user_error(r)
    assert "nothing answers" in r.err
    web = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)], cwd=tmp_path,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_up(f"http://127.0.0.1:{port}/", web, 30)
        r = cli("probe", "serve", "--url", f"http://127.0.0.1:{port}/v1")
        assert_user_error(r)
        assert "not an OpenAI-compatible server" in r.err and "404" in r.err
    finally:
        web.terminate()
        web.wait(10)
    assert not user_catalog.exists()  # nothing written


def test_probe_serve_refuses_a_sweep_over_its_request_bound(cli, llama_server, user_catalog):
    url, _ = llama_server
    r = cli("probe", "serve", "--url", url, "--context", "1024", "--concurrency", "8,16", "--repeats", "10",
            "--max-requests", "100")
    assert_user_error(r)
    assert "241 requests" in r.err


@pytest.mark.skipif(not os.environ.get("RECOMMENDER_TEST_VLLM_SERVE"),
                    reason="set RECOMMENDER_TEST_VLLM_SERVE=1 to start vLLM's CPU OpenAI server (minutes)")
def test_probe_serve_measures_vllms_cpu_server(cli, smollm2_hf, user_catalog):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(smollm2_hf),
                             "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "1024",
                             "--dtype", "bfloat16"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_up(f"http://127.0.0.1:{port}/v1/models", proc, 600)
        r = cli("probe", "serve", "--url", f"http://127.0.0.1:{port}/v1", "--prompt-tokens", "64",
                "--output-tokens", "16", "--concurrency", "1,4", "--repeats", "2", "--model-id",
                "HuggingFaceTB/SmolLM2-135M-Instruct", "--json")
        assert r.code == 0, r.err
        out = r.json()
        assert out["server"]["kind"] == "vllm"
        for x in out["items"]:
            assert x["engine"] == "vllm" and x["context_tokens"] == 1024  # vLLM reports max_model_len
            assert x["prompt_tokens"] == 64 and x["output_tokens"] == 16  # usage, with ignore_eos
        # vLLM batches: 4 concurrent requests get more output tokens per second than 1
        assert out["items"][1]["throughput_tokens_per_s"] > out["items"][0]["throughput_tokens_per_s"]
    finally:
        proc.terminate()
        proc.wait(60)
