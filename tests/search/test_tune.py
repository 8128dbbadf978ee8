"""`recommender tune`: predicted mode against the exhaustive grid and `recommend`, constraints, bad input, the real
measured mode (SmolLM2 on this CPU), two workers sharing one study through --storage, and --pareto's plot."""

import os
import subprocess

import pytest

from conftest import BIN, assert_user_error, smollm2_gguf_or_skip

pytest.importorskip("optuna")

SMALL = ["Qwen/Qwen2.5-7B", "--gpu", "RTX 4090", "--quant", "Q4_K_M", "--quant", "Q8_0", "--quant", "F16"]


def test_grid_optimum_matches_recommend_and_tune_reaches_it(cli):
    """Restricted to what `recommend` enumerates (default KV dtype, no partial offload), the exhaustive grid's
    optimum is recommend's top candidate with the same score, and TPE finds it."""
    limits = ["--vram", "24", "--max-latency", "800ms"]
    rec = cli("recommend", *limits, "--model", SMALL[0], *SMALL[1:], "--per-model", "0", "--top", "1", "--json")
    assert rec.code == 0, rec.err
    top = rec.json()["candidates"][0]
    r = cli("tune", *SMALL, *limits, "--kv-dtype", "default", "--no-offload", "--trials", "30", "--json")
    assert r.code == 0, r.err
    d = r.json()
    assert d["grid"]["size"] == rec.json()["counts"]["candidates"] == 12  # (1 + 1 + 4 engines) x 2 contexts
    opt = d["grid"]["optimum"][0]
    assert (opt["model"], opt["quant"], opt["engine"], opt["context_tokens"]) == \
           (top["model"], top["quant"], top["engine"], top["context_tokens"])
    assert d["grid"]["optimum_score"] == pytest.approx(top["score"], abs=1e-6)
    assert d["regret"] == 0.0 and 1 <= d["trials_to_optimum"] <= 30
    assert d["best"]["config"] == opt and d["best"]["status"] == "feasible"
    assert d["n_trials"] == 30 and len(d["trials"]) == 30


def test_constraints_honored(cli):
    """A tight budget: many trials are infeasible, and nothing infeasible is returned as a result."""
    r = cli("tune", "Qwen/Qwen2.5-7B", "Qwen/Qwen3-4B", "--gpu", "RTX 4090", "--vram", "6", "--max-latency", "150ms",
            "--trials", "60", "--json")
    assert r.code == 0, r.err
    d = r.json()
    budget, limit = d["query"]["vram_bytes"], d["query"]["max_latency_ms"]
    statuses = {t["status"] for t in d["trials"]}
    assert {"feasible", "infeasible"} <= statuses
    for t in d["trials"]:
        if t["status"] == "feasible":
            assert t["memory_bytes"] <= budget and t["latency_ms"] <= limit
        else:
            assert t["reasons"]
    best = d["best"]
    assert best["status"] == "feasible" and best["memory_bytes"] <= budget and best["latency_ms"] <= limit
    assert best["score"] == min(t["score"] for t in d["trials"] if t["status"] == "feasible")
    # partial offload is part of the space on a GPU: some trial put only part of the layers on it
    assert any(t["config"]["gpu_layers"] is not None for t in d["trials"])


