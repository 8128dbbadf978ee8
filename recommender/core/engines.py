"""The engines the planner knows, one frozen record each (:class:`EngineSpec`).

Every list about engines derives from these records: the names and aliases (``resolve_engine``), the probe
adapters' registry (``evaluators.base.ENGINES``), which engines run a quantization (``QuantSpec.engines``,
recommender.model.quant), the KV dtypes an engine offers (``predict.constants.ENGINE_KV_DTYPES``), its minimum
compute capabilities (``predict.constants.MIN_COMPUTE_CAPABILITY``) and its multi-GPU split modes
(``predict.split.ENGINE_MODES``). The numbers an engine's memory and speed follow (KV padding, compute buffer,
runtime overhead, efficiencies...) are its rules, in ``recommender.predict.engines`` (one module per engine).

Code outside this module and ``recommender.predict.engines`` asks a record what an engine does (``file_format``,
``partial_offload``, ``backends``...) and never compares an engine's name (tests/house/test_engine_names.py).
Adding an engine: its record here and its rules module in recommender/predict/engines/ (plus, for probes, a child-side
adapter in evaluators/ named by ``adapter``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from recommender.core.errors import UserError
from recommender.core.fuzzy import resolve

CC = tuple[int, int]


@dataclass(frozen=True)
class EngineSpec:
    """What one inference engine is, independent of how fast it runs (that is its rules module's)."""

    name: str  # the canonical name (catalog rows, --engine, the rules registry)
    aliases: tuple[str, ...]  # other spellings resolve_engine accepts
    label: str  # how docs and messages spell it
    quant_families: tuple[str, ...]  # QuantSpec.family values it runs (recommender.model.quant)
    kv_dtypes: tuple[str, ...]  # KV-cache dtypes it offers; the first is its default
    backends: tuple[str, ...]  # HardwareProfile.backend values it runs on
    # (quant family or '*' for any, minimum CUDA compute capability, source)
    min_compute_capability: tuple[tuple[str, CC, str], ...] = ()
    split_modes: tuple[str, ...] = ()  # multi-GPU plans (predict.split.SplitMode); () = one GPU only
    file_format: str = "safetensors"  # the model files it loads: 'gguf' or 'safetensors' (a Hugging Face repo)
    partial_offload: bool = False  # whether it runs some layers on the host (llama.cpp n_gpu_layers)
    pip_extra: Optional[str] = None  # the llm-recommender extra that installs it (pyproject.toml)
    # child-side probe adapter (evaluators/): (module, class); None = planned only, no probe here
    adapter: Optional[tuple[str, str]] = None
    serves_kv_budget: bool = False  # reserves a fixed share of GPU memory at start and fills it with KV blocks
    # its planning rules: the module of recommender/predict/engines/ that defines RULES (an EngineRules)
    rules_module: str = ""
    # the name an accuracy probe's child (evaluators/accuracy_worker.py, lm-eval) runs it under; None: no accuracy probe
    accuracy_backend: Optional[str] = None


_VLLM_CC = (
    ("*", (7, 0), "vLLM requires compute capability >= 7.0 (docs: GPU installation requirements)"),
    ("fp8", (8, 9), "FP8 W8A8 kernels need Ada/Hopper, compute capability >= 8.9 (vLLM quantization docs)"),
    ("awq", (7, 5), "vLLM AWQ kernels need compute capability >= 7.5 (vLLM supported-hardware table)"),
    ("gptq", (6, 0), "vLLM GPTQ needs compute capability >= 6.0 (vLLM supported-hardware table)"),
    ("int8", (7, 5), "vLLM INT8 W8A8 kernels need compute capability >= 7.5 (vLLM supported-hardware table: INT8 "
                     "W8A8 from Turing)"),
)

_SGLANG_CC = (
    ("*", (7, 5), "SGLang runs from compute capability 7.5 (datawhalechina.github.io/zero-to-sglang Part 0.2: RTX "
                  "30/40/50 out of the box, RTX 20 / T4 (7.5) with an extra flag)"),
    ("fp8", (8, 9), "FP8 W8A8 GEMMs need FP8 tensor cores: Ada/Hopper, compute capability >= 8.9 (as vLLM's)"),
)

# bump when the set of planned engines or a record changes (recommend's candidates change): recommender/versions.py
ENGINES_VERSION = "engines-v2"  # v2: SGLang planned (CUDA, its quants, tensor parallelism)

ENGINE_SPECS: tuple[EngineSpec, ...] = (
    EngineSpec(name="llama.cpp", aliases=("llamacpp", "llama-cpp", "llama_cpp", "gguf"), label="llama.cpp",
               quant_families=("float", "gguf"), kv_dtypes=("f16", "q8_0", "q4_0"),
               backends=("cuda", "rocm", "metal", "vulkan", "sycl", "cpu"), split_modes=("layer", "row"),
               file_format="gguf", partial_offload=True, pip_extra="llama",
               adapter=("evaluators.llama_cpp", "LlamaCppEngine"), accuracy_backend="llama.cpp",
               rules_module="llama_cpp"),
    EngineSpec(name="vllm", aliases=("vLLM",), label="vLLM",
               quant_families=("float", "awq", "gptq", "fp8", "int8", "bnb"), kv_dtypes=("bf16", "f16", "fp8"),
               backends=("cuda", "rocm", "cpu"), min_compute_capability=_VLLM_CC, split_modes=("tensor", "pipeline"),
               pip_extra="vllm", adapter=("evaluators.vllm_engine", "VllmEngine"), serves_kv_budget=True,
               accuracy_backend="vllm", rules_module="vllm"),
    EngineSpec(name="transformers", aliases=("hf", "huggingface"), label="transformers",
               quant_families=("float", "awq", "gptq", "bnb"), kv_dtypes=("bf16", "f16"),
               backends=("cuda", "rocm", "cpu"), pip_extra="transformers",
               adapter=("evaluators.transformers_engine", "TransformersEngine"), accuracy_backend="hf",
               rules_module="transformers"),
    # SGLang (github.com/sgl-project/sglang): planned only, no probe adapter in this project. Its quantizations:
    # server_args.py QUANTIZATION_CHOICES (awq, gptq / *_marlin, fp8, w8a8_int8, w8a8_fp8 ...), the planner's
    # families of them; --kv-cache-dtype auto (the model's dtype) / fp8_e5m2 / fp8_e4m3; --tp (tensor parallelism).
    # CUDA only here: its ROCm build has no sourced terms in this project.
    EngineSpec(name="sglang", aliases=("sgl",), label="SGLang",
               quant_families=("float", "awq", "gptq", "fp8", "int8"), kv_dtypes=("bf16", "f16", "fp8"),
               backends=("cuda",), min_compute_capability=_SGLANG_CC, split_modes=("tensor",),
               rules_module="sglang"),  # its KV pool follows mem_fraction_static (engines/sglang.py memory_notes)
)

ENGINES: tuple[str, ...] = tuple(e.name for e in ENGINE_SPECS)
ENGINE_ALIASES: dict[str, str] = {a: e.name for e in ENGINE_SPECS for a in e.aliases}
_BY_NAME: dict[str, EngineSpec] = {e.name: e for e in ENGINE_SPECS}


def resolve_engine(name: str) -> str:
    return resolve(name, ENGINES, "engine", aliases=ENGINE_ALIASES, hint_cmd=f"engines: {', '.join(ENGINES)}")


def engine_spec(name: str) -> EngineSpec:
    """The record of an engine by its canonical name (KeyError for another: resolve a user's spelling first)."""
    return _BY_NAME[name]


def engines_running(family: str) -> list[str]:
    """The engines that run a quantization family, in ENGINE_SPECS order."""
    return [e.name for e in ENGINE_SPECS if family in e.quant_families]


def engines_on(backend: str) -> list[str]:
    return [e.name for e in ENGINE_SPECS if backend in e.backends]


def gguf_engine() -> str:
    """The engine that loads GGUF files (the first record whose file format is GGUF)."""
    return next(e.name for e in ENGINE_SPECS if e.file_format == "gguf")


def accuracy_engine(backend: str) -> EngineSpec:
    """The record of the engine an accuracy backend name (llama.cpp, hf, vllm) runs, or a resolved engine name."""
    for e in ENGINE_SPECS:
        if backend == e.accuracy_backend:
            return e
    return engine_spec(resolve_engine(backend))


def accuracy_backends(file_format: str) -> list[str]:
    """The accuracy backends that load models of one file format."""
    return [e.accuracy_backend for e in ENGINE_SPECS if e.accuracy_backend and e.file_format == file_format]


def probe_adapter(name: str) -> tuple[str, str, str]:
    """(module, class, pip extra) of an engine's child-side probe adapter; a UserError for an engine that is planned
    only (no adapter in evaluators/)."""
    e = engine_spec(resolve_engine(name))
    if e.adapter is None:
        probed = [x.name for x in ENGINE_SPECS if x.adapter is not None]
        raise UserError(f"{e.label} is planned (recommend, estimate) but has no probe adapter in this project",
                        hint=f"probe with one of: {', '.join(probed)}")
    return (*e.adapter, e.pip_extra or "?")
