"""`recommender tune`: Optuna over model x quantization x engine x context x batch x KV-cache dtype x GPU layers.

Predicted mode: each trial is one configuration estimated exactly as `recommend` estimates a candidate
(``recommend.CandidateBuilder``: estimate.py, the measured-row overlay, quality, the hard constraints). The whole grid
is cheap to evaluate analytically, so it is evaluated too: it fixes the normalization of the score (below) and gives
the optimum that regret and trials-to-optimum are measured against.

Measured mode (``measure=True``): each trial runs a real probe of a GGUF file in a child process
(evaluators/runner.py, as `recommender probe perf` does), never one whose predicted memory exceeds the budget, and
files every probe as a measurement row in the user's catalog overlay; a later trial or a later run with the same
settings on the same machine reuses the row instead of probing again.

The score per trial (docs/tune.md): the weighted normalized cost of score.py, normalized against fixed reference
statistics of the feasible grid (min/max, or mean/std for z-score) instead of the candidates at hand. A trial's score
is therefore stable (it does not depend on what other trials found) and equals the score `recommend` would give that
configuration among the feasible grid.

Optuna is imported lazily (the ``tune`` extra); nothing here is imported by `recommend`.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import json
import math
import os
import socket
import time
from typing import Any, Callable, Literal, Optional, Union

from pydantic import Field, PrivateAttr


from recommender.core.collector import collector_paused
from recommender.core.engines import engine_spec
from recommender.core.errors import UserError
from recommender.core.records import Strict
from recommender.model.quant import QUANTS
from recommender.predict import constants as C
from recommender.predict.serving import Slo, goodput_from
from recommender.rank.candidates import Candidate, CandidateBuilder, OverBudget, skips_base
from recommender.search.tpe import tpe_sampler
from recommender.rank.query import resolve_models, LATENCY_FIELD, Query
from recommender.score.order import SCORE_DECIMALS, cost_columns, costs as _costs, value_scale
from recommender.score.weighted import CRITERIA, ValueScale, missing_fill, norm_stats, norm_value, score_arrays

# llama.cpp partial offload levels tried: share of the repeating layers on the GPU (1.0 = all, the default).
OFFLOAD_FRACTIONS: tuple[float, ...] = (1.0, 0.75, 0.5, 0.25)
QUALITY_CRITERIA = ("ppl", "zh", "en")
OPTIMUM_TOL = 1e-9  # a trial reaches the optimum when its score is within this of the grid's best
UNKNOWN_LATENCY_MS = 1e9  # the Pareto objectives need a number for an unknown latency (such a trial is infeasible)


# ---------------------------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------------------------
class TuneConfig(Strict):
    model: str
    quant: str
    engine: str
    context_tokens: int
    batch: int
    kv_dtype: str
    gpu_layers: Optional[int] = None  # repeating layers on the GPU (llama.cpp); None = every layer

    def key(self) -> tuple:
        return self.key_of(self.model, self.quant, self.engine, self.context_tokens, self.batch, self.kv_dtype,
                           self.gpu_layers)

    @staticmethod
    def key_of(model: str, quant: str, engine: str, context_tokens: int, batch: int, kv_dtype: str,
               gpu_layers: Optional[int]) -> tuple:
        return model, quant, engine, context_tokens, batch, kv_dtype, -1 if gpu_layers is None else gpu_layers


# the grid's tuple type has TuneConfig's fields, in its order, with its defaults (one column list: TuneConfig's)
_GridKeyFields = collections.namedtuple(
    "_GridKeyFields", list(TuneConfig.model_fields),
    defaults=[f.default for f in TuneConfig.model_fields.values() if not f.is_required()])


class GridKey(_GridKeyFields):
    """One configuration of the exhaustive grid (Space.configs): a TuneConfig's fields as a tuple. The grid has
    ~100,000 of them; the TuneConfig record is built only for those the answer shows (:meth:`config`)."""

    __slots__ = ()

    def key(self) -> tuple:
        return TuneConfig.key_of(*self)

    def config(self) -> TuneConfig:
        """The record (not revalidated: the space's own values)."""
        return TuneConfig.model_construct(**self._asdict())


class TrialRecord(Strict):
    number: int
    config: TuneConfig
    status: Literal["feasible", "infeasible", "skipped", "failed", "pruned"]
    # predicted: estimate (+ measured-row overlay); measured: probed in this trial; cached: a stored probe row
    source: Literal["predicted", "measured", "cached", "none"]
    score: Optional[float] = None
    score_parts: dict[str, float] = Field(default_factory=dict)
    latency_ms: Optional[float] = None
    memory_bytes: Optional[int] = None
    quality_cost: Optional[float] = None
    reasons: list[str] = Field(default_factory=list)
    provenance: dict[str, str] = Field(default_factory=dict)
    measurement_id: Optional[str] = None
    worker: str = ""
    goodput_rps: Optional[float] = None  # --objective goodput: requests/s meeting the SLOs


class GridSummary(Strict):
    size: int
    feasible: int
    optimum_score: Optional[float]
    optimum: list[TuneConfig]  # every configuration at the optimum score (ties)
    reference: dict[str, list[float]]  # criterion -> [lo, hi] (minmax) or [mean, std] (zscore)


class TuneResult(Strict):
    mode: Literal["predicted", "measured"]
    objective: Literal["score", "pareto", "goodput"]  # goodput: trial score = -goodput (requests/s meeting slo)
    slo: Optional[Slo] = None
    query: Query
    space: dict[str, Any]
    study_name: str
    storage: Optional[str]
    seed: int
    sampler: dict[str, Any]
    n_trials: int  # trials of the study (every worker's, with --storage)
    n_distinct: int  # distinct configurations among them
    best: Optional[TrialRecord]
    grid: GridSummary
    regret: Optional[float]  # best score found - grid optimum (None: nothing feasible found)
    trials_to_optimum: Optional[int]  # trials (in trial-number order) until the optimum was first reached
    distinct_to_optimum: Optional[int]
    reached_within: Optional[bool] = None  # optimum reached within 10 % of the grid's size in trials
    pareto_front: list[TrialRecord] = Field(default_factory=list)
    grid_front_size: Optional[int] = None
    front_on_grid_front: Optional[int] = None  # points of the trials' front that are on the grid's true front
    trials: list[TrialRecord] = Field(default_factory=list)
    elapsed_s: float = 0.0
    notes: list[str] = Field(default_factory=list)


# ---------------------------------------------------------------------------------------------------------------
# The search space
# ---------------------------------------------------------------------------------------------------------------
class Space(Strict):
    models: list[str]
    quants: list[str]
    engines: dict[str, list[str]]  # quant -> engines
    contexts: list[int]
    batches: list[int]
    kv_dtypes: dict[str, list[str]]  # engine -> KV dtypes
    offload_fractions: list[float]  # [1.0] = no partial offload
    num_layers: dict[str, int]  # model -> repeating layers
    # model -> the quants it has a variant of, where that is not every quant of `quants` (a catalog model has the
    # GGUF types and the checkpoints its publisher or converters made: gpt-oss alone has MXFP4)
    model_quants: dict[str, list[str]] = Field(default_factory=dict)

    def quants_of(self, model: str) -> list[str]:
        return self.model_quants.get(model, self.quants)

    def gpu_layers_for(self, model: str, frac: float) -> Optional[int]:
        if frac >= 1.0:
            return None
        # llama.cpp n_gpu_layers (the output layer counts as one); num_layers + 1 would be every layer
        return max(1, min(self.num_layers[model], int(round(frac * self.num_layers[model]))))

    def configs(self) -> list["GridKey"]:
        """Every configuration (the exhaustive grid), duplicates removed (two GPU shares that round to the same
        n_gpu_layers), in the order of the loops: a GridKey each (the space's own values, typed by build_space)."""
        def keys():
            for m in self.models:
                gls = [self.gpu_layers_for(m, f) for f in self.offload_fractions]
                for qn in self.quants_of(m):
                    for e in self.engines[qn]:
                        egls = gls if engine_spec(e).partial_offload else [None]
                        for ctx in self.contexts:
                            for b in self.batches:
                                for kv in self.kv_dtypes[e]:
                                    for gl in egls:
                                        yield GridKey(m, qn, e, ctx, b, kv, gl)

        return list(dict.fromkeys(keys()))  # first appearance kept (TuneConfig.key_of: None and -1 never both)

    def suggest(self, trial) -> TuneConfig:
        """Define-by-run: a parameter's name carries its choices, so a name always has one distribution (Optuna
        does not allow a categorical's choices to change between trials)."""
        def pick(name: str, choices: list):
            return choices[0] if len(choices) == 1 else trial.suggest_categorical(name, choices)

        model = pick("model", self.models)
        qs = self.quants_of(model)  # a model with fewer quants has a parameter of its own (fixed choices per name)
        quant = pick("quant" if qs == self.quants else f"quant:{model}", qs)
        engines = self.engines[quant]
        engine = pick("engine:" + ",".join(engines), engines)
        ctx = pick("context", self.contexts)
        batch = pick("batch", self.batches)
        kv = pick(f"kv_dtype:{engine}", self.kv_dtypes[engine])
        gl = None
        if engine_spec(engine).partial_offload:
            gl = self.gpu_layers_for(model, pick(f"gpu_share:{engine}", self.offload_fractions))
        return TuneConfig(model=model, quant=quant, engine=engine, context_tokens=ctx, batch=batch, kv_dtype=kv,
                          gpu_layers=gl)

    def describe(self) -> dict[str, Any]:
        return {"models": self.models, "quants": self.quants, "engines": self.engines, "contexts": self.contexts,
                "batches": self.batches, "kv_dtypes": self.kv_dtypes, "gpu_share": self.offload_fractions,
                "quants_by_model": self.model_quants}


def build_space(catalog, q: Query, kv_dtypes: Optional[list[str]] = None, offload: bool = True) -> Space:
    """The space `recommend` enumerates for this query (models, quants, engines, contexts, batches), plus the KV
    dtypes each engine offers and, for llama.cpp on a CUDA/ROCm GPU, partial offload. As in recommend, a chat
    workload leaves base and classifier checkpoints out unless --include-base or named, and each model is tried at
    the quants it has a variant of; a model and a quant both named that do not pair are refused."""

    models = catalog.models()
    variants = catalog.variants()
    named = resolve_models(catalog, q.models)
    wanted = named or [m for m in sorted(models) if not skips_base(q, models[m], set())]
    quants = [qn for qn in QUANTS if (not q.quants or qn in q.quants)]
    engines: dict[str, list[str]] = {}
    for qn in quants:
        es = [e for e in QUANTS[qn].engines if not q.engines or e in q.engines]
        if es:
            engines[qn] = es
    quants = [qn for qn in quants if qn in engines and any((m, qn) in variants for m in wanted)]
    if not quants:
        raise UserError("no quantization runs on the engines asked for",
                        hint="drop --engine / --quant, or pair them (e.g. Q4_K_M runs on llama.cpp)")
    model_quants = {m: qs for m in wanted if (qs := [qn for qn in quants if (m, qn) in variants]) != quants}
    if model_quants and named and q.quants:  # the first named model lacking a named quant, in the order asked
        m, qs = next(iter(model_quants.items()))
        raise UserError(f"{m} has no {next(qn for qn in quants if qn not in qs)} variant in the catalog",
                        hint="restrict --quant to the variants the model has (`recommender catalog show MODEL`)")
    empty = [m for m, qs in model_quants.items() if not qs]
    if empty:
        raise UserError(f"{empty[0]} has none of the quantizations asked for in the catalog",
                        hint="drop --quant / --engine, or see its variants: `recommender catalog show MODEL`")
    kv: dict[str, list[str]] = {}
    for e in {e for es in engines.values() for e in es}:
        offered = list(C.ENGINE_KV_DTYPES[e])
        chosen = [d for d in offered
                  if not kv_dtypes or d in kv_dtypes or ("default" in kv_dtypes and d == offered[0])]
        kv[e] = chosen or [offered[0]]  # an engine without any asked-for dtype keeps its default
    if kv_dtypes:
        known = {d for ds in C.ENGINE_KV_DTYPES.values() for d in ds} | {"default"}
        bad = [d for d in kv_dtypes if d not in known]
        if bad:
            raise UserError(f"unknown KV dtype {bad[0]!r}", hint=f"KV dtypes: {', '.join(sorted(known))}")
    fracs = list(OFFLOAD_FRACTIONS) if offload and q.hardware.backend in ("cuda", "rocm") else [1.0]
    return Space(models=list(wanted), quants=quants, engines=engines, contexts=list(q.workload.contexts),
                 batches=list(q.workload.batches), kv_dtypes=kv, offload_fractions=fracs,
                 num_layers={m: models[m].num_layers for m in wanted}, model_quants=model_quants)


# ---------------------------------------------------------------------------------------------------------------
# Stable score: normalization against fixed reference statistics
# ---------------------------------------------------------------------------------------------------------------
class Reference(Strict):
    """Per criterion, the statistics score.normalize would compute over the feasible grid, frozen: (lo, hi) for
    min-max, (mean, std) for z-score, and the fill value for a missing figure. A criterion without a known value in
    the grid has no entry and adds 0, as in score.py."""

    method: Literal["value", "minmax", "zscore"]
    missing: Literal["worst", "mean"]
    weights: dict[str, float]
    stats: dict[str, tuple[float, float]]
    fill: dict[str, float]
    # value: the query's anchors (score.order.value_scale), not statistics of the grid
    anchors: dict[str, Optional[Union[float, str]]] = Field(default_factory=dict)
    _scale: Optional[ValueScale] = PrivateAttr(default=None)

    def value_scale(self) -> ValueScale:
        """The value functions' anchors as a ValueScale, built once (the grid scores ~100,000 rows with it)."""
        if self._scale is None:
            a = self.anchors
            guard = None if a.get("guard_field") is None else (a["guard_field"], a["guard_ok_ms"], a["guard_limit_ms"])
            self._scale = ValueScale(a["budget_bytes"], a["t_ok_ms"], a["limit_ms"], bool(a["user_limit"]),
                                     a.get("goodput_target"), guard)
        return self._scale

    def score(self, costs: dict[str, Optional[float]]) -> tuple[float, dict[str, float]]:
        if self.method == "value":
            scale = self.value_scale()
            parts = {c: scale.u(c, costs) for c in CRITERIA if self.weights.get(c)}
            return sum(self.weights[c] * parts[c] for c in parts), parts
        return self._relative_score(costs)

    def scores(self, rows: list[dict[str, Optional[float]]]) -> list[float]:
        """[score(r)[0] for r in rows]: under value on arrays (score.weighted.score_arrays, the same numbers)."""
        if self.method != "value" or not rows:
            return [self.score(r)[0] for r in rows]
        import numpy as np  # noqa: PLC0415

        names = ("latency", "vram", "quant_points", "goodput", "ttft", "tpot", "acc", "zh", "en")
        cols = {k: np.array([math.nan if (v := r.get(k)) is None else v for r in rows], dtype=float) for k in names}
        return self.score_columns(cols)

    def score_columns(self, cols: dict) -> list[float]:
        """``scores`` (value method) of rows given as columns: criterion -> float array, NaN = None (a criterion
        absent: None in every row)."""
        import numpy as np  # noqa: PLC0415

        names = ("latency", "vram", "quant_points", "goodput", "ttft", "tpot", "acc", "zh", "en")
        n = len(next(iter(cols.values()))) if cols else 0
        if not n:
            return []
        cols = {k: cols[k] if k in cols else np.full(n, np.nan) for k in names}
        return score_arrays(cols, self.weights, "value", self.missing, self.value_scale())[0].tolist()

    def norm(self, crit: str, v: Optional[float]) -> float:
        if crit not in self.stats:
            return 0.0
        if v is None:
            return self.fill[crit]
        return norm_value(v, self.stats[crit], self.method)

    def _relative_score(self, costs: dict[str, Optional[float]]) -> tuple[float, dict[str, float]]:
        parts = {c: self.norm(c, costs.get(c)) for c in CRITERIA if self.weights.get(c)}
        return sum(self.weights[c] * parts[c] for c in parts), parts

    def quality_cost(self, parts: dict[str, float]) -> float:
        """Weighted mean of the normalized quality parts (ppl, zh, en): the quality objective of --pareto."""
        w = {c: self.weights.get(c, 0.0) for c in QUALITY_CRITERIA if self.weights.get(c)}
        total = sum(w.values())
        return sum(w[c] * parts.get(c, 0.0) for c in w) / total if total else 0.0


def _tie(memory: Optional[float], latency: Optional[float]) -> tuple[float, float]:
    inf = float("inf")
    return (inf if memory is None else memory, inf if latency is None else latency)


def make_reference(rows: list[dict[str, Optional[float]]], weights: dict[str, float], method: str, missing: str,
                   fallback: Optional[dict[str, tuple[float, float]]] = None, q=None) -> Reference:
    if method == "value":  # fixed value functions: nothing to freeze from the grid
        sc = value_scale(q)
        return Reference(method=method, missing=missing, weights=weights, stats={}, fill={},
                         anchors={"budget_bytes": sc.budget_bytes, "t_ok_ms": sc.t_ok_ms, "limit_ms": sc.limit_ms,
                                  "user_limit": float(sc.user_limit), "goodput_target": sc.goodput_target,
                                  "guard_field": sc.guard[0] if sc.guard else None,
                                  "guard_ok_ms": sc.guard[1] if sc.guard else None,
                                  "guard_limit_ms": sc.guard[2] if sc.guard else None})
    stats: dict[str, tuple[float, float]] = {}
    fill: dict[str, float] = {}
    for c in CRITERIA:
        if not weights.get(c):
            continue
        known = [r[c] for r in rows if r.get(c) is not None]
        if not known:
            if fallback and c in fallback:
                stats[c] = fallback[c]
                fill[c] = 1.0 if method == "minmax" else 0.0
            continue
        stats[c] = norm_stats(known, method)
        fill[c] = missing_fill([norm_value(v, stats[c], method) for v in known], method, missing)
    return Reference(method=method, missing=missing, weights=weights, stats=stats, fill=fill)


# ---------------------------------------------------------------------------------------------------------------
# Evaluation of one configuration
# ---------------------------------------------------------------------------------------------------------------
class Outcome(Strict):
    status: Literal["feasible", "infeasible", "skipped", "failed"]
    source: Literal["predicted", "measured", "cached", "none"]
    costs: dict[str, Optional[float]]
    reasons: list[str] = Field(default_factory=list)
    constraints: list[float]  # <= 0: satisfied (Optuna's convention); memory, latency, other
    provenance: dict[str, str] = Field(default_factory=dict)
    measurement_id: Optional[str] = None
    # serving figures (goodput): batch and Predictor.serving's serve_ttft_ms, serve_tpot_ms, serve_e2e_ms,
    # request_throughput_per_s
    serve: dict[str, Optional[float]] = Field(default_factory=dict)


def goodput_rps(serve: dict[str, Optional[float]], slo: Slo) -> Optional[float]:
    """Requests/s meeting every SLO, as vLLM's `bench serve --goodput` counts them, from a configuration's serving
    figures (``Outcome.serve``: recommender.predict.serving, the model recommend ranks serve candidates with). None:
    a figure is unknown."""
    return goodput_from(serve, slo)


def _constraints(memory: Optional[float], budget: int, lat: Optional[float], limit: Optional[float],
                 other: bool) -> list[float]:
    mem_c = (memory - budget) / budget if memory is not None else 1.0
    if limit is None:
        lat_c = -1.0
    else:
        lat_c = (lat - limit) / limit if lat is not None else 1.0
    return [mem_c, lat_c, 1.0 if other else -1.0]


class PredictedEvaluator:
    """Configurations estimated as `recommend` estimates candidates."""

    mode = "predicted"

    def __init__(self, catalog, q: Query) -> None:
        self.q = q
        self.builder = CandidateBuilder(catalog, q)
        self._cache: dict[tuple, Candidate] = {}

    def candidate(self, c: TuneConfig) -> Candidate:
        cand = self._cache.get(c.key())
        if cand is None:
            cand = self._cache[c.key()] = self.builder.build(c.model, c.quant, c.engine, c.context_tokens, c.batch,
                                                             kv_dtype=c.kv_dtype, gpu_layers=c.gpu_layers)
        return cand

    def grid(self, configs: list[GridKey]) -> "Grid":
        """Every configuration's status, costs and serving figures, predicted as arrays (CandidateBuilder.table): the
        figures ``__call__`` gives each (tests/predict/test_vector.py), as columns; the configurations the vector
        path leaves out through ``__call__`` (their Candidate the one the table built)."""
        import numpy as np  # noqa: PLC0415

        table = self.builder.table(configs)
        n = len(configs)
        table.fill(np.flatnonzero(table.vectorized))  # the quality figures each configuration's costs read
        cols = table.columns()
        # score.order.costs of each configuration's Row, as columns (the same keys, in the same order; NaN: None)
        method = self.q.normalization
        names = ("latency", "vram", "acc") + (("ppl", "quant_points", "goodput", "ttft", "tpot", "zh", "en")
                                              if method == "value" else ("ppl", "zh", "en"))
        src = cost_columns(cols, method)
        costs = {k: np.full(n, np.nan) if k == "ppl" and method == "value" else np.array(src[k], dtype=float)
                 for k in names}
        serve = {"batch": np.array([c.batch for c in configs], dtype=float),
                 **{k: np.array(table.arrays[k], dtype=float) for k in SERVE_NAMES}}
        feasible = ~table.excluded
        outcomes: dict[int, Outcome] = {}
        later: dict[int, Callable[[], Outcome]] = {}
        for i in np.flatnonzero(~table.vectorized).tolist():  # one by one: memory first, as recommend screens
            c = configs[i]
            if self.q.machine is None:
                cand = self.builder.build(c.model, c.quant, c.engine, c.context_tokens, c.batch,
                                          kv_dtype=c.kv_dtype, gpu_layers=c.gpu_layers, screen=True)
                if isinstance(cand, OverBudget):  # infeasible whatever its latency: its Outcome when asked for
                    feasible[i] = False
                    later[i] = functools.partial(self, c)
                    continue
                self._cache.setdefault(c.key(), cand)
            outcomes[i] = o = self(c)
            feasible[i] = o.status == "feasible"
        return Grid(configs, feasible, costs, serve, outcomes, later)

    def __call__(self, c: TuneConfig, **_: Any) -> Outcome:
        cand = self.candidate(c)
        # reasons other than memory ("needs ...") and latency ("TTFT ..."): engine support, context too long
        lat_tag = self.q.latency_metric.upper() + " "
        other = any(not (r.startswith("needs ") or r.startswith(lat_tag)) for r in cand.excluded)
        p = cand.provenance
        return Outcome(status="infeasible" if cand.excluded else "feasible", source="predicted", costs=_costs(cand, self.q.normalization),
                       reasons=list(cand.excluded),
                       constraints=_constraints(cand.total_vram_bytes, self.q.vram_bytes, cand.latency_ms,
                                                self.q.max_latency_ms, other),
                       provenance={"memory": p["total_vram_bytes"],
                                   "latency": p[LATENCY_FIELD[self.q.latency_metric]]},
                       serve={"batch": float(cand.batch),
                              **{k: f.value for k, f in self.builder.serving(cand).items()}})


SERVE_NAMES = ("serve_ttft_ms", "serve_tpot_ms", "serve_e2e_ms", "request_throughput_per_s",
               "output_throughput_tokens_per_s")


class GridOutcome:
    """One grid configuration as the grid's summary reads it (status, costs, serving figures), from the vectorized
    Predictor (PredictedEvaluator.grid); a trial's Outcome carries the rest."""

    __slots__ = ("status", "costs", "serve")

    def __init__(self, status: str, costs: dict, serve: dict) -> None:
        self.status, self.costs, self.serve = status, costs, serve


def _none(v: float) -> Optional[float]:
    return None if v != v else v  # NaN: None, as score.order.costs has it


class Grid:
    """The exhaustive grid as columns: its configurations (GridKey), whether each is feasible, its costs
    (score.order.costs' keys: criterion -> array, NaN = None) and serving figures, and the full Outcome of the
    configurations evaluated one by one (``outcomes``: index -> Outcome, their costs also in the columns). ``later``:
    infeasible configurations whose Outcome is computed when :meth:`outcome` asks for it (the memory screen
    excluded them; their columns are NaN until then). Iterating gives (configuration, outcome) pairs, the outcome
    built on the way."""

    def __init__(self, configs: list, feasible, costs: dict, serve: dict, outcomes: dict[int, Outcome],
                 later: Optional[dict[int, Callable[[], Outcome]]] = None) -> None:
        self.configs, self.feasible, self.costs, self.serve = configs, feasible, costs, serve
        self.outcomes, self.later = outcomes, later or {}
        for i, o in outcomes.items():
            self._put(i, o)

    def _put(self, i: int, o: Outcome) -> None:
        import numpy as np  # noqa: PLC0415

        for cols, vals in ((self.costs, o.costs), (self.serve, o.serve)):  # the columns hold its numbers
            for k, a in cols.items():
                v = vals.get(k)
                a[i] = np.nan if v is None else v

    @classmethod
    def of(cls, pairs: list[tuple[Any, Outcome]]) -> "Grid":
        """A grid evaluated one configuration at a time (the measured mode's predictions)."""
        import numpy as np  # noqa: PLC0415

        n = len(pairs)
        first = pairs[0][1] if pairs else None
        costs = {k: np.full(n, np.nan) for k in (first.costs if first else ())}
        serve = {k: np.full(n, np.nan) for k in (first.serve if first else ())}
        feasible = np.array([o.status == "feasible" for _, o in pairs], dtype=bool)
        return cls([c for c, _ in pairs], feasible, costs, serve, {i: o for i, (_, o) in enumerate(pairs)})

    def __len__(self) -> int:
        return len(self.configs)

    def __iter__(self):
        return ((c, self.outcome(i)) for i, c in enumerate(self.configs))

    def outcome(self, i: int):
        o = self.outcomes.get(i)
        if o is not None:
            return o
        make = self.later.pop(i, None)
        if make is not None:
            o = self.outcomes[i] = make()
            self._put(i, o)
            return o
        return GridOutcome("feasible" if self.feasible[i] else "infeasible",
                           {k: _none(a[i].item()) for k, a in self.costs.items()},
                           {k: _none(a[i].item()) for k, a in self.serve.items()})

    def feasible_index(self):
        import numpy as np  # noqa: PLC0415

        return np.flatnonzero(self.feasible)

    def cost_rows(self, idx) -> list[dict[str, Optional[float]]]:
        """The costs of configurations ``idx`` as score.order.costs' dicts."""
        for i in set(idx.tolist()) & self.later.keys():
            self.outcome(i)
        lists = {k: a[idx].tolist() for k, a in self.costs.items()}
        out = []
        for j, i in enumerate(idx.tolist()):
            o = self.outcomes.get(i)
            out.append(o.costs if o is not None else {k: _none(v[j]) for k, v in lists.items()})
        return out

    def cost(self, name: str, i: int) -> Optional[float]:
        if i in self.later:
            self.outcome(i)
        a = self.costs.get(name)
        return None if a is None else _none(a[i].item())


def evaluate_grid(evaluator: PredictedEvaluator, space: Space) -> Grid:
    configs = space.configs()
    grid = getattr(evaluator, "grid", None)
    if grid is not None:  # predicted: every configuration at once (recommender.predict.vector)
        return grid(configs)
    return Grid.of([(c, evaluator(c)) for c in configs])


# ---------------------------------------------------------------------------------------------------------------
# The study
# ---------------------------------------------------------------------------------------------------------------
def _quiet_optuna():
    import warnings  # noqa: PLC0415

    try:
        import optuna  # noqa: PLC0415
    except ImportError:
        raise UserError("optuna is not installed", hint="pip install 'llm-recommender[tune]'") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # its handler writes to stderr
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    return optuna


def _constraints_of(frozen) -> list[float]:
    return list(frozen.user_attrs.get("constraints", [1.0]))


CONSTRAINT_NAMES = ("memory", "latency", "other")
PARETO_POPULATION = 20


def _trial_constraints(optuna) -> bool:
    """Optuna >= 5 takes constraints per trial (Trial.set_constraint; constraints_func is deprecated there, to go in
    v7); older versions only through the sampler's constraints_func. Both feed the same constrained TPE / NSGA-II."""
    return hasattr(optuna.trial.Trial, "set_constraint")


def make_sampler(pareto: bool, seed: int, n_startup: int):
    optuna = _quiet_optuna()
    cf = {} if _trial_constraints(optuna) else {"constraints_func": _constraints_of}
    if pareto:
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=PARETO_POPULATION, **cf)
    # multivariate TPE, stated: it is Optuna 5's default for one objective (Optuna 3-4: univariate), and the sampler
    # bench/tune_regret.py figures were measured with, as far as this tree shows (37 of 42 scenario x seed runs reached the grid optimum
    # within 10 % of the grid, against 34 of 42 with group=True; docs/tune.md). Until 2026-12-01 it was left to the
    # default (Optuna 5.0.0 here and in CI) while sampler_settings reported univariate. Univariate costs about twice as much per trial here (every
    # parameter splits the whole history again): 2,000 trials of a 2-model space 59 s against 31 s.
    # recommender.search.tpe: Optuna's TPESampler drawing the same samples, its split of the history made once a trial
    return tpe_sampler(optuna, seed=seed, n_startup_trials=n_startup, multivariate=True, **cf)


