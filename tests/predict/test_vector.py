"""The vectorized Predictor (recommender.predict.vector, CandidateBuilder.table) against the one-by-one path
(CandidateBuilder.build -> Predictor.predict): every figure ranking reads, for every candidate of several questions,
within a relative 1e-9, and the same hard limits. The two paths call the same formula functions (array-agnostic,
recommender.predict.counts), one with arrays, one with numbers; a formula changed for one kind of input only (a
branch written as a Python ``if`` that arrays take the wrong way, a term added on one path) fails here."""

import math

import pytest

from recommender.catalog.store import Catalog
from recommender.cli.query_opts import LatencyMetricOpt, MissingOpt, QueryOptions, build_query
from recommender.core.paths import base_catalog_path
from recommender.rank.candidates import CandidateBuilder, build_key, candidate_keys
from recommender.rank.recommend import recommend
from recommender.search.tune import PredictedEvaluator, build_space

REL = 1e-9


def _query(gpu, vram=None, latency=None, workload="chat", metric="ttft", normalization="value", quant=None):
    opts = QueryOptions(vram=vram, max_latency=latency, latency_metric=LatencyMetricOpt(metric), workload=workload,
                        context=None, batch=None, prompt_tokens=None, output_tokens=None, weights=None,
                        missing=MissingOpt.worst, gpu=gpu, model=None, engine=None, quant=quant, top=5,
                        per_model=1, catalog_path=None)
    return build_query(opts, normalization)[0]


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=REL, abs_tol=1e-12)


FIELDS = ("ttft_ms", "tpot_ms", "e2e_ms", "total_vram_bytes")


@pytest.mark.parametrize("gpu,vram,latency,workload,metric", [
    ("RTX 4090", "24", "800ms", "chat", "ttft"),  # A
    ("RTX 3060 12GB", None, "800ms", "chat", "ttft"),  # C: partial-offload keys (n_gpu_layers) beside the rest
    ("Apple M2 Max 30-core GPU 32GB", None, None, "chat", "ttft"),  # D: Metal
    ("H200 SXM", None, "800ms", "chat", "e2e"),  # calibrated terms and measured rows on this GPU, E2E limited
    ("cpu", "16", "5s", "chat", "tpot"),  # F: a CPU (its calibration re-estimates on the nominal scale)
    ("RTX 4090", "24", None, "long-doc", "ttft"),  # H
    ("L40S", None, None, "serve", "ttft"),  # I: batches 1-64, serving figures and goodput
    ("H200 SXM", None, None, "serve", "ttft"),  # batches 1-64 on calibrated hardware: MoE and dense rows' features
])
def test_every_candidate_has_the_one_by_one_figures(gpu, vram, latency, workload, metric):
    catalog = Catalog(base_catalog_path())
    q = _query(gpu, vram, latency, workload, metric)
    b = CandidateBuilder(catalog, q)
    keys = candidate_keys(q, b)
    table = b.table(keys)
    # one GPU: every key, partial offload included, but DeepSeek-V4's (compressed attention: one by one)
    v4 = [bool(b.models[k.model].compress_pattern) for k in keys]
    assert table.vectorized.tolist() == [not x for x in v4]
    checked = 0
    for i, k in enumerate(keys):
        if not table.vectorized[i]:
            continue
        row = table.row(i)
        c = build_key(b, k)
        for name in FIELDS:
            assert _same(table.value(name, i), c.figures[name].value), (k, name)
        assert _same(row.latency_ms, c.latency_ms), k
        assert _same(row.goodput_per_s, c.goodput_per_s), k
        assert len(row.excluded) == len(c.excluded), (k, row.excluded, c.excluded)
        if b.slo is not None:
            serve = b.serving(c)
            for name in ("serve_ttft_ms", "serve_tpot_ms", "request_throughput_per_s",
                         "output_throughput_tokens_per_s"):
                assert _same(table.value(name, i), serve[name].value), (k, name)
        checked += 1
    assert checked > 500


def test_tune_grid_is_the_trials_figures():
    """tune's grid (PredictedEvaluator.grid, vectorized) gives each configuration the status, costs and serving
    figures a trial gets (PredictedEvaluator.__call__), KV dtypes included."""
    catalog = Catalog(base_catalog_path())
    q = _query("RTX 4090", "24", "800ms", quant=["Q4_K_M", "Q8_0", "AWQ-4bit"])
    ev = PredictedEvaluator(catalog, q)
    configs = build_space(catalog, q, None, offload=False).configs()
    grid = ev.grid(configs)
    assert len(grid) == len(configs) > 200
    for c, g in grid:
        o = ev(c)
        assert g.status == o.status, c
        for k, v in o.costs.items():
            assert _same(g.costs[k], v), (c, k)
        for k, v in o.serve.items():
            assert _same(g.serve[k], v), (c, k)


@pytest.mark.parametrize("normalization", ["value", "minmax"])
def test_recommend_shows_records(normalization):
    """The rows shown are full records (every figure with its basis), ranked as the numbers said."""
    catalog = Catalog(base_catalog_path())
    rec = recommend(catalog, _query("RTX 4090", "24", "800ms", normalization=normalization))
    assert rec.candidates and all(c.figures["ttft_ms"].basis for c in rec.candidates)
    assert [c.rank for c in rec.candidates] == list(range(1, len(rec.candidates) + 1))
    assert all(c.launch is not None for c in rec.candidates)


def test_serve_on_the_calibrated_h200_answers_with_the_one_by_one_figures():
    """`recommend --gpu "H200 SXM" --workload serve` answers (it crashed: the calibrated TPOT features' MoE terms
    asked a Python ``if`` of the arrays of a group's dense and MoE rows at batch > 1), and its top row has the
    figures CandidateBuilder.build gives its configuration one by one, as have the other rows shown."""
    catalog = Catalog(base_catalog_path())
    q = _query("H200 SXM", workload="serve")
    rec = recommend(catalog, q)
    assert rec.candidates
    b = CandidateBuilder(catalog, q)
    provenances = set()
    for top in rec.candidates:  # the top row and the other rows shown
        c = b.build(top.model, top.quant, top.engine, top.context_tokens, top.batch)
        for name, f in c.figures.items():
            assert _same(top.figures[name].value, f.value), (top.model, name)
            assert top.figures[name].provenance == f.provenance, (top.model, name)
            provenances.add(f.provenance)
    assert "calibrated" in provenances  # the H200's fitted terms are applied to the rows shown
