"""`recommender probe perf`: measure a real engine on this machine and store the row."""

from __future__ import annotations

from typing import Optional

import typer


from recommender.core.errors import UserError
from recommender.core.paths import user_catalog_path
from recommender.core.units import fmt_bytes, fmt_ms, parse_tokens
from evaluators.accuracy_job import AccuracyJob
from evaluators.base import engine_name
from recommender.hardware.host import probe_host
from recommender.catalog.store import UserCatalog
from recommender.probes.accuracy import items as I, probe as P
from recommender.probes.perf import resolve_target, run_perf_probe
from recommender.probes.serve import parse_slo, run_serve_probe, ServeSettings
from recommender.core.redact import printable, redact
from recommender.cli.common import (check_seconds, emit_json, info, MAX_PROBE_TIMEOUT_S, open_catalog,
                                    stderr_console)
from rich.markup import escape

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
    timeout: float = typer.Option(600.0, "--timeout", min=5, max=MAX_PROBE_TIMEOUT_S,
                                 help="Seconds before the probe is killed."),
    save: bool = typer.Option(True, "--save/--no-save", help="Write the row to your catalog overlay."),
    as_json: bool = typer.Option(False, "--json", help="JSON on stdout."),
) -> None:
    """TTFT, TPOT, ITL, tok/s and peak memory, after warm-up, over repeats, in a child process."""


    eng = engine_name(engine)
    ctx = parse_tokens(context)
    if prompt_tokens + output_tokens > ctx:
        raise UserError(f"prompt {prompt_tokens} + output {output_tokens} tokens do not fit a {ctx}-token context",
                        hint="raise --context or lower --prompt-tokens / --output-tokens")
    catalog = open_catalog()
    target = resolve_target(model, eng, quant, synthetic, catalog, model_id)
    if trust_remote_code:
        target.extra["trust_remote_code"] = True

    what = (f"{target.model_id} {target.quant} on {eng}{' (synthetic weights)' if target.synthetic else ''}: "
            f"ctx {ctx}, batch {batch}, prompt {prompt_tokens}, output {output_tokens}, warm-up + {repeats} repeats")
    check_seconds(timeout, "--timeout")
    with stderr_console().status(escape(f"probing {what} (child process, timeout {timeout:.0f} s) ...")):
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


