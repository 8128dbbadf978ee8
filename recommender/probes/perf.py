"""`probe perf`: resolve what to run, run it in a child process, and turn the result into a Measurement row."""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional


from recommender.core.errors import UserError
from recommender.core.paths import cache_root, SOURCES_DIR
from recommender.core.records import Measurement, ModelSpec
from evaluators.base import LoadSettings, RequestShape
from evaluators.runner import ProbeJob, run_probe
from recommender.model.arch import spec_from_config, spec_from_gguf
from recommender.model.quant import gguf_file_quant, QUANTS, resolve_quant
from recommender.hardware.host import probe_host
from recommender.predict.analytical import kv_cache_bytes
from recommender.predict.predictor import Predictor
from recommender.catalog.ingest import quant_of_config, read_config
from recommender.catalog.store import Catalog
from recommender.probes.synthetic import build_synthetic_hf_folder, cached_synthetic_gguf, find_vocab_gguf

ARCH_FIELDS = ("hidden_size", "num_layers", "num_attention_heads", "num_kv_heads", "head_dim", "intermediate_size",
               "vocab_size", "num_experts", "moe_intermediate_size")


def synthetic_cache_dir() -> Path:
    return cache_root() / "synthetic"


def match_catalog_model(spec: ModelSpec, catalog: Catalog) -> Optional[str]:
    """The catalog model with exactly this architecture (a GGUF of a known model), preferring a name match."""
    same = [m for m in catalog.models().values() if all(getattr(m, f) == getattr(spec, f) for f in ARCH_FIELDS)]
    if not same:
        return None
    name = spec.id.lower().replace(" ", "-")
    same.sort(key=lambda m: (m.name.lower() not in name, m.id))
    return same[0].id


class ProbeTarget:
    """What a probe runs: a model file, the catalog model it measures, its quantization, and whether it is synthetic.
    ``extra`` goes to the engine's load settings (e.g. the HF config of a synthetic transformers model)."""

    def __init__(self, path: Path | str, model_id: str, quant: str, synthetic: bool, spec: ModelSpec,
                 extra: Optional[dict] = None) -> None:
        self.path, self.model_id, self.quant, self.synthetic, self.spec = path, model_id, quant, synthetic, spec
        self.extra = extra or {}

    def file_bytes(self) -> Optional[int]:
        p = Path(self.path)
        if p.is_file():
            return p.stat().st_size
        if p.is_dir():
            return sum(f.stat().st_size for f in p.glob("*.safetensors"))
        return None


def hf_config_for(spec: ModelSpec) -> dict:
    """The model's config.json: the shipped source file, or the file a user added it from."""
    import json  # noqa: PLC0415


    for p in (SOURCES_DIR / "configs" / (spec.id.replace("/", "__") + ".json"), Path(spec.source)):
        if p.suffix == ".json" and p.is_file():
            return json.loads(p.read_text(encoding="utf-8"))
    raise UserError(f"no config.json known for {spec.id}",
                    hint="add the model with `recommender catalog add path/to/config.json` first")


def synthetic_transformers_target(spec: ModelSpec, quant: str) -> ProbeTarget:
    """A random-weight transformers model with spec's exact architecture, built by the engine on its device."""
    return ProbeTarget(f"synthetic:{spec.id}", spec.id, quant, synthetic=True, spec=spec,
                       extra={"hf_config": hf_config_for(spec), "dtype": quant.lower()})


def _looks_like_path(text: str) -> bool:
    """A path the user meant as a file ('./m.gguf', '~/models/x', 'x.gguf'), not a catalog id such as 'Qwen/Qwen3-8B'."""
    return text.startswith(("/", ".", "~")) or Path(text).suffix.lower() in (".gguf", ".json", ".safetensors")


