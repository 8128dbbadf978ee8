"""vLLM through its offline ``LLM`` API.

The KV cache is capped explicitly (``kv_cache_memory_bytes``; on CPU, ``VLLM_CPU_KVCACHE_SPACE``) to what the
configuration needs, so the peak memory measured is the model's need and not vLLM's up-front reservation of
``gpu_memory_utilization`` of the device; vLLM's own KV size (blocks x block size) is recorded with the row.

The offline API returns whole requests, not token streams: TTFT and the decode span come from vLLM's own per-request
stats (``RequestOutput.metrics``: ``first_token_latency``, ``first_token_ts``, ``last_token_ts``; stats logging is
turned on for this), and TPOT = (E2E - TTFT)/(n_out - 1). Where a vLLM build gives no such stats, TTFT falls back to
the end-to-end time of the same requests with ``max_tokens=1``. ITL percentiles are not available for this engine. Generation ignores end-of-sequence tokens and always produces
``output_tokens`` tokens.
"""

from __future__ import annotations

import os
import random
import time


from evaluators.base import EngineInfo, LoadSettings, RequestShape, RunTiming

BYTES_PER_GIB = 1024**3
KV_HEADROOM = 1.25  # room above the computed cache for block rounding and the scheduler's watermark


class VllmEngine:
    name = "vllm"
    extra = "vllm"

    def __init__(self) -> None:
        import vllm  # noqa: PLC0415

        self.vllm = vllm
        self.llm = None

    def load(self, s: LoadSettings) -> EngineInfo:
        from vllm import LLM  # noqa: PLC0415

        kv_bytes = int(s.extra.get("kv_cache_bytes", 0) * KV_HEADROOM) or None
        on_cpu = s.extra.get("device") == "cpu" or not _has_cuda()
        kwargs = dict(model=s.model_path, max_model_len=s.context_tokens, max_num_seqs=max(s.batch, 1),
                      dtype=str(s.extra.get("dtype", "auto")), trust_remote_code=bool(s.extra.get("trust_remote_code")),
                      seed=0, enforce_eager=bool(s.extra.get("enforce_eager", on_cpu)),
                      enable_prefix_caching=False,  # repeats reuse prompts: a cache hit would skip the prefill
                      skip_tokenizer_init=True,  # probes feed token ids: a folder needs no tokenizer
                      disable_log_stats=False)  # per-request timing stats (first/last token)
        if s.kv_dtype in {"fp8", "fp8_e4m3", "fp8_e5m2"}:
            kwargs["kv_cache_dtype"] = s.kv_dtype
        if on_cpu:
            gib = max(1, -(-(kv_bytes or BYTES_PER_GIB) // BYTES_PER_GIB))
            os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(gib)
        elif kv_bytes:
            kwargs["kv_cache_memory_bytes"] = kv_bytes
        self.llm = LLM(**kwargs)
        self.settings = s
        cache = self.llm.llm_engine.vllm_config.cache_config
        blocks = getattr(cache, "num_gpu_blocks", None) or getattr(cache, "num_cpu_blocks", None)
        self.n_vocab = self.llm.llm_engine.model_config.get_vocab_size()
        return EngineInfo(name=self.name, version=self.vllm.__version__, backend="cpu" if on_cpu else "cuda",
                          details={"kv_blocks": blocks, "block_size": cache.block_size,
                                   "kv_tokens": blocks * cache.block_size if blocks else None,
                                   "kv_cache_memory_bytes": kwargs.get("kv_cache_memory_bytes"),
                                   "cpu_kvcache_space_gib": os.environ.get("VLLM_CPU_KVCACHE_SPACE") if on_cpu
                                   else None, **{k: v for k, v in kwargs.items() if k != "model"}})

    def _run(self, prompts, n: int):
        from vllm import SamplingParams  # noqa: PLC0415

        params = SamplingParams(max_tokens=n, min_tokens=n, temperature=0.0, ignore_eos=True, detokenize=False)
        t0 = time.perf_counter()
        outs = self.llm.generate(prompts, params, use_tqdm=False)
        dt = (time.perf_counter() - t0) * 1e3
        got = [len(o.outputs[0].token_ids) for o in outs]
        if any(g != n for g in got):
            raise RuntimeError(f"vLLM produced {got} tokens, {n} were asked for")
        return dt, outs

    def measure(self, shape: RequestShape) -> RunTiming:
        B, P, N = shape.batch, shape.prompt_tokens, shape.output_tokens
        rng = random.Random(shape.seed)
        lo = min(100, self.n_vocab - 1)
        prompts = [{"prompt_token_ids": [rng.randrange(lo, self.n_vocab) for _ in range(P)]} for _ in range(B)]
        e2e, outs = self._run(prompts, N)
        stats = [getattr(o, "metrics", None) for o in outs]
        if all(getattr(st, "first_token_latency", None) for st in stats):
            times = []
            for st in stats:  # per request: TTFT from vLLM, then its own first->last token span
                ttft = st.first_token_latency * 1e3
                times.append([ttft, ttft + (st.last_token_ts - st.first_token_ts) * 1e3])
        else:
            ttft, _ = self._run(prompts, 1)
            times = [[ttft, e2e] for _ in range(B)]
        return RunTiming(token_times_ms=times, n_tokens=[N] * B)

    def unload(self) -> None:
        self.llm = None


def _has_cuda() -> bool:
    try:
        import torch  # noqa: PLC0415

        return bool(torch.cuda.is_available())
    except ImportError:
        return False