@app.command("serve")
def serve(
    url: str = typer.Option(..., "--url", help="The server's OpenAI base URL, e.g. http://127.0.0.1:8080/v1."),
    model: Optional[str] = typer.Option(None, "--model", help="The model name to request (default: the first one "
                                                               "the server lists)."),
    api: str = typer.Option("completions", "--api", help="completions (raw prompt, exact length) or chat."),
    prompt_tokens: int = typer.Option(256, "--prompt-tokens", min=1, help="Prompt length (tokens)."),
    output_tokens: int = typer.Option(64, "--output-tokens", min=2, help="Output length (tokens, max_tokens with "
                                                                         "ignore_eos where the server takes it)."),
    concurrency: str = typer.Option("1", "--concurrency", help="Concurrency levels to sweep, e.g. 1,2,4,8."),
    repeats: int = typer.Option(3, "--repeats", min=1, max=100, help="Requests per level = concurrency x repeats."),
    warmup: int = typer.Option(1, "--warmup", min=1, max=20, help="Warm-up requests before the sweep."),
    slo: Optional[str] = typer.Option(None, "--slo", help="Goodput SLOs in ms, e.g. ttft:800,tpot:50 (keys ttft, "
                                                          "tpot, e2el, as vLLM's --goodput)."),
    timeout: float = typer.Option(300.0, "--timeout", min=5, help="Seconds for the whole probe."),
    request_timeout: float = typer.Option(120.0, "--request-timeout", min=1, help="Seconds for one request."),
    max_requests: int = typer.Option(256, "--max-requests", min=1, help="Refuse a sweep that needs more requests."),
    model_id: Optional[str] = typer.Option(None, "--model-id", help="Catalog id to file the rows under (default: "
                                                                    "what the server reports)."),
    quant: Optional[str] = typer.Option(None, "--quant", "-q", help="Quantization (default: what the server "
                                                                    "reports)."),
    engine: Optional[str] = typer.Option(None, "--engine", "-e", help="Engine to file the rows under (default: "
                                                                       "from the server kind)."),
    context: Optional[str] = typer.Option(None, "--context", help="The server's context window (default: what it "
                                                                  "reports)."),
    kv_dtype: str = typer.Option("f16", "--kv-dtype", help="The server's KV cache dtype."),
    hardware: Optional[str] = typer.Option(None, "--hardware", help="Hardware name to file the rows under (needed "
                                                                    "for a server on another machine)."),
    device: str = typer.Option("auto", "--device", help="auto (this machine's GPU if it has one), gpu or cpu."),
    save: bool = typer.Option(True, "--save/--no-save", help="Write the rows to your catalog overlay."),
    as_json: bool = typer.Option(False, "--json", help="JSON on stdout."),
) -> None:
    """TTFT, TPOT, ITL, E2E, throughput and goodput of a running server, as vLLM's `bench serve` defines them."""
    if api not in ("completions", "chat"):
        raise UserError(f"--api {api!r} is not completions or chat", hint="use --api completions or --api chat")
    if device not in ("auto", "gpu", "cpu"):
        raise UserError(f"--device {device!r} is not auto, gpu or cpu", hint="use --device auto, gpu or cpu")
    try:
        levels = tuple(int(x) for x in concurrency.replace(" ", "").split(",") if x)
    except ValueError:
        levels = ()
    if not levels or any(c < 1 or c > 256 for c in levels):
        raise UserError(f"--concurrency {concurrency!r} is not a list of levels 1..256", hint="e.g. --concurrency 1,2,4")
    check_seconds(timeout, "--timeout")
    check_seconds(request_timeout, "--request-timeout")
    eng = engine_name(engine) if engine else None
    settings = ServeSettings(url=url, model=model, api=api, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                             concurrency=levels, repeats=repeats, warmup=warmup, slo_ms=parse_slo(slo),
                             timeout_s=timeout, request_timeout_s=request_timeout, max_requests=max_requests)
    catalog = open_catalog()
    with stderr_console().status(escape(printable(
            f"probing {redact(url)}: levels {', '.join(map(str, levels))}, {repeats} x level requests, prompt "
            f"{prompt_tokens}, output {output_tokens} (limit {timeout:.0f} s) ..."))):
        out = run_serve_probe(settings, catalog, model_id=model_id, quant=quant, engine=eng,
                              context_tokens=parse_tokens(context) if context else None, kv_dtype=kv_dtype,
                              hardware=hardware, device=device)
    catalog.close()
    for n in dict.fromkeys(out.notes + [n for r in out.rows for n in r.raw.get("notes", [])]):
        info(f"warning: {n}")
    if save and out.rows:
        with UserCatalog(user_catalog_path()) as w:
            w.put_measurements(out.rows)
    if as_json:
        emit_json({"server": {"url": redact(out.info.base_url), "kind": out.info.kind, "version": out.info.version,
                              "models": out.info.models}, "saved": save, "levels_skipped": out.levels_skipped,
                   "items": [r.model_dump(mode="json") for r in out.rows]})
    else:
        _print_serve(out)
    failed = [r for r in out.rows if r.status != "ok"]
    if out.levels_skipped or failed:
        if out.levels_skipped:
            info(f"error: the time limit stopped the sweep before level(s) {', '.join(map(str, out.levels_skipped))}")
            info("hint: raise --timeout, or lower --repeats / --output-tokens")
        else:
            info(f"error: every request of level {failed[0].batch} failed: {failed[0].failure_reason}")
            info("hint: check the server's log; the failed row was recorded")
        raise typer.Exit(1)