def sampler_settings(pareto: bool, n_startup: int) -> dict[str, Any]:
    import optuna  # noqa: PLC0415

    how = "Trial.set_constraint" if _trial_constraints(optuna) else "constraints_func"
    base = {"optuna": optuna.__version__, "constraints": f"{', '.join(CONSTRAINT_NAMES)} via {how} (<= 0 feasible)"}
    if pareto:
        return {"name": "NSGAIISampler", "population_size": PARETO_POPULATION, **base}
    return {"name": "TPESampler", "multivariate": True, "n_startup_trials": n_startup, **base}


def _set_constraints(optuna, trial, values: list[float]) -> None:
    trial.set_user_attr("constraints", values)
    if _trial_constraints(optuna):
        for k, v in zip(CONSTRAINT_NAMES, values):
            trial.set_constraint(k, v)


def query_fingerprint(q: Query, space: Space, mode: str, pareto: bool) -> str:
    blob = json.dumps({"q": q.model_dump(mode="json", exclude={"top", "per_model"}), "space": space.describe(),
                       "mode": mode, "pareto": pareto}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


STORAGE_RETRIES = 20  # joining a study another worker is creating
SCHEMA_RETRIES = 8  # creating the storage's tables while another worker does (or an unreachable server)


def open_study(storage: Optional[str], study_name: str, pareto: bool, sampler, fingerprint: str):
    """Create or join a study. With an RDB URL several processes (or machines) share it; concurrent creation is
    retried, and a study made for another query is refused."""
    optuna = _quiet_optuna()
    store = None
    if storage:
        kwargs: dict[str, Any] = {}
        if storage.startswith("sqlite"):
            kwargs = {"connect_args": {"timeout": 60}}
            check_sqlite_storage(storage)
        for attempt in range(SCHEMA_RETRIES):
            try:
                store = optuna.storages.RDBStorage(storage, engine_kwargs=kwargs)
                break
            except ImportError as e:
                raise UserError(f"cannot open storage {_redact(storage)!r}: {e}",
                                hint="PostgreSQL needs a driver: pip install 'recommender[postgres]' (psycopg 3)") from None
            except Exception as e:  # noqa: BLE001 - SQLAlchemy's many URL / connection errors
                msg = str(e).splitlines()[0] if str(e) else type(e).__name__
                # two workers creating the schema at once: one sees the other's tables or alembic row, or a lock
                # (PostgreSQL: CREATE TYPE / TABLE of the other worker -> DuplicateObject, a ProgrammingError)
                racing = type(e).__name__ in ("OperationalError", "IntegrityError") or (
                    type(e).__name__ == "ProgrammingError" and "already exists" in msg)
                if racing and attempt < SCHEMA_RETRIES - 1:
                    time.sleep(0.2 * (attempt + 1))
                    continue
                raise _bad_storage(storage, msg) from None
    kw: dict[str, Any] = {"directions": ["minimize"] * 3} if pareto else {"direction": "minimize"}
    last: Optional[Exception] = None
    for attempt in range(STORAGE_RETRIES):
        try:
            study = optuna.create_study(storage=store, study_name=study_name, sampler=sampler, load_if_exists=True,
                                        **kw)
            break
        except optuna.exceptions.DuplicatedStudyError as e:  # another worker created it just now: load it
            last = e
        except ValueError as e:  # a study of that name with other directions
            raise UserError(f"study {study_name!r} exists with another objective: {e}",
                            hint="use another --study-name, or the same --pareto setting as the study") from None
        except Exception as e:  # noqa: BLE001 - e.g. sqlite 'database is locked' while another worker writes
            last = e
        time.sleep(0.2 * (attempt + 1))
    else:
        raise UserError(f"cannot open study {study_name!r}: {last}", hint="check the --storage URL")
    have = study.user_attrs.get("query_fingerprint")
    if have is None:
        study.set_user_attr("query_fingerprint", fingerprint)
    elif have != fingerprint:
        raise UserError(f"study {study_name!r} was created for another query or search space",
                        hint="every worker of one study needs the same options; or use another --study-name")
    return study


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _record(t) -> Optional[TrialRecord]:
    ua = t.user_attrs
    if "config" not in ua:
        return None
    state = t.state.name
    status = ua.get("status", "pruned" if state == "PRUNED" else "failed")
    if state == "PRUNED":
        status = "pruned"
    return TrialRecord(number=t.number, config=TuneConfig(**ua["config"]), status=status,
                       source=ua.get("source", "none"), score=ua.get("score"), score_parts=ua.get("score_parts", {}),
                       latency_ms=ua.get("latency_ms"), memory_bytes=ua.get("memory_bytes"),
                       quality_cost=ua.get("quality_cost"), reasons=ua.get("reasons", []),
                       provenance=ua.get("provenance", {}), measurement_id=ua.get("measurement_id"),
                       worker=ua.get("worker", ""), goodput_rps=ua.get("goodput_rps"))


def _dominates(a: tuple, b: tuple) -> bool:
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def pareto_front(records: list[TrialRecord]) -> list[TrialRecord]:
    """Non-dominated feasible trials over (latency, memory, quality cost), one per configuration."""
    uniq: dict[tuple, TrialRecord] = {}
    for r in records:
        if r.status == "feasible" and r.latency_ms is not None and r.memory_bytes is not None:
            uniq.setdefault(r.config.key(), r)
    pts = list(uniq.values())
    objs = [(r.latency_ms, float(r.memory_bytes), r.quality_cost or 0.0) for r in pts]
    front = [r for i, r in enumerate(pts) if not any(_dominates(objs[j], objs[i]) for j in range(len(pts)) if j != i)]
    return sorted(front, key=lambda r: (r.latency_ms, r.memory_bytes))


def _grid_front_keys(objs: list[tuple[tuple, tuple]]) -> set[tuple]:
    """Keys of the non-dominated points of the grid (numpy, O(n^2) vectorized)."""
    import numpy as np  # noqa: PLC0415

    if not objs:
        return set()
    keys = [k for k, _ in objs]
    a = np.array([o for _, o in objs], dtype=float)
    out = set()
    for i in range(len(a)):
        le = (a <= a[i]).all(axis=1)
        lt = (a < a[i]).any(axis=1)
        if not (le & lt).any():
            out.add(keys[i])
    return out


def run_tune(catalog, q: Query, *, measured=None, **options: Any) -> TuneResult:
    """:func:`_run_tune`; in predicted mode (``measured`` None) with the cyclic collector paused, as recommend pauses
    it (recommender.core.collector: the grid's ~130,000 configurations stay alive to the end)."""
    if measured is not None:  # probes for minutes: the collector as it is
        return _run_tune(catalog, q, measured=measured, **options)
    with collector_paused():
        return _run_tune(catalog, q, **options)


def _run_tune(catalog, q: Query, *, trials: int, seed: int, pareto: bool = False, storage: Optional[str] = None,
             study_name: Optional[str] = None, kv_dtypes: Optional[list[str]] = None, offload: bool = True,
             n_startup: int = 10, measured=None, progress: Optional[Callable[[str], None]] = None,
             stop_at_optimum: bool = False, slo: Optional[Slo] = None,
             opened: Optional[Callable[[], None]] = None) -> TuneResult:
    """Run (or join) a study and compare it with the exhaustive grid. ``measured``: a MeasuredEvaluator (the
    probe side, recommender.search.tune_measure); None = predicted mode. ``stop_at_optimum`` ends the study once a trial
    reaches the grid optimum (bench/tune_regret.py: the trials after it would not change trials-to-optimum).
    ``slo``: maximize goodput (requests/s meeting the SLOs, :func:`goodput_rps`) instead of the weighted score; a
    trial's score is then -goodput, so the grid optimum, regret and trials-to-optimum keep their meaning."""
    if slo is not None and (pareto or measured is not None):
        raise UserError("--objective goodput is a predicted, single-objective search",
                        hint="drop --pareto / --measure, or use the weighted score")
    optuna = _quiet_optuna()
    t0 = time.perf_counter()
    notes: list[str] = []
    if measured is not None:
        space = measured.space
        grid_eval = measured.predicted
    else:
        space = build_space(catalog, q, kv_dtypes, offload)
        grid_eval = PredictedEvaluator(catalog, q)
    grid = evaluate_grid(grid_eval, space)
    fidx = grid.feasible_index()  # the feasible configurations, in the grid's order
    # the feasible rows' costs as dicts where the reference or the score reads them so (value: columns)
    rows_needed = measured is not None or q.normalization != "value" or slo is not None
    feasible_rows = grid.cost_rows(fidx) if rows_needed else []
    fallback = None
    if measured is not None:
        fallback = measured.latency_fallback(feasible_rows)
        if fallback:
            notes.append(f"latency normalized over [0, {fallback['latency'][1]:.0f} ms] (the limit): no predicted "
                         f"latency on {q.hardware.name}")
    ref = make_reference(feasible_rows, q.weights, q.normalization, q.missing, fallback, q)

    def score_of(o: Outcome) -> tuple[float, dict[str, float]]:
        if slo is None:
            return ref.score(o.costs)
        g = goodput_rps(o.serve, slo)
        return -(g or 0.0), {"goodput_rps": g or 0.0}

    if slo is not None:
        scores = [score_of(grid.outcome(i))[0] for i in fidx.tolist()]
    elif ref.method == "value" and not rows_needed:
        scores = ref.score_columns({k: a[fidx] for k, a in grid.costs.items()})
    else:
        scores = ref.scores(feasible_rows)
    opt = min(scores, default=None)
    # ties (the value score is flat inside the limits) in recommend's order: less memory, then lower latency
    tied = [] if opt is None else [j for j, s in enumerate(scores) if s <= opt + OPTIMUM_TOL]
    at = fidx.tolist()
    tied.sort(key=lambda j: (scores[j], _tie(grid.cost("vram", at[j]), grid.cost("latency", at[j]))))
    optimum = [grid.configs[at[j]] for j in tied[:20]]
    summary = GridSummary(size=len(grid), feasible=len(scores), optimum_score=opt,
                          optimum=[c.config() if isinstance(c, GridKey) else c for c in optimum],
                          reference={k: list(v) for k, v in ref.stats.items()})
    for crit, w in q.weights.items():
        if w and crit not in ref.stats and ref.method != "value":
            notes.append(f"no feasible configuration has a value for '{crit}': its weight ({w:.2f}) does not "
                         f"affect the score")
    if not scores:
        notes.append("no configuration of the grid satisfies the constraints" +
                     (" (as predicted)" if measured is not None else ""))

    sampler = make_sampler(pareto, seed, n_startup)
    name = study_name or f"tune-{query_fingerprint(q, space, 'measured' if measured else 'predicted', pareto)}"
    mode_tag = ("measured" if measured else "predicted") + (f":goodput:{slo.model_dump_json()}" if slo else "")
    if slo is not None and not study_name:
        name = f"tune-{query_fingerprint(q, space, mode_tag, pareto)}"
    study = open_study(storage, name, pareto, sampler, query_fingerprint(q, space, mode_tag, pareto))
    if opened is not None:  # the caller's plan notes come after a bad --storage's error line, never before it
        opened()
    me = worker_id()
    evaluate = measured if measured is not None else grid_eval

    def objective(trial):
        cfg = space.suggest(trial)
        trial.set_user_attr("config", cfg.model_dump())
        trial.set_user_attr("worker", me)
        try:
            out = evaluate(cfg, study=study)  # a MeasuredEvaluator raises TrialPruned when the budget is spent
        except optuna.TrialPruned:
            _set_constraints(optuna, trial, [1.0, 1.0, 1.0])
            raise
        _set_constraints(optuna, trial, out.constraints)
        score, parts = score_of(out)
        if slo is not None:
            trial.set_user_attr("goodput_rps", goodput_rps(out.serve, slo))
        lat, mem = out.costs.get("latency"), out.costs.get("vram")
        qc = ref.quality_cost(parts)
        for k, v in (("status", out.status), ("source", out.source), ("score", score), ("score_parts", parts),
                     ("latency_ms", lat), ("memory_bytes", None if mem is None else int(mem)),
                     ("quality_cost", qc), ("reasons", out.reasons),
                     ("provenance", out.provenance), ("measurement_id", out.measurement_id)):
            trial.set_user_attr(k, v)
        if progress:
            progress(f"trial {trial.number}: {cfg.model} {cfg.quant} {cfg.engine} ctx {cfg.context_tokens} "
                     f"batch {cfg.batch} kv {cfg.kv_dtype}"
                     + (f" ngl {cfg.gpu_layers}" if cfg.gpu_layers is not None else "")
                     + f" -> {out.status} ({out.source}) score {score:.4f}")
        if pareto:
            return (lat if lat is not None else UNKNOWN_LATENCY_MS, (mem or 0.0) / 1024**3, qc)
        if stop_at_optimum and opt is not None and out.status == "feasible" and score <= opt + OPTIMUM_TOL:
            study.stop()
        return score

    study.optimize(objective, n_trials=trials, catch=(), gc_after_trial=False)
    records = [r for r in (_record(t) for t in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
                           if t.state.name in ("COMPLETE", "PRUNED", "FAIL")) if r is not None]
    feasible = [r for r in records if r.status == "feasible" and r.score is not None]
    best = min(feasible, key=lambda r: (round(r.score, SCORE_DECIMALS), _tie(r.memory_bytes, r.latency_ms),
                                        r.number)) if feasible else None
    regret = ttopt = dtopt = None
    if best is not None and opt is not None and measured is None:  # measured scores are not comparable with the
        regret = max(best.score - opt, 0.0)                          # predicted grid's optimum
        seen: set[tuple] = set()
        for i, r in enumerate(records, 1):
            seen.add(r.config.key())
            if r.status == "feasible" and r.score is not None and r.score <= opt + OPTIMUM_TOL:
                ttopt, dtopt = i, len(seen)
                break
    n_distinct = len({r.config.key() for r in records})
    result = TuneResult(
        mode="measured" if measured is not None else "predicted",
        objective="pareto" if pareto else "goodput" if slo is not None else "score", slo=slo,
        query=q, space=space.describe(), study_name=name, storage=_redact(storage), seed=seed,
        sampler=sampler_settings(pareto, n_startup), n_trials=len(records), n_distinct=n_distinct, best=best,
        grid=summary, regret=regret, trials_to_optimum=ttopt, distinct_to_optimum=dtopt,
        reached_within=(ttopt is not None and ttopt <= 0.1 * summary.size) if summary.size and measured is None
        else None,
        trials=records, notes=notes)
    if pareto:
        result.pareto_front = pareto_front(records)
        if measured is None and scores:
            objs = []
            for c, o in grid:
                if o.status == "feasible" and o.costs.get("latency") is not None:
                    _, parts = ref.score(o.costs)
                    objs.append((c.key(), (o.costs["latency"], o.costs["vram"], ref.quality_cost(parts))))
            gf = _grid_front_keys(objs)
            result.grid_front_size = len(gf)
            result.front_on_grid_front = sum(1 for r in result.pareto_front if r.config.key() in gf)
    if measured is not None:
        result.notes += measured.notes
    result.elapsed_s = round(time.perf_counter() - t0, 3)
    return result


OPTUNA_TABLES = {"studies", "trials", "alembic_version", "version_info"}


def _bad_storage(url: str, msg: str) -> UserError:
    return UserError(f"cannot open storage {_redact(url)!r}: {msg}",
                     hint="give an RDB URL, e.g. sqlite:///tune.db or postgresql://user:password@host/dbname")


def check_storage(url: str) -> None:
    """A --storage URL, checked before any work is done (the grid is evaluated before the study opens, a minute or
    more on a large space): a sqlite file (:func:`check_sqlite_storage`), else a URL SQLAlchemy parses, of a kind
    of database it knows. Connecting, and the driver, are open_study's."""
    if url.startswith("sqlite"):
        check_sqlite_storage(url)
        return
    try:
        from sqlalchemy.engine import make_url  # noqa: PLC0415 - optuna's dependency

        make_url(url).get_dialect()
    except ImportError:
        return  # no SQLAlchemy (no optuna) or no driver: open_study says which
    except Exception as e:  # noqa: BLE001 - ArgumentError (unparsable), NoSuchModuleError (unknown database)
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise _bad_storage(url, msg) from None


def check_sqlite_storage(url: str) -> None:
    """A sqlite --storage must be a new file or an Optuna study file: Optuna would add its tables to any database."""
    import sqlite3  # noqa: PLC0415

    path = url.split("///", 1)[1].split("?", 1)[0] if "///" in url else ""
    if not path or path == ":memory:" or not os.path.exists(path):
        return
    if not os.path.isfile(path):
        raise UserError(f"--storage {path} is not a regular file", hint="give e.g. sqlite:///tune.db")
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            # a damaged file whose header still reads (torn or overwritten pages): Optuna would fail mid-run
            try:
                check = [r[0] for r in con.execute("PRAGMA quick_check")]
            except sqlite3.DatabaseError as e:
                check = [str(e)]
            if check != ["ok"]:
                raise UserError(f"--storage {path} is a damaged SQLite database (quick_check: {check[0]})",
                                hint="restore it from a copy, or give a new file")
        finally:
            con.close()
    except sqlite3.OperationalError as e:  # 'database is locked': a writer holds it; not a damaged file
        if "locked" in str(e).lower() or "busy" in str(e).lower():
            raise UserError(f"--storage {path} is locked by another process ({e})",
                            hint="wait for the other `tune` (or program) to finish, or give another file") from None
        raise UserError(f"--storage {path} is not a SQLite database ({e})",
                        hint="give a new file or one an earlier `tune --storage` made") from None
    except sqlite3.Error as e:
        raise UserError(f"--storage {path} is not a SQLite database ({e})",
                        hint="give a new file or one an earlier `tune --storage` made") from None
    if tables and not tables & OPTUNA_TABLES:
        raise UserError(f"--storage {path} is a SQLite database of something else ({len(tables)} tables, no Optuna "
                        "study): not adding tables to it", hint="give a new file, e.g. sqlite:///tune.db")


def _redact(url: Optional[str]) -> Optional[str]:
    """A storage URL without its password (results and logs are shared): user:password@ and ?password=..."""
    if not url or "://" not in url:
        return url
    if "?" in url:
        import re  # noqa: PLC0415

        url = re.sub(r"(?i)([?&](?:password|passwd|pwd|secret|token)=)[^&]*", r"\1***", url)
    if "@" not in url.split("?", 1)[0]:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"
