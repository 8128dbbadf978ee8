"""Measured mode of `recommender tune`: one real probe per trial, in a child process, cached in the catalog.

A trial's configuration (context, batch, KV dtype, and GPU layers on a GPU) is first estimated
(recommender.predict); a configuration whose predicted memory exceeds the budget is never run (status
``skipped``). Otherwise a stored probe row with the same settings on this machine (hardware fingerprint, engine,
model file, quant, batch, context, prompt, output, KV dtype, GPU layers, at least as many repeats) is reused
(``cached``); else the probe runs (evaluators/runner.py, as `recommender probe perf` does) and its row, ok or failed,
is written to the user overlay in one transaction. A probe cut short by the wall-clock budget is not stored.

Memory of a measured trial: on a GPU the NVML peak of the probe; on a CPU the buffers llama.cpp reports allocating
(model + KV + compute + output, its own log lines): what the memory model predicts. The process's peak RSS also
counts the Python interpreter and the libraries, which no configuration changes; it is kept in the row.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Optional


from recommender.core.engines import gguf_engine
from recommender.core.errors import UserError
from recommender.core.paths import user_catalog_path
from recommender.core.records import Measurement
from evaluators.base import LoadSettings, RequestShape
from evaluators.runner import ProbeJob, run_probe
from recommender.model.quant import QUANTS
from recommender.predict import constants as C
from recommender.predict.predictor import Config, Prediction, Predictor
from recommender.catalog.store import UserCatalog
from recommender.rank.quality import QualityIndex, TaskAccuracy, quant_cost
from recommender.rank.query import LATENCY_FIELD, Query
from recommender.search.tune import _constraints, OFFLOAD_FRACTIONS, Outcome, Space, TuneConfig
from recommender.probes.perf import measurement_from_result, resolve_target

ENGINE = gguf_engine()  # measured tuning runs the GGUF engine (llama.cpp) on a model file of this machine
DUCKDB_LOCK_RETRY_S = 30.0  # another worker writing the overlay: wait this long for its lock


class MeasuredEvaluator:
    mode = "measured"

    def __init__(self, catalog, q: Query, target, host, *, kv_dtypes: Optional[list[str]], offload: bool,
                 repeats: int, budget_s: float, probe_timeout_s: float, threads: Optional[int] = None) -> None:

        if target.quant not in _quant_names():
            raise UserError(f"{target.quant} is not a quantization the planner knows",
                            hint="measured tuning takes a GGUF file of a catalog quantization")
        self.q, self.target, self.host = q, target, host
        self.repeats, self.budget_s, self.probe_timeout_s, self.threads = repeats, budget_s, probe_timeout_s, threads
        self.on_gpu = q.hardware.backend != "cpu"
        offered = list(C.ENGINE_KV_DTYPES[ENGINE])
        kv = [d for d in offered if not kv_dtypes or d in kv_dtypes or ("default" in kv_dtypes and d == offered[0])]
        if not kv:
            raise UserError(f"llama.cpp offers no KV dtype among {', '.join(kv_dtypes or [])}",
                            hint=f"llama.cpp KV dtypes: {', '.join(offered)}")

        self.space = Space(models=[target.model_id], quants=[target.quant], engines={target.quant: [ENGINE]},
                           contexts=list(q.workload.contexts), batches=list(q.workload.batches),
                           kv_dtypes={ENGINE: kv},
                           offload_fractions=list(OFFLOAD_FRACTIONS) if (offload and self.on_gpu) else [1.0],
                           num_layers={target.model_id: target.spec.num_layers})
        quality = QualityIndex(catalog)
        self.quality = {"zh": quality.zh(target.model_id).value, "en": quality.en(target.model_id).value,
                        "ppl": quality.ppl_ratio(target.quant).value}
        if q.normalization == "value":  # the value score's quality terms (docs/scoring.md), constant for one target
            tasks = TaskAccuracy(catalog, quality, catalog.models())
            acc, measured_acc = tasks.accuracy(target.model_id, target.quant, tuple(q.workload.accuracy_tasks))
            self.quality = {"acc": acc.value, "zh": tasks.group(target.model_id, "zh", target.quant)[0].value,
                            "en": tasks.group(target.model_id, "en", target.quant)[0].value, "ppl": None,
                            "quant_points": quant_cost(catalog.quant_quality(), target.quant,
                                                       target.spec.params_active, measured_acc).value}
        self.cache: dict[tuple, Measurement] = {}
        for m in catalog.measurements(model_id=target.model_id):
            k = self._row_key(m)
            if k is not None:
                self.cache.setdefault(k, m)  # newest first
        catalog.close()  # the overlay is written below: no read-only attachment of it may stay open
        self.t0 = time.monotonic()
        self.probed = self.reused = self.skipped = 0
        self.notes: list[str] = []

    # -- prediction --------------------------------------------------------------------------------------------
    def _prompt(self, ctx: int) -> int:
        wl = self.q.workload
        return min(wl.prompt_tokens, max(ctx - wl.output_tokens, 1))

    def predicted_estimate(self, c: TuneConfig) -> Prediction:
        """The analytical prediction of a trial (what decides whether it is run; measured rows replace it)."""
        return Predictor(self.q.hardware).predict(self.target.spec, Config(
            model=self.target.model_id, quant=c.quant, engine=ENGINE, context_tokens=c.context_tokens,
            batch=c.batch, prompt_tokens=self._prompt(c.context_tokens), output_tokens=self.q.workload.output_tokens,
            kv_dtype=c.kv_dtype, gpu_layers=c.gpu_layers))

    def predicted_memory(self, est) -> int:
        """GPU: total_vram_bytes. CPU: every weight + KV cache + compute buffer (no device context)."""
        if self.on_gpu:
            return est.total_vram_bytes
        return est.weights_bytes + est.kv_cache_bytes + est.compute_buffer_bytes

    def predicted(self, c: TuneConfig, **_: Any) -> Outcome:
        est = self.predicted_estimate(c)
        mem = self.predicted_memory(est)
        lat = est.value(LATENCY_FIELD[self.q.latency_metric])
        costs = {"latency": lat, "vram": float(mem), **self._quality_costs()}
        over = mem > self.q.vram_bytes
        lat_over = self.q.max_latency_ms is not None and lat is not None and lat > self.q.max_latency_ms
        return Outcome(status="infeasible" if (over or lat_over) else "feasible", source="predicted", costs=costs,
                       constraints=_constraints(mem, self.q.vram_bytes, lat,
                                                self.q.max_latency_ms if lat is not None else None, False))

    def latency_fallback(self, feasible_rows: list[dict]) -> Optional[dict[str, tuple[float, float]]]:
        if not self.q.weights.get("latency") or any(r.get("latency") is not None for r in feasible_rows):
            return None
        if self.q.max_latency_ms is None:
            raise UserError(f"no predicted latency on {self.q.hardware.name} to normalize measured latency against",
                            hint="give --max-latency (latency is then normalized over [0, limit]), or set the "
                                 "latency weight to 0 with --weights latency=0")
        return {"latency": (0.0, self.q.max_latency_ms)}

    def _quality_costs(self) -> dict[str, Optional[float]]:
        zh, en, ppl = self.quality["zh"], self.quality["en"], self.quality["ppl"]
        acc = self.quality.get("acc")
        out = {"ppl": ppl, "zh": None if zh is None else 100.0 - zh, "en": None if en is None else 100.0 - en,
               "acc": None if acc is None else 100.0 - acc}
        if "quant_points" in self.quality:
            out["quant_points"] = self.quality["quant_points"]
        return out

    # -- the cache -----------------------------------------------------------------------------------------------
    def _row_key(self, m: Measurement) -> Optional[tuple]:
        if m.hardware_fingerprint != self.host.fingerprint or m.engine != ENGINE:
            return None
        if m.raw.get("model_file") != str(self.target.path) or m.quant != self.target.quant:
            return None
        if m.status == "ok" and len(m.raw.get("repeats", [])) < self.repeats:
            return None
        return (m.batch, m.context_tokens, m.prompt_tokens, m.output_tokens, m.kv_dtype,
                -1 if m.gpu_layers is None else m.gpu_layers, m.raw.get("threads"))

    def _key(self, c: TuneConfig) -> tuple:
        return (c.batch, c.context_tokens, self._prompt(c.context_tokens), self.q.workload.output_tokens,
                c.kv_dtype, -1 if c.gpu_layers is None else c.gpu_layers, self.threads)

    def _save(self, row: Measurement) -> None:

        deadline = time.monotonic() + DUCKDB_LOCK_RETRY_S
        while True:
            try:
                with UserCatalog(user_catalog_path()) as w:
                    w.put_measurements([row])
                return
            except UserError as e:  # another worker holds the file lock: wait for it
                if "lock" not in e.message.lower() or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    # -- one trial -----------------------------------------------------------------------------------------------
    def __call__(self, c: TuneConfig, study=None, **_: Any) -> Outcome:
        import optuna  # noqa: PLC0415

        est = self.predicted_estimate(c)
        pred_mem = self.predicted_memory(est)
        budget = self.q.vram_bytes
        if pred_mem > budget:
            self.skipped += 1
            return Outcome(status="skipped", source="none", costs={"latency": None, "vram": float(pred_mem),
                                                                   **self._quality_costs()},
                           reasons=[f"not run: predicted memory {pred_mem / 1024**2:.0f} MiB exceeds the budget of "
                                    f"{budget / 1024**2:.0f} MiB"],
                           constraints=_constraints(pred_mem, budget, None, self.q.max_latency_ms, False),
                           provenance={"memory": "estimated"})
        key = self._key(c)
        row = self.cache.get(key)
        source = "cached"
        if row is None:
            remaining = self.budget_s - (time.monotonic() - self.t0)
            if remaining <= 1.0:
                if study is not None:
                    study.stop()
                raise optuna.TrialPruned("measuring budget spent")
            timeout = min(self.probe_timeout_s, remaining)
            row = self._probe(c, timeout)
            if row is None:  # cut short by the budget: not a property of the configuration, not stored
                if study is not None:
                    study.stop()
                raise optuna.TrialPruned("measuring budget spent during the probe")
            self._save(row)
            self.cache[key] = row
            self.probed += 1
            source = "measured"
        else:
            self.reused += 1
        return self._outcome(row, source, pred_mem)

    def _probe(self, c: TuneConfig, timeout: float) -> Optional[Measurement]:


        wl = self.q.workload
        job = ProbeJob(engine=ENGINE,
                       load=LoadSettings(model_path=str(self.target.path), context_tokens=c.context_tokens,
                                         batch=c.batch, kv_dtype=c.kv_dtype,
                                         gpu_layers=-1 if c.gpu_layers is None else c.gpu_layers,
                                         threads=self.threads, extra=dict(self.target.extra)),
                       shape=RequestShape(prompt_tokens=self._prompt(c.context_tokens), output_tokens=wl.output_tokens,
                                          batch=c.batch),
                       repeats=self.repeats)
        result = run_probe(job, timeout_s=timeout)
        if result.status != "ok" and (result.failure_reason or "").startswith("timed out") \
                and timeout < self.probe_timeout_s:
            return None
        row = measurement_from_result(self.target, job, result, self.host)
        row.raw["threads"] = self.threads
        row.raw["origin"] = "recommender tune --measure"
        return row

    def _outcome(self, m: Measurement, source: str, pred_mem: int) -> Outcome:
        q = self.q
        if m.status != "ok":
            return Outcome(status="failed", source=source, costs={"latency": None, "vram": float(pred_mem),
                                                                  **self._quality_costs()},
                           reasons=[f"probe failed: {m.failure_reason}"], constraints=[1.0, 1.0, 1.0],
                           measurement_id=m.id, provenance={"memory": "estimated"})
        lat = {"ttft": m.ttft_ms, "tpot": m.tpot_ms,
               "e2e": (m.raw.get("summary", {}).get("e2e_ms") or {}).get("median")}[q.latency_metric]
        mem, mem_prov = self.measured_memory(m)
        if mem is None:
            mem, mem_prov = pred_mem, "estimated"
        reasons = []
        if mem > q.vram_bytes:
            reasons.append(f"measured memory {mem / 1024**2:.0f} MiB exceeds the budget of "
                           f"{q.vram_bytes / 1024**2:.0f} MiB")
        if q.max_latency_ms is not None and (lat is None or lat > q.max_latency_ms):
            reasons.append(f"measured {q.latency_metric.upper()} "
                           f"{'unknown' if lat is None else f'{lat:.0f} ms'} exceeds the limit of "
                           f"{q.max_latency_ms:.0f} ms")
        return Outcome(status="infeasible" if reasons else "feasible", source=source,
                       costs={"latency": lat, "vram": float(mem), **self._quality_costs()}, reasons=reasons,
                       constraints=_constraints(mem, q.vram_bytes, lat, q.max_latency_ms, False),
                       measurement_id=m.id, provenance={"memory": mem_prov, "latency": "measured"})

    def measured_memory(self, m: Measurement) -> tuple[Optional[int], str]:
        if self.on_gpu:
            return m.peak_vram_bytes, "measured"
        bufs = (m.raw.get("engine") or {}).get("details", {}).get("reported_buffers_mib") or {}
        if bufs:
            return int(sum(bufs.values()) * 1024**2), "measured"
        return None, "estimated"


def _quant_names() -> set[str]:

    return set(QUANTS)


def resolve_measured_target(model: str, catalog):
    """A GGUF file on this machine (llama.cpp), validated before any probe starts."""

    p = Path(model).expanduser()
    if not (p.is_file() and p.suffix.lower() == ".gguf"):
        raise UserError(f"--measure needs a .gguf model file on this machine, not {model!r}",
                        hint="give the file, e.g. $(python -c 'from recommender.local_models import smollm2_gguf; "
                             "print(smollm2_gguf())')")
    return resolve_target(str(p), ENGINE, None, False, catalog)