def _print_serve(out) -> None:
    i = out.info
    print(printable(f"{i.kind} {i.version} at {redact(i.base_url)}"))
    for m in out.rows:
        r = m.raw
        mt = r["metrics"]
        print(f"  {m.model_id} {m.quant} ({m.engine}) · concurrency {m.batch} · {mt['completed']} requests "
              f"({mt['failed']} failed) in {mt['duration_s']:.1f} s · prompt {m.prompt_tokens}, output "
              f"{m.output_tokens} tokens · {m.hardware_name}")
        if m.status != "ok":
            print(f"    failed: {printable(m.failure_reason or '')}")
            continue
        t, p, e = mt["ttft_ms"], mt["tpot_ms"], mt["e2el_ms"]
        print(f"    TTFT median {fmt_ms(t['median'])} (p99 {fmt_ms(t['p99'])}) · TPOT median "
              + (f"{fmt_ms(p['median'])} (p99 {fmt_ms(p['p99'])})" if p else "?")
              + f" · ITL median {fmt_ms(m.itl_ms_p50)} · E2E median {fmt_ms(e['median'])}")
        print(f"    output {mt['output_throughput_tokens_per_s']:.1f} tok/s · {mt['request_throughput_per_s']:.2f} req/s"
              + (f" · goodput {mt['request_goodput_per_s']:.2f} req/s ({mt['good_requests']} of {mt['completed']} "
                 f"within {', '.join(f'{k} {v:g} ms' for k, v in mt['slo_ms'].items())})"
                 if mt["request_goodput_per_s"] is not None else ""))
        st = r.get("server_timings")
        if st:
            print(f"    the server's own timings ({st['source']}): decode "
                  f"{fmt_ms(st['decode_ms_per_token_median'])}/token, prompt {fmt_ms(st['prompt_ms_median'])}")


