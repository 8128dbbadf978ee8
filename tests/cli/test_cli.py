"""`recommend`, `estimate` and `hardware` as a user runs them."""

import json
import re

import pytest
from conftest import ROOT, assert_user_error

GIB = 1024**3
PROVENANCES = {"measured", "calibrated", "published", "estimated", "unknown"}


def test_readme_command_json(cli):
    r = cli("--vram", "24", "--max-latency", "800ms", "--json", prog="recommend")
    assert r.code == 0, r.err
    data = r.json()
    cands = data["candidates"]
    assert len(cands) >= 5
    assert [c["rank"] for c in cands] == list(range(1, len(cands) + 1))
    assert len({c["model"] for c in cands}) == len(cands)  # one model's variants do not crowd the top
    scores = [c["score"] for c in cands]
    assert scores == sorted(scores)
    for c in cands:
        assert c["figures"]["total_vram_bytes"]["value"] <= 24 * GIB
        assert c["figures"]["ttft_ms"]["value"] is not None and c["figures"]["ttft_ms"]["value"] <= 800
        for field in ("weights_bytes", "kv_cache_bytes", "total_vram_bytes", "ttft_ms", "tpot_ms",
                      "decode_tokens_per_s"):
            f = c["figures"][field]
            assert f["provenance"] in PROVENANCES - {"unknown"} and f["unit"], field
        for q in ("zh_accuracy", "en_accuracy", "ppl_ratio"):
            m = c["figures"][q]
            assert m["provenance"] in PROVENANCES and m["basis"]
            assert (m["value"] is None) == (m["provenance"] == "unknown")
        assert c["basis"]["formula"] and c["excluded"] == []
        for f in ("model", "quant", "engine", "context_tokens", "batch", "figures", "terms", "basis", "score"):
            assert f in c
        assert "kv_bytes_per_token" in c["terms"]
    # the version docs/json.md describes (its title): a bump without the docs, or the docs without a bump, fails
    documented = re.search(r"schema version (\d+)", (ROOT / "docs" / "json.md").read_text().splitlines()[0])
    assert data["schema_version"] == int(documented.group(1)) == 2


def test_readme_command_table(cli):
    r = cli("--vram", "24", "--max-latency", "800ms", prog="recommend")
    assert r.code == 0, r.err
    assert "model" in r.out and "TTFT" in r.out and "score" in r.out
    assert "ᵉ" in r.out  # provenance marks on the numbers
    assert " 1 " in r.out.splitlines()[4] or "│  1 │" in r.out


def test_json_is_clean_in_a_narrow_terminal(cli):
    r = cli("--vram", "24", "--json", prog="recommend", env={"COLUMNS": "30"})
    json.loads(r.out)  # nothing wrapped, no log lines on stdout


def test_recommender_recommend_subcommand_and_weights(cli):
    base = cli("recommend", "--vram", "24", "--max-latency", "800ms", "--json").json()["candidates"][0]
    zh_only = cli("recommend", "--vram", "24", "--max-latency", "800ms", "--weights",
                  "latency=0,vram=0,ppl=0,acc=0,zh=1", "--json").json()["candidates"]
    # the zh criterion of the value score is the comparable zh figure (published, bridged or estimated with its basis);
    # every other weight 0 (task accuracy, acc, is a criterion of its own), so zh alone orders the answer
    best_zh = max(c["figures"]["zh_comparable"]["value"] or 0 for c in zh_only)
    assert zh_only[0]["figures"]["zh_comparable"]["value"] == best_zh
    assert zh_only[0]["model"] != base["model"] or base["figures"]["zh_comparable"]["value"] == best_zh


def test_tighter_limits_exclude_and_explain(cli):
    r = cli("--vram", "8", "--max-latency", "100ms", "--explain", prog="recommend")
    assert r.code == 0, r.err
    assert "excluded" in r.err and "GiB" in r.err
    data = cli("--vram", "8", "--max-latency", "100ms", "--json", prog="recommend").json()
    assert all(c["figures"]["total_vram_bytes"]["value"] <= 8 * GIB and c["figures"]["ttft_ms"]["value"] <= 100 for c in data["candidates"])
    assert data["excluded"] and all(e["excluded"] for e in data["excluded"])


def test_nothing_fits_is_exit_1(cli):
    r = cli("--vram", "256MiB", prog="recommend")
    assert r.code == 1
    assert "hint:" in r.err and "Traceback" not in r.err


def test_plan_for_another_gpu_and_workload(cli):
    r = cli("--gpu", "h100 sxm", "--workload", "long-doc", "--json", prog="recommend")
    assert r.code == 0, r.err
    data = r.json()
    assert data["query"]["hardware"]["name"].startswith("H100")
    assert all(c["context_tokens"] == 32768 for c in data["candidates"])


