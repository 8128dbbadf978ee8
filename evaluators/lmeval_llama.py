"""An in-process lm-eval ``LM`` for llama.cpp (llama-cpp-python's low-level API): log-likelihoods from the model's
own logits.

Why not lm-eval's ``gguf`` backend: it talks to a llama-server over HTTP and reads top-k ``logprobs`` of a
completion; with lm-eval 0.4.13 that path fails or scores at chance (the server does not echo prompt log-probs).
Here every continuation token's log-probability is ``log_softmax(logits)[token]`` at the position before it,
computed in float64 from the full vocabulary row llama.cpp returns.

- Model loading reuses :class:`evaluators.llama_cpp.LlamaCppEngine` (its settings include turning llama.cpp's extra
  CPU buffer types off: AMX repacking crashes llama_decode on CPUs that advertise AMX without the kernel granting it).
- The KV cache is reused between requests that share a prefix (the four options of a question share the prompt):
  requests are sorted by token sequence, the cache is cut back to the common prefix (``llama_memory_seq_rm``) and
  only the rest is decoded. The last context token is always re-decoded, because its logits are needed.
- Inputs longer than the context are truncated from the left, as lm-eval's HF backend does.
- ``loglikelihood_rolling`` (perplexity) uses lm-eval's own rolling windows (``get_rolling_token_windows``) with
  the window = the context size and the BOS/EOS token as the first window's prefix.
- ``generate_until`` is not implemented: the accuracy probes are multiple-choice log-likelihood tasks only.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from typing import Callable, Optional

import numpy as np
from lm_eval.api.model import TemplateLM


from recommender.core.gguf_header import read_header
from evaluators.base import LoadSettings
from evaluators.llama_cpp import LlamaCppEngine, N_BATCH

DEFAULT_N_CTX = 4096  # tokens; capped by the model's training context


def default_threads() -> int:
    """Half the cores (at least one). llama.cpp's worker threads spin at barriers: when anything else runs on the
    machine, a thread per core stalls every step. Measured on this project's shared 2-core machine, 10 C-Eval
    questions took 102.7 s with 2 threads and 10.0 s with 1 (another process busy on one core)."""
    return max(1, (os.cpu_count() or 2) // 2)


def log_softmax(row: np.ndarray) -> np.ndarray:
    x = row.astype(np.float64)
    m = x.max()
    return x - m - np.log(np.exp(x - m).sum())


class LlamaCppLM(TemplateLM):
    """lm-eval model backed by a GGUF file. ``progress(done, total)`` is called as requests finish."""

    def __init__(self, model_path: str, n_ctx: int = DEFAULT_N_CTX, threads: Optional[int] = None,
                 gpu_layers: int = -1, progress: Optional[Callable[[int, int], None]] = None) -> None:
        super().__init__()
        self.engine = LlamaCppEngine()
        L = self.L = self.engine.L
        probe = self._n_ctx_train(model_path)
        self.n_ctx = min(n_ctx, probe) if probe else n_ctx
        self.info = self.engine.load(LoadSettings(model_path=model_path, context_tokens=self.n_ctx, batch=1,
                                                  kv_dtype="f16", gpu_layers=gpu_layers,
                                                  threads=threads or default_threads()))
        self.ctx = self.engine.ctx
        self.vocab = L.llama_model_get_vocab(self.engine.model)
        self.n_vocab = self.engine.n_vocab
        self.add_bos = bool(L.llama_vocab_get_add_bos(self.vocab))
        self._bos = L.llama_vocab_bos(self.vocab)
        self._eos = L.llama_vocab_eos(self.vocab)
        self._cached: list[int] = []  # tokens whose KV entries are in sequence 0
        self.progress = progress
        self.decoded_tokens = 0

    def _n_ctx_train(self, path: str) -> Optional[int]:
        """``<arch>.context_length`` of the GGUF header (recommender.core.gguf_header: milliseconds, where gguf-py's
        GGUFReader spends seconds building the vocabulary), or None."""

        try:
            header = read_header(path)
            value = header.get(f"{header.get('general.architecture')}.context_length")
            return int(value) if value else None
        except Exception:  # noqa: BLE001 - fall back to the requested size
            return None

    # -- lm-eval interface ----------------------------------------------------------------------------------------
    @property
    def eot_token_id(self) -> int:
        return self._eos

    @property
    def prefix_token_id(self) -> int:
        return self._bos if self._bos >= 0 else self._eos

    @property
    def max_length(self) -> int:
        return self.n_ctx

    @property
    def tokenizer_name(self) -> str:
        return "llama.cpp:" + os.path.basename(self.engine.settings.model_path)

    def tok_encode(self, string: str, add_special_tokens: Optional[bool] = None, **kwargs) -> list[int]:
        L = self.L
        data = string.encode("utf-8")
        add = self.add_bos if add_special_tokens is None else bool(add_special_tokens)
        n_max = len(data) + 8
        buf = (L.llama_token * n_max)()
        n = L.llama_tokenize(self.vocab, data, len(data), buf, n_max, add, False)
        if n < 0:
            buf = (L.llama_token * -n)()
            n = L.llama_tokenize(self.vocab, data, len(data), buf, -n, add, False)
        return list(buf[:n])

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs) -> list[tuple[float, bool]]:
        order = sorted(range(len(requests)), key=lambda i: requests[i][1] + requests[i][2])
        out: list[Optional[tuple[float, bool]]] = [None] * len(requests)
        for done, i in enumerate(order, 1):
            _, ctx_enc, cont_enc = requests[i]
            out[i] = self._score(ctx_enc, cont_enc)
            if self.progress:
                self.progress(done, len(requests))
        return out  # type: ignore[return-value]

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        return [sum(lp for lp, _ in self.rolling_token_logprobs(req.args[0])) for req in requests]

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        raise NotImplementedError("the llama.cpp lm-eval backend scores log-likelihoods only (multiple-choice "
                                  "and perplexity tasks); generation tasks are not supported")

    # -- scoring --------------------------------------------------------------------------------------------------
    def rolling_token_logprobs(self, text: str) -> list[tuple[float, int]]:
        """(log-prob, token) of every token of ``text`` (no BOS scored), in lm-eval's rolling windows."""
        from lm_eval.utils import get_rolling_token_windows, make_disjoint_window  # noqa: PLC0415

        toks = self.tok_encode(text, add_special_tokens=False)
        out: list[tuple[float, int]] = []
        for ctx, cont in map(make_disjoint_window, get_rolling_token_windows(
                token_list=toks, prefix_token=self.prefix_token_id, max_seq_len=self.n_ctx - 1, context_len=1)):
            rows = self._rows(ctx, cont)
            out += [(float(r[t]), t) for r, t in zip(rows, cont)]
        return out

    def _score(self, ctx_enc: list[int], cont_enc: list[int]) -> tuple[float, bool]:
        rows = self._rows(ctx_enc, cont_enc)
        lp = sum(float(r[t]) for r, t in zip(rows, cont_enc))
        greedy = all(int(np.argmax(r)) == t for r, t in zip(rows, cont_enc))
        return lp, greedy

    def _rows(self, ctx_enc: list[int], cont_enc: list[int]) -> list[np.ndarray]:
        """Log-softmax rows predicting each continuation token."""
        whole = (list(ctx_enc) + list(cont_enc))
        if len(whole) > self.n_ctx:  # left truncation, as lm-eval's HF backend does
            whole = whole[-self.n_ctx:]
        n_cont = len(cont_enc)
        first_needed = len(whole) - n_cont - 1  # position whose logits predict the first continuation token
        if first_needed < 0:
            raise ValueError("a continuation needs at least one context token")
        common = 0
        for a, b in zip(self._cached, whole):
            if a != b:
                break
            common += 1
        start = min(common, first_needed)
        L = self.L
        mem = L.llama_get_memory(self.ctx)
        if start < len(self._cached):
            if not L.llama_memory_seq_rm(mem, 0, start, -1):
                L.llama_memory_clear(mem, True)
                start = 0
        self._cached = whole[:start]
        rows: list[np.ndarray] = []
        batch = L.llama_batch_init(N_BATCH, 0, 1)
        try:
            pos = start
            while pos < len(whole):
                chunk = whole[pos: pos + N_BATCH]
                batch.n_tokens = len(chunk)
                for j, tok in enumerate(chunk):
                    p = pos + j
                    batch.token[j] = tok
                    batch.pos[j] = p
                    batch.n_seq_id[j] = 1
                    batch.seq_id[j][0] = 0
                    batch.logits[j] = 1 if p >= first_needed and p < len(whole) - 1 else 0
                rc = L.llama_decode(self.ctx, batch)
                if rc != 0:
                    raise RuntimeError(f"llama_decode returned {rc}: {self.engine._last_log()}")
                self.decoded_tokens += len(chunk)
                for j in range(len(chunk)):
                    if batch.logits[j]:
                        rows.append(log_softmax(self._logits(j)))
                self._cached += chunk
                pos += len(chunk)
        finally:
            L.llama_batch_free(batch)
        return rows

    def _logits(self, i: int) -> np.ndarray:
        ptr = self.L.llama_get_logits_ith(self.ctx, i)
        arr = (ctypes.c_float * self.n_vocab).from_address(ctypes.addressof(ptr.contents))
        return np.frombuffer(arr, dtype=np.float32).copy()

    def close(self) -> None:
        self.engine.unload()


def stderr_progress(label: str, every_s: float = 5.0) -> Callable[[int, int], None]:
    t0 = time.perf_counter()
    last = [0.0]

    def cb(done: int, total: int) -> None:
        now = time.perf_counter()
        if done == total or now - last[0] >= every_s:
            last[0] = now
            sys.stderr.write(f"{label}: {done}/{total} requests scored ({now - t0:.0f} s)\n")
            sys.stderr.flush()

    return cb
