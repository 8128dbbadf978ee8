"""`recommender sensitivity`: Kendall tau-b, stability intervals, flip rates, the tornado chart."""

import random

import pytest

from conftest import assert_user_error

from recommender.core.records import Figure
from recommender.hardware.profiles import load_profiles
from recommender.core.workloads import get_workload
from recommender.rank.candidates import Candidate
from recommender.rank.query import Query
from recommender.score.weighted import BRIEF_WEIGHTS, DEFAULT_WEIGHTS
from recommender.search.sensitivity import analyse, grid, kendall_tau_b, perturbed

Q = ("--vram", "24", "--max-latency", "800ms")


def test_kendall_tau_b_known_values():
    assert kendall_tau_b([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]) == pytest.approx(1.0)
    assert kendall_tau_b([1, 2, 3, 4, 5], [5, 4, 3, 2, 1]) == pytest.approx(-1.0)
    # ties: x = 1,2,2,3 / y = 1,3,2,4 -> 5 concordant, 0 discordant, 1 pair tied in x: 5 / sqrt(5 * 6)
    assert kendall_tau_b([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(5 / 30 ** 0.5)
    assert kendall_tau_b([1, 1, 1], [1, 2, 3]) is None  # one side all tied: undefined
    assert kendall_tau_b([1], [1]) is None


def test_kendall_tau_b_matches_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(5)
    for _ in range(300):
        n = rng.randint(2, 60)
        x = [rng.randint(0, 6) for _ in range(n)]
        y = [rng.choice([rng.randint(0, 6), rng.random()]) for _ in range(n)]
        ours, ref = kendall_tau_b(x, y), stats.kendalltau(x, y).statistic
        if ours is None:
            assert ref != ref  # scipy: nan
        else:
            assert ours == pytest.approx(ref, abs=1e-12)


def test_perturbation_keeps_proportions_and_sum():
    w = dict(BRIEF_WEIGHTS)
    p = perturbed(w, "latency", 0.5)
    assert sum(p.values()) == pytest.approx(1.0)
    assert p["latency"] == 0.5
    assert p["vram"] / p["zh"] == pytest.approx(w["vram"] / w["zh"])
    assert p["en"] == 0.0
    assert grid(0.3, 0.05, 0.2) == pytest.approx([0.1, 0.15, 0.2, 0.25, 0.35, 0.4, 0.45, 0.5])
    assert grid(0.0, 0.05, 0.1) == pytest.approx([0.05, 0.1])  # never below 0
    # a single criterion at weight 1: the rest is split equally among the others
    only = {"latency": 1.0, "vram": 0.0, "ppl": 0.0, "zh": 0.0, "en": 0.0, "acc": 0.0}
    assert perturbed(only, "latency", 0.6)["zh"] == pytest.approx(0.4 / 5)
    v = perturbed(dict(DEFAULT_WEIGHTS), "acc", 0.5)  # the value default: accuracy weight on the task mix
    assert v["vram"] / v["latency"] == pytest.approx(0.25 / 0.30) and v["zh"] == 0.0


def _cand(model, latency_ms, zh):
    figs = {"total_vram_bytes": Figure(2 * 1024**3, "bytes", "estimated"), "ppl_ratio": Figure(1.0, "ratio", "estimated"),
            "zh_accuracy": Figure(zh, "%", "published"), "en_accuracy": Figure(None, "%", "unknown")}
    return Candidate.model_construct(model=model, quant="Q8_0", engine="llama.cpp", batch=1, context_tokens=4096,
                                     latency_ms=latency_ms, figures=figs, excluded=[])


def _query(**kw):
    return Query(vram_bytes=24 * 1024**3, workload=get_workload("chat"), hardware=load_profiles()[0],
                 weights=dict(BRIEF_WEIGHTS), normalization="minmax", **kw)


@pytest.mark.parametrize("norm", ["minmax", "zscore"])
def test_stability_interval_two_candidates_analytic(norm):
    """A is faster, B more accurate in Chinese; memory and ppl equal. With two candidates both normalizations give
    A and B opposite parts (0/1 or -1/+1) on latency and zh, so A is best while w_zh <= w_latency (times the
    scale). Moving latency to t rescales zh to 0.25 (1 - t) / 0.7: A stays best for t >= 0.25 / 0.95. Moving zh to
    t rescales latency to 0.3 (1 - t) / 0.75 = 0.4 (1 - t): A stays best for t <= 0.4 / 1.4."""
    a, b = _cand("A", 10.0, 50.0), _cand("B", 20.0, 70.0)
    (res,), comparison = analyse([a, b], _query(), step=0.05, span=0.2, normalizations=[norm])
    assert comparison is None  # one normalization: nothing to compare
    assert res.base_top.model == "A"
    by = {c.criterion: c for c in res.criteria}
    lat, zh, vram = by["latency"], by["zh"], by["vram"]
    assert lat.stability_interval == pytest.approx((0.25 / 0.95, 1.0), abs=1e-6)
    assert lat.below.model == "B" and lat.above is None
    assert zh.stability_interval == pytest.approx((0.0, 0.4 / 1.4), abs=1e-6)
    assert zh.above.model == "B" and zh.below is None
    assert vram.stability_interval == (0.0, 1.0)  # equal memory: no weight on it lets B win
    # the grid points below 0.263 (0.10 .. 0.25) hand the top to B; above, A stays
    assert [p.weight for p in lat.points if p.top_changed] == pytest.approx([0.1, 0.15, 0.2, 0.25])
    assert [p.weight for p in zh.points if p.top_changed] == pytest.approx([0.3, 0.35, 0.4, 0.45])
    assert all(p.tau == -1.0 for p in lat.points if p.top_changed)  # two entries, swapped
    assert res.top1_flip_rate == pytest.approx(8 / res.vectors, abs=1e-4)


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """`sensitivity --json` and `recommend --json` (both normalizations) on the shipped catalog."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "RECOMMENDER_USER_CATALOG": str(tmp_path_factory.mktemp("u") / "user.duckdb")}
    env.pop("RECOMMENDER_CATALOG", None)
    bin_ = Path(sys.executable).parent

    def run(prog, *args):
        p = subprocess.run([str(bin_ / prog), *args], check=False, capture_output=True, text=True, env=env, timeout=120)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)

    return {"sens": run("recommender", "sensitivity", *Q, "--normalization", "both", "--json"),
            "sens-value": run("recommender", "sensitivity", *Q, "--json"),
            "value": run("recommend", *Q, "--json"),
            "minmax": run("recommend", *Q, "--normalization", "minmax", "--json"),
            "zscore": run("recommend", *Q, "--normalization", "zscore", "--json"),
            "run": run}


@pytest.mark.parametrize("which,norms", [("sens", ["minmax", "zscore"]), ("sens-value", ["value"])])
def test_sensitivity_json_on_shipped_catalog(shipped, which, norms):
    data = shipped[which]
    assert data["step"] == 0.05 and data["span"] == 0.2
    assert [r["normalization"] for r in data["results"]] == norms
    for res in data["results"]:
        # the base ranking is recommend's ranking under the same normalization
        rec = shipped[res["normalization"]]["candidates"]
        assert [(p["model"], p["quant"], p["engine"], p["context_tokens"]) for p in res["base_ranking"]] == \
               [(c["model"], c["quant"], c["engine"], c["context_tokens"]) for c in rec]
        assert 0 <= res["top1_model_flip_rate"] <= res["top1_flip_rate"] <= 1
        assert -1 <= res["tau_min"] <= res["tau_mean"] <= 1
        points = [p for c in res["criteria"] for p in c["points"]]
        assert res["vectors"] == len(points)
        assert res["top1_flip_rate"] == pytest.approx(sum(p["top_changed"] for p in points) / len(points), abs=1e-4)
        for c in res["criteria"]:
            lo, hi = c["stability_interval"]
            assert 0 <= lo <= c["base_weight"] <= hi <= 1
            for p in c["points"]:
                assert sum(p["weights"].values()) == pytest.approx(1.0, abs=1e-5)
                assert p["tau"] is None or -1 <= p["tau"] <= 1
                # the interval and the grid agree: inside, the top pick holds; outside, it changes
                if lo + 1e-4 < p["weight"] < hi - 1e-4:
                    assert not p["top_changed"], (c["criterion"], p)
                elif p["weight"] < lo - 1e-4 or p["weight"] > hi + 1e-4:
                    assert p["top_changed"], (c["criterion"], p)
    if len(norms) == 2:
        assert -1 <= data["comparison"]["tau"] <= 1


@pytest.mark.parametrize("norm", ["value", "minmax"])
def test_stability_interval_predicts_recommend(shipped, norm):
    """Just inside a bound of the interval `recommend` keeps the top pick; just outside it picks the named one.
    Whichever bound the shipped catalog puts inside (0, 1): the lower one with the pick below it, else the upper one
    with the pick above it (in the 2026 catalog the value-normalized pick's only inner bound is an upper one)."""
    res = shipped["sens-value" if norm == "value" else "sens"]["results"][0]
    top = (res["base_top"]["model"], res["base_top"]["quant"], res["base_top"]["engine"])
    eps = 0.001  # close enough that no second crossing lies between the bound and the probe (one did at 0.004)
    bounds = [(c, c["stability_interval"][0], -1, c["below"]) for c in res["criteria"]
              if c["below"] and c["stability_interval"][0] > 2 * eps]
    bounds += [(c, c["stability_interval"][1], +1, c["above"]) for c in res["criteria"]
               if c["above"] and c["stability_interval"][1] < 1 - 2 * eps]
    assert bounds, "the top pick holds for every weight of every criterion: no bound to check"
    crit, bound, side, other = bounds[0]
    base = {k: v for k, v in shipped[norm]["query"]["weights"].items()}
    for t, expected in ((bound - side * eps, top), (bound + side * eps, (other["model"], other["quant"],
                                                                          other["engine"]))):
        w = perturbed(base, crit["criterion"], t)
        arg = ",".join(f"{k}={v:.10f}" for k, v in w.items())
        best = shipped["run"]("recommend", *Q, "--weights", arg, "--normalization", norm, "--json")["candidates"][0]
        assert (best["model"], best["quant"], best["engine"]) == expected, (crit["criterion"], t)


def test_sensitivity_table_and_plots(cli, tmp_path):
    png, page = tmp_path / "tornado.png", tmp_path / "tornado.html"
    r = cli("sensitivity", *Q, "--normalization", "both", "--plot", str(png))
    assert r.code == 0, r.err
    assert "top-1 flip rate" in r.out and "stable" in r.out and f"wrote {png}" in r.err
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width > 800 and height > 300
    r = cli("sensitivity", *Q, "--plot", str(page), "--json")
    assert r.code == 0, r.err
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "<svg" in text and "</svg>" in text
    assert "<script" not in text and 'src="http' not in text and "<link" not in text  # self-contained
    lo, hi = r.json()["results"][0]["criteria"][0]["stability_interval"]
    assert f"{lo:.4f}" in text and f"{hi:.4f}" in text


@pytest.mark.parametrize("args", [
    ("--step", "0"), ("--step", "abc"), ("--step", "0.3", "--span", "0.2"), ("--span", "2"),
    ("--plot", "chart.pdf"), ("--plot", "/nonexistent-dir/x.png"), ("--weights", "latency=-1"),
])
def test_sensitivity_bad_input(cli_inproc, args):
    assert_user_error(cli_inproc("sensitivity", *Q, *args))


def test_sensitivity_nothing_fits(cli):
    r = cli("sensitivity", "--vram", "256MiB", "--json")
    assert r.code == 1
    assert r.json()["results"] == [] and "hint:" in r.err and "Traceback" not in r.err
