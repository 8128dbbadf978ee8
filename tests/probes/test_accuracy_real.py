"""Accuracy probes on the real SmolLM2-135M (CPU, small item sets): the CLI end to end, a paired comparison with a
more aggressive quantization derived from the shipped Q4_1, and llama.cpp's log-likelihoods against lm-eval's own hf
backend on the same weights."""

from __future__ import annotations


import pytest

import os
import subprocess

from tests.conftest import BIN, Run, assert_user_error, smollm2_gguf_or_skip

pytest.importorskip("lm_eval")
pytest.importorskip("llama_cpp")


@pytest.fixture
def slow_cli(user_catalog):
    """The `cli` fixture with room for real scoring: 50 questions take ~40 s on one core, longer on a busy machine."""

    def run(*args: str, prog: str = "recommender") -> Run:
        env = {**os.environ, "RECOMMENDER_USER_CATALOG": str(user_catalog), "COLUMNS": "100"}
        env.pop("RECOMMENDER_CATALOG", None)
        return Run(subprocess.run([str(BIN / prog), *args], capture_output=True, text=True, env=env, timeout=1200))

    return run


@pytest.fixture(scope="module")
def q2k(tmp_path_factory):
    from recommender.probes.accuracy.requant import requantize

    return requantize(smollm2_gguf_or_skip(), "Q2_K", tmp_path_factory.mktemp("q2k") / "SmolLM2-135M-Instruct.Q2_K.gguf")