@pytest.mark.parametrize("args", [
    ["--vram", "-5"],
    ["--vram", "lots"],
    ["--vram", "9000TiB"],
    ["--vram", "24", "--max-latency", "fast"],
    ["--vram", "24", "--model", "qwen9-7b"],
    ["--vram", "24", "--gpu", "RTX 4900"],
    ["--vram", "24", "--gpu", "H100"],
    ["--vram", "24", "--weights", "speed=1"],
    ["--vram", "24", "--workload", "poetry"],
    ["--vram", "24", "--engine", "ollama2"],
])
def test_bad_input_is_one_line_and_exit_2(cli_inproc, args):
    assert_user_error(cli_inproc(*args, prog="recommend"))


def test_did_you_mean(cli):
    r = cli("--vram", "24", "--gpu", "RTX 4900", prog="recommend")
    assert "did you mean" in r.err and "4090" in r.err


def test_estimate_json_fields_and_anchor(cli):
    r = cli("estimate", "qwen2.5-7b", "--quant", "q4_k_m", "--gpu", "RTX 4090", "--context", "4096", "--json")
    assert r.code == 0, r.err
    e = r.json()
    assert e["figures"]["weights_bytes"]["value"] == pytest.approx(4_682_433_632, rel=0.03)
    assert e["terms"]["kv_bytes_per_token"] == 57_344
    assert e["figures"]["kv_cache_bytes"]["value"] == 57_344 * 4096
    assert e["figures"]["total_vram_bytes"]["value"] > e["figures"]["weights_bytes"]["value"] - e["terms"]["host_weights_bytes"] + e["figures"]["kv_cache_bytes"]["value"]
    assert e["figures"]["total_vram_bytes"]["provenance"] == "estimated" and "formula" in e["basis"]


def test_estimate_errors(cli_inproc):
    assert_user_error(cli_inproc("estimate", "qwen2.5-7b", "--quant", "Q3_XL"))
    assert_user_error(cli_inproc("estimate", "qwen2.5-7b", "--quant", "AWQ", "--engine", "llama.cpp"))
    assert_user_error(cli_inproc("estimate", "qwen2.5-7b", "--context", "-1"))
    assert_user_error(cli_inproc("estimate", "nosuchmodel"))


def test_hardware_without_gpu(cli):
    r = cli("hardware", "--json")
    assert r.code == 0, r.err
    host = r.json()
    assert host["gpus"] == [] and "no NVIDIA GPU" in host["gpu_status"]
    assert host["cpu"]["logical_cores"] >= 1 and host["ram_total_bytes"] > 0
    r = cli("hardware")
    assert r.code == 0 and "GPU" in r.out and "CPU" in r.out


def test_unknown_command_is_exit_2(cli):
    r = cli("frobnicate")
    assert_user_error(r)
    assert "frobnicate" in r.err


@pytest.mark.parametrize("args,prog,fragment", [
    (["--vram", "24", "--bogus"], "recommend", "--bogus"),  # unknown option
    (["tune", "--trials", "0"], "recommender", "--trials"),  # value out of range
    (["estimate"], "recommender", "model"),  # missing argument
    (["probe", "perf", "--repeats", "many"], "recommender", "--repeats"),  # not a number
])
def test_command_line_mistakes_are_one_line_and_a_hint(cli_inproc, args, prog, fragment):
    """The command line's own errors read like ours: one `error:` line naming the problem, a `hint:` pointing at
    the command's --help, exit 2 — not a framed usage box (a real process: test_unknown_command_is_exit_2)."""
    r = cli_inproc(*args, prog=prog)
    assert_user_error(r)
    assert fragment in r.err and "--help" in r.err


def test_measured_rows_replace_estimates_and_say_so(cli):
    r = cli("estimate", "qwen2.5-7b", "--quant", "Q4_K_M", "--gpu", "H200", "--context", "4096",
            "--prompt-tokens", "512", "--output-tokens", "64", "--json")
    e = r.json()
    assert e["figures"]["tpot_ms"]["provenance"] == "measured" and e["figures"]["total_vram_bytes"]["provenance"] == "measured"
    tag = e["figures"]["tpot_ms"]["basis"]
    assert "NVIDIA H200" in tag and "synthetic" in tag and e["basis"]["measured"] in tag
    other = cli("estimate", "qwen2.5-7b", "--quant", "Q4_K_M", "--gpu", "H200", "--context", "4096",
                "--prompt-tokens", "1024", "--output-tokens", "64", "--json").json()
    # measured with a 512-token prompt: not reused; the H200's calibrated prefill model answers instead
    assert other["figures"]["ttft_ms"]["provenance"] == "calibrated"
    assert other["figures"]["tpot_ms"]["provenance"] == "measured"
