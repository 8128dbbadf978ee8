"""A deterministic fake engine for the conformance tests (loaded by the probe child as 'fake_engine:FakeEngine')."""

import os
import signal
import time


from evaluators.base import EngineInfo, LoadSettings, RequestShape, RunTiming

PREFILL_MS_PER_TOKEN = 0.01
DECODE_MS_PER_STEP = 2.0


class FakeEngine:
    name = "fake"
    extra = "none"

    def load(self, s: LoadSettings) -> EngineInfo:
        self.mode = s.extra.get("mode", "ok")
        if self.mode == "crash":
            os.kill(os.getpid(), signal.SIGSEGV)
        if self.mode == "raise":
            raise RuntimeError("cannot allocate the KV cache")
        if self.mode == "hang":
            time.sleep(3600)
        self.settings = s
        return EngineInfo(name=self.name, version="0", backend="cpu")

    def measure(self, shape: RequestShape) -> RunTiming:
        ttft = shape.prompt_tokens * shape.batch * PREFILL_MS_PER_TOKEN
        times = [[ttft + i * DECODE_MS_PER_STEP for i in range(shape.output_tokens)] for _ in range(shape.batch)]
        time.sleep(times[0][-1] / 1000)
        return RunTiming(token_times_ms=times)

    def unload(self) -> None:
        pass