def test_probe_accuracy_then_paired_delta_against_a_requantized_variant(cli, slow_cli, user_catalog, q2k):
    gguf = smollm2_gguf_or_skip()
    r = slow_cli("probe", "accuracy", str(gguf), "--tasks", "mmlu", "--items", "50", "--threads", "1", "--json")
    assert r.code == 0, r.err
    out = r.json()
    t = out["tasks"][0]
    assert (t["task"], t["n"], t["status"]) == ("mmlu", 50, "ok")
    assert t["ci95"][0] <= t["accuracy"] <= t["ci95"][1] and t["ci95"][1] - t["ci95"][0] > 0.1
    assert sum(s["n"] for s in t["per_subject"].values()) == 50
    assert t["correct"] == sum(s["correct"] for s in t["per_subject"].values())
    # SmolLM2-135M is at chance on MMLU (its card reports cloze MMLU, not multiple choice): the guard must say so
    assert "chance" in t["flags"] and any("chance" in m for m in t["flag_messages"])
    assert "requests scored" in r.err  # progress on stderr, JSON alone on stdout
    ppl = {p["language"]: p for p in out["perplexity"]}
    assert set(ppl) == {"en", "zh"}
    for p in ppl.values():  # bits per byte = NLL / ln 2 / bytes; ppl = exp(NLL / tokens)
        assert 0.3 < p["bits_per_byte"] < 4 and p["perplexity"] > 1
    # rows are in the overlay, with the item file's checksum
    from recommender.catalog.store import Catalog
    from recommender.core.paths import SHIPPED_CATALOG

    rows = Catalog(SHIPPED_CATALOG, user_catalog).accuracy_rows(run_id=out["run_id"])
    assert len(rows) == 1 and rows[0].items_sha256 == t["items_sha256"] and rows[0].provenance == "measured"
    assert len(rows[0].raw["items"]) == 50

    # recommend now uses the measured MMLU accuracy for SmolLM2 Q4_1 (and only for Q4_1), marked measured
    rec = cli("--model", "HuggingFaceTB/SmolLM2-135M-Instruct", "--quant", "Q4_1", "--quant", "Q8_0",
              "--per-model", "0", "--top", "50", "--vram", "24", "--json", prog="recommend")
    assert rec.code == 0, rec.err
    by_quant = {c["quant"]: c for c in rec.json()["candidates"]}
    en = by_quant["Q4_1"]["figures"]["en_accuracy"]
    assert en["provenance"] == "measured" and en["value"] == pytest.approx(round(100 * t["accuracy"], 2))
    assert "mmlu-test-v1-50.jsonl" in en["basis"] and "n=50" in en["basis"]
    assert by_quant["Q8_0"]["figures"]["en_accuracy"]["provenance"] != "measured"
    # the value score's task accuracy (code: English only) is the measured MMLU mapped onto the OLL v2 scale, and the
    # quantization cost is not counted twice for the measured quant
    code = cli("--model", "HuggingFaceTB/SmolLM2-135M-Instruct", "--quant", "Q4_1", "--quant", "Q8_0", "--workload",
               "code", "--per-model", "0", "--top", "50", "--vram", "24", "--json", prog="recommend")
    by_quant = {c["quant"]: c for c in code.json()["candidates"]}
    acc = by_quant["Q4_1"]["figures"]["task_accuracy"]
    assert acc["provenance"] == "measured" and "measured MMLU" in acc["basis"]
    assert by_quant["Q4_1"]["figures"]["quant_cost_points"]["value"] == 0
    assert by_quant["Q8_0"]["figures"]["task_accuracy"]["provenance"] != "measured"
    # and `catalog show` says the same, variant by variant
    shown = {v["quant"]: v for v in cli("catalog", "show", "HuggingFaceTB/SmolLM2-135M-Instruct", "--json")
             .json()["variants"]}
    assert shown["Q4_1"]["quality"]["en"] == en and shown["Q8_0"]["quality"]["en"]["provenance"] != "measured"
    table = cli("catalog", "show", "HuggingFaceTB/SmolLM2-135M-Instruct")
    assert f"{round(100 * t['accuracy'], 2):.1f}ᵐ" in table.out and "Q4_1 en accuracy (measured)" in table.out

    # a different item set than the baseline's is refused before anything is scored
    bad = cli("probe", "accuracy", str(q2k), "--tasks", "mmlu", "--items", "150", "--baseline", out["run_id"],
              "--no-ppl")
    assert_user_error(bad)
    assert "identical items" in bad.err

    # the Q2_K variant, paired against the stored Q4_1 run, with KL-divergence against the Q4_1 file
    r2 = slow_cli("probe", "accuracy", str(q2k), "--tasks", "mmlu", "--items", "50", "--threads", "1",
             "--baseline", out["run_id"], "--kl-reference", str(gguf), "--json")
    assert r2.code == 0, r2.err
    o2 = r2.json()
    d = o2["paired"]["mmlu"]
    a, b = o2["tasks"][0]["accuracy"], t["accuracy"]
    assert d["delta"] == pytest.approx(a - b)
    assert d["other_only_right"] - d["baseline_only_right"] == round(50 * (a - b))
    assert d["ci_low"] <= d["delta"] <= d["ci_high"] and 0 <= d["mcnemar_p"] <= 1
    p2 = {p["language"]: p for p in o2["perplexity"]}
    for lang in ("en", "zh"):
        # 2-bit weights lose information: more bits per byte than Q4_1 on the same text, and a KL above zero
        assert p2[lang]["bits_per_byte"] > ppl[lang]["bits_per_byte"]
        assert p2[lang]["kl_mean_nats"] > 0.01 and p2[lang]["top1_agreement"] < 1.0
        assert p2[lang]["tokens"] == ppl[lang]["tokens"]


