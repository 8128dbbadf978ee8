"""llama.cpp through llama-cpp-python's low-level API, in-process.

Batch B means B sequences submitted together, as llama.cpp's server batches concurrent requests: one context with
``n_seq_max = B`` and ``n_ctx = B x context``; the prompts are prefilled in shared micro-batches, then every decode
step evaluates one token of each sequence in one ``llama_decode`` call. Sampling is greedy (argmax of the logits),
and generation runs to exactly ``output_tokens`` tokens (an end-of-sequence token does not stop it), so every repeat
does the same work.
"""

from __future__ import annotations

import ctypes
import os
import random
import re
import time


from evaluators.base import EngineInfo, LoadSettings, RequestShape, RunTiming

# ggml_type ids for the KV cache (ggml.h: GGML_TYPE_F16 = 1, GGML_TYPE_Q4_0 = 2, GGML_TYPE_Q8_0 = 8)
KV_TYPES = {"f16": 1, "q4_0": 2, "q8_0": 8}
N_BATCH = 2048  # logical batch (llama.cpp default n_batch)
N_UBATCH = 512  # physical micro-batch (llama.cpp default n_ubatch)
ALL_LAYERS = 999  # n_gpu_layers meaning "every layer" (llama.cpp's -ngl 99 convention, with headroom)

# llama.cpp keeps only the C pointer of the log callback, process-wide, and calls it from every later load in the
# process. The ctypes callback must therefore live as long as the process, not as long as an engine: a callback
# freed with its engine (it was an attribute closing over the engine, so a garbage cycle freed at a random later
# time) made the next llama.cpp load anywhere in the process jump into freed memory (SIGSEGV in libffi).
_LOG_CB = None
_LOG_SINK: "list[str] | None" = None  # the loaded engine's log list


def _log_callback(L):
    """The one log callback of this module, made on first use and never freed."""
    global _LOG_CB  # noqa: PLW0603
    if _LOG_CB is None:

        @L.llama_log_callback
        def _cb(level, text, user_data):  # noqa: ARG001
            try:
                sink = _LOG_SINK
                if sink is not None:
                    sink.append(text.decode("utf-8", "replace"))
            except Exception:  # noqa: BLE001 - never raise into C
                pass

        _LOG_CB = _cb
    return _LOG_CB
_BUFFER_RE = re.compile(r"(?P<dev>[\w.]+)\s+(?P<kind>model|KV|compute|output)\s+buffer size =\s+(?P<mib>[\d.]+) MiB")