def resolve_target(model_or_file: str, engine: str, quant: Optional[str], synthetic: bool, catalog: Catalog,
                   model_id: Optional[str] = None) -> ProbeTarget:
    """A .gguf file (llama.cpp) or an HF folder (transformers), validated before any engine starts, or a catalog
    model with --synthetic."""

    path = Path(model_or_file).expanduser()
    if path.exists():
        if engine in ("transformers", "vllm"):

            if not (path.is_dir() and (path / "config.json").is_file() and any(path.glob("*.safetensors"))):
                raise UserError(f"{path} is not a model folder with config.json and *.safetensors",
                                hint=f"{engine} probes take an HF folder (weights as safetensors, never pickles)")
            config = read_config(path / "config.json")
            spec = spec_from_config(config, model_id=model_id or f"local/{path.name}", source=str(path))
            mid = model_id or match_catalog_model(spec, catalog) or spec.id
            return ProbeTarget(path, mid, quant_of_config(config), synthetic=False, spec=spec)
        if engine != "llama.cpp":
            raise UserError(f"probing a model file with {engine} is not supported yet",
                            hint="use --engine llama.cpp with a .gguf file, or a catalog model with --synthetic")
        if path.suffix.lower() != ".gguf" or not path.is_file():
            raise UserError(f"{path} is not a .gguf file", hint="llama.cpp probes take a GGUF model file")

        spec, info = spec_from_gguf(path)  # raises UserError on a malformed or truncated file
        fq = gguf_file_quant(info)
        if quant and resolve_quant(quant) != fq:
            raise UserError(f"{path.name} is {fq}, not {resolve_quant(quant)}", hint="drop --quant for a file")
        mid = model_id or match_catalog_model(spec, catalog) or spec.id
        return ProbeTarget(path, mid, fq, synthetic=False, spec=spec)
    try:
        spec = catalog.resolve_model(model_or_file)
    except UserError:
        if _looks_like_path(model_or_file):
            raise UserError(f"no such file or folder: {model_or_file}",
                            hint="give the path of a .gguf file or an HF model folder on this machine, or a catalog "
                                 "model with --synthetic") from None
        raise
    if not synthetic:
        raise UserError(f"{model_or_file!r} is a catalog model, not a file on this machine",
                        hint="give the model's .gguf file or HF folder, or add --synthetic to measure a random-weight "
                             "model with its exact architecture")
    q = resolve_quant(quant or ("Q4_K_M" if engine == "llama.cpp" else "BF16"))
    if engine not in QUANTS[q].engines:
        raise UserError(f"{q} does not run on {engine}", hint=f"{q} runs on: {', '.join(QUANTS[q].engines)}")
    if engine == "transformers":
        if QUANTS[q].family != "float":
            raise UserError(f"synthetic {q} models for transformers are not supported", hint="use --quant BF16 or F16")
        return synthetic_transformers_target(spec, q)
    if engine == "vllm":
        if QUANTS[q].family != "float":
            raise UserError(f"synthetic {q} models for vLLM are not supported", hint="use --quant BF16 or F16")

        dtype = {"BF16": "bfloat16", "F16": "float16"}[q]
        folder = build_synthetic_hf_folder(hf_config_for(spec), dtype,
                                           synthetic_cache_dir() / f"{spec.id.replace('/', '__')}-{q}-hf")
        return ProbeTarget(folder, spec.id, q, synthetic=True, spec=spec, extra={"dtype": dtype})

    out = cached_synthetic_gguf(spec, q, synthetic_cache_dir(), vocab_gguf=find_vocab_gguf(spec))
    return ProbeTarget(Path(out), spec.id, q, synthetic=True, spec=spec)