@app.command("accuracy")
def accuracy(
    model: str = typer.Argument(..., help="A .gguf file (llama.cpp) or an HF model folder (hf / vllm)."),
    tasks: str = typer.Option("ceval,cmmlu,mmlu", "--tasks", help="Comma-separated: ceval, cmmlu, mmlu."),
    items: str = typer.Option("50", "--items", help="Items per task: 50, 150 (stratified subsets) or full."),
    shots: int = typer.Option(0, "--shots", help="Few-shot examples per question: 0 or 5."),
    baseline: Optional[str] = typer.Option(None, "--baseline",
                                           help="Another variant (file/folder, scored now) or a stored run id: "
                                                "paired difference on the same items."),
    engine: Optional[str] = typer.Option(None, "--engine", "-e", help="llama.cpp (GGUF), hf or vllm (HF folder)."),
    ppl: bool = typer.Option(True, "--ppl/--no-ppl", help="Also bits-per-byte / perplexity on the shipped texts."),
    kl_reference: Optional[str] = typer.Option(None, "--kl-reference",
                                               help="GGUF of the same model to measure KL-divergence against "
                                                    "(default: --baseline when it is a GGUF)."),
    data_dir: Optional[str] = typer.Option(None, "--data-dir", help="Raw benchmark CSVs, for --items full."),
    model_id: Optional[str] = typer.Option(None, "--model-id", help="Catalog id to file the rows under."),
    dtype: str = typer.Option("auto", "--dtype", help="hf / vllm weights dtype."),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, help="CPU threads (llama.cpp)."),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code",
                                           help="Let transformers run Python code shipped in the model folder "
                                                "(only for folders you trust)."),
    timeout: float = typer.Option(3600.0, "--timeout", min=5, max=MAX_PROBE_TIMEOUT_S,
                                 help="Seconds before a probe is killed."),
    save: bool = typer.Option(True, "--save/--no-save", help="Write the rows to your catalog overlay."),
    as_json: bool = typer.Option(False, "--json", help="JSON on stdout."),
) -> None:
    """Accuracy on fixed C-Eval / CMMLU / MMLU items with 95 % intervals, per subject; paired deltas; bits/byte."""
    from pathlib import Path  # noqa: PLC0415



    names = [t.strip().lower() for t in tasks.split(",") if t.strip()]
    bad = [t for t in names if t not in I.TASKS]
    if not names or bad:
        raise UserError(f"unknown task(s): {', '.join(bad) or '(none)'}", hint=f"--tasks takes {', '.join(I.TASKS)}")
    if shots not in (0, 5):
        raise UserError(f"--shots {shots} is not supported", hint="use --shots 0 or --shots 5")
    size = I.parse_items(items)
    ddir = Path(data_dir).expanduser() if data_dir else None
    files = {t: I.items_path(t, size, ddir) for t in names}
    catalog = open_catalog()
    target = P.resolve(model, engine, catalog, model_id)
    import importlib.util  # noqa: PLC0415

    for mod, extra in (("lm_eval", "eval"), *((("llama_cpp", "llama"),) if target.engine == "llama.cpp" else ())):
        if importlib.util.find_spec(mod) is None:
            raise UserError(f"{mod} is not installed (needed by accuracy probes on {target.engine})",
                            hint=f"pip install 'llm-recommender[{extra}]'")
    host = probe_host()
    texts = {lang: P.TEXT_DIR / f for lang, f in P.PPL_TEXTS.items()} if ppl else {}

    base_target = None
    base_rows = []
    if baseline:
        if Path(baseline).expanduser().exists():
            base_target = P.resolve(baseline, engine if engine else None, catalog, model_id or target.model_id)
        else:
            base_rows = [r for r in catalog.accuracy_rows(run_id=baseline) if r.status == "ok"]
            if not base_rows:
                raise UserError(f"--baseline {baseline!r} is neither a file nor a stored run id",
                                hint="give the other variant's file/folder, or a run_id from an earlier --json output")
            by_task = {r.task: r for r in base_rows}
            for t in names:  # refuse before scoring anything: a paired delta needs the very same items
                b = by_task.get(t)
                if b is None or b.items_sha256 != files[t][1]["sha256"] or b.shots != shots:
                    what = "not scored" if b is None else f"scored on {b.items_file}, {b.shots}-shot"
                    raise UserError(f"baseline run {baseline} has {t} {what}; this run would score "
                                    f"{files[t][1]['file']}, {shots}-shot",
                                    hint="paired deltas need identical items: use the baseline's --tasks, --items "
                                         "and --shots")
    kl_ref = kl_reference or (baseline if base_target is not None and base_target.engine == "llama.cpp"
                              and target.engine == "llama.cpp" else None)
    if kl_ref and not Path(kl_ref).expanduser().is_file():
        raise UserError(f"--kl-reference {kl_ref} is not a file", hint="give a GGUF of the same model")

    def job_for(t, kl: Optional[str]) -> AccuracyJob:
        return P.make_job(t, {k: v[0] for k, v in files.items()}, shots, threads=threads, dtype=dtype,
                          trust_remote_code=trust_remote_code, ppl_texts={k: str(v) for k, v in texts.items()},
                          kl_reference=str(Path(kl).expanduser()) if kl else None)

    def settings(job: AccuracyJob) -> dict:
        return {"shots": shots, "items": size, "n_ctx": job.n_ctx, "threads": job.threads, "dtype": job.dtype,
                "trust_remote_code": job.trust_remote_code, "lm_eval_tasks": "evaluators/lm_tasks.py"}

    import uuid  # noqa: PLC0415

    all_acc, all_ppl = [], []
    if base_target is not None:
        info(f"baseline: {base_target.path.name} ({base_target.model_id} {base_target.quant}, {base_target.engine})")
        bjob = job_for(base_target, None)
        bres = P.run_job(bjob, timeout)
        brun = uuid.uuid4().hex[:12]
        base_rows = P.accuracy_rows(base_target, {k: v[1] for k, v in files.items()}, shots, bres, host, brun,
                                    settings(bjob))
        all_acc += base_rows
        all_ppl += P.perplexity_rows(base_target, texts, bres, host, brun, None)
    info(f"scoring {target.path.name} ({target.model_id} {target.quant}, {target.engine}): {', '.join(names)}, "
         f"--items {size}, {shots}-shot")
    job = job_for(target, kl_ref)
    res = P.run_job(job, timeout)
    run_id = uuid.uuid4().hex[:12]
    rows = P.accuracy_rows(target, {k: v[1] for k, v in files.items()}, shots, res, host, run_id, settings(job))
    prow = P.perplexity_rows(target, texts, res, host, run_id,
                             Path(kl_ref).name if kl_ref else None)
    all_acc += rows
    all_ppl += prow
    paired = P.compare(base_rows, rows) if base_rows else {}
    catalog.close()  # the overlay is attached read-only to this connection: release it before writing
    if save:
        with UserCatalog(user_catalog_path()) as w:
            w.put_scores_measured(all_acc, all_ppl)
    out = {"run_id": run_id, "model_id": target.model_id, "quant": target.quant, "variant": target.path.name,
           "engine": target.engine, "items": size, "shots": shots, "saved": save,
           "tasks": [_acc_json(r) for r in rows], "perplexity": [_ppl_json(r) for r in prow], "paired": paired}
    if base_rows:
        out["baseline"] = {"run_id": base_rows[0].run_id, "variant": base_rows[0].variant,
                           "tasks": [_acc_json(r) for r in base_rows]}
    if as_json:
        emit_json(out)
    else:
        _print_accuracy(out)
    for r in rows:
        for msg in r.raw.get("flag_messages", []):
            info(f"warning: {r.task}: {msg}")
    failed = [r for r in rows if r.status != "ok"]
    if failed or (not rows and res.status != "ok"):
        info(f"error: probe failed: {failed[0].failure_reason if failed else res.failure_reason}")
        info("hint: the failed rows were recorded; check the model file, or raise --timeout")
        raise typer.Exit(1)