def test_llama_cpp_loglikelihoods_match_lm_eval_hf_backend(smollm2_hf):
    """Same weights (the HF folder is the GGUF dequantized), two engines: per-option log-likelihoods agree."""
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    from evaluators.lmeval_llama import LlamaCppLM
    from recommender.probes.accuracy import items as I
    from evaluators import lm_tasks as T

    docs = I.load_items(I.items_path("mmlu", "50")[0])[:6]
    reqs = [Instance(request_type="loglikelihood", doc=d, arguments=(
        T.DESCRIPTION["mmlu"].replace("{{subject_name}}", d["subject_name"]) + T._render_question("mmlu", d),
        " " + L), idx=i) for d in docs for i, L in enumerate("ABCD")]
    lc = LlamaCppLM(str(smollm2_gguf_or_skip()), n_ctx=1024, threads=1)
    a = [x[0] for x in lc.loglikelihood(reqs, disable_tqdm=True)]
    # the KL pass also gives the perplexity probe's NLL (one decode of the text per model): the same total and token
    # count as token_logprobs over the same windows, and a model against itself has KL 0
    from pathlib import Path

    from evaluators.accuracy_worker import kl_divergence, token_logprobs

    text = (Path(__file__).resolve().parents[2] / "sources" / "text" / "ppl-en-v1.txt").read_text(encoding="utf-8")
    kl, nll, n = kl_divergence(lc, lc, text[:800])
    nll_ref, n_ref = token_logprobs(lc, text[:800])
    assert n == n_ref == kl["tokens"] > 100 and nll == pytest.approx(nll_ref, rel=1e-6) and nll > n
    assert abs(kl["kl_mean"]) < 1e-4 and kl["top1_agreement"] > 0.99
    lc.close()
    hf = HFLM(pretrained=str(smollm2_hf), device="cpu", dtype="float32", batch_size=1)
    b = [x[0] for x in hf.loglikelihood(reqs, disable_tqdm=True)]
    diffs = sorted(abs(x - y) for x, y in zip(a, b))
    print("llama.cpp", [round(x, 3) for x in a], "\nhf", [round(x, 3) for x in b])
    # bf16 folder vs llama.cpp's Q4_1 kernels (activations quantized to 8 bits): small differences only, against
    # option log-likelihoods spread over several nats
    assert diffs[len(diffs) // 2] < 0.15 and diffs[-1] < 0.75, diffs
    import statistics

    assert statistics.correlation(a, b) > 0.95
    picks_a = [max(range(4), key=lambda k: a[4 * i + k]) for i in range(len(docs))]
    picks_b = [max(range(4), key=lambda k: b[4 * i + k]) for i in range(len(docs))]
    assert sum(x == y for x, y in zip(picks_a, picks_b)) >= len(docs) - 1


def test_vllm_backend_scores_the_same_items_and_text(slow_cli, smollm2_hf):
    """lm-eval's vLLM backend (vLLM's CPU build in CI) on the SmolLM2 folder: the same 50 MMLU items, stored with their
    checksum, and bits per byte on the shipped English text within 0.05 of llama.cpp's on the GGUF it came from."""
    import importlib.util
    import math

    if importlib.util.find_spec("vllm") is None:  # never import vllm here: it changes this process (llama.cpp
        pytest.skip("vLLM is not installed")     # tests run later in it segfaulted after an `import vllm`)
    if not os.environ.get("RECOMMENDER_TEST_VLLM_ACCURACY"):
        # vLLM's CPU engine start-up is not reliable on a busy 2-core machine (once in three runs here its engine
        # process died during start-up), so CI does not run this 2.5-minute test; run it by hand with the variable.
        pytest.skip("set RECOMMENDER_TEST_VLLM_ACCURACY=1 to score through vLLM's CPU build")
    from pathlib import Path

    from evaluators.accuracy_worker import PPL_WINDOW, token_logprobs
    from evaluators.lmeval_llama import LlamaCppLM

    r = slow_cli("probe", "accuracy", str(smollm2_hf), "--engine", "vllm", "--tasks", "mmlu", "--items", "50",
                 "--json")
    assert r.code == 0, r.err[-2000:]
    out = r.json()
    t = out["tasks"][0]
    assert (t["task"], t["n"], t["status"], out["engine"]) == ("mmlu", 50, "ok", "vllm")
    assert sum(s["n"] for s in t["per_subject"].values()) == 50 and t["items_sha256"]
    ppl = {p["language"]: p for p in out["perplexity"]}
    text = Path(__file__).resolve().parents[2] / "sources" / "text" / "ppl-en-v1.txt"
    lm = LlamaCppLM(str(smollm2_gguf_or_skip()), n_ctx=PPL_WINDOW, threads=1)
    nll, _ = token_logprobs(lm, text.read_text(encoding="utf-8"))
    lm.close()
    bpb_llama = nll / math.log(2) / len(text.read_text(encoding="utf-8").encode("utf-8"))
    assert abs(ppl["en"]["bits_per_byte"] - bpb_llama) < 0.05, (ppl["en"]["bits_per_byte"], bpb_llama)