def measurement_from_result(target: ProbeTarget, job, result, host) -> Measurement:
    """One catalog row from a probe result (ok or failed), with the hardware and every setting."""
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    info = result.engine or {}
    backend = info.get("backend", "cpu")
    gpu = host.gpus[job.gpu_index] if host.gpus and backend == "cuda" else None
    hw_name = gpu.name if gpu else host.cpu.model
    s = result.summary

    def med(key: str) -> Optional[float]:
        return s.get(key, {}).get("median") if isinstance(s.get(key), dict) else None

    key = "|".join(str(x) for x in (host.fingerprint, job.engine, info.get("version"), target.model_id, target.quant,
                                    job.load.batch, job.load.context_tokens, job.shape.prompt_tokens,
                                    job.shape.output_tokens, job.load.kv_dtype, now,
                                    uuid.uuid4().hex))  # random part: two probes in one second are two rows
    row = Measurement(
        id=hashlib.sha256(key.encode()).hexdigest()[:16],
        hardware_fingerprint=host.fingerprint, hardware_name=hw_name, engine=job.engine,
        engine_version=str(info.get("version", "unknown")), model_id=target.model_id, quant=target.quant,
        batch=job.shape.batch, context_tokens=job.load.context_tokens, prompt_tokens=job.shape.prompt_tokens,
        output_tokens=job.shape.output_tokens, kv_dtype=job.load.kv_dtype, gpu_layers=job.load.gpu_layers,
        ttft_ms=med("ttft_ms"), tpot_ms=med("tpot_ms"), itl_ms_p50=med("itl_ms_p50"),
        decode_tokens_per_s=med("decode_tokens_per_s"), prefill_tokens_per_s=med("prefill_tokens_per_s"),
        throughput_tokens_per_s=med("throughput_tokens_per_s"),
        peak_vram_bytes=result.peak_gpu_used_bytes if gpu else None, peak_rss_bytes=result.peak_rss_bytes,
        raw={"repeats": result.repeats, "summary": s, "engine": info, "warmup": job.warmup,
             "model_file": str(target.path), "model_file_bytes": target.file_bytes(),
             "gpu": gpu.model_dump() if gpu else None, "cpu": host.cpu.model_dump(),
             "gpu_baseline_bytes": result.gpu_baseline_bytes, "wall_s": result.wall_s,
             "seed": job.shape.seed},
        status=result.status, failure_reason=result.failure_reason, synthetic=target.synthetic,
        provenance="measured", measured_at=now)
    if row.status == "ok" and (problems := row.problems):  # an engine that reported impossible figures
        row = row.model_copy(update={"status": "failed", "failure_reason": "impossible figures: "
                                     + "; ".join(problems)[:280]})
    return row


def run_perf_probe(target: ProbeTarget, engine: str, *, context_tokens: int, batch: int, prompt_tokens: int,
                   output_tokens: int, repeats: int = 3, kv_dtype: str = "f16", gpu_layers: int = -1,
                   threads: Optional[int] = None, timeout_s: float = 600.0, host=None) -> Measurement:
    """Run one performance probe in a child process (evaluators.runner) and turn it into a catalog row (ok or
    failed). The caller decides where the row goes."""


    if engine == "vllm":  # cap vLLM's KV cache at what this configuration needs (see evaluators/vllm_engine.py)

        target.extra["kv_cache_bytes"] = kv_cache_bytes(target.spec, context_tokens, batch, "vllm", "bf16")
    job = ProbeJob(engine=engine, load=LoadSettings(model_path=str(target.path), context_tokens=context_tokens,
                                                    batch=batch, kv_dtype=kv_dtype, gpu_layers=gpu_layers,
                                                    threads=threads, extra=target.extra),
                   shape=RequestShape(prompt_tokens=prompt_tokens, output_tokens=output_tokens, batch=batch),
                   repeats=repeats)
    result = run_probe(job, timeout_s=timeout_s)
    return measurement_from_result(target, job, result, host or probe_host())


def bandwidth_share(m: Measurement, spec: ModelSpec, profile) -> Optional[float]:
    """Measured decode speed as a fraction of the memory-bandwidth limit: bytes read per decode step (weights the
    step touches + the KV cache of every sequence, recommender.predict) x steps per second / bandwidth."""
    if m.status != "ok" or not m.decode_tokens_per_s or profile is None or not profile.memory_bandwidth_bytes_per_s:
        return None

    try:  # the row's own configuration, its KV dtype included (a q8_0 cache reads half the KV bytes of f16)
        e = Predictor(profile).for_measurement(spec, m)
    except (KeyError, ValueError):
        return None
    return e.decode_bytes_per_step * m.decode_tokens_per_s / profile.memory_bandwidth_bytes_per_s
