"""`recommender probe perf`: measure a real engine on this machine and store the row."""

from __future__ import annotations

from typing import Optional

import typer

from .common import emit_json, info, open_catalog

app = typer.Typer(help="Measure engines on this machine; rows go to your catalog overlay.", no_args_is_help=True)


@app.command("perf")
def perf(
    model: str = typer.Argument(..., help="A .gguf file, or a catalog model with --synthetic."),
    engine: str = typer.Option("llama.cpp", "--engine", "-e", help="Engine: llama.cpp, transformers or vllm."),
    quant: Optional[str] = typer.Option(None, "--quant", "-q", help="Quantization of a synthetic model."),
    context: str = typer.Option("4096", "--context", help="Context window per sequence (tokens, 4K)."),
    batch: int = typer.Option(1, "--batch", min=1, max=1024, help="Concurrent sequences."),
    prompt_tokens: int = typer.Option(512, "--prompt-tokens", min=1),
    output_tokens: int = typer.Option(128, "--output-tokens", min=2),
    repeats: int = typer.Option(3, "--repeats", min=1, max=100),
    kv_dtype: str = typer.Option("f16", "--kv-dtype", help="KV cache dtype (llama.cpp: f16, q8_0, q4_0; "
                                                           "transformers: the model dtype)."),
    gpu_layers: int = typer.Option(-1, "--gpu-layers", help="Layers on the GPU (-1 = all)."),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, help="CPU threads (default: all cores)."),
    synthetic: bool = typer.Option(False, "--synthetic",
                                   help="Build a random-weight model with the catalog model's exact architecture."),
    model_id: Optional[str] = typer.Option(None, "--model-id", help="Catalog id to file the row under."),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code",
                                           help="Let transformers run Python code shipped in the model folder "
                                                "(needed by some architectures; only for folders you trust)."),
    timeout: float = typer.Option(600.0, "--timeout", min=5, help="Seconds before the probe is killed."),
    save: bool = typer.Option(True, "--save/--no-save", help="Write the row to your catalog overlay."),
    as_json: bool = typer.Option(False, "--json", help="JSON on stdout."),
) -> None:
    """TTFT, TPOT, ITL, tok/s and peak memory, after warm-up, over repeats, in a child process."""
    from evaluators.base import engine_name  # noqa: PLC0415

    from ..catalog.store import UserCatalog  # noqa: PLC0415
    from ..errors import UserError  # noqa: PLC0415
    from ..paths import user_catalog_path  # noqa: PLC0415
    from ..probe import resolve_target, run_perf_probe  # noqa: PLC0415
    from ..units import parse_tokens  # noqa: PLC0415

    eng = engine_name(engine)
    ctx = parse_tokens(context)
    if prompt_tokens + output_tokens > ctx:
        raise UserError(f"prompt {prompt_tokens} + output {output_tokens} tokens do not fit a {ctx}-token context",
                        hint="raise --context or lower --prompt-tokens / --output-tokens")
    catalog = open_catalog()
    target = resolve_target(model, eng, quant, synthetic, catalog, model_id)
    if trust_remote_code:
        target.extra["trust_remote_code"] = True
    from .common import stderr_console  # noqa: PLC0415

    what = (f"{target.model_id} {target.quant} on {eng}{' (synthetic weights)' if target.synthetic else ''}: "
            f"ctx {ctx}, batch {batch}, prompt {prompt_tokens}, output {output_tokens}, warm-up + {repeats} repeats")
    with stderr_console().status(f"probing {what} (child process, timeout {timeout:.0f} s) ..."):
        row = run_perf_probe(target, eng, context_tokens=ctx, batch=batch, prompt_tokens=prompt_tokens,
                             output_tokens=output_tokens, repeats=repeats, kv_dtype=kv_dtype, gpu_layers=gpu_layers,
                             threads=threads, timeout_s=timeout)
    info(f"probed {what} in {row.raw.get('wall_s') or 0:.1f} s")
    if save:
        with UserCatalog(user_catalog_path()) as w:
            w.put_measurements([row])
    if as_json:
        emit_json(row.model_dump(mode="json"))
    else:
        _print_row(row)
    if row.status != "ok":
        info(f"error: probe failed: {row.failure_reason}")
        info("hint: the failed row was recorded; try a smaller --context/--batch or check the model file")
        raise typer.Exit(1)


def _print_row(m) -> None:
    from ..units import fmt_bytes, fmt_ms  # noqa: PLC0415

    s = m.raw.get("summary", {})

    def spread(key: str) -> str:
        v = s.get(key)
        return f" (±{100 * v['rel_spread']:.1f} %)" if isinstance(v, dict) else ""

    print(f"{m.model_id} {m.quant} on {m.engine} {m.engine_version} · {m.hardware_name} · status {m.status}")
    if m.status == "ok":
        print(f"  TTFT {fmt_ms(m.ttft_ms)}{spread('ttft_ms')} · TPOT {fmt_ms(m.tpot_ms)}{spread('tpot_ms')} · "
              f"ITL p50 {fmt_ms(m.itl_ms_p50)}")
        print(f"  decode {m.decode_tokens_per_s:.1f} tok/s per sequence · prefill {m.prefill_tokens_per_s:.0f} tok/s "
              f"· throughput {m.throughput_tokens_per_s:.1f} tok/s")
        print(f"  peak GPU memory {fmt_bytes(m.peak_vram_bytes)} · peak RSS {fmt_bytes(m.peak_rss_bytes)}"
              + (" · DRIFT between repeats" if s.get("drift_flag") else ""))
