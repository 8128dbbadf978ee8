"""Candidates: model x quant x engine x batch x context, each predicted (recommender.predict.Predictor), with its
quality figures and the hard limits it breaks."""

from __future__ import annotations

import math
from typing import Callable, NamedTuple, Optional, Union

from pydantic import Field

from recommender.core.engines import engine_spec, engines_on
from recommender.core.records import CHAT_CHECKPOINTS, CatalogReader, Figure, HardwareProfile, ModelSpec
from recommender.hardware.profiles import OFFLOAD_BACKENDS, load_profiles
from recommender.model.quant import QUANTS
from recommender.predict import constants as C
from recommender.predict.analytical import memory
from recommender.predict.counts import compressed
from recommender.predict.predictor import Config, Prediction, Predictor
from recommender.predict.serving import Slo
from recommender.predict.split import check_plan, default_plan
from recommender.predict.vector import Columns, predict_group, serve_arrays
from recommender.rank.launch import Launch
from recommender.rank.quality import QualityIndex, TaskAccuracy, quant_cost, quant_cost_value, ranked_accuracy
from recommender.rank.query import LATENCY_FIELD, Query, serve_slos
from recommender.score.order import QUALITY_COLUMNS, quality_values
from recommender.score.weighted import HEADROOM_MIN_BYTES, HEADROOM_SHARE

# A reasoning checkpoint writes hidden reasoning before its visible answer (issue 23): the time to the visible answer
# is TTFT + R x TPOT, and E2E, throughput and goodput decode R + n_out tokens. No token usage per checkpoint is in the
# sources yet, so R is one published ratio for every workload: reasoning models generate ~18x the tokens of
# non-reasoning models on the same tasks (Srivastava et al., "Do LLMs Overthink Basic Math Reasoning?", 53 LLMs,
# arXiv:2507.04023 abstract), read as total output = 18 x the visible answer, R = 17 x n_out. Hybrid checkpoints (Qwen3,
# GLM-4.5+, DeepSeek-V3.1+) are planned in their non-thinking mode (R = 0), the mode their comparable accuracy has.
REASONING_TOKEN_RATIO = 18.0
REASONING_BASIS = ("reasoning tokens R = (18 - 1) x the workload's answer tokens: reasoning models generate ~18x the "
                   "tokens of non-reasoning ones (Srivastava et al. 2025, arXiv:2507.04023, 53 LLMs, basic math; a "
                   "stated default: no published token usage for this checkpoint)")


def reasoning_tokens(spec: ModelSpec, output_tokens: int) -> tuple[int, str]:
    """(hidden reasoning tokens before the visible answer, the planned mode with its basis) of a checkpoint."""
    kind = spec.checkpoint_kind
    if kind == "reasoning":
        return round((REASONING_TOKEN_RATIO - 1.0) * output_tokens), f"thinking (reasoning checkpoint): {REASONING_BASIS}"
    if kind == "hybrid":
        return 0, "non-thinking (hybrid checkpoint planned in its non-thinking mode: no reasoning tokens)"
    return 0, "no thinking"


QUALITY_FIGURES = ("zh_accuracy", "en_accuracy", "ppl_ratio", "task_accuracy", "zh_comparable", "en_comparable",
                   "quant_cost_points", "task_accuracy_ranked")


_QP, _PPL = QUALITY_COLUMNS.index("quant_points"), QUALITY_COLUMNS.index("ppl")
_MISSING = object()


class Candidate(Prediction):
    """A Prediction with the model's quality figures (zh_accuracy, en_accuracy, ppl_ratio join ``figures``), the
    constrained latency, and what ranking made of it."""

    rank: Optional[int] = None
    params_total: int
    params_active: int
    latency_ms: Optional[float]  # the constrained latency metric
    score: Optional[float] = None  # weighted normalized cost, lower is better
    score_parts: dict[str, float] = Field(default_factory=dict)
    excluded: list[str] = Field(default_factory=list)
    launch: Optional[Launch] = None  # how to run it (recommender.rank.launch), set on the rows a recommendation shows

    zh_accuracy = property(lambda self: self.figures["zh_accuracy"].value)
    en_accuracy = property(lambda self: self.figures["en_accuracy"].value)
    ppl_ratio = property(lambda self: self.figures["ppl_ratio"].value)
    task_accuracy = property(lambda self: self.figures["task_accuracy"].value)
    goodput_per_s = property(lambda self: (f := self.figures.get("goodput_requests_per_s")) and f.value)


class OverBudget:
    """A candidate the memory-first pre-pass excluded: its analytical memory is above the budget, so it is excluded
    whatever its latency. It carries what a lower bound on its score needs (quality figures, memory) and builds the
    full Candidate - exactly the one ``CandidateBuilder.build`` would have built - when it has to be shown
    (recommender.score.order.rank: the strongest excluded)."""

    __slots__ = ("model", "quant", "engine", "context_tokens", "batch", "figures", "total_vram_bytes", "excluded",
                 "_build")
    deferred = True
    latency_ms = ttft_ms = tpot_ms = goodput_per_s = None  # not computed

    def __init__(self, model: str, quant: str, engine: str, ctx: int, batch: int, figures: dict[str, Figure],
                 vram: int, reason: str, build: Callable[[], "Candidate"]) -> None:
        self.model, self.quant, self.engine, self.context_tokens, self.batch = model, quant, engine, ctx, batch
        self.figures, self.total_vram_bytes, self.excluded, self._build = figures, vram, [reason], build

    def full(self) -> "Candidate":
        return self._build()


def _cc(hw: HardwareProfile) -> Optional[tuple[int, int]]:
    if not hw.compute_capability:
        return None
    major, _, minor = hw.compute_capability.partition(".")
    return int(major), int(minor or 0)


def engine_supported(engine: str, family: str, quant: str, hw: HardwareProfile) -> Optional[str]:
    """None when the engine can run this quantization on this hardware, else the reason it cannot."""
    if hw.backend not in engine_spec(engine).backends:  # the engine's record lists the backends it runs on
        if hw.backend == "metal":
            return f"{engine} has no Apple Metal backend"
        others = " or ".join(engines_on(hw.backend))
        if hw.backend in ("vulkan", "sycl"):
            return f"{engine} has no {hw.backend.upper()} backend ({others} runs on {hw.name} through Vulkan or SYCL)"
        return f"{engine} has no {hw.backend.upper()} backend (on {hw.name}: {others})"
    if hw.backend == "cpu" and family not in ("float", "gguf"):
        return f"{quant} kernels need a GPU (CPU planning covers GGUF and float weights)"
    cc = _cc(hw)
    keys = [(engine, "*"), (engine, family), ("*", quant.lower())]
    for key in keys:
        rule = C.MIN_COMPUTE_CAPABILITY.get(key)
        if rule and cc is not None and hw.backend == "cuda" and cc < rule[0]:
            return f"{quant} on {engine} needs compute capability >= {rule[0][0]}.{rule[0][1]} ({rule[1]})"
    return None


