"""`recommender estimate MODEL --quant Q ...`: the same code path `recommend` uses, for one configuration."""

from __future__ import annotations

from typing import Optional

import typer


from recommender.core.engines import ENGINE_SPECS, engine_spec, resolve_engine
from recommender.core.errors import UserError
from recommender.core.units import fmt_bytes, fmt_ms, parse_latency_ms, parse_tokens
from recommender.model.quant import QUANTS, resolve_quant
from recommender.core.workloads import DEFAULT_WORKLOAD, get_workload
from recommender.hardware.multi import planning_machine
from recommender.hardware.profiles import load_profiles
from recommender.predict import constants as C
from recommender.predict.analytical import check_load_mode
from recommender.predict.predictor import Config, Predictor
from recommender.predict.serving import Slo
from recommender.predict.split import ENGINE_MODES, SplitPlan, check_plan, default_plan
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
    load_mode: str = typer.Option(C.LLAMA_CPP_DEFAULT_LOAD_MODE, "--load-mode",
                                  help="llama.cpp load mode with --gpu-layers: mmap (its default) or none "
                                       "(--no-mmap: host weights in pinned memory, faster prompt copies)."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="Plan for this GPU profile; several: \"2x RTX 3090\", "
                                                          "\"RTX 4090,RTX 3090\"."),
    gpus: Optional[int] = typer.Option(None, "--gpus", min=1, help="How many of the --gpu card."),
    link: Optional[str] = typer.Option(None, "--link", help="Link between the GPUs: pcie4 x16, pcie3 x8, nvlink."),
    split_mode: Optional[str] = typer.Option(None, "--split", help="Multi-GPU plan: layer or row (llama.cpp -sm), "
                                                                   "tensor or pipeline (vLLM). Default: the "
                                                                   "engine's (layer; tensor when the heads divide)."),
    tensor_split: Optional[str] = typer.Option(None, "--tensor-split", "-ts",
                                               help="llama.cpp --tensor-split proportions, e.g. 3,1 "
                                                    "(default: by each GPU's memory)."),
    vram: Optional[str] = typer.Option(None, "--vram", help="Override the GPU memory (24, 24GiB, 24GB); with "
                                                            "several GPUs, each one's."),
    bandwidth: Optional[str] = typer.Option(None, "--bandwidth", help="Override the memory bandwidth (100GB/s, "
                                                                      "1.8TB/s); a CPU's is measured by default."),
    slo_ttft: Optional[str] = typer.Option(None, "--slo-ttft", help="Goodput at this TTFT limit under load, e.g. "
                                                                     "1s, 500ms (the batch = closed-loop clients)."),
    slo_tpot: Optional[str] = typer.Option(None, "--slo-tpot", help="Goodput at this TPOT limit under load, e.g. 50ms."),
    as_json: bool = typer.Option(False, "--json", help="JSON on stdout."),
) -> None:
    """Estimate memory and latency of one configuration, every number with its provenance and formula. With
    --batch N > 1 (or an SLO) also the figures of N closed-loop clients: TTFT/TPOT under load, requests/s, goodput."""

    catalog = open_catalog()
    spec = catalog.resolve_model(model)
    q = resolve_quant(quant)
    eng = resolve_engine(engine) if engine else QUANTS[q].engines[0]
    if eng not in QUANTS[q].engines:
        raise UserError(f"{q} does not run on {eng}", hint=f"{q} runs on: {', '.join(QUANTS[q].engines)}")
    if kv_dtype and kv_dtype not in C.ENGINE_KV_DTYPES[eng]:
        raise UserError(f"KV dtype {kv_dtype!r} is not available on {eng}",
                        hint=f"{eng} KV dtypes: {', '.join(C.ENGINE_KV_DTYPES[eng])}")
    if gpu_layers is not None and not engine_spec(eng).partial_offload:
        offload = [e.name for e in ENGINE_SPECS if e.partial_offload]
        raise UserError(f"--gpu-layers (partial offload) is modelled for {', '.join(offload)}, not {eng}",
                        hint=f"drop --gpu-layers, or use --engine {offload[0]}")
    check_load_mode(load_mode, "--load-mode")
    ctx = parse_tokens(context)
    slo = Slo(ttft_ms=parse_latency_ms(slo_ttft, "--slo-ttft") if slo_ttft else None,
              tpot_ms=parse_latency_ms(slo_tpot, "--slo-tpot") if slo_tpot else None) if slo_ttft or slo_tpot else None

    wl = get_workload(DEFAULT_WORKLOAD)
    if output_tokens is None:
        output_tokens = wl.output_tokens
    if prompt_tokens is None:
        prompt_tokens = min(wl.prompt_tokens, max(ctx - output_tokens, 1))  # the same rule recommend applies
    if prompt_tokens >= ctx:
        raise UserError(f"--prompt-tokens {prompt_tokens} does not fit in a {ctx}-token context",
                        hint="raise --context or shorten the prompt")
    hw, machine, _host_ram, notes = planning_machine(gpu, gpus, vram, link, bandwidth)
    plan = _plan(eng, spec, machine, split_mode, tensor_split, gpu_layers)
    for n in notes:
        info(n)
    predictor = Predictor.for_catalog(catalog, hw, load_profiles(), {spec.id: spec}, model_id=spec.id,
                                      machine=machine)
    config = Config(model=spec.id, quant=q, engine=eng, context_tokens=ctx, batch=batch, prompt_tokens=prompt_tokens,
                    output_tokens=output_tokens, kv_dtype=kv_dtype, gpu_layers=gpu_layers, split=plan,
                    load_mode=load_mode)
    variant = catalog.variants().get((spec.id, q))
    est = predictor.predict(spec, config, variant=variant)
    if machine is None and est.total_vram_bytes is not None and est.total_vram_bytes > hw.memory_bytes:
        est.notes.append(_does_not_fit(predictor, spec, config, variant, est.total_vram_bytes, hw))
    if batch > 1 or slo is not None:  # as a server: `batch` closed-loop clients (recommend -w serve's model)
        est.figures.update(predictor.serving(spec, est, slo, variant=catalog.variants().get((spec.id, q))))
    if as_json:
        emit_json(est)
        return
    print_estimate(est)


