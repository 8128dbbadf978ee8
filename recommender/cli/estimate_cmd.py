"""`recommender estimate MODEL --quant Q ...`: the same code path `recommend` uses, for one configuration."""

from __future__ import annotations

from typing import Optional

import typer


from recommender.core.engines import resolve_engine
from recommender.core.errors import UserError
from recommender.core.units import fmt_bytes, fmt_ms, parse_tokens
from recommender.model.quant import QUANTS, resolve_quant
from recommender.hardware.profiles import load_profiles, planning_hardware
from recommender.core.workloads import DEFAULT_WORKLOAD, get_workload
from recommender.predict import constants as C
from recommender.predict.predictor import Config, Predictor
from recommender.cli.common import emit_json, info, LEGEND, mark, open_catalog, stdout_console


def estimate_command(
    model: str = typer.Argument(..., help="Catalog model: HF id or a unique part of its name (qwen2.5-7b)."),
    quant: str = typer.Option("Q4_K_M", "--quant", "-q", help="Quantization, e.g. Q4_K_M, Q8_0, F16, AWQ-4bit."),
    context: str = typer.Option("4096", "--context", help="Context window in tokens (4096, 32K)."),
    batch: int = typer.Option(1, "--batch", min=1, max=4096, help="Concurrent sequences."),
    engine: Optional[str] = typer.Option(None, "--engine", "-e", help="llama.cpp, vllm or transformers."),
    prompt_tokens: Optional[int] = typer.Option(None, "--prompt-tokens", min=1,
                                                help="Prompt length (default: the chat workload's, as recommend)."),
    output_tokens: Optional[int] = typer.Option(None, "--output-tokens", min=1,
                                                help="Output length (default: the chat workload's)."),
    kv_dtype: Optional[str] = typer.Option(None, "--kv-dtype", help="KV cache dtype (f16, q8_0, q4_0, fp8...)."),
    gpu_layers: Optional[int] = typer.Option(None, "--gpu-layers", min=0,
                                             help="llama.cpp n_gpu_layers for partial offload (default: all)."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="Plan for this GPU profile."),
    vram: Optional[str] = typer.Option(None, "--vram", help="Override the GPU memory (24, 24GiB, 24GB)."),
    as_json: bool = typer.Option(False, "--json", help="JSON on stdout."),
) -> None:
    """Estimate memory and latency of one configuration, every number with its provenance and formula."""

    catalog = open_catalog()
    spec = catalog.resolve_model(model)
    q = resolve_quant(quant)
    eng = resolve_engine(engine) if engine else QUANTS[q].engines[0]
    if eng not in QUANTS[q].engines:
        raise UserError(f"{q} does not run on {eng}", hint=f"{q} runs on: {', '.join(QUANTS[q].engines)}")
    if kv_dtype and kv_dtype not in C.ENGINE_KV_DTYPES[eng]:
        raise UserError(f"KV dtype {kv_dtype!r} is not available on {eng}",
                        hint=f"{eng} KV dtypes: {', '.join(C.ENGINE_KV_DTYPES[eng])}")
    if gpu_layers is not None and eng != "llama.cpp":
        raise UserError(f"--gpu-layers (partial offload) is modelled for llama.cpp, not {eng}",
                        hint="drop --gpu-layers, or use --engine llama.cpp")
    ctx = parse_tokens(context)

    wl = get_workload(DEFAULT_WORKLOAD)
    if output_tokens is None:
        output_tokens = wl.output_tokens
    if prompt_tokens is None:
        prompt_tokens = min(wl.prompt_tokens, max(ctx - output_tokens, 1))  # the same rule recommend applies
    if prompt_tokens >= ctx:
        raise UserError(f"--prompt-tokens {prompt_tokens} does not fit in a {ctx}-token context",
                        hint="raise --context or shorten the prompt")
    hw, notes = planning_hardware(gpu, vram)
    for n in notes:
        info(n)
    predictor = Predictor.for_catalog(catalog, hw, load_profiles(), {spec.id: spec}, model_id=spec.id)
    est = predictor.predict(spec, Config(model=spec.id, quant=q, engine=eng, context_tokens=ctx, batch=batch,
                                         prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                                         kv_dtype=kv_dtype, gpu_layers=gpu_layers),
                            variant=catalog.variants().get((spec.id, q)))
    if as_json:
        emit_json(est)
        return
    print_estimate(est)


def _interval(est, field: str, fmt) -> str:
    """' [low-high]' after a calibrated figure (10-90 % of held-out errors), else nothing."""
    iv = est.intervals.get(field) if est.provenance.get(field) == "calibrated" else None
    return f" [{fmt(iv[0])}–{fmt(iv[1])}]" if iv else ""


def print_estimate(est) -> None:
    from rich.table import Table  # noqa: PLC0415


    p = est.provenance
    t = Table(title=f"{est.model} {est.quant} on {est.engine}, {est.hardware} · ctx {est.context_tokens} × batch "
                    f"{est.batch} · prompt {est.prompt_tokens}, output {est.output_tokens}", caption=LEGEND)
    t.add_column("quantity")
    t.add_column("value", justify="right")
    rows = [
        ("weights", mark(fmt_bytes(est.weights_bytes), p["weights_bytes"])),
        ("  on the GPU", mark(fmt_bytes(est.weights_gpu_bytes), p["weights_bytes"])),
        ("  in host RAM", mark(fmt_bytes(est.host_weights_bytes), p["weights_bytes"])),
        (f"KV cache ({est.kv_dtype}, {est.kv_bytes_per_token:,} B/token)", mark(fmt_bytes(est.kv_cache_bytes),
                                                                                  p["kv_cache_bytes"])),
        ("compute buffers", mark(fmt_bytes(est.compute_buffer_bytes), p["overhead_bytes"])),
        ("runtime overhead", mark(fmt_bytes(est.runtime_overhead_bytes), p["overhead_bytes"])),
        ("total GPU memory", mark(fmt_bytes(est.total_vram_bytes), p["total_vram_bytes"])
         + _interval(est, "total_vram_bytes", fmt_bytes)),
        ("TTFT", mark(fmt_ms(est.ttft_ms), p["ttft_ms"]) + _interval(est, "ttft_ms", fmt_ms)),
        ("TPOT", mark(fmt_ms(est.tpot_ms), p["tpot_ms"]) + _interval(est, "tpot_ms", fmt_ms)),
        ("E2E", mark(fmt_ms(est.e2e_ms), p["e2e_ms"])),
        ("decode tok/s (per sequence)", mark("?" if est.decode_tokens_per_s is None
                                             else f"{est.decode_tokens_per_s:.1f}", p["decode_tokens_per_s"])),
        ("throughput tok/s", mark("?" if est.throughput_tokens_per_s is None
                                  else f"{est.throughput_tokens_per_s:.1f}", p["throughput_tokens_per_s"])),
    ]
    for r in rows:
        t.add_row(*r)
    stdout_console().print(t)
    for k, v in est.basis.items():
        info(f"{k}: {v}")
    for name in ("ttft_ms", "tpot_ms", "total_vram_bytes"):  # where each headline figure came from
        f = est.figures[name]
        if f.basis:
            info(f"{name} ({f.provenance}): {f.basis}")
    for n in est.notes:
        info(f"note: {n}")