class CandidateBuilder:
    """Everything a candidate needs from the catalog, read once: the Predictor of the query's hardware (calibration
    and measured rows), quality and the hard limits of one query. ``enumerate_candidates`` (recommend) and
    ``recommender.search.tune`` (one configuration per trial, KV dtype and partial offload included) build candidates
    through it."""

    def __init__(self, catalog: CatalogReader, q: Query, predictor: Optional[Predictor] = None) -> None:
        self.q = q
        self.quality = QualityIndex(catalog)
        self.wanted = {catalog.resolve_model(m).id for m in q.models}
        self.models = catalog.models()
        self.tasks = TaskAccuracy(catalog, self.quality, self.models, q.workload.name)
        self.quant_table = catalog.quant_quality()
        self.groups = tuple(q.workload.accuracy_tasks)
        self.slo = Slo(**dict(zip(("ttft_ms", "tpot_ms"), serve_slos(q)))) \
            if q.workload.rank_by == "goodput" else None
        self.variants = catalog.variants()
        self.predictor = predictor or Predictor.for_catalog(catalog, q.hardware, load_profiles(), self.models,
                                                            machine=q.machine)
        self._quality: dict[tuple[str, str], dict[str, Figure]] = {}
        self._quant_costs: dict[tuple, Figure] = {}
        self._quality_costs: dict[tuple[str, str], tuple[float, ...]] = {}
        self._qp_values: dict[tuple, Optional[float]] = {}  # quality_costs' quantization costs and PPL ratios
        self._ppl_values: dict = {}
        self._model_quality: dict[str, dict] = {}  # _quant_free of the models no probe measured
        self._ranked: dict[int, tuple[Figure, Figure]] = {}
        self._support: dict[tuple[str, str], Optional[str]] = {}
        self._measured_models: Optional[set[str]] = None

    def build(self, mid: str, quant: str, engine: str, ctx: int, batch: int, kv_dtype: Optional[str] = None,
              gpu_layers: Optional[int] = None, split: bool = True,
              screen: bool = False) -> Union[Candidate, OverBudget]:
        """One candidate. On a multi-GPU machine (``q.machine``) it is spread over every GPU by the engine's default
        plan, or with ``split=False`` runs on the first GPU alone (llama.cpp ``-sm none``, vLLM without
        parallelism). ``screen``: memory first - a configuration whose (analytical) memory is above the budget comes
        back as an OverBudget, its latency not computed until it has to be shown."""
        q, hw, wl = self.q, self.q.hardware, self.q.workload
        spec: ModelSpec = self.models[mid]
        quality = self.quality_figures(mid, quant)
        unsupported = self.supported(engine, quant)  # per (engine, quant) on this hardware
        think, mode = reasoning_tokens(spec, wl.output_tokens)
        n_out = wl.output_tokens + think  # decoded tokens: hidden reasoning, then the visible answer
        prompt = min(wl.prompt_tokens, max(ctx - n_out, 1))
        plan = None
        if q.machine is not None and split:  # several GPUs: the engine's default split over all of them
            plan = default_plan(engine, spec, q.machine)
            why = "multi-GPU plans cover llama.cpp and vLLM" if plan is None else \
                check_plan(engine, plan, spec, q.machine)
            if why:
                unsupported = unsupported or f"{engine} on {q.machine.name}: {why}"
                plan = None
            gpu_layers = None
        field = LATENCY_FIELD[q.latency_metric]

        def limits(figs: dict, notes: list[str]) -> dict:
            """The candidate's other fields: its quality figures, the constrained latency and the limits it breaks
            (a split's per-device memory and the serve SLOs are checked below, once the record exists)."""
            figs.update(quality)
            figs["thinking_tokens"] = Figure(think, "tokens", "estimated", mode)
            if think and self.slo is None and figs["ttft_ms"].value is not None and figs["tpot_ms"].value is not None:
                t, d = figs["ttft_ms"], figs["tpot_ms"]
                figs["ttft_first_token_ms"] = t
                figs["ttft_ms"] = Figure(t.value + think * d.value, "ms", "estimated", interval=None,
                                         basis=f"time to the visible answer = TTFT {t.value:.0f} ms + {think} reasoning "
                                               f"tokens x TPOT {d.value:.1f} ms ({mode})")
            lat, vram = figs[field].value, figs["total_vram_bytes"].value
            reasons = self.reasons(spec, ctx, think, n_out, unsupported, plan is None, vram, lat, notes)
            return {"params_total": spec.params_total, "params_active": spec.params_active, "rank": None,
                    "score": None, "score_parts": {}, "latency_ms": lat, "excluded": reasons}

        config = Config(model=mid, quant=quant, engine=engine, context_tokens=ctx, batch=batch, prompt_tokens=prompt,
                        output_tokens=n_out, kv_dtype=kv_dtype, gpu_layers=gpu_layers, split=plan,
                        load_mode=q.load_mode)
        mem = None
        if screen and plan is None:
            budget = hw.memory_bytes if q.machine is not None else q.vram_bytes
            mem = self.predictor.screen_memory(spec, config, self.variants[(mid, quant)])
            vram = None if mem is None else mem.total_bytes
            if vram is not None and vram > budget:
                figs = {**quality, "total_vram_bytes": Figure(vram, "bytes", "estimated")}
                return OverBudget(mid, quant, engine, ctx, batch, figs, vram,
                                  f"needs {vram / 1024**3:.1f} GiB of GPU memory, budget is {budget / 1024**3:.1f} GiB",
                                  lambda: self.build(mid, quant, engine, ctx, batch, kv_dtype, gpu_layers, split))
        c = self.predictor.predict(spec, config, variant=self.variants[(mid, quant)], record=Candidate, extra=limits,
                                   mem=mem)
        for d in c.devices or ():  # a split: every device must hold its share
            if not d.fits:
                c.excluded.append(f"GPU {d.index} ({d.name}) needs {d.total_bytes / 1024**3:.1f} GiB, has "
                                  f"{d.budget_bytes / 1024**3:.1f} GiB")
        if self.slo is not None:  # serve: the figures under load of `batch` clients, goodput at the workload's SLOs
            c.figures.update(self.serving(c, self.slo))
            if think:
                self._visible_serve_ttft(c, think, mode)
            g = c.figures["goodput_requests_per_s"]
            if g.value == 0:
                c.excluded.insert(0, f"at batch {batch} requests miss the serve SLOs: {g.basis.split(';')[0]}")
        return c

    def reasons(self, spec: ModelSpec, ctx: int, think: int, n_out: int, unsupported: Optional[str], one_gpu: bool,
                vram: float, lat: Optional[float], notes: list[str]) -> list[str]:
        """The hard limits a configuration breaks (its context, its engine, its memory on one GPU, its latency), as
        the lines a user reads; the serve SLOs and a split's devices are checked by ``build``."""
        q, wl, hw = self.q, self.q.workload, self.q.hardware
        reasons = []
        if think and ctx < wl.prompt_tokens + n_out:
            reasons.append(f"context {ctx} holds no {wl.prompt_tokens}-token prompt + {think} reasoning + "
                           f"{wl.output_tokens} answer tokens")
        if unsupported:
            reasons.append(unsupported)
        if ctx > spec.max_position_embeddings:
            reasons.append(f"context {ctx} exceeds the model's maximum of {spec.max_position_embeddings}")
        budget = hw.memory_bytes if q.machine is not None else q.vram_bytes  # one GPU of a machine: its own
        if one_gpu and vram > budget:
            reasons.append(f"needs {vram / 1024**3:.1f} GiB of GPU memory, budget is "
                           f"{budget / 1024**3:.1f} GiB")
        if q.max_latency_ms is not None:
            if lat is None:
                reasons.append(f"{q.latency_metric.upper()} unknown ({'; '.join(notes) or 'no data'}), "
                               f"so the latency limit cannot be checked")
            elif lat > q.max_latency_ms:
                reasons.append(f"{q.latency_metric.upper()} {lat:.0f} ms exceeds the limit of "
                               f"{q.max_latency_ms:.0f} ms")
        return reasons

    def supported(self, engine: str, quant: str) -> Optional[str]:
        """None when the engine runs this quantization on the query's hardware, else why not (once per pair)."""
        key = (engine, quant)
        if key not in self._support:
            self._support[key] = engine_supported(engine, QUANTS[quant].family, quant, self.q.hardware)
        return self._support[key]

    def table(self, keys: list) -> "KeyTable":
        """The figures ranking reads for every configuration of ``keys`` (CandidateKey, or any record with model,
        quant, engine, context_tokens, batch and optionally kv_dtype and gpu_layers), computed by the vectorized
        Predictor (recommender.predict.vector) in groups of one quantization, engine, KV dtype and batch: memory,
        TTFT, TPOT, E2E, the constrained latency, serving figures and goodput, and whether a hard limit excludes it.
        The same figures as ``build`` of each key (tests/predict/test_vector.py); records are built only by
        ``row(i).full()``. A multi-GPU machine's keys are left to ``build`` (vectorized: False)."""
        return KeyTable(self, keys)

    def _offload_memory(self, mid: str, quant: str, engine: str, ctx: int, batch: int, n: Optional[int]):
        q, spec = self.q, self.models[mid]
        return memory(spec, quant, engine, q.hardware, context_tokens=ctx, batch=batch,
                      prompt_tokens=min(q.workload.prompt_tokens, max(ctx - q.workload.output_tokens, 1)),
                      output_tokens=q.workload.output_tokens, variant=self.variants[(mid, quant)], gpu_layers=n)

    def offload_layers(self, mid: str, quant: str, engine: str, ctx: int, batch: int) -> Optional[int]:
        """llama.cpp partial offload of a configuration too big for the GPU: the most layers (n_gpu_layers, the output
        layer first; docs/estimates.md 6.7) whose memory fits the budget less the score's headroom (room for the
        estimate's error and the runtime, as one sets -ngl leaving a margin), found by bisection on the memory terms
        alone; None when the whole model fits (the GPU-only configuration is the plan), not even the output layer
        fits, or host RAM (q.host_ram_bytes) cannot hold the rest of the weights and their KV cache."""
        return self.offload_layers_many([(mid, quant, engine, ctx, batch)])[0]

    def offload_layers_many(self, reqs: list[tuple[str, str, str, int, int]]) -> list[Optional[int]]:
        """``offload_layers`` of many configurations (model, quant, engine, context, batch): the same bisection for
        every one at once, on arrays (analytical.memory with arrays of n_gpu_layers), in groups of one quantization,
        engine and batch."""
        import numpy as np  # noqa: PLC0415

        q, wl = self.q, self.q.workload
        out: list[Optional[int]] = [None] * len(reqs)
        shared = self.__dict__.setdefault("_vector_shared", {"spec": {}})
        ids, recs = list(self.models), list(self.models.values())
        pos = {m: j for j, m in enumerate(ids)}
        groups: dict[tuple, list[int]] = {}
        for i, (mid, quant, engine, _ctx, batch) in enumerate(reqs):
            if compressed(self.models[mid]):  # DeepSeek-V4: no partial-offload plan on this path yet
                continue
            groups.setdefault((quant, engine, batch), []).append(i)
        target = q.vram_bytes - max(HEADROOM_SHARE * q.vram_bytes, HEADROOM_MIN_BYTES)
        for (quant, engine, batch), rows in groups.items():
            mpos = np.array([pos[reqs[i][0]] for i in rows])
            spec = Columns(recs, mpos, shared["spec"])
            if quant not in shared:
                shared[quant] = ([self.variants.get((m, quant)) for m in ids], {})
            variant = Columns(shared[quant][0], mpos, shared[quant][1])
            ctx = np.array([reqs[i][3] for i in rows])
            prompt = np.minimum(wl.prompt_tokens, np.maximum(ctx - wl.output_tokens, 1))

            def mem(n):
                return memory(spec, quant, engine, q.hardware, context_tokens=ctx, batch=batch, prompt_tokens=prompt,
                              output_tokens=wl.output_tokens, variant=variant, gpu_layers=n)

            over = mem(None).total_bytes > q.vram_bytes  # the whole model does not fit: offload is the plan
            if not over.any():
                continue
            if not over.all():  # bisect only the configurations that need it (each row's memory is its own)
                rows = [r for r, o in zip(rows, over.tolist()) if o]
                mpos, ctx, prompt, over = mpos[over], ctx[over], prompt[over], over[over]
                spec = Columns(recs, mpos, shared["spec"])
                variant = Columns(shared[quant][0], mpos, shared[quant][1])
            # every n_gpu_layers 1..num_layers of every row in one call of the memory terms (the Python cost is per
            # call, the arithmetic per element), then the bisection below walks that grid: the same steps, the same
            # answer as evaluating the memory at each step
            hi = np.maximum(spec.num_layers, 1).astype(np.int64)
            width = int(hi.max())
            grid_n = np.minimum(np.arange(1, width + 1)[None, :], hi[:, None]).reshape(-1)
            rep = np.repeat(np.arange(len(rows)), width)
            m = memory(spec.take(rep), quant, engine, q.hardware, context_tokens=ctx[rep], batch=batch,
                       prompt_tokens=prompt[rep], output_tokens=wl.output_tokens, variant=variant.take(rep),
                       gpu_layers=grid_n)
            fits = (m.total_bytes <= target).reshape(len(rows), width)  # [row, n - 1]
            host = (m.host_bytes + (m.kv_total_bytes - m.kv_gpu_bytes)).reshape(len(rows), width)
            at = np.arange(len(rows))
            lo = np.ones(len(rows), dtype=np.int64)
            best = np.zeros(len(rows), dtype=np.int64)  # 0: not even the output layer fits
            while True:
                active = over & (lo <= hi)
                if not active.any():
                    break
                n = np.where(active, (lo + hi) // 2, 1)
                fit = fits[at, n - 1]
                best = np.where(active & fit, n, best)
                lo = np.where(active & fit, n + 1, lo)
                hi = np.where(active & ~fit, n - 1, hi)
            host_ok = host[at, np.maximum(best, 1) - 1] <= q.host_ram_bytes
            for j, i in enumerate(rows):
                if over[j] and best[j] > 0 and host_ok[j]:
                    out[i] = int(best[j])
        return out

    def build_offload(self, mid: str, quant: str, engine: str, ctx: int, batch: int, n: int) -> Candidate:
        """The partial-offload candidate at n_gpu_layers ``n`` (offload_layers), with a note of the split."""
        c = self.build(mid, quant, engine, ctx, batch, gpu_layers=n)
        m = self._offload_memory(mid, quant, engine, ctx, batch, n)
        host = m.host_bytes + (m.kv_total_bytes - m.kv_gpu_bytes)
        c.notes.append(f"partial offload: n_gpu_layers {n} (the output layer and {n - 1} of "
                       f"{self.models[mid].num_layers} blocks on the GPU), {host / 1024**3:.1f} GiB of weights and KV "
                       f"cache in host RAM ({self.q.host_ram_bytes / 1024**3:.1f} GiB usable)")
        return c
    def _visible_serve_ttft(self, c: Candidate, think: int, mode: str) -> None:
        """Serve: a reasoning checkpoint's visible answer starts after its reasoning tokens at the loaded TPOT; the
        TTFT SLO applies to it (goodput 0 when it misses). Throughput and E2E already decode reasoning + answer."""
        t, d = c.figures["serve_ttft_ms"], c.figures["serve_tpot_ms"]
        if t.value is None or d.value is None:
            return
        vis = t.value + think * d.value
        c.figures["serve_ttft_ms"] = Figure(vis, "ms", "estimated", f"time to the visible answer under load = TTFT "
                                            f"{t.value:.0f} ms + {think} reasoning tokens x TPOT {d.value:.1f} ms "
                                            f"({mode})")
        if self.slo.ttft_ms is not None and vis > self.slo.ttft_ms:
            c.figures["goodput_requests_per_s"] = Figure(0.0, "requests/s", "estimated",
                                                         f"the visible answer starts after {vis:.0f} ms, past the TTFT "
                                                         f"SLO of {self.slo.ttft_ms:.0f} ms ({think} reasoning tokens)")

    def quality_figures(self, mid: str, quant: str) -> dict[str, Figure]:
        """The quality figures of a variant (model x quant), the same for each of its engines, contexts and batches:
        computed once."""
        quality = self._quality.get((mid, quant))
        if quality is None:
            spec = self.models[mid]
            acc, measured = self.tasks.accuracy(mid, quant, self.groups)
            cost_key = (quant, spec.params_active, measured)  # the same figure for models of one size
            cost = self._quant_costs.get(cost_key)
            if cost is None:
                cost = self._quant_costs[cost_key] = quant_cost(self.quant_table, quant, spec.params_active, measured)
            quality = self._quality[(mid, quant)] = {
                "zh_accuracy": self.quality.zh(mid, quant), "en_accuracy": self.quality.en(mid, quant),
                "ppl_ratio": self.quality.ppl_ratio(quant, mid), "task_accuracy": acc,
                "task_accuracy_ranked": self.ranked_accuracy(acc),
                "zh_comparable": self.tasks.group(mid, "zh", quant)[0],
                "en_comparable": self.tasks.group(mid, "en", quant)[0],
                "quant_cost_points": cost}
        return quality

    def quality_costs(self, mid: str, quant: str) -> tuple[float, ...]:
        """score.order.quality_values of the variant's quality figures (the numbers ranking reads), computed once."""
        v = self._quality_costs.get((mid, quant))
        if v is None:
            f = self._quality.get((mid, quant))
            if f is not None:
                v = quality_values(f)
            else:  # the numbers without the records (the same figures quality_figures holds)
                f = self._model_quality.get(mid) or self._quant_free(mid, quant)
                # both per quant (and model size), the PPL ratio per model only where probe rows measured one
                ck = (quant, self.models[mid].params_active, f["_measured"])
                qp = self._qp_values.get(ck, _MISSING)
                if qp is _MISSING:
                    qp = self._qp_values[ck] = quant_cost_value(self.quant_table, *ck)
                pk = (mid, quant) if self.quality._ppl_rows.get(mid) else quant
                ppl = self._ppl_values.get(pk, _MISSING)
                if ppl is _MISSING:
                    ppl = self._ppl_values[pk] = self.quality.ppl_ratio(quant, mid).value
                v = list(f["_values"])  # quality_values of the quant-free figures; the quant's two put in
                v[_QP], v[_PPL] = math.nan if qp is None else qp, math.nan if ppl is None else ppl
                v = tuple(v)
            self._quality_costs[(mid, quant)] = v
        return v

    def _quant_free(self, mid: str, quant: str) -> dict:
        """The quality figures of a variant that do not depend on its quant when probe accuracy measured none of the
        model's (QualityIndex / TaskAccuracy key them by quant only then): kept per model in that case."""
        if self._measured_models is None:
            self._measured_models = {m for m, _quant in self.quality._acc}
        acc, measured = self.tasks.accuracy(mid, quant, self.groups)
        f = {"zh_accuracy": self.quality.zh(mid, quant), "en_accuracy": self.quality.en(mid, quant),
             "task_accuracy": acc, "task_accuracy_ranked": self.ranked_accuracy(acc),
             "zh_comparable": self.tasks.group(mid, "zh", quant)[0],
             "en_comparable": self.tasks.group(mid, "en", quant)[0], "_measured": measured}
        f["_values"] = quality_values(f)
        if mid not in self._measured_models:
            self._model_quality[mid] = f
        return f

    def ranked_accuracy(self, acc: Figure) -> Figure:
        """rank.quality.ranked_accuracy at the query's risk, once per task-accuracy figure (a model's, shared by its
        quants)."""
        hit = self._ranked.get(id(acc))
        if hit is None or hit[0] is not acc:
            hit = self._ranked[id(acc)] = (acc, ranked_accuracy(acc, self.q.risk))
        return hit[1]

    def quality_floor(self, mid: str) -> Optional[dict[str, Figure]]:
        """Quality figures no variant of the model beats: its task accuracy and group figures, which are the same for
        each of its quants, with no quantization cost. None when probe accuracy measured one of its quants (that
        variant has figures of its own)."""
        if self._measured_models is None:
            self._measured_models = {m for m, _quant in self.quality._acc}
        if mid in self._measured_models:
            return None
        acc = self.tasks.accuracy(mid, None, self.groups)[0]
        return {"task_accuracy": acc, "task_accuracy_ranked": self.ranked_accuracy(acc),
                "zh_comparable": self.tasks.group(mid, "zh")[0], "en_comparable": self.tasks.group(mid, "en")[0],
                "quant_cost_points": Figure(0.0, "points", "estimated", "no quantization cost (a lower bound)")}

    def serving(self, c: Prediction, slo: Optional[Slo] = None) -> dict[str, Figure]:
        """The candidate's figures under load (Predictor.serving), goodput at ``slo`` included."""
        return self.predictor.serving(self.models[c.model], c, slo, variant=self.variants[(c.model, c.quant)])


def skips_base(q: Query, spec: ModelSpec, wanted: set[str]) -> bool:
    """A base (not chat-tuned) or classifier (Llama-Guard) checkpoint is left out of a chat workload unless
    --include-base or named. Only a
    checkpoint the catalog states is base counts: a model the user added (`catalog add`, no checkpoint stated) is
    ranked - they added it to have it considered."""
    return q.workload.chat and not q.include_base and spec.id not in wanted \
        and spec.checkpoint is not None and spec.checkpoint not in CHAT_CHECKPOINTS


class CandidateKey(NamedTuple):
    """One configuration of a query's grid (CandidateBuilder.build's arguments): ``split`` False is the first GPU
    alone of a multi-GPU machine; ``gpu_layers``: llama.cpp partial offload, n_gpu_layers (CandidateBuilder.
    offload_layers), the rest in host RAM."""

    model: str
    quant: str
    engine: str
    context_tokens: int
    batch: int
    split: bool = True
    gpu_layers: Optional[int] = None


# Partial offload is offered for a variant whose weights are more than this share of the GPU budget (below it the
# whole model fits with its KV cache, and the GPU-only configuration is the one to run) and fit in GPU + host RAM.
OFFLOAD_MIN_WEIGHTS_SHARE = 0.85


def offload_wanted(q: Query, builder: "CandidateBuilder", mid: str, quant: str, engine: str) -> bool:
    """Whether a variant gets a partial-offload configuration: llama.cpp on one discrete GPU, a latency workload
    (one stream), host RAM given, and weights too big for the GPU yet within GPU + host RAM."""
    if not engine_spec(engine).partial_offload or q.host_ram_bytes is None or q.machine is not None \
            or q.hardware.backend not in OFFLOAD_BACKENDS or q.workload.rank_by == "goodput":
        return False
    v = builder.variants.get((mid, quant))
    w = getattr(v, "weights_bytes", None)
    return bool(w) and OFFLOAD_MIN_WEIGHTS_SHARE * q.vram_bytes < w < q.vram_bytes + q.host_ram_bytes


_new_key = tuple.__new__  # CandidateKey(...) without its Python-level __new__ (all seven fields given)


def candidate_keys(q: Query, builder: CandidateBuilder) -> list[CandidateKey]:
    """Every configuration of a query, in the fixed order of the enumeration."""
    b, wl = builder, q.workload
    wanted = b.wanted
    out: list[CandidateKey] = []
    offload: list[tuple[int, tuple]] = []  # (place in out, request): partial offload, found for all at once below
    only = {tuple(v) for v in q.variants}
    for (mid, quant) in b.variants:
        if wanted and mid not in wanted:
            continue
        if only and (mid, quant) not in only:
            continue
        if skips_base(q, b.models[mid], wanted):
            continue
        if q.quants and quant not in q.quants:
            continue
        qs = QUANTS.get(quant)
        if qs is None:
            continue
        for engine in qs.engines:
            if q.engines and engine not in q.engines:
                continue
            off = offload_wanted(q, b, mid, quant, engine)
            if not off and q.machine is None:  # the common case: one key per context and batch, built as tuples
                out.extend([_new_key(CandidateKey, (mid, quant, engine, ctx, batch, True, None))
                            for ctx in wl.contexts for batch in wl.batches])
                continue
            for ctx in wl.contexts:
                for batch in wl.batches:
                    out.append(CandidateKey(mid, quant, engine, ctx, batch))
                    if q.machine is not None:  # and on the first GPU alone
                        out.append(CandidateKey(mid, quant, engine, ctx, batch, False))
                    if off and batch == 1:
                        offload.append((len(out), (mid, quant, engine, ctx, batch)))
                        out.append(None)  # its place in the enumeration, kept or dropped below
    if offload:
        layers = b.offload_layers_many([r for _, r in offload])
        for (at, (mid, quant, engine, ctx, batch)), n in zip(offload, layers):
            if n is not None:
                out[at] = CandidateKey(mid, quant, engine, ctx, batch, gpu_layers=n)
        out = [k for k in out if k is not None]
    return out


def build_key(builder: CandidateBuilder, k: CandidateKey, screen: bool = False) -> Union[Candidate, OverBudget]:
    if k.gpu_layers is not None:
        return builder.build_offload(k.model, k.quant, k.engine, k.context_tokens, k.batch, k.gpu_layers)
    return builder.build(k.model, k.quant, k.engine, k.context_tokens, k.batch, split=k.split, screen=screen)


def enumerate_candidates(catalog: CatalogReader, q: Query, builder: Optional[CandidateBuilder] = None,
                         screen: bool = False, rows: bool = False) -> list[Union[Candidate, OverBudget, "Row"]]:
    """Every candidate of a query, in a fixed order. ``screen``: memory first (CandidateBuilder.build); the list then
    holds OverBudget records where the memory alone excludes a candidate (recommender.score.order.rank takes
    both). ``rows``: the vectorized Predictor's rows (CandidateBuilder.table: numbers, ``full()`` for the record)."""
    b = builder or CandidateBuilder(catalog, q)
    keys = candidate_keys(q, b)
    if rows:
        table = b.table(keys)
        return [table.row(i) for i in range(len(keys))]
    return [build_key(b, k, screen) for k in keys]


class KeyTable:
    """The figures ranking reads for a list of configurations, as arrays (CandidateBuilder.table): computed in groups
    by the vectorized Predictor, one element per key. ``row(i)`` is key i as a :class:`Row` (numbers, no record);
    keys the vector path leaves out (``vectorized[i]`` False: a multi-GPU machine, a DeepSeek-V4 model, partial offload) are built one by
    one (``CandidateBuilder.build``)."""

    def __init__(self, builder: CandidateBuilder, keys: list) -> None:
        import numpy as np  # noqa: PLC0415  (numpy where configurations are predicted as arrays)

        self.builder, self.keys = builder, keys
        b, q, wl = builder, builder.q, builder.q.workload
        n = len(keys)
        nan = float("nan")
        cols = ("ttft_ms", "tpot_ms", "e2e_ms", "total_vram_bytes", "latency_ms", "goodput_per_s",
                "output_throughput_tokens_per_s", "serve_ttft_ms", "serve_tpot_ms", "serve_e2e_ms",
                "request_throughput_per_s", "raw_ttft_ms")
        a = {c: np.full(n, nan) for c in cols}
        excluded = np.zeros(n, dtype=bool)
        vectorized = np.zeros(n, dtype=bool)
        vram_p = np.array(["estimated"] * n, dtype=object)
        lat_p = vram_p.copy()
        groups: dict[tuple, list[int]] = {}
        one_by_one = {m for m, spec in b.models.items() if compressed(spec)}  # DeepSeek-V4: predicted one by one
        plain = all(type(k) is CandidateKey for k in keys)  # recommend's keys: no KV dtype
        for i, k in enumerate(keys):
            if q.machine is not None or k.model in one_by_one:
                continue
            groups.setdefault((k.quant, k.engine, None if plain else getattr(k, "kv_dtype", None),
                               k.gpu_layers is not None if plain else getattr(k, "gpu_layers", None) is not None),
                              []).append(i)
        field = LATENCY_FIELD[q.latency_metric]
        # every model's fields and per-model terms, read once for all groups (vector.Columns over the catalog)
        shared = b.__dict__.setdefault("_vector_shared", {"spec": {}})
        ids = list(b.models)
        recs = list(b.models.values())
        pos = {m: j for j, m in enumerate(ids)}
        if "think" not in shared:
            shared["think"] = np.array([reasoning_tokens(s, wl.output_tokens)[0] for s in recs])
            shared["maxpos"] = np.array([s.max_position_embeddings for s in recs])
        # a group: one quantization, engine, KV dtype and offload, every batch (batch is an array dimension of the
        # formulas; vector.predict_group splits it where the calibrated terms or measured rows need one batch)
        # the keys' fields as arrays, read once (a group takes its rows' elements)
        if n and plain:
            k_model, _q, _e, k_ctx, k_batch, _s, k_gl = zip(*keys)
        else:
            k_model, k_ctx, k_batch = ([getattr(k, f) for k in keys] for f in ("model", "context_tokens", "batch"))
            k_gl = [getattr(k, "gpu_layers", None) for k in keys]
        all_mpos = np.fromiter(map(pos.get, k_model, [0] * n), dtype=np.int64, count=n) if n else np.zeros(0, int)
        all_ctx = np.array(k_ctx, dtype=np.int64)
        all_batch = np.array(k_batch, dtype=np.int64)
        all_gl = np.array([-1 if g is None else g for g in k_gl], dtype=np.int64) if groups and any(
            off for *_x, off in groups) else None
        for (quant, engine, kv, offload), rows in groups.items():
            idx = np.array(rows)
            mpos = all_mpos[idx]
            spec = Columns(recs, mpos, shared["spec"])
            if quant not in shared:
                shared[quant] = ([b.variants.get((m, quant)) for m in ids], {})
            variant = Columns(shared[quant][0], mpos, shared[quant][1])
            pairs = [(recs[j], shared[quant][0][j]) for j in mpos.tolist()] if b.predictor.measured else None
            think = shared["think"][mpos]
            ctx = all_ctx[idx]
            batch = all_batch[idx]
            n_out = wl.output_tokens + think  # decoded tokens: hidden reasoning, then the visible answer
            prompt = np.minimum(wl.prompt_tokens, np.maximum(ctx - n_out, 1))
            gl = all_gl[idx] if offload else None  # llama.cpp n_gpu_layers
            t = predict_group(b.predictor, spec, variant, quant, engine, ctx, batch, prompt, n_out, kv_dtype=kv,
                              gpu_layers=gl, rows=pairs, load_mode=q.load_mode)
            known = ~np.isnan(t.ttft_ms) & ~np.isnan(t.tpot_ms)
            vis = t.ttft_ms
            if b.slo is None:  # a reasoning checkpoint's visible answer starts after its reasoning tokens
                vis = np.where((think > 0) & known, t.ttft_ms + think * t.tpot_ms, t.ttft_ms)
            lat = {"ttft_ms": vis, "tpot_ms": t.tpot_ms, "e2e_ms": t.e2e_ms}[field]
            lat_prov = {"ttft_ms": t.ttft_provenance, "tpot_ms": t.tpot_provenance, "e2e_ms": t.e2e_provenance}[field]
            maxpos = shared["maxpos"][mpos]
            ex = ((think > 0) & (ctx < wl.prompt_tokens + n_out)) | (ctx > maxpos) | (t.total_vram_bytes > q.vram_bytes)
            if b.supported(engine, quant):
                ex |= True
            if q.max_latency_ms is not None:
                ex |= np.isnan(lat) | (lat > q.max_latency_ms)
            one = batch == 1
            if one.all():
                single = t.ttft_ms
            else:  # serving needs each configuration's TTFT at batch 1 (Predictor.serving): its batch-1 row's
                single = _single_ttft(b, spec, variant, quant, engine, kv, mpos, one, t.ttft_ms, ctx, prompt, n_out,
                                      gl, pairs)
            # the serving figures without SLOs (tune's), from the figures the record holds: its TTFT is the visible
            # answer's on a latency workload (Predictor.serving reads the record's TTFT at batch 1)
            raw = serve_arrays(np.where(one, vis, single), vis, t.tpot_ms, batch, n_out, None)
            for c in ("serve_ttft_ms", "serve_tpot_ms", "serve_e2e_ms", "request_throughput_per_s"):
                a[c][idx] = raw[c]
            a["output_throughput_tokens_per_s"][idx] = raw["output_throughput_tokens_per_s"]
            if b.slo is not None:  # serve: goodput at the workload's SLOs, the visible answer's TTFT
                sv = serve_arrays(single, t.ttft_ms, t.tpot_ms, batch, n_out, b.slo)
                g = sv["goodput_requests_per_s"]
                if b.slo.ttft_ms is not None:
                    seen = sv["serve_ttft_ms"] + think * sv["serve_tpot_ms"]
                    g = np.where((think > 0) & ~np.isnan(seen) & (seen > b.slo.ttft_ms), 0.0, g)
                a["goodput_per_s"][idx] = g
                ex |= g == 0
            a["ttft_ms"][idx], a["tpot_ms"][idx], a["e2e_ms"][idx] = vis, t.tpot_ms, t.e2e_ms
            a["raw_ttft_ms"][idx] = t.ttft_ms
            a["total_vram_bytes"][idx], a["latency_ms"][idx] = t.total_vram_bytes, lat
            vram_p[idx], lat_p[idx] = t.vram_provenance, lat_prov
            excluded[idx], vectorized[idx] = ex, True
        self.arrays, self.excluded, self.vectorized = a, excluded, vectorized
        self.vram_provenance, self.latency_provenance = vram_p, lat_p
        self._rows: dict[int, Union["Row", Candidate]] = {}

    def value(self, name: str, i: int) -> Optional[float]:
        v = self.arrays[name][i].item()
        return None if v != v else v  # NaN: unknown

    def columns(self) -> dict:
        """The columns recommender.score.order.rank_arrays ranks (its module comment), over every key: the figures
        ranking reads, as each key's Row (or record) holds them. The quality columns and the keys the vector path
        leaves out are NaN until ``fill`` gives them (best-first fills only what it takes up)."""
        cols = self.__dict__.get("_columns")
        if cols is not None:
            return cols
        import numpy as np  # noqa: PLC0415

        a, keys, n = self.arrays, self.keys, len(self.keys)
        nan = np.full(n, np.nan)

        def codes(names, key=None) -> tuple:
            """Integer codes in the names' sorted order: np.unique's codes, without its sort of ~100,000 strings."""
            order = {x: j for j, x in enumerate(sorted(set(names), key=key))}
            return np.fromiter(map(order.__getitem__, names), dtype=np.int64, count=len(names)), len(order)

        plain = all(type(k) is CandidateKey for k in keys)  # recommend's keys: no KV dtype
        k_model, k_quant, k_engine, k_ctx, k_batch = (tuple(zip(*keys))[:5] if n and plain else (
            [getattr(k, f) for k in keys] for f in ("model", "quant", "engine", "context_tokens", "batch")))
        model, n_model = codes(k_model)
        quant, n_quant = codes(k_quant)
        engine, n_engine = codes(k_engine)
        ctx, n_ctx = codes(k_ctx, key=str)  # grouping only: any order
        kv, n_kv = (np.zeros(n, dtype=np.int64), 1) if plain else codes([str(getattr(k, "kv_dtype", None))
                                                                          for k in keys])
        variant = model * n_quant + quant
        # variants by first appearance (fill computes each one's quality once)
        vuniq, vfirst, vcode = np.unique(variant, return_index=True, return_inverse=True)
        cols = self._columns = {
            "latency": a["latency_ms"].copy(), "ttft": a["ttft_ms"].copy(), "tpot": a["tpot_ms"].copy(),
            "vram": np.trunc(a["total_vram_bytes"]),  # a Row's total_vram_bytes is int()
            "goodput": a["goodput_per_s"].copy(), "output_throughput": a["output_throughput_tokens_per_s"].copy(),
            "blocked": self.excluded.copy(), "deferred": np.zeros(n, dtype=bool),
            "batch": np.array(k_batch, dtype=np.int64),
            "model": model, "quant": quant, "engine": engine,
            "config": (((variant * n_engine + engine) * n_ctx + ctx) * n_kv + kv),
            **{c: nan.copy() for c in QUALITY_COLUMNS}}
        self._filled = np.zeros(n, dtype=bool)
        self._variant_code = vcode.astype(np.int64).reshape(-1)
        self._variant_names = [(keys[i].model, keys[i].quant) for i in vfirst.tolist()]
        self._quality = np.full((len(vuniq), len(QUALITY_COLUMNS)), np.nan)  # quality_values of each variant
        self._quality_done = np.zeros(len(vuniq), dtype=bool)
        return cols

    def variant_codes(self):
        """Each key's variant (model x quant) as an integer code, 0 .. variants - 1 (columns' order)."""
        self.columns()
        return self._variant_code

    def variant_names(self) -> list[tuple[str, str]]:
        """Each variant code's (model, quant)."""
        self.columns()
        return self._variant_names

    def fill(self, idx, defer: bool = False) -> None:
        """Give the columns of keys ``idx`` their quality figures (CandidateBuilder.quality_figures, per variant)
        and, for the keys the vector path leaves out, the figures of their records (built here, one by one).
        ``defer`` (a value-method ranking): such a key whose memory alone is above the budget (CandidateBuilder.build
        with ``screen``: an OverBudget) is not predicted - its columns hold the best case of its latency, TTFT, TPOT
        and goodput (score.order.lower_bound_costs), ``deferred`` is set, and ``resolve`` gives its record's figures
        when the ranking needs them (score.order.rank_arrays)."""
        import numpy as np  # noqa: PLC0415

        cols = self.columns()
        idx = np.asarray(idx, dtype=np.int64)
        todo = idx[~self._filled[idx]]
        if not len(todo):
            return
        b, vcode, qual, done = self.builder, self._variant_code, self._quality, self._quality_done
        for v in sorted(set(vcode[todo].tolist())):  # np.unique's order; it imports numpy.ma
            if not done[v]:
                qual[v] = b.quality_costs(*self._variant_names[v])
                done[v] = True
        for j, name in enumerate(QUALITY_COLUMNS):
            cols[name][todo] = qual[vcode[todo], j]
        for i in todo[~self.vectorized[todo]].tolist():  # built one by one: the record's figures
            if defer and i not in self._rows:
                k = self.keys[i]
                r = build_key(b, k, screen=True) if isinstance(k, CandidateKey) else b.build(
                    k.model, k.quant, k.engine, k.context_tokens, k.batch, kv_dtype=getattr(k, "kv_dtype", None),
                    gpu_layers=getattr(k, "gpu_layers", None), screen=True)
                if isinstance(r, OverBudget):  # excluded by its memory: its latency's best case until resolved
                    cols["latency"][i] = cols["ttft"][i] = cols["tpot"][i] = 0.0
                    cols["goodput"][i], cols["output_throughput"][i] = math.inf, math.nan
                    cols["vram"][i], cols["blocked"][i], cols["deferred"][i] = r.total_vram_bytes, True, True
                    continue
                self._rows[i] = r
            self._record_columns(i)
        self._filled[todo] = True

    def _record_columns(self, i: int) -> None:
        """The columns of key ``i`` (not vectorized) from its record."""
        cols, c = self._columns, self.row(i)
        for name, x in (("latency", c.latency_ms), ("ttft", c.ttft_ms), ("tpot", c.tpot_ms),
                        ("vram", c.total_vram_bytes), ("goodput", c.goodput_per_s),
                        ("output_throughput", _value(c.figures.get("output_throughput_tokens_per_s")))):
            cols[name][i] = float("nan") if x is None else x
        cols["blocked"][i] = bool(c.excluded)
        cols["deferred"][i] = False

    def resolve(self, i: int) -> None:
        """A deferred key's (fill) columns from its record, built now."""
        self._record_columns(i)

    def record(self, i: int) -> Candidate:
        """Key i's Candidate (CandidateBuilder.build): the record of a Row, or the one built for it."""
        r = self.row(i)
        return r.full() if isinstance(r, Row) else r

    def row(self, i: int) -> Union["Row", Candidate]:
        """Key i as a Row (vectorized) or as the Candidate ``build`` makes (not vectorized); one object per key."""
        r = self._rows.get(i)
        if r is None:
            k = self.keys[i]
            if not self.vectorized[i]:
                r = build_key(self.builder, k) if isinstance(k, CandidateKey) else self.builder.build(
                    k.model, k.quant, k.engine, k.context_tokens, k.batch, kv_dtype=getattr(k, "kv_dtype", None),
                    gpu_layers=getattr(k, "gpu_layers", None))
            else:
                r = Row(self, i)
            self._rows[i] = r
        return r


def _single_ttft(b: CandidateBuilder, spec: Columns, variant: Columns, quant: str, engine: str, kv, mpos, one,
                 ttft, ctx, prompt, n_out, gl, pairs):
    """Each row's TTFT at batch 1 (a group of KeyTable: its rows' model positions ``mpos``, contexts ``ctx`` and
    n_gpu_layers ``gl``; ``one``: the rows at batch 1, ``ttft`` every row's TTFT): a batch-1 row's own; another's
    from the batch-1 row of the same model, context and n_gpu_layers, or predicted at batch 1 where there is none."""
    import numpy as np  # noqa: PLC0415
    # one integer per (model, context, n_gpu_layers); the rows at batch 1 sorted by it, each row's found by bisection
    code = (mpos * (int(ctx.max()) + 1) + ctx) * ((int(gl.max()) + 2) if gl is not None else 1) + (
        0 if gl is None else gl + 1)
    at = np.flatnonzero(one)
    order = np.argsort(code[at], kind="stable")
    have = code[at][order]
    where_ = np.minimum(np.searchsorted(have, code), max(len(have) - 1, 0))
    found = (have[where_] == code) if len(have) else np.zeros(len(code), dtype=bool)
    single = np.where(found, ttft[at[order[where_]]] if len(have) else np.nan, np.nan)
    miss = np.flatnonzero(~found)
    if len(miss):
        single[miss] = predict_group(b.predictor, spec.take(miss), variant.take(miss), quant, engine, ctx[miss], 1,
                                     prompt[miss], n_out[miss], kv_dtype=kv,
                                     gpu_layers=None if gl is None else gl[miss],
                                     rows=None if pairs is None else [pairs[i] for i in miss.tolist()]).ttft_ms
    return single


def _value(f: Optional[Figure]) -> Optional[float]:
    return None if f is None else f.value


class Row:
    """One configuration as the numbers ranking reads (score.order: costs, order_key, choose_batches), from the
    vectorized Predictor (KeyTable); ``full()`` builds its Candidate - the record ``CandidateBuilder.build`` makes,
    every figure with its basis - for the rows that are shown. Its ``excluded`` lines are the hard limits it breaks
    (a serve SLO miss in short: the shown record says by how much)."""

    __slots__ = ("model", "quant", "engine", "context_tokens", "batch", "kv_dtype", "gpu_layers", "figures",
                 "total_vram_bytes", "latency_ms", "ttft_ms", "tpot_ms", "goodput_per_s", "_excluded", "blocked",
                 "score", "score_parts", "rank", "_table", "_i", "_full")
    deferred = False

    def __init__(self, table: KeyTable, i: int) -> None:
        b, k, v = table.builder, table.keys[i], table.value
        self.model, self.quant, self.engine, self.context_tokens, self.batch = (k.model, k.quant, k.engine,
                                                                                 k.context_tokens, k.batch)
        self.kv_dtype, self.gpu_layers = getattr(k, "kv_dtype", None), getattr(k, "gpu_layers", None)
        quality = b.quality_figures(k.model, k.quant)
        thr = v("output_throughput_tokens_per_s", i)
        self.figures = quality if b.slo is None else {
            **quality, "output_throughput_tokens_per_s": Figure(thr, "tokens/s", "estimated")}
        self.total_vram_bytes = int(table.arrays["total_vram_bytes"][i])
        self.latency_ms, self.ttft_ms, self.tpot_ms = v("latency_ms", i), v("ttft_ms", i), v("tpot_ms", i)
        self.goodput_per_s = v("goodput_per_s", i)
        self.score, self.score_parts, self.rank = None, {}, None
        self._table, self._i, self._full = table, i, None
        self.blocked = bool(table.excluded[i])  # a hard limit excludes it (score.order.is_excluded)
        self._excluded = None if self.blocked else []

    @property
    def excluded(self) -> list[str]:
        """The hard limits this configuration breaks (empty: feasible); the reasons are worded when first asked."""
        if self._excluded is None:
            b, k = self._table.builder, self._table.keys[self._i]
            spec = b.models[k.model]
            think = reasoning_tokens(spec, b.q.workload.output_tokens)[0]
            self._excluded = b.reasons(spec, k.context_tokens, think, b.q.workload.output_tokens + think,
                                       b.supported(k.engine, k.quant), True, self.total_vram_bytes, self.latency_ms,
                                       [])
            if self.goodput_per_s == 0:
                self._excluded.insert(0, f"at batch {k.batch} requests miss the serve SLOs")
        return self._excluded

    zh_accuracy = property(lambda self: self.figures["zh_accuracy"].value)
    en_accuracy = property(lambda self: self.figures["en_accuracy"].value)
    ppl_ratio = property(lambda self: self.figures["ppl_ratio"].value)
    task_accuracy = property(lambda self: self.figures["task_accuracy"].value)

    def full(self) -> Candidate:
        """The Candidate of this configuration (CandidateBuilder.build), with the score and rank ranking gave it."""
        if self._full is None:
            b, k = self._table.builder, self._table.keys[self._i]
            self._full = build_key(b, k) if isinstance(k, CandidateKey) else b.build(
                self.model, self.quant, self.engine, self.context_tokens, self.batch, kv_dtype=self.kv_dtype,
                gpu_layers=self.gpu_layers)
        c = self._full
        c.score, c.score_parts, c.rank = self.score, dict(self.score_parts), self.rank
        return c