def _does_not_fit(predictor, spec, config, variant, need: float, hw) -> str:
    """The note for a configuration above the GPU's memory: by how much, and on llama.cpp with a discrete GPU the
    largest partial offload that fits (what a user would try next)."""
    note = (f"does not fit: this configuration needs {fmt_bytes(need)} of GPU memory, the {hw.name} profile has "
            f"{fmt_bytes(hw.memory_bytes)}")
    if not engine_spec(config.engine).partial_offload or hw.backend not in ("cuda", "rocm"):
        return note + " (partial offload is modelled for llama.cpp on a discrete GPU)"
    part = predictor.offload_fit(spec, config, hw.memory_bytes, variant)
    if part is None:
        return note + "; not even the output layer fits with llama.cpp partial offload"
    return (note + f"; llama.cpp partial offload fits at --gpu-layers {part.gpu_layers} of {spec.num_layers + 1} "
            f"({fmt_bytes(part.total_vram_bytes)} on the GPU, the rest in host RAM: TPOT {fmt_ms(part.tpot_ms)}, "
            f"TTFT {fmt_ms(part.ttft_ms)}, estimated)")


def _plan(engine: str, spec, machine, mode: Optional[str], tensor_split: Optional[str],
          gpu_layers: Optional[int]) -> Optional[SplitPlan]:
    """The split plan of --split/--tensor-split on a multi-GPU machine (None on one GPU); bad input is a UserError."""
    if machine is None:
        if mode or tensor_split:
            raise UserError("--split and --tensor-split plan several GPUs",
                            hint='name them: --gpu "2x RTX 3090" (or --gpu NAME --gpus N)')
        return None
    if gpu_layers is not None:
        raise UserError("--gpu-layers (partial offload) is not modelled with a multi-GPU split",
                        hint="drop --gpu-layers, or plan for one GPU")
    if mode is None:
        plan = default_plan(engine, spec, machine)
        if plan is None:
            raise UserError(f"{engine} has no multi-GPU plan here", hint="use --engine llama.cpp or vllm")
    else:
        modes = ENGINE_MODES.get(engine, ())
        if mode not in modes:
            raise UserError(f"--split {mode!r} is not a {engine} plan",
                            hint=f"{engine} plans: {', '.join(modes)}" if modes else "use --engine llama.cpp or vllm")
        plan = SplitPlan(mode=mode)
    if tensor_split is not None:
        try:
            props = [float(x) for x in tensor_split.split(",")]
        except ValueError:
            raise UserError(f"--tensor-split {tensor_split!r}: give numbers separated by commas", hint="e.g. 3,1")
        plan = plan.model_copy(update={"tensor_split": props})
    why = check_plan(engine, plan, spec, machine)
    if why:
        raise UserError(f"{plan.label} on {machine.name}: {why}",
                        hint="pick another --split, or a number of GPUs the model's heads divide by")
    return plan


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
    if "request_throughput_per_s" in est.figures:  # batch > 1: served to `batch` closed-loop clients
        f = est.figures
        rows += [
            (f"served to {est.batch} clients: TTFT", mark(fmt_ms(f["serve_ttft_ms"].value), p["serve_ttft_ms"])),
            ("  TPOT", mark(fmt_ms(f["serve_tpot_ms"].value), p["serve_tpot_ms"])),
            ("  E2E", mark(fmt_ms(f["serve_e2e_ms"].value), p["serve_e2e_ms"])),
            ("  requests/s", mark("?" if f["request_throughput_per_s"].value is None
                                  else f"{f['request_throughput_per_s'].value:.2f}", p["request_throughput_per_s"])),
            ("  output tok/s", mark("?" if f["output_throughput_tokens_per_s"].value is None
                                    else f"{f['output_throughput_tokens_per_s'].value:.1f}",
                                    p["output_throughput_tokens_per_s"])),
        ]
        if "goodput_requests_per_s" in f:
            g = f["goodput_requests_per_s"]
            rows.append(("  goodput req/s (at the SLOs)", mark("?" if g.value is None else f"{g.value:.2f}",
                                                                g.provenance)))
    for r in rows:
        t.add_row(*r)
    stdout_console().print(t)
    if est.devices:
        print_devices(est)
    for k, v in est.basis.items():
        info(f"{k}: {v}")
    for name in ("ttft_ms", "tpot_ms", "total_vram_bytes", "serve_tpot_ms", "request_throughput_per_s",
                 "goodput_requests_per_s"):
        if name not in est.figures:
            continue  # where each headline figure came from
        f = est.figures[name]
        if f.basis:
            info(f"{name} ({f.provenance}): {f.basis}")
    for n in est.notes:
        info(f"note: {n}")


