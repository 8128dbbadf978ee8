"""The options that describe a ranking question (limits, workload, weights, filters), shared by every command that
ranks candidates (`recommend`, `recommender sensitivity`): one definition of each option and one parser."""

from __future__ import annotations

import functools
import inspect
from enum import Enum
from typing import Callable, NamedTuple, Optional, get_type_hints

import typer

from recommender.core.engines import resolve_engine
from recommender.core.errors import UserError
from recommender.core.units import parse_latency_ms, parse_tokens
from recommender.model.quant import resolve_quant
from recommender.predict import constants as C
from recommender.predict.analytical import check_load_mode
from recommender.core.workloads import get_workload
from recommender.hardware.multi import planning_machine
from recommender.rank.query import Query
from recommender.score.weighted import parse_weights


class LatencyMetricOpt(str, Enum):
    ttft = "ttft"
    tpot = "tpot"
    e2e = "e2e"


class NormOpt(str, Enum):
    value = "value"
    minmax = "minmax"
    zscore = "zscore"


NORM_HELP = ("value (default): value functions anchored on your limits and the workload, in accuracy points "
             "(docs/scoring.md); minmax / zscore: the brief's normalization over the candidates at hand.")
INCLUDE_BASE_HELP = "Rank base (not chat-tuned) and classifier (Llama-Guard) checkpoints too in a chat workload."


class MissingOpt(str, Enum):
    worst = "worst"
    mean = "mean"


class RiskOpt(str, Enum):
    neutral = "neutral"
    moderate = "moderate"
    averse = "averse"


class QueryOptions(NamedTuple):
    """The shared options of a ranking question, as the user typed them (parsed by build_query)."""

    vram: Optional[str]
    max_latency: Optional[str]
    latency_metric: LatencyMetricOpt
    workload: str
    context: Optional[list[str]]
    batch: Optional[list[int]]
    prompt_tokens: Optional[int]
    output_tokens: Optional[int]
    weights: Optional[str]
    missing: MissingOpt
    gpu: Optional[str]
    model: Optional[list[str]]
    engine: Optional[list[str]]
    quant: Optional[list[str]]
    top: int
    per_model: int
    catalog_path: Optional[str]
    gpus: Optional[int] = None
    link: Optional[str] = None
    bandwidth: Optional[str] = None
    ram: Optional[str] = None
    risk: RiskOpt = None
    load_mode: Optional[str] = None  # llama.cpp partial offload: mmap (None: its default) or none


def _options() -> dict[str, object]:
    """A fresh typer.Option per shared option (QueryOptions' fields, in order)."""
    return {
        "vram": typer.Option(None, "--vram", help="GPU memory budget: 24 (GiB), 24GiB, 24GB (SI), 24576MiB. "
                                                  "Default: the planned GPU's memory."),
        "max_latency": typer.Option(None, "--max-latency", help="Latency limit: 800ms, 0.8s, 800 (ms)."),
        "latency_metric": typer.Option(LatencyMetricOpt.ttft, "--latency-metric",
                                       help="Which latency the limit applies to."),
        "workload": typer.Option("chat", "--workload", "-w", help="Workload preset (profiles/workloads)."),
        "context": typer.Option(None, "--context", help="Context window(s) to consider, e.g. 8K."),
        "batch": typer.Option(None, "--batch", help="Concurrent sequences to consider."),
        "prompt_tokens": typer.Option(None, "--prompt-tokens", help="Prompt length (tokens)."),
        "output_tokens": typer.Option(None, "--output-tokens", help="Output length (tokens)."),
        "weights": typer.Option(None, "--weights", help="latency=0.3,vram=0.25,ppl=0.2,acc=0.25 (value; zh, en = 0); "
                                                        "minmax/zscore default to zh=0.25 instead of acc."),
        "missing": typer.Option(MissingOpt.worst, "--missing", help="Rule for a metric with no data."),
        "gpu": typer.Option(None, "--gpu", help="Plan for this GPU (a profile name) instead of this machine."),
        "model": typer.Option(None, "--model", "-m", help="Only these models."),
        "engine": typer.Option(None, "--engine", "-e", help="Only these engines."),
        "quant": typer.Option(None, "--quant", "-q", help="Only these quantizations."),
        "top": typer.Option(10, "--top", min=1, help="How many to show."),
        "per_model": typer.Option(1, "--per-model", min=0, help="Best configurations kept per model (0 = all)."),
        "catalog_path": typer.Option(None, "--catalog", help="Catalog file (default: $RECOMMENDER_CATALOG, else "
                                                             "the shipped catalog.duckdb)."),
        "gpus": typer.Option(None, "--gpus", min=1, help="How many of the --gpu card (a multi-GPU machine); "
                                                         "or --gpu \"2x RTX 3090\", --gpu \"RTX 4090,RTX 3090\"."),
        "link": typer.Option(None, "--link", help="Link between the GPUs: pcie4 x16, pcie3 x8, nvlink "
                                                  "(default: the cards' own, profiles/links)."),
        "bandwidth": typer.Option(None, "--bandwidth", help="Memory bandwidth of the planned GPU or CPU: 100GB/s, "
                                                            "1.8TB/s, 100 (GB/s). Default: the profile's sourced "
                                                            "figure; a CPU's is measured here (a few seconds, once)."),
        "ram": typer.Option(None, "--ram", help="Host RAM for llama.cpp partial offload: 64 (GiB), 64GB. Default: "
                                                "this machine's RAM, less 10 % (at least 4 GiB)."),
        "load_mode": typer.Option(C.LLAMA_CPP_DEFAULT_LOAD_MODE, "--load-mode",
                                  help="llama.cpp load mode of partial-offload plans: mmap (its default) or none "
                                       "(--no-mmap: host weights in pinned memory, prompt copies about 5x faster)."),
        "risk": typer.Option(RiskOpt.moderate, "--risk", help="Which task accuracy ranks: neutral = the point value, "
                                                              "moderate = its 16th percentile (mean - 1 SD), averse "
                                                              "= its 5th percentile; an estimate with a wide interval "
                                                              "then does not outrank a published figure inside it."),
    }


