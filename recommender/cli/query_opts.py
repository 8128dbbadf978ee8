"""The options that describe a ranking question (limits, workload, weights, filters), shared by every command that
ranks candidates (`recommend`, `recommender sensitivity`): one definition of each option and one parser."""

from __future__ import annotations

from enum import Enum
from typing import Optional

import typer


class LatencyMetricOpt(str, Enum):
    ttft = "ttft"
    tpot = "tpot"
    e2e = "e2e"


class NormOpt(str, Enum):
    minmax = "minmax"
    zscore = "zscore"


class MissingOpt(str, Enum):
    worst = "worst"
    mean = "mean"


# Each factory returns a fresh typer.Option, used as a parameter default: `vram: Optional[str] = vram_opt()`.
def vram_opt():
    return typer.Option(None, "--vram", help="GPU memory budget: 24 (GiB), 24GiB, 24GB (SI), 24576MiB. "
                                             "Default: the planned GPU's memory.")


def max_latency_opt():
    return typer.Option(None, "--max-latency", help="Latency limit: 800ms, 0.8s, 800 (ms).")


def latency_metric_opt():
    return typer.Option(LatencyMetricOpt.ttft, "--latency-metric", help="Which latency the limit applies to.")


def workload_opt():
    return typer.Option("chat", "--workload", "-w", help="Workload preset (profiles/workloads).")


def context_opt():
    return typer.Option(None, "--context", help="Context window(s) to consider, e.g. 8K.")


def batch_opt():
    return typer.Option(None, "--batch", help="Concurrent sequences to consider.")


def prompt_tokens_opt():
    return typer.Option(None, "--prompt-tokens", help="Prompt length (tokens).")


def output_tokens_opt():
    return typer.Option(None, "--output-tokens", help="Output length (tokens).")


def weights_opt():
    return typer.Option(None, "--weights", help="latency=0.3,vram=0.25,ppl=0.2,zh=0.25 (en=0 by default).")


def missing_opt():
    return typer.Option(MissingOpt.worst, "--missing", help="Rule for a metric with no data.")


def gpu_opt():
    return typer.Option(None, "--gpu", help="Plan for this GPU (a profile name) instead of this machine.")


def model_opt():
    return typer.Option(None, "--model", "-m", help="Only these models.")


def engine_opt():
    return typer.Option(None, "--engine", "-e", help="Only these engines.")


def quant_opt():
    return typer.Option(None, "--quant", "-q", help="Only these quantizations.")


def top_opt(help: str = "How many to show."):
    return typer.Option(10, "--top", min=1, help=help)


def per_model_opt():
    return typer.Option(1, "--per-model", min=0, help="Best configurations kept per model (0 = all).")


def catalog_opt():
    return typer.Option(None, "--catalog", help="Catalog file (default: $RECOMMENDER_CATALOG, else the shipped "
                                                "catalog.duckdb).")


def build_query(vram: Optional[str], max_latency: Optional[str], latency_metric: str, workload: str,
                context: Optional[list[str]], batch: Optional[list[int]], prompt_tokens: Optional[int],
                output_tokens: Optional[int], weights: Optional[str], normalization: str, missing: str,
                gpu: Optional[str], model: Optional[list[str]], engine: Optional[list[str]],
                quant: Optional[list[str]], top: int, per_model: int, catalog):
    """Turn CLI options into a validated Query (raises UserError on bad input)."""
    from ..engines import resolve_engine  # noqa: PLC0415
    from ..errors import UserError  # noqa: PLC0415
    from ..quant import resolve_quant  # noqa: PLC0415
    from ..recommend import Query  # noqa: PLC0415
    from ..score import parse_weights  # noqa: PLC0415
    from ..units import parse_latency_ms, parse_memory, parse_tokens  # noqa: PLC0415
    from ..workloads import get_workload  # noqa: PLC0415

    vram_bytes = parse_memory(vram) if vram is not None else None
    max_ms = parse_latency_ms(max_latency) if max_latency is not None else None
    w = parse_weights(weights)
    wl = get_workload(workload)
    upd = {}
    if context:
        upd["contexts"] = sorted({parse_tokens(c) for c in context})
    if batch:
        if any(b < 1 or b > 4096 for b in batch):
            raise UserError(f"--batch {batch} out of range", hint="batch is the number of concurrent sequences, 1-4096")
        upd["batches"] = sorted(set(batch))
    for name, val in (("prompt_tokens", prompt_tokens), ("output_tokens", output_tokens)):
        if val is not None:
            if val < 1:
                raise UserError(f"--{name.replace('_', '-')} must be >= 1", hint="give a token count, e.g. 512")
            upd[name] = val
    if upd:
        wl = wl.model_copy(update=upd)
    from .common import planning_hardware  # noqa: PLC0415

    hw, notes = planning_hardware(gpu, vram_bytes)
    if vram_bytes is None:
        vram_bytes = hw.memory_bytes
    models = [catalog.resolve_model(m).id for m in (model or [])]
    q = Query(vram_bytes=vram_bytes, max_latency_ms=max_ms, latency_metric=latency_metric, workload=wl,
              hardware=hw, weights=w, normalization=normalization, missing=missing, models=models,
              engines=[resolve_engine(e) for e in (engine or [])], quants=[resolve_quant(x) for x in (quant or [])],
              top=top, per_model=per_model)
    return q, notes


def no_fit_hint(excluded) -> str:
    """The hint printed when nothing fits: the strongest excluded candidates (Candidate records) say why."""
    unknown_only = excluded and all(any("unknown" in r for r in c.excluded) and len(c.excluded) == 1
                                    for c in excluded)
    return ("hint: this GPU profile has no peak FLOP/s figure, so TTFT is unknown: use --latency-metric tpot"
            if unknown_only else "hint: raise --vram or --max-latency, pick a smaller --context, or see --explain")
