"""`recommend --verify`: the top picks with local weights run on this machine (the real SmolLM2 GGUF), predicted vs
measured, rows stored so the next answer uses them."""

import pytest

from tests.conftest import smollm2_gguf_or_skip

pytest.importorskip("llama_cpp")

SMOL = "HuggingFaceTB/SmolLM2-135M-Instruct"
QUERY = ("recommend", "--model", SMOL, "--quant", "Q4_1", "--gpu", "cpu", "--prompt-tokens", "64",
         "--output-tokens", "16", "--context", "1K")


def test_verify_runs_the_top_pick_and_the_next_answer_uses_the_measurement(cli, user_catalog):
    gguf = smollm2_gguf_or_skip()
    r = cli(*QUERY, "--verify", "--json")
    assert r.code == 0, r.err
    out = r.json()
    (v,) = out["verification"]  # one model, one configuration per model
    top = out["candidates"][0]
    assert (v["model"], v["quant"], v["engine"], v["batch"], v["context_tokens"]) == \
        (SMOL, "Q4_1", "llama.cpp", top["batch"], 1024)
    assert v["weights"] == str(gguf) and not v["synthetic"] and v["status"] == "ok", v
    checks = {c["name"]: c for c in v["checks"]}
    # what recommend promised is what it showed
    assert checks["peak_memory_bytes"]["predicted"] == top["figures"]["total_vram_bytes"]["value"]
    assert checks["ttft_ms"]["provenance"] == top["figures"]["ttft_ms"]["provenance"]
    # the process held the whole weights file in memory, and more
    assert checks["peak_memory_bytes"]["measured"] > gguf.stat().st_size
    assert checks["ttft_ms"]["measured"] > 0 and checks["tpot_ms"]["measured"] > 0
    assert v["limits_held"] == {"memory": True}
    # stored as a measured row ...
    listed = cli("catalog", "measurements", "--json").json()
    row = next(m for m in listed if m["id"] == v["measurement_id"])
    assert row["provenance"] == "measured" and row["ttft_ms"] == checks["ttft_ms"]["measured"]
    # ... which the next answer for this configuration shows in place of its estimate
    again = cli(*QUERY, "--json").json()["candidates"][0]
    assert again["figures"]["ttft_ms"] == {**again["figures"]["ttft_ms"], "value": row["ttft_ms"],
                                           "provenance": "measured"}
    assert again["figures"]["tpot_ms"]["value"] == row["tpot_ms"]
    # a TTFT limit: unknown on a CPU before (nothing fits), measured now; the table says whether it held
    limit = f"{2 * row['ttft_ms'] + 1000:.0f}ms"
    r = cli(*QUERY, "--max-latency", limit, "--verify")
    assert r.code == 0, r.err
    assert "verified on this machine (predicted → measured)" in r.out and "limits: memory held, ttft " in r.out


def test_verify_refuses_to_measure_a_plan_for_other_hardware(cli, user_catalog):
    r = cli("recommend", "--model", SMOL, "--quant", "Q4_1", "--gpu", "H200", "--verify", "--json")
    assert r.code == 0, r.err
    (v,) = r.json()["verification"]
    assert v["skipped"].startswith("planned for H200") and v["measurement_id"] is None
    assert not user_catalog.exists()  # nothing measured, nothing written