def print_devices(est) -> None:
    """Per-device memory of a split plan (every figure estimated: docs/estimates.md §7)."""
    from rich.table import Table  # noqa: PLC0415

    vllm = engine_spec(est.engine).serves_kv_budget  # a KV block budget per GPU
    t = Table(title=f"{est.split.label} over {est.hardware} · {est.link}", caption="every figure estimated ᵉ")
    for name in ("GPU", "layers", "weights", "KV cache", "compute", "runtime", "total", "of", "fits",
                 *(("KV budget", "KV blocks") if vllm else ()), "decode ms"):
        t.add_column(name, justify="left" if name == "GPU" else "right")
    for d in est.devices:
        row = [f"{d.index} {d.name}", f"{d.layers}{' +out' if d.output_layer and not vllm else ''}",
               fmt_bytes(d.weights_bytes), fmt_bytes(d.kv_cache_bytes), fmt_bytes(d.compute_buffer_bytes),
               fmt_bytes(d.runtime_overhead_bytes), fmt_bytes(d.total_bytes), fmt_bytes(d.budget_bytes),
               "yes" if d.fits else "NO"]
        if vllm:
            row += [fmt_bytes(d.kv_budget_bytes) if d.kv_budget_bytes is not None else "?",
                    f"{d.kv_blocks:,}" if d.kv_blocks is not None else "?"]
        row.append("?" if d.decode_ms is None else f"{d.decode_ms:.2f}")
        t.add_row(*row)
    stdout_console().print(t)
