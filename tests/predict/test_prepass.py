"""recommend's memory-first pre-pass (recommender.rank.candidates.OverBudget, score.order.rank) and its best-first
search (recommender.rank.recommend.best_first): the answer is the one of the full enumeration - the same ranking with
the same scores and figures, the same strongest excluded with the same scores - while most over-budget
configurations never get their latency computed and most variants are not predicted at all."""

import importlib

import pytest

from recommender.catalog.store import Catalog
from recommender.cli.query_opts import LatencyMetricOpt, MissingOpt, QueryOptions, build_query
from recommender.core.paths import base_catalog_path
from recommender.rank.candidates import CandidateBuilder, enumerate_candidates
from recommender.rank.recommend import recommend
from recommender.score.order import rank


def _query(gpu, vram, latency, normalization="value", workload="chat", metric="ttft", top=10, per_model=1,
           quant=None, weights=None):
    opts = QueryOptions(vram=vram, max_latency=latency, latency_metric=LatencyMetricOpt(metric), workload=workload,
                        context=None, batch=None, prompt_tokens=None, output_tokens=None, weights=weights,
                        missing=MissingOpt.worst, gpu=gpu, model=None, engine=None, quant=quant, top=top,
                        per_model=per_model, catalog_path=None)
    return build_query(opts, normalization)[0]


def _answer(ranked, strongest, feasible):
    def key(c):
        return (c.model, c.quant, c.engine, c.context_tokens, c.batch, c.score, tuple(sorted(c.score_parts.items())),
                tuple((k, f.value, f.provenance) for k, f in sorted(c.figures.items())), tuple(c.excluded))
    return [key(c) for c in ranked], [key(c) for c in strongest], len(feasible)


@pytest.mark.parametrize("gpu,vram,latency,normalization", [
    ("RTX 4090", "24", "800ms", "value"),  # the query
    ("RTX 4060 Ti 16GB", "8", "100ms", "value"),  # most configurations over the budget
    ("RTX 4090", "24", "800ms", "minmax"),  # a relative method: every row moves the scale
])
def test_the_answer_is_the_full_enumerations(gpu, vram, latency, normalization):
    catalog = Catalog(base_catalog_path())
    q = _query(gpu, vram, latency, normalization)
    full = enumerate_candidates(catalog, q, CandidateBuilder(catalog, q))
    screened = enumerate_candidates(catalog, q, CandidateBuilder(catalog, q), screen=True)
    assert len(screened) == len(full)
    deferred = sum(getattr(c, "deferred", False) for c in screened)
    if normalization == "value":
        assert deferred > 0.1 * len(full)  # the pre-pass did skip work
    want = _answer(*rank(full, q))
    got = _answer(*rank(screened, q))
    assert got == want
    assert want[1]  # some excluded candidates were shown, so the deferred ones were compared too
    if normalization == "value":  # only those that could be shown were built in full (on the 8 GB card with a
        # 100 ms limit about a fifth: there every excluded row pays the full latency cost, which the bound leaves out)
        assert sum(getattr(c, "deferred", False) for c in screened) > 0.5 * deferred


@pytest.mark.parametrize("gpu,vram,latency,kw", [
    ("RTX 4090", "24", "800ms", {}),  # the query
    ("H200", None, None, {"workload": "long-doc", "top": 60, "per_model": 0}),  # 60 rows, several per model
    ("M2 Max 96GB", None, None, {"workload": "code"}),
    ("RTX 3090", None, "60ms", {"workload": "serve", "metric": "tpot", "quant": ["Q4_K_M", "AWQ-4bit", "Q8_0"]}),
    ("2x RTX 3090", None, None, {}),  # split and first-GPU-alone configurations of each variant
    ("A100 80GB SXM4", None, None, {"weights": "latency=0.5,acc=0.5", "metric": "e2e"}),
])
def test_best_first_gives_the_full_enumerations_answer(gpu, vram, latency, kw, monkeypatch):
    # small first rounds: each round stops closer to the bound, so a stop rule that is too early shows
    monkeypatch.setattr(importlib.import_module("recommender.rank.recommend"), "FIRST_ROUND_VARIANTS", 4)
    catalog = Catalog(base_catalog_path())
    q = _query(gpu, vram, latency, **kw)
    rec = recommend(catalog, q)
    full = enumerate_candidates(catalog, q, CandidateBuilder(catalog, q))
    want = _answer(*rank(full, q))
    assert _answer(rec.candidates, rec.excluded, [])[:2] == want[:2]
    assert want[0] and want[1]  # rows and excluded rows were compared
    assert rec.counts["candidates"] + rec.counts["offload"] == len(full) and rec.counts["models"] == len({c.model for c in full})
    # variants that cannot be shown were not predicted: most of them on the query
    assert rec.counts["predicted"] < (0.5 if gpu == "RTX 4090" else 1.0) * len(full)
    assert rec.counts["feasible"] + rec.counts["excluded"] == rec.counts["predicted"]


@pytest.mark.parametrize("gpu,vram,latency,kw", [
    ("cpu", "16", "5s", {}),  # question F: 6 models fit, fewer than the 10 rows shown
    ("cpu", "32", "2s", {"per_model": 3, "top": 20}),
])
def test_a_short_ranking_is_the_full_enumerations_answer(gpu, vram, latency, kw, monkeypatch):
    """Fewer configurations can be ranked than are shown (a CPU, where few models fit the limits): the quality-only
    search takes up every key, and the search with the latency and memory bounds gives the same answer, counts
    included."""
    monkeypatch.setattr(importlib.import_module("recommender.rank.recommend"), "FIRST_ROUND_VARIANTS", 4)
    catalog = Catalog(base_catalog_path())
    q = _query(gpu, vram, latency, **kw)
    rec = recommend(catalog, q)
    full = enumerate_candidates(catalog, q, CandidateBuilder(catalog, q))
    want = _answer(*rank(full, q))
    assert 0 < len(want[0]) < q.top and want[1]  # a short ranking, and excluded rows were compared
    assert _answer(rec.candidates, rec.excluded, [])[:2] == want[:2]
    assert rec.counts["predicted"] == len(full) and rec.counts["feasible"] == want[2]
