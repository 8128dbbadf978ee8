"""A server under load: the figures of one configuration served to ``concurrency`` closed-loop clients, and goodput.

This is the one serving model: recommend's serve ranking, ``tune --goodput``, ``estimate --batch N`` and the bench
scripts take their throughput and goodput from :func:`serve_figures` (through ``Predictor.serving``).

The metrics are vLLM ``bench serve``'s (vllm/benchmarks/serve.py): TTFT and TPOT = (E2E - TTFT) / (n_out - 1) per
request; request throughput = completed requests / duration; output token throughput = generated tokens / duration;
goodput = requests whose TTFT and TPOT meet the SLOs, per second of the run.

The load is ``vllm bench serve --max-concurrency N --request-rate inf``: N clients, each sending its next request when
the last one finishes. The server batches continuously (vLLM V1; llama-server with --parallel N): one new request's
prefill runs in a step with the other streams' decode tokens, one partial prefill at a time (vLLM V1's scheduler,
SchedulerConfig.max_num_partial_prefills = 1). In the steady state each of the N streams runs one prefill per request
cycle, so a request's decode phase is interrupted by the other N - 1 streams' prefills:

    P      = TTFT(N) / N                  the decode time one prompt's prefill takes from the others (the predicted
                                          prefill of N prompts, per prompt: in a mixed step the weights are read once
                                          for the prefill and the decode tokens)
    D      = TPOT(N)                      one decode step with N sequences in flight
    TTFT   = q(N) x max(TTFT(1), D),  q(N) = min(1 + log2(N) / TTFT_QUEUE_LOG2_DIVISOR, TTFT_QUEUE_CAP)
                                          its own prefill alone (a mixed step is at least a decode step), queued
                                          behind the prefill under way (aiconfigurator's vLLM queueing factor,
                                          calibrated on measured vLLM runs)
    TPOT   = D + (N - 1) x P / (n_out - 1)  the decode step plus the other streams' prefills spread over its steps
    E2E    = TTFT + (n_out - 1) x TPOT
    request throughput = N / E2E           (Little's law for a closed loop of N clients)
    output throughput  = N x n_out / E2E
    goodput            = request throughput when TTFT and TPOT meet the SLOs, else 0 (a prediction is one figure for
                         every request: all of them meet the SLOs or none does)

This is the structure of ai-dynamo/aiconfigurator's aggregated (in-flight batching) estimate for vLLM
(aic-core/src/aiconfigurator_core/sdk/backends/base_backend.py run_agg and vllm_backend.py, commit 095f58a): the N
prefills of a cycle run as mixed steps among the decode steps, TPOT averages the decode steps of a cycle with the
mixed ones, and throughput is capped at Little's law. At N = 1 it is the single-stream figures: TTFT, TPOT and E2E
unchanged. Checked against a published closed-loop vLLM sweep in bench/serve_model.py and tests/predict/test_serving.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from recommender.core.records import Figure, Provenance, Strict
from recommender.predict.constants import Const
from recommender.predict.counts import is_array, maximum, where

SERVE_MODEL_VERSION = "serve-v1"  # v1: one closed-loop model for recommend, tune --goodput and estimate

_AIC = ("ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/sdk/backends/vllm_backend.py "
        "_ttft_queuing_factor (commit 095f58a): TTFT = prefill x (1 + log2(b)/8), capped at 2, calibrated on its "
        "measured vLLM aggregated-serving entries (b = 1..64; MAPE 26.4 % -> 18.0 %)")
TTFT_QUEUE_LOG2_DIVISOR = Const(8.0, "log2(concurrency) per unit of queueing factor", _AIC)
TTFT_QUEUE_CAP = Const(2.0, "x one prefill", _AIC)

SERVE_UNITS = {"serve_ttft_ms": "ms", "serve_tpot_ms": "ms", "serve_e2e_ms": "ms",
               "request_throughput_per_s": "requests/s", "output_throughput_tokens_per_s": "tokens/s",
               "goodput_requests_per_s": "requests/s"}
_PROVENANCE_ORDER = ("unknown", "estimated", "calibrated", "published", "measured")  # weakest first


class Slo(Strict):
    """Service-level objectives (vLLM `bench serve --goodput ttft:MS tpot:MS`); None: no limit on that metric."""

    ttft_ms: Optional[float] = None
    tpot_ms: Optional[float] = None


@dataclass(frozen=True, slots=True)
class ServePoint:
    """The steady state of ``concurrency`` closed-loop clients (module docstring), ms and per second."""

    concurrency: int
    output_tokens: int
    prefill_ms: float  # P: the decode time one prompt's prefill takes from the other streams
    decode_step_ms: float  # D: one decode step with `concurrency` sequences
    ttft_ms: float
    tpot_ms: float
    e2e_ms: float

    @property
    def request_throughput_per_s(self) -> float:
        return self.concurrency * 1000.0 / self.e2e_ms

    @property
    def output_throughput_tokens_per_s(self) -> float:
        return self.concurrency * self.output_tokens * 1000.0 / self.e2e_ms

    def goodput(self, slo: Slo) -> float:
        """Requests/s meeting the SLOs: all of them (request throughput) or none (0)."""
        return where(meets_slo(self.ttft_ms, self.tpot_ms, slo), self.request_throughput_per_s, 0.0)


def meets_slo(ttft_ms: float, tpot_ms: float, slo: Slo) -> bool:
    """Whether TTFT and TPOT meet the SLOs (elementwise for arrays of configurations)."""
    if is_array(ttft_ms, tpot_ms):
        ok = True
        if slo.ttft_ms is not None:
            ok = ok & (ttft_ms <= slo.ttft_ms)
        if slo.tpot_ms is not None:
            ok = ok & (tpot_ms <= slo.tpot_ms)
        return ok
    return (slo.ttft_ms is None or ttft_ms <= slo.ttft_ms) and (slo.tpot_ms is None or tpot_ms <= slo.tpot_ms)


def ttft_queue_factor(concurrency: int) -> float:
    """q(N): how many prefills a new request's TTFT takes at concurrency N (1 at N = 1; aiconfigurator's)."""
    if concurrency <= 1:
        return 1.0
    return min(1.0 + math.log2(concurrency) / TTFT_QUEUE_LOG2_DIVISOR.value, TTFT_QUEUE_CAP.value)


def serve_point(concurrency: int, single_ttft_ms: Optional[float], batch_ttft_ms: Optional[float],
                batch_tpot_ms: Optional[float], output_tokens: int) -> Optional[ServePoint]:
    """The closed-loop steady state from a configuration's TTFT alone (``single_ttft_ms``: one prompt), its TTFT at
    batch = ``concurrency`` (the prefill of that many prompts) and its TPOT there (a decode step with ``concurrency``
    sequences); None when one is unknown. Array-agnostic: the times may be arrays of configurations (NaN: unknown)
    at one concurrency."""
    if single_ttft_ms is None or batch_ttft_ms is None or batch_tpot_ms is None:
        return None
    n = concurrency
    if is_array(n):  # one concurrency per configuration (recommender.predict.vector): each row at its own, q(N) of
        # each distinct N from ttft_queue_factor itself
        import numpy as np  # noqa: PLC0415  (numpy only where arrays are predicted)
        levels = sorted(set(n.tolist()))
        if levels[0] < 1:
            raise ValueError(f"concurrency must be >= 1, not {levels[0]}")
        q = np.array([ttft_queue_factor(v) for v in levels])[np.searchsorted(levels, n)]
        wait = where(n > 1, batch_tpot_ms, 0.0)  # a new request waits for the running decode step, at N > 1
    elif concurrency < 1:
        return None
    else:
        q, wait = ttft_queue_factor(n), batch_tpot_ms if n > 1 else 0.0
    steps = maximum(output_tokens - 1, 1)
    p = batch_ttft_ms / n
    ttft = maximum(single_ttft_ms, wait) * q
    tpot = batch_tpot_ms + (n - 1) * p / steps
    return ServePoint(concurrency=n, output_tokens=output_tokens, prefill_ms=p, decode_step_ms=batch_tpot_ms,
                      ttft_ms=ttft, tpot_ms=tpot, e2e_ms=ttft + steps * tpot)


def _weakest(*provs: Provenance) -> Provenance:
    return next(p for p in _PROVENANCE_ORDER if p in provs)


def serve_figures(figures: dict[str, Figure], single_ttft: Figure, concurrency: int, output_tokens: int,
                  slo: Optional[Slo] = None) -> dict[str, Figure]:
    """The serving figures of a prediction's figures (its TTFT and TPOT at batch = ``concurrency``) and of its TTFT at
    batch 1 (``single_ttft``): serve_ttft_ms, serve_tpot_ms, serve_e2e_ms, request_throughput_per_s,
    output_throughput_tokens_per_s and, with ``slo``, goodput_requests_per_s. Their provenance is the weakest of the
    figures they come from (a model applied to them)."""
    ttft, tpot = figures["ttft_ms"], figures["tpot_ms"]
    pt = serve_point(concurrency, single_ttft.value, ttft.value, tpot.value, output_tokens)
    names = [*SERVE_UNITS][:-1] + (["goodput_requests_per_s"] if slo is not None else [])
    if pt is None:
        return {k: Figure(None, SERVE_UNITS[k], "unknown", "TTFT or TPOT unknown") for k in names}
    prov = _weakest(ttft.provenance, tpot.provenance, single_ttft.provenance)
    how = (f"{concurrency} closed-loop clients, continuous batching: prefill P = TTFT({concurrency})/{concurrency} "
           f"= {pt.prefill_ms:.1f} ms, decode step D = {pt.decode_step_ms:.2f} ms")
    out = {
        "serve_ttft_ms": Figure(pt.ttft_ms, "ms", prov, f"{how}; TTFT = max(TTFT(1) {single_ttft.value:.1f} ms, D) x "
                                                         f"{ttft_queue_factor(concurrency):.3f} (queued behind the "
                                                         f"prefill under way)"),
        "serve_tpot_ms": Figure(pt.tpot_ms, "ms", prov, f"{how}; TPOT = D + (N - 1) x P / (n_out - 1) (the other "
                                                         f"streams' prefills interrupt the decode)"),
        "serve_e2e_ms": Figure(pt.e2e_ms, "ms", prov, "TTFT + (n_out - 1) x TPOT under load"),
        "request_throughput_per_s": Figure(round(pt.request_throughput_per_s, 6), "requests/s", prov,
                                           f"N / E2E = {concurrency} / {pt.e2e_ms:.0f} ms (closed loop)"),
        "output_throughput_tokens_per_s": Figure(round(pt.output_throughput_tokens_per_s, 6), "tokens/s", prov,
                                                 f"N x n_out / E2E = {concurrency} x {output_tokens} / "
                                                 f"{pt.e2e_ms:.0f} ms"),
    }
    if slo is not None:
        lim = ", ".join(f"{k.upper()} {v:.0f} ms" for k, v in (("ttft", slo.ttft_ms), ("tpot", slo.tpot_ms))
                        if v is not None)
        out["goodput_requests_per_s"] = Figure(
            round(pt.goodput(slo), 6), "requests/s", prov,
            f"{concurrency} in flight: TTFT {pt.ttft_ms:.0f} ms, TPOT {pt.tpot_ms:.1f} ms against the SLOs ({lim}); "
            f"goodput = N / E2E = {concurrency} / {pt.e2e_ms:.0f} ms when both are met, else 0")
    return out


def goodput_from(serve: dict[str, Optional[float]], slo: Slo) -> Optional[float]:
    """Goodput (requests/s) of serving figures as values (``serve_ttft_ms``, ``serve_tpot_ms``,
    ``request_throughput_per_s``), e.g. a tune trial's stored figures; None when one it needs is unknown."""
    ttft, tpot, rps = (serve.get(k) for k in ("serve_ttft_ms", "serve_tpot_ms", "request_throughput_per_s"))
    if rps is None or (slo.ttft_ms is not None and ttft is None) or (slo.tpot_ms is not None and tpot is None):
        return None
    return rps if meets_slo(ttft, tpot, slo) else 0.0