def _acc_json(r) -> dict:
    return {"task": r.task, "status": r.status, "n": r.n, "correct": r.correct, "accuracy": r.accuracy,
            "ci95": [r.ci_low, r.ci_high] if r.ci_low is not None else None, "chance": r.chance, "flags": r.flags,
            "flag_messages": r.raw.get("flag_messages", []), "items_file": r.items_file,
            "items_sha256": r.items_sha256, "shots": r.shots, "engine_version": r.engine_version,
            "per_subject": r.per_subject, "failure_reason": r.failure_reason, "provenance": r.provenance,
            "hardware": r.hardware_name, "measured_at": r.measured_at}


def _ppl_json(r) -> dict:
    return {"language": r.language, "text_file": r.text_file, "tokens": r.tokens, "bytes": r.bytes,
            "bits_per_byte": r.bits_per_byte, "perplexity": r.perplexity, "kl_reference": r.kl_reference,
            "kl_mean_nats": r.kl_mean, "kl_p99_nats": r.kl_p99, "top1_agreement": r.top1_agreement,
            "status": r.status, "failure_reason": r.failure_reason}


def _pct(x) -> str:
    return "?" if x is None else f"{100 * x:.1f}"


def _print_accuracy(out: dict) -> None:
    print(f"{out['model_id']} {out['quant']} ({out['variant']}) on {out['engine']} · --items {out['items']} · "
          f"{out['shots']}-shot · run {out['run_id']}")
    for t in out["tasks"]:
        if t["status"] != "ok":
            print(f"  {t['task']:6s} failed: {t['failure_reason']}")
            continue
        ci = t["ci95"]
        subj = len(t["per_subject"])
        print(f"  {t['task']:6s} {_pct(t['accuracy'])} %ᵐ  95 % CI [{_pct(ci[0])}, {_pct(ci[1])}]  "
              f"n={t['n']} ({subj} subjects)  chance {_pct(t['chance'])} %"
              + (f"  flags: {', '.join(t['flags'])}" if t["flags"] else ""))
    for p in out["perplexity"]:
        if p["status"] == "ok":
            kl = f"  KL vs {p['kl_reference']} {p['kl_mean_nats']:.4f} nats/token" if p["kl_mean_nats"] is not None else ""
            print(f"  text {p['language']}: {p['bits_per_byte']:.3f} bits/byte · perplexity {p['perplexity']:.2f} "
                  f"({p['tokens']} tokens, {p['bytes']} bytes){kl}")
    for task, d in out.get("paired", {}).items():
        print(f"  Δ {task} vs {d['baseline']}: {100 * d['delta']:+.1f} points  95 % CI "
              f"[{100 * d['ci_low']:+.1f}, {100 * d['ci_high']:+.1f}]  flips {d['baseline_only_right']}→wrong, "
              f"{d['other_only_right']}→right of n={d['n']}  McNemar p={d['mcnemar_p']:.2f}")