def query_options(func: Optional[Callable] = None, *, top_help: Optional[str] = None):
    """Decorator for a Typer command: adds the shared options before the command's own and hands them to it as one
    argument, `opts: QueryOptions` (so each option is defined once, here). `top_help` rewords --top's help."""
    if func is None:
        return functools.partial(query_options, top_help=top_help)
    sig = inspect.signature(func)
    own = [p for p in sig.parameters.values() if p.name != "opts"]
    hints = get_type_hints(QueryOptions)
    options = _options()
    if top_help:
        options["top"].help = top_help
    shared = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                                annotation=hints[name]) for name, default in options.items()]

    @functools.wraps(func)
    def command(**kwargs):
        opts = QueryOptions(**{name: kwargs.pop(name) for name in QueryOptions._fields})
        return func(opts=opts, **kwargs)

    command.__annotations__ = {k: v for k, v in func.__annotations__.items() if k != "opts"}
    command.__signature__ = sig.replace(parameters=shared + own)
    return command


def build_query(opts: QueryOptions, normalization: str, include_base: bool = False):
    """Turn the shared options into a validated Query (raises UserError on bad input). Returns (query, notes).

    Parsed from the top layer down (weights, hardware, quantizations, workload, engines, numbers); model names stay as
    typed and are matched against the catalog when candidates are built."""
    o = opts
    w = parse_weights(o.weights, normalization)
    hw, machine, host_ram, notes = planning_machine(o.gpu, o.gpus, o.vram, o.link, o.bandwidth, o.ram)
    wl = get_workload(o.workload)
    quants = [resolve_quant(x) for x in (o.quant or [])]
    engines = [resolve_engine(e) for e in (o.engine or [])]
    max_ms = parse_latency_ms(o.max_latency) if o.max_latency is not None else None
    load_mode = check_load_mode(o.load_mode or C.LLAMA_CPP_DEFAULT_LOAD_MODE, "--load-mode")
    upd = {}
    if o.context:
        upd["contexts"] = sorted({parse_tokens(c) for c in o.context})
    if o.batch:
        if any(b < 1 or b > 4096 for b in o.batch):
            raise UserError(f"--batch {o.batch} out of range",
                            hint="batch is the number of concurrent sequences, 1-4096")
        upd["batches"] = sorted(set(o.batch))
    for name, val in (("prompt_tokens", o.prompt_tokens), ("output_tokens", o.output_tokens)):
        if val is not None:
            if val < 1:
                raise UserError(f"--{name.replace('_', '-')} must be >= 1", hint="give a token count, e.g. 512")
            upd[name] = val
    if upd:
        wl = wl.model_copy(update=upd)
    q = Query(vram_bytes=machine.memory_bytes if machine else hw.memory_bytes, machine=machine, max_latency_ms=max_ms, latency_metric=o.latency_metric.value, workload=wl,
              hardware=hw, weights=w, normalization=normalization, missing=o.missing.value, models=list(o.model or []),
              engines=engines, quants=quants, top=o.top, per_model=o.per_model, include_base=include_base,
              host_ram_bytes=host_ram, risk=(o.risk.value if o.risk is not None else "moderate"),
              load_mode=load_mode)
    return q, notes


def no_fit_hint(excluded) -> str:
    """The hint printed when nothing fits: the strongest excluded candidates (Candidate records) say why."""
    unknown_only = excluded and all(any("unknown" in r for r in c.excluded) and len(c.excluded) == 1
                                    for c in excluded)
    return ("hint: this GPU profile has no peak FLOP/s figure, so TTFT is unknown: use --latency-metric tpot"
            if unknown_only else "hint: raise --vram or --max-latency, pick a smaller --context, or see --explain")
