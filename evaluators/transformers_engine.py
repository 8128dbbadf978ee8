"""Hugging Face transformers: ``model.generate`` (greedy), timed per generated token.

Each step's time is taken by a logits processor, which ``generate`` calls once per new token right after the forward
pass that produced its logits (with a device synchronize, so the time is when the token exists, not when the kernel
was queued). Generation is forced to exactly ``output_tokens`` (``min_new_tokens``), so every repeat does the same
work. Weights load from safetensors only; ``trust_remote_code`` stays off unless the job's settings say
``trust_remote_code: true`` (it runs Python code shipped with the model folder).

A synthetic model (``model_path = "synthetic:<id>"`` with the HF config in ``settings.extra["hf_config"]``) is built
with ``from_config`` directly on the device: random weights with the exact architecture.
"""

from __future__ import annotations

import gc
import time


from evaluators.base import EngineInfo, LoadSettings, RequestShape, RunTiming
from evaluators.hf_config import hf_config_object

DTYPES = {"bf16": "bfloat16", "bfloat16": "bfloat16", "f16": "float16", "float16": "float16", "f32": "float32"}


class TransformersEngine:
    name = "transformers"
    extra = "transformers"

    def __init__(self) -> None:
        import torch  # noqa: PLC0415
        import transformers  # noqa: PLC0415

        self.torch = torch
        self.transformers = transformers
        self.model = None

    def load(self, s: LoadSettings) -> EngineInfo:
        torch, tf = self.torch, self.transformers
        self.device = "cuda" if torch.cuda.is_available() and s.gpu_layers != 0 else "cpu"
        dtype_name = DTYPES.get(str(s.extra.get("dtype", "bf16")).lower())
        if dtype_name is None:
            raise ValueError(f"dtype {s.extra.get('dtype')} not supported (use bf16, f16 or f32)")
        dtype = getattr(torch, dtype_name)
        if s.threads:
            torch.set_num_threads(s.threads)
        trust = bool(s.extra.get("trust_remote_code", False))
        if s.model_path.startswith("synthetic:"):

            cfg = hf_config_object(s.extra["hf_config"])
            torch.manual_seed(0)
            with torch.device(self.device):
                self.model = tf.AutoModelForCausalLM.from_config(cfg, dtype=dtype, trust_remote_code=trust)
        else:
            self.model = tf.AutoModelForCausalLM.from_pretrained(s.model_path, dtype=dtype, use_safetensors=True,
                                                                 trust_remote_code=trust).to(self.device)
        self.model.eval()
        cfg = self.model.config
        self.n_vocab = getattr(cfg, "vocab_size", None) or cfg.get_text_config().vocab_size
        self.settings = s
        return EngineInfo(name=self.name, version=tf.__version__,
                          backend="cuda" if self.device == "cuda" else "cpu",
                          details={"torch": torch.__version__, "dtype": dtype_name, "device": self.device,
                                   "attn_implementation": getattr(cfg, "_attn_implementation", None),
                                   "params": sum(p.numel() for p in self.model.parameters()),
                                   "trust_remote_code": trust,
                                   "gpu": torch.cuda.get_device_name(0) if self.device == "cuda" else None})

    def _sync(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def measure(self, shape: RequestShape) -> RunTiming:
        torch = self.torch
        B, P, N = shape.batch, shape.prompt_tokens, shape.output_tokens
        if P + N > self.settings.context_tokens:
            raise ValueError(f"prompt {P} + output {N} tokens exceed the context of {self.settings.context_tokens}")
        gen = torch.Generator().manual_seed(shape.seed)
        lo = min(100, self.n_vocab - 1)
        ids = torch.randint(lo, self.n_vocab, (B, P), generator=gen).to(self.device)
        stamps: list[float] = []
        sync = self._sync

        def timer(input_ids, scores):  # a LogitsProcessor: called once per generated token
            sync()
            stamps.append(time.perf_counter())
            return scores

        if self.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        sync()
        t0 = time.perf_counter()
        with torch.inference_mode():
            self.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=N, min_new_tokens=N,
                                do_sample=False, logits_processor=[timer], pad_token_id=0, use_cache=True)
        times = [(t - t0) * 1e3 for t in stamps]
        peak = int(torch.cuda.max_memory_allocated()) if self.device == "cuda" else None
        return RunTiming(token_times_ms=[list(times) for _ in range(B)], peak_engine_bytes=peak)

    def unload(self) -> None:
        self.model = None
        gc.collect()
        if self.device == "cuda":
            self.torch.cuda.empty_cache()