def test_default_space_is_the_models_recommend_ranks_at_the_quants_they_have(cli):
    """Without named models tune searches what recommend ranks for the workload: chat checkpoints only, each at the
    quants it has (MXFP4 is the MoE models' type; gpt-oss has no Q4_K_M GGUF). It used to refuse
    the whole query because some model lacked some quant. A named model with a named quant it lacks is refused."""
    r = cli("tune", "--gpu", "RTX 4090", "--vram", "24", "--max-latency", "800ms", "--quant", "MXFP4", "--quant",
            "Q4_K_M", "--kv-dtype", "default", "--no-offload", "--trials", "20", "--json")
    assert r.code == 0, r.err
    space = r.json()["space"]
    rec = cli("recommend", "--gpu", "RTX 4090", "--vram", "24", "--max-latency", "800ms", "--quant", "MXFP4",
              "--quant", "Q4_K_M", "--top", "500", "--per-model", "0", "--json").json()
    assert set(space["models"]) == {c["model"] for c in rec["candidates"] + rec["excluded"]} | set(space["models"])
    assert r.json()["grid"]["size"] == rec["counts"]["candidates"]  # the same enumeration, one config each
    assert "openai/gpt-oss-20b" in space["models"] and "Qwen/Qwen2.5-7B" not in space["models"]  # base: left out
    qbm = space["quants_by_model"]
    assert qbm["Qwen/Qwen3-8B"] == ["Q4_K_M"] and qbm["openai/gpt-oss-20b"] == ["MXFP4"]  # (no Q4_K_M GGUF of it)
    assert "Qwen/Qwen3-30B-A3B-Instruct-2507" not in qbm  # an MoE: it has both
    assert_user_error(cli("tune", "Qwen/Qwen3-8B", "--gpu", "RTX 4090", "--quant", "MXFP4", "--trials", "2"))


@pytest.mark.parametrize("args", [
    ["--budget", "ten minutes"],
    ["--kv-dtype", "q5_1"],
    ["--plot", "front.png"],  # without --pareto
    ["--storage", "nosuchdb://x"],
    ["--measure", "Qwen/Qwen2.5-7B"],  # a catalog model, not a file
    ["--weights", "latency=-1"],
])
def test_bad_input(cli_inproc, args):
    r = cli_inproc("tune", "--gpu", "RTX 4090", "--trials", "2", *args)
    assert_user_error(r)


def test_measure_on_cpu_with_smollm2_and_rerun_is_cached(cli, user_catalog):
    """Real probes of SmolLM2 in child processes; a configuration whose predicted memory is over the budget is never
    run; every probe is filed in the overlay, and a rerun reuses the rows instead of probing."""
    gguf = smollm2_gguf_or_skip()
    pytest.importorskip("llama_cpp")
    args = ["tune", str(gguf), "--measure", "--vram", "200MiB", "--max-latency", "20s", "--context", "256",
            "--context", "1024", "--batch", "1", "--kv-dtype", "f16", "--kv-dtype", "q4_0", "--prompt-tokens", "16",
            "--output-tokens", "4", "--trials", "8", "--budget", "150s", "--threads", "2", "--json"]
    r = cli(*args)
    assert r.code in (0, 1), r.err
    d = r.json()
    assert d["mode"] == "measured"
    by_status: dict = {}
    for t in d["trials"]:
        by_status.setdefault(t["status"], []).append(t)
    # 1024 tokens with an f16 cache is predicted at ~211 MiB (> 200): skipped, never probed
    assert by_status.get("skipped"), [t["config"] for t in d["trials"]]
    for t in by_status["skipped"]:
        assert t["measurement_id"] is None and t["config"]["kv_dtype"] == "f16"
        assert t["config"]["context_tokens"] == 1024
    probed = [t for t in d["trials"] if t["source"] == "measured"]
    assert probed, r.err
    for t in probed:
        assert t["measurement_id"] and t["provenance"]["latency"] == "measured" and t["latency_ms"] > 0
    from recommender.catalog.store import Catalog
    from recommender.core.paths import base_catalog_path

    rows = [m for m in Catalog(base_catalog_path(None), user_catalog).measurements()
            if m.raw.get("origin") == "recommender tune --measure"]
    assert {m.id for m in rows} == {t["measurement_id"] for t in probed}
    assert not any(m.context_tokens == 1024 and m.kv_dtype == "f16" for m in rows)
    # the rerun probes nothing: every trial is reused from the catalog (or skipped again)
    r2 = cli(*args)
    d2 = r2.json()
    assert {t["source"] for t in d2["trials"]} <= {"cached", "none"}, r2.err
    assert "probes run 0" in r2.err
    rows2 = [m for m in Catalog(base_catalog_path(None), user_catalog).measurements()
             if m.raw.get("origin") == "recommender tune --measure"]
    assert len(rows2) == len(rows)