class LlamaCppEngine:
    name = "llama.cpp"
    extra = "llama"

    def __init__(self) -> None:
        import llama_cpp  # noqa: PLC0415  (ImportError -> the registry's install hint)

        self.L = llama_cpp
        self.model = None
        self.ctx = None
        self.log: list[str] = []

    # ---------------------------------------------------------------------------------------------------------
    def _capture_logs(self) -> None:
        global _LOG_SINK  # noqa: PLW0603
        _LOG_SINK = self.log
        self.L.llama_log_set(_log_callback(self.L), ctypes.c_void_p())

    def _release_logs(self) -> None:
        """Give llama.cpp's log back to llama-cpp-python's own logger (kept alive by its module)."""
        global _LOG_SINK  # noqa: PLW0603
        if _LOG_SINK is self.log:
            _LOG_SINK = None
            from llama_cpp import _logger  # noqa: PLC0415

            self.L.llama_log_set(_logger.llama_log_callback, ctypes.c_void_p())

    def load(self, s: LoadSettings) -> EngineInfo:
        L = self.L
        self._capture_logs()
        L.llama_backend_init()
        mp = L.llama_model_default_params()
        mp.n_gpu_layers = ALL_LAYERS if s.gpu_layers < 0 else s.gpu_layers
        # llama.cpp's extra CPU buffer types (AMX weight repacking) crash llama_decode on CPUs that advertise AMX
        # without the kernel granting it (seen on this project's development machines): off unless asked for.
        mp.use_extra_bufts = bool(s.extra.get("use_extra_bufts", False))
        self.model = L.llama_model_load_from_file(s.model_path.encode(), mp)
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {s.model_path}: {self._last_log()}")
        cp = L.llama_context_default_params()
        cp.n_ctx = s.context_tokens * s.batch
        cp.n_batch = N_BATCH
        cp.n_ubatch = N_UBATCH
        cp.n_seq_max = s.batch
        if s.kv_dtype not in KV_TYPES:
            raise ValueError(f"KV dtype {s.kv_dtype} not supported by llama.cpp (use {', '.join(KV_TYPES)})")
        cp.type_k = cp.type_v = KV_TYPES[s.kv_dtype]
        # sliding-window layers keep only their window, as llama-server does (llama_context_default_params() of
        # llama-cpp-python 0.3.36 says swa_full=true, a full-size cache on every layer)
        cp.swa_full = bool(s.extra.get("swa_full", False))
        threads = s.threads or os.cpu_count() or 1
        cp.n_threads = cp.n_threads_batch = threads
        self.ctx = L.llama_init_from_model(self.model, cp)
        if not self.ctx:
            raise RuntimeError(f"llama.cpp could not create a context of {cp.n_ctx} tokens: {self._last_log()}")
        vocab = L.llama_model_get_vocab(self.model)
        self.n_vocab = L.llama_vocab_n_tokens(vocab)
        self.settings = s
        offload = bool(L.llama_supports_gpu_offload()) and mp.n_gpu_layers > 0
        buffers: dict[str, float] = {}
        for line in self.log:
            m = _BUFFER_RE.search(line)
            if m:
                key = f"{m['dev']} {m['kind']}"
                buffers[key] = buffers.get(key, 0.0) + float(m["mib"])
        return EngineInfo(name=self.name, version=getattr(L, "__version__", "unknown"),
                          backend="cuda" if offload else "cpu",
                          details={"n_ctx": L.llama_n_ctx(self.ctx), "n_batch": N_BATCH, "n_ubatch": N_UBATCH,
                                   "n_seq_max": s.batch, "n_threads": threads, "n_gpu_layers": mp.n_gpu_layers,
                                   "use_extra_bufts": bool(mp.use_extra_bufts), "swa_full": bool(cp.swa_full),
                                   "model_size_bytes": int(L.llama_model_size(self.model)),
                                   "reported_buffers_mib": buffers,
                                   "system_info": L.llama_print_system_info().decode(errors="replace")})

    def _last_log(self) -> str:
        lines = [ln.strip() for ln in self.log if ln.strip()]
        return lines[-1] if lines else "no message"

    # ---------------------------------------------------------------------------------------------------------
    def _argmax(self, i: int) -> int:
        ptr = self.L.llama_get_logits_ith(self.ctx, i)
        row = (ctypes.c_float * self.n_vocab).from_address(ctypes.addressof(ptr.contents))
        import numpy as np  # noqa: PLC0415

        return int(np.frombuffer(row, dtype=np.float32).argmax())

    def _decode(self, batch, items: list[tuple[int, int, int, bool]]) -> None:
        """items: (token, position, sequence, wants logits)."""
        L = self.L
        batch.n_tokens = len(items)
        for i, (tok, pos, seq, logits) in enumerate(items):
            batch.token[i] = tok
            batch.pos[i] = pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq
            batch.logits[i] = 1 if logits else 0
        rc = L.llama_decode(self.ctx, batch)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc} (context full or out of memory): {self._last_log()}")

    def measure(self, shape: RequestShape) -> RunTiming:
        L = self.L
        B, P, N = shape.batch, shape.prompt_tokens, shape.output_tokens
        if B > self.settings.batch:
            raise ValueError(f"batch {B} exceeds the loaded n_seq_max {self.settings.batch}")
        if P + N > self.settings.context_tokens:
            raise ValueError(f"prompt {P} + output {N} tokens exceed the context of {self.settings.context_tokens}")
        L.llama_memory_clear(L.llama_get_memory(self.ctx), True)
        rng = random.Random(shape.seed)
        lo = min(100, self.n_vocab - 1)  # keep clear of special tokens at the start of most vocabularies
        prompts = [[rng.randrange(lo, self.n_vocab) for _ in range(P)] for _ in range(B)]
        batch = L.llama_batch_init(max(N_BATCH, B), 0, B)
        try:
            t0 = time.perf_counter()
            # prefill: every prompt token but each sequence's last, in micro-batches of up to N_BATCH tokens ...
            pending = [(tok, pos, s, False) for s in range(B) for pos, tok in enumerate(prompts[s][:-1])]
            for i in range(0, len(pending), N_BATCH):
                self._decode(batch, pending[i:i + N_BATCH])
            # ... then the last prompt token of every sequence together, with logits -> the first output token
            self._decode(batch, [(prompts[s][-1], P - 1, s, True) for s in range(B)])
            tokens = [self._argmax(s) for s in range(B)]
            now = (time.perf_counter() - t0) * 1e3
            times = [[now] for _ in range(B)]
            for step in range(1, N):
                self._decode(batch, [(tokens[s], P - 1 + step, s, True) for s in range(B)])
                tokens = [self._argmax(s) for s in range(B)]
                now = (time.perf_counter() - t0) * 1e3
                for s in range(B):
                    times[s].append(now)
        finally:
            L.llama_batch_free(batch)
        return RunTiming(token_times_ms=times)

    def unload(self) -> None:
        L = self.L
        if self.ctx:
            L.llama_free(self.ctx)
            self.ctx = None
        if self.model:
            L.llama_model_free(self.model)
            self.model = None
        self._release_logs()
