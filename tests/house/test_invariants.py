"""Invariants a maintainer leans on, as properties over real catalog models and the Predictor (hypothesis, a few
examples each, no deadline): memory grows with the context and with the batch; a model's weights grow with the bits
per weight of its quantization kind; raising a limit (VRAM or latency) never removes a feasible candidate; every
quantization has its cost row in the shipped catalog."""

from __future__ import annotations

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from recommender.catalog.store import Catalog  # noqa: E402
from recommender.core.paths import SHIPPED_CATALOG  # noqa: E402
from recommender.core.units import GIB  # noqa: E402
from recommender.core.workloads import get_workload  # noqa: E402
from recommender.hardware.profiles import find_profile, load_profiles  # noqa: E402
from recommender.model.quant import QUANTS, quants_for, weights_bytes  # noqa: E402
from recommender.predict.predictor import Config, Predictor  # noqa: E402
from recommender.rank.query import Query  # noqa: E402
from recommender.rank.recommend import recommend  # noqa: E402
from recommender.score.weighted import DEFAULT_WEIGHTS  # noqa: E402

SETTINGS = dict(max_examples=8, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

CATALOG = Catalog(SHIPPED_CATALOG)
MODELS = CATALOG.models()
IDS = sorted(MODELS)
PROFILES = load_profiles()
GPU = find_profile("H100 SXM5", PROFILES)
ENGINE_OF = {"gguf": "llama.cpp", "float": "llama.cpp", "awq": "vllm", "gptq": "vllm", "fp8": "vllm", "int8": "vllm",
             "bnb": "transformers"}


def _memory(mid: str, quant: str, engine: str, ctx: int, batch: int) -> float:
    p = Predictor(GPU).predict(MODELS[mid], Config(model=mid, quant=quant, engine=engine, context_tokens=ctx,
                                                    batch=batch, output_tokens=64))
    return p.figures["total_vram_bytes"].value


@st.composite
def configs(draw):
    mid = draw(st.sampled_from(IDS))
    spec = MODELS[mid]
    quant = draw(st.sampled_from([q for q in quants_for(spec) if QUANTS[q].family in ENGINE_OF]))
    engine = draw(st.sampled_from([e for e in QUANTS[quant].engines if e in ("llama.cpp", "vllm", "transformers")]))
    top = max(1024, min(spec.max_position_embeddings, 32768))
    ctx = draw(st.integers(512, top // 2))
    return mid, quant, engine, ctx


@settings(**SETTINGS)
@given(configs(), st.integers(1, 8))
def test_memory_grows_with_context_and_batch(cfg, batch):
    mid, quant, engine, ctx = cfg
    m = _memory(mid, quant, engine, ctx, batch)
    assert _memory(mid, quant, engine, 2 * ctx, batch) >= m, "longer context, less memory"
    assert _memory(mid, quant, engine, ctx, batch + 1) >= m, "larger batch, less memory"


# quantization kinds whose bits per weight order their sizes: one kernel class, or one storage format of a family
KINDS = [[q for q in QUANTS if QUANTS[q].kernel_class == k] for k in ("kquant", "iquant", "legacy")]
KINDS += [["Q8_0", "F16"], ["AWQ-4bit", "GPTQ-8bit", "BF16"], ["BNB-NF4", "BNB-INT8", "BF16"], ["FP8", "BF16"]]


@settings(**SETTINGS)
@given(st.sampled_from(IDS), st.sampled_from(range(len(KINDS))))
def test_weights_grow_with_bits_per_weight(mid, kind):
    spec = MODELS[mid]
    offered = set(quants_for(spec))
    qs = sorted((q for q in KINDS[kind] if q in offered), key=lambda q: QUANTS[q].nominal_bits)
    for a, b in zip(qs, qs[1:]):
        if QUANTS[a].nominal_bits < QUANTS[b].nominal_bits:
            assert weights_bytes(spec, a) <= weights_bytes(spec, b), (mid, a, b)


def _feasible(vram_gib: float, latency_ms: float, model: str) -> set[tuple]:
    q = Query(vram_bytes=int(vram_gib * GIB), max_latency_ms=latency_ms, workload=get_workload("chat"), hardware=GPU,
              weights=dict(DEFAULT_WEIGHTS), models=[model], include_base=True, per_model=0, top=10**6)
    return {(c.model, c.quant, c.engine, c.batch, c.context_tokens, c.kv_dtype, c.gpu_layers)
            for c in recommend(CATALOG, q).candidates}


@settings(**{**SETTINGS, "max_examples": 4})
@given(st.sampled_from(IDS), st.floats(4, 40), st.floats(1, 40), st.floats(50, 2000), st.floats(1, 20))
def test_raising_a_limit_never_removes_a_feasible_candidate(mid, vram, more_vram, latency, more_latency):
    base = _feasible(vram, latency, mid)
    assert base <= _feasible(vram + more_vram, latency, mid)
    assert base <= _feasible(vram, latency * more_latency, mid)


def test_every_quant_has_a_cost_row_in_the_catalog():
    """All of them, not a sample (8 examples of 36 names missed the two bitsandbytes ones)."""
    table = CATALOG.quant_quality()
    missing = [q for q in QUANTS if q not in table]
    assert not missing, f"no quant_quality row in the shipped catalog for {missing} (rebuild it)"
    for q in QUANTS:
        assert table[q]["points_low"] <= table[q]["points_8b"] <= table[q]["points_high"], q