def test_two_workers_share_one_study(tmp_path, user_catalog):
    """Two `recommender tune` processes started together on one SQLite study: the study holds both workers'
    trials, and their count is the sum."""
    import optuna

    url = f"sqlite:///{tmp_path / 'study.db'}"
    env = {**os.environ, "RECOMMENDER_USER_CATALOG": str(user_catalog)}
    env.pop("RECOMMENDER_CATALOG", None)
    cmd = [str(BIN / "recommender"), "tune", *SMALL, "--vram", "24", "--trials", "12", "--storage", url,
           "--study-name", "shared", "--json"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    study = optuna.load_study(study_name="shared", storage=url)
    trials = study.get_trials()
    assert len(trials) == 24
    workers = {t.user_attrs["worker"] for t in trials}
    assert len(workers) == 2
    assert sorted(sum(1 for t in trials if t.user_attrs["worker"] == w) for w in workers) == [12, 12]
    assert {str(p.pid) for p in procs} == {w.rsplit(":", 1)[1] for w in workers}


def test_pareto_front_and_plot(cli, tmp_path):
    png = tmp_path / "front.png"
    r = cli("tune", "Qwen/Qwen2.5-7B", "Qwen/Qwen3-4B", "--gpu", "RTX 4090", "--vram", "24", "--max-latency",
            "800ms", "--pareto", "--plot", str(png), "--trials", "40", "--json")
    assert r.code == 0, r.err
    d = r.json()
    front = d["pareto_front"]
    assert front and d["objective"] == "pareto" and d["sampler"]["name"] == "NSGAIISampler"
    objs = [(t["latency_ms"], t["memory_bytes"], t["quality_cost"]) for t in front]
    for i, a in enumerate(objs):
        assert front[i]["status"] == "feasible"
        for j, b in enumerate(objs):  # no point of the front dominates another
            assert i == j or not (all(x <= y for x, y in zip(b, a)) and any(x < y for x, y in zip(b, a)))
    assert 0 <= d["front_on_grid_front"] <= len(front)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_partial_offload_moves_layers_to_host():
    """llama.cpp n_gpu_layers: fewer layers on the GPU -> less GPU memory, more host bytes per decode step, slower
    decode; n_layer + 1 (every block and the output layer) equals no offload."""
    from recommender.cli.common import open_catalog
    from recommender.predict.analytical import estimate
    from recommender.hardware.profiles import find_profile, load_profiles

    spec = open_catalog().models()["Qwen/Qwen2.5-7B"]
    hw = find_profile("RTX 4090", load_profiles())
    kw = dict(context_tokens=4096, prompt_tokens=1024, output_tokens=256)
    full = estimate(spec, "Q4_K_M", "llama.cpp", hw, **kw)
    assert estimate(spec, "Q4_K_M", "llama.cpp", hw, gpu_layers=spec.num_layers + 1, **kw) == full
    half = estimate(spec, "Q4_K_M", "llama.cpp", hw, gpu_layers=spec.num_layers // 2, **kw)
    assert half.gpu_layers == spec.num_layers // 2
    assert half.total_vram_bytes < full.total_vram_bytes - 0.4 * full.weights_gpu_bytes
    assert half.host_bytes_per_step > 0 and half.tpot_ms > full.tpot_ms and half.ttft_ms > full.ttft_ms
    assert half.weights_gpu_bytes + half.host_weights_bytes == full.weights_bytes
    with pytest.raises(ValueError):
        estimate(spec, "AWQ-4bit", "vllm", hw, gpu_layers=4, **kw)


def test_moe_partial_offload_reads_only_the_touched_experts():
    """gpt-oss-120b (128 experts, 4 per token) with most blocks in host RAM: each side reads its own share of the
    experts, only those a token touches - never negative bytes (estimate-v3 gave -36 GB on the GPU side) nor every
    host expert - and decode gets faster with every block moved to the GPU."""
    from recommender.cli.common import open_catalog
    from recommender.predict.analytical import estimate
    from recommender.hardware.profiles import find_profile, load_profiles

    spec = open_catalog().models()["openai/gpt-oss-120b"]
    hw = find_profile("RTX 4090", load_profiles())
    kw = dict(context_tokens=4096, prompt_tokens=1024, output_tokens=256)
    runs = [estimate(spec, "MXFP4", "llama.cpp", hw, gpu_layers=g, **kw) for g in (6, 14, 24, 30)]
    for e in runs:
        assert 0 < e.decode_bytes_per_step < e.weights_gpu_bytes
        assert 0 < e.host_bytes_per_step < 0.2 * e.host_weights_bytes  # 4 of 128 experts + the dense parts
    assert [e.tpot_ms for e in runs] == sorted((e.tpot_ms for e in runs), reverse=True)


def test_estimate_says_when_it_does_not_fit_and_what_offload_does(cli):
    """A configuration above the GPU's memory is flagged, and on llama.cpp the note names the largest
    --gpu-layers that fits: that one fits, one more does not."""
    r = cli("estimate", "gpt-oss-120b", "--quant", "MXFP4", "--gpu", "RTX 4090", "--json")
    note = next(n for n in r.json()["notes"] if n.startswith("does not fit"))
    g = int(note.split("--gpu-layers ")[1].split()[0])
    budget = 24 * 1024**3
    fits = cli("estimate", "gpt-oss-120b", "--quant", "MXFP4", "--gpu", "RTX 4090", "--gpu-layers", str(g), "--json")
    more = cli("estimate", "gpt-oss-120b", "--quant", "MXFP4", "--gpu", "RTX 4090", "--gpu-layers", str(g + 1),
               "--json")
    assert fits.json()["figures"]["total_vram_bytes"]["value"] <= budget < \
        more.json()["figures"]["total_vram_bytes"]["value"]
    assert not any(n.startswith("does not fit") for n in fits.json()["notes"])
    small = cli("estimate", "qwen2.5-7b", "--gpu", "RTX 4090", "--json")
    assert not any(n.startswith("does not fit") for n in small.json()["notes"])


def test_estimate_gpu_layers_cli(cli):
    """`recommender estimate --gpu-layers`: the output layer and g - 1 blocks on the GPU (llama.cpp's count, as the
    H200 buffers showed); only llama.cpp has partial offload."""
    full = cli("estimate", "qwen2.5-7b", "--gpu", "RTX 4090", "--json").json()
    part = cli("estimate", "qwen2.5-7b", "--gpu", "RTX 4090", "--gpu-layers", "14", "--json").json()
    assert part["gpu_layers"] == 14 and "13 of 28 blocks" in part["basis"]["offload"]
    assert part["figures"]["total_vram_bytes"]["value"] < full["figures"]["total_vram_bytes"]["value"] and part["figures"]["tpot_ms"]["value"] > full["figures"]["tpot_ms"]["value"]
    assert_user_error(cli("estimate", "qwen2.5-7b", "--quant", "AWQ-4bit", "--engine", "vllm", "--gpu-layers", "4"))


def test_the_reported_sampler_is_the_one_that_runs():
    """The JSON `sampler` record says what TPE does: Optuna 5 made multivariate TPE the default for one objective,
    and the code used to leave it to the default while reporting univariate."""
    from recommender.search.tune import make_sampler, sampler_settings

    sampler, said = make_sampler(False, 0, 10), sampler_settings(False, 10)
    assert sampler._multivariate is said["multivariate"] is True
    assert sampler._n_startup_trials == said["n_startup_trials"] == 10
