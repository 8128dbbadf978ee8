"""From a planned configuration to the command that runs it: every flag the plan assumes, for each engine that can
run it, and where its weights come from.

The plan a Candidate carries (context, batch, KV dtype, GPU layers, split) is what its figures were predicted for;
a flag left to the engine's default can move them (llama-server's default context is the model's, its default slots
are "auto", vLLM's default max-model-len is the model's maximum). So every recipe states them all:

- llama.cpp (`llama-server`, `llama-cli`, `python -m llama_cpp.server`, Ollama): the KV cache of `batch` sequences of
  `context_tokens` each is one cache of context x batch tokens with `batch` slots (as the probe loads it,
  evaluators/llama_cpp.py: n_ctx = B x context, n_seq_max = B); `-ngl` every layer (999) or the planned partial
  offload (0 on a CPU plan); flash attention as the plan assumed it (recommender.predict.analytical.
  llama_cpp_flash_attn); the KV types; the logical and physical batch the compute buffer was sized with
  (n_batch 2048, n_ubatch LLAMA_CPP_N_UBATCH); a split's mode and proportions (`-sm`, `-ts`), or `-sm none` for the
  first GPU alone of a multi-GPU machine.
- vLLM (`vllm serve`): `--max-model-len`, `--max-num-seqs` (batch), `--gpu-memory-utilization`
  (VLLM_GPU_MEMORY_UTILIZATION), `--max-num-batched-tokens` (VLLM_MAX_NUM_BATCHED_TOKENS), `-tp`/`-pp`,
  `--kv-cache-dtype` and `--dtype` (the KV dtype), `--quantization`.

Weights: sources/weights/repos.csv (each row with its source) and sources/published_gguf_sizes.csv (exact sizes),
the publisher's own repositories first; float weights on vLLM / transformers are the model's own repository (the
catalog id is its Hugging Face id). A variant with none says so ("no known public file").
"""

from __future__ import annotations

import csv
import shlex
from functools import lru_cache
from typing import Literal, Optional

from pydantic import Field, computed_field

from recommender.core.paths import SOURCES_DIR
from recommender.core.records import HardwareProfile, Strict
from recommender.hardware.multi import MultiGpu
from recommender.model.quant import QUANTS
from recommender.core.engines import engine_spec
from recommender.predict.constants import LLAMA_CPP_DEFAULT_LOAD_MODE
from recommender.predict.engines.llama_cpp import LLAMA_CPP_N_UBATCH, llama_cpp_flash_attn
from recommender.predict.engines.sglang import reserve_mib
from recommender.predict.engines.vllm import VLLM_GPU_MEMORY_UTILIZATION, VLLM_MAX_NUM_BATCHED_TOKENS

WEIGHTS_CSV = SOURCES_DIR / "weights" / "repos.csv"
GGUF_SIZES_CSV = SOURCES_DIR / "published_gguf_sizes.csv"
LLAMA_CPP_N_BATCH = 2048  # llama.cpp's default logical batch (common.h n_batch), as the probe loads it
ALL_LAYERS = 999  # -ngl: every layer (llama.cpp's -ngl 99 convention, with headroom), as the probe loads it
HOST = "127.0.0.1"
PORTS = {"llama-server": 8080, "llama_cpp.server": 8000, "vllm": 8000, "ollama": 11434, "mlx_lm.server": 8080,
         "sglang": 30000}  # each tool's default port (SGLang: ServerArgs.port = 30000)
# ggml_type ids (ggml.h enum ggml_type) of the KV types llama_cpp.server's --type_k/--type_v take
GGML_TYPE_IDS = {"f16": 1, "q4_0": 2, "q8_0": 8}
# vLLM --quantization of a quantization family (vLLM QuantizationMethods); None = read from the checkpoint's config
VLLM_QUANTIZATION = {"awq": "awq", "gptq": "gptq", "fp8": "fp8", "bnb": "bitsandbytes", "int8": None, "float": None}
VLLM_DTYPE = {"bf16": "bfloat16", "f16": "float16"}
# quantization families whose weights the engine makes at load from the 16-bit checkpoint (no separate files)
ON_LOAD = {"fp8": "vLLM quantizes the 16-bit weights to FP8 at load (--quantization fp8, dynamic scales)",
           "bnb": "bitsandbytes quantizes the 16-bit weights at load"}


class WeightsFile(Strict):
    """One public copy of a variant's weights."""

    repo: str  # Hugging Face repository
    file: Optional[str] = None  # the GGUF file (its first shard); None = the whole repository (HF layout)
    format: str  # gguf | hf (safetensors: float, AWQ, GPTQ folders)
    kind: Literal["publisher", "community", "on-load"]
    source: str  # where the file was seen (URL, github:OWNER/REPO@PATH) or the catalog's config source
    basis: str = ""
    file_bytes: Optional[int] = None  # the published size, where an exact byte count was seen
    size_check: Optional[str] = None  # published size against the catalog's weights_bytes


class LaunchCommand(Strict):
    """One engine's command line for the plan."""

    tool: str  # llama-server | llama-cli | llama_cpp.server | vllm | ollama | mlx_lm.server | transformers
    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict)  # set for the command (ollama: for `ollama serve`)
    setup: list[list[str]] = Field(default_factory=list)  # commands to run first (ollama create)
    files: dict[str, str] = Field(default_factory=dict)  # file name -> content (an Ollama Modelfile)
    url: Optional[str] = None  # the OpenAI-compatible base URL it serves
    notes: list[str] = Field(default_factory=list)  # what this tool cannot reproduce of the plan

    @computed_field
    @property
    def command(self) -> str:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        return (env + " " if env else "") + shlex.join(self.argv)


class Launch(Strict):
    """How to run one candidate: the commands (its planned engine's main server first) and the weights."""

    engine: str
    weights: list[WeightsFile]  # best first: the publisher's, then community quantizers
    weights_note: str = ""  # "no known public file ..." when weights is empty
    commands: list[LaunchCommand]

    @property
    def primary(self) -> Optional[LaunchCommand]:
        return self.commands[0] if self.commands else None


@lru_cache(maxsize=1)
def _rows() -> tuple[dict, ...]:
    out = []
    if WEIGHTS_CSV.exists():
        with WEIGHTS_CSV.open(newline="", encoding="utf-8") as f:
            out += [dict(r) for r in csv.DictReader(f)]
    if GGUF_SIZES_CSV.exists():
        with GGUF_SIZES_CSV.open(newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                owner = r["gguf_repo"].split("/")[0]
                out.append({"model_id": r["model_id"], "quant": r["quant"], "format": "gguf", "repo": r["gguf_repo"],
                            "file": r["file_name"], "file_bytes": r["file_bytes"],
                            "kind": "publisher" if owner == r["model_id"].split("/")[0] else "community",
                            "source": r["source_url_or_repo@commit"], "basis": r["note"]})
    return tuple(out)


def _size_check(published: Optional[int], catalog: Optional[int]) -> Optional[str]:
    if not published or not catalog:
        return None
    return (f"published {published:,} B, catalog {catalog:,} B "
            f"({100 * (catalog - published) / published:+.1f} % catalog vs published)")


def weights_for(model: str, quant: str, engine: str, catalog_bytes: Optional[int] = None) -> list[WeightsFile]:
    """The public copies of a variant, the publisher's first (then GGUF copies with a named file, then the data's
    order)."""
    family = QUANTS[quant].family if quant in QUANTS else "gguf"
    fmt = "gguf" if engine_spec(engine).file_format == "gguf" else "hf"
    found, seen = [], set()
    if fmt == "hf" and (family == "float" or family in ON_LOAD):
        found.append(WeightsFile(repo=model, format="hf", kind="publisher" if family == "float" else "on-load",
                                 source="the catalog model id (its Hugging Face repository; sources/configs/"
                                        "sources.csv)",
                                 basis="the publisher's 16-bit checkpoint" if family == "float" else ON_LOAD[family]))
    for r in _rows():
        if r["model_id"] != model or r["quant"] != quant or (r["format"] == "gguf") != (fmt == "gguf"):
            continue
        key = (r["repo"], r["file"])
        if key in seen:
            continue
        seen.add(key)
        size = int(r["file_bytes"]) if r.get("file_bytes") else None
        found.append(WeightsFile(repo=r["repo"], file=r["file"] or None, format=fmt, kind=r["kind"],
                                 source=r["source"], basis=r["basis"], file_bytes=size,
                                 size_check=_size_check(size, catalog_bytes)))
    order = {"publisher": 0, "on-load": 1, "community": 2}
    # stable: within a kind, a copy whose file is named before one known only by its quant tag, then the data's order
    return sorted(found, key=lambda w: (order[w.kind], fmt == "gguf" and w.file is None))


def _local_name(model: str, quant: str) -> str:
    return f"{model.split('/')[-1]}-{quant}.gguf"


def _llama_model_args(w: Optional[WeightsFile], model: str, quant: str, local: Optional[str]) -> list[str]:
    """llama.cpp's model arguments. A known file is named (`-hf REPO -hff FILE`, -hff overriding the tag): with only
    a quant tag (`-hf REPO:QUANT`) llama.cpp downloads the first file of the repository whose name matches
    `QUANT[.-]` anywhere (common/download.cpp find_best_model, llama.cpp as vendored in llama-cpp-python 0.3.36), so in a
    repository holding unsloth's UD-Q4_K_M.gguf but no plain Q4_K_M file the tag Q4_K_M takes the UD mix."""
    if local:
        return ["-m", local]
    if w is not None and w.file:
        return ["-hf", w.repo, "-hff", w.file]
    if w is not None:
        return ["-hf", f"{w.repo}:{quant}"]
    return ["-m", _local_name(model, quant)]


def _llama_plan(c, hw: HardwareProfile, machine: Optional[MultiGpu], load_mode: str) -> dict:
    """The llama.cpp settings of a plan, engine-neutral: ctx, slots, layers, fa, kv, split, and no_mmap: a
    partial-offload plan in load mode "none" (its prompt copies were priced at the pinned rate) runs without mmap."""
    layers = 0 if hw.backend == "cpu" else (ALL_LAYERS if c.gpu_layers is None else c.gpu_layers)
    split_mode, ts = None, None
    if c.split is not None:
        split_mode = c.split.mode
        props = c.split.tensor_split or [d.memory_bytes / 1024 ** 3 for d in (c.devices or [])]
        ts = [round(x, 2) for x in props] or None
    elif machine is not None:  # the first GPU of a multi-GPU machine alone
        split_mode = "none"
    return {"ctx": c.context_tokens * c.batch, "slots": c.batch, "layers": layers,
            "fa": llama_cpp_flash_attn(hw), "kv": c.kv_dtype, "split": split_mode, "ts": ts,
            "ubatch": int(LLAMA_CPP_N_UBATCH.value), "nbatch": LLAMA_CPP_N_BATCH,
            "no_mmap": load_mode == "none" and c.gpu_layers is not None}


def _llama_server(c, p: dict, w, local, tool: str = "llama-server") -> LaunchCommand:
    argv = [tool, *_llama_model_args(w, c.model, c.quant, local),
            "-c", str(p["ctx"] if tool == "llama-server" else c.context_tokens),
            "-ngl", str(p["layers"]), "-fa", "on" if p["fa"] else "off",
            "-ctk", p["kv"], "-ctv", p["kv"], "-b", str(p["nbatch"]), "-ub", str(p["ubatch"])]
    if p["split"]:
        argv += ["-sm", p["split"]]
        if p["split"] == "none":
            argv += ["-mg", "0"]
    if p["ts"]:
        argv += ["-ts", ",".join(f"{x:g}" for x in p["ts"])]
    notes = []
    if tool == "llama-server":
        argv += ["-np", str(p["slots"]), "--host", HOST, "--port", str(PORTS[tool])]
        if c.batch > 1:
            notes.append(f"-c {p['ctx']} is the KV cache of all {c.batch} slots ({c.context_tokens} tokens each)")
    elif c.batch > 1:
        notes.append(f"llama-cli runs one conversation: the plan's batch {c.batch} needs llama-server -np {c.batch}")
    if not p["fa"] and p["kv"] != "f16":
        notes.append("llama.cpp needs flash attention for a quantized V cache: the plan's KV type may be refused")
    if p["no_mmap"]:
        argv.append("--no-mmap")
    return LaunchCommand(tool=tool, argv=argv, url=f"http://{HOST}:{PORTS[tool]}/v1" if tool == "llama-server"
                         else None, notes=notes)


def _llama_cpp_python(c, p: dict, w, local) -> LaunchCommand:
    tool = "llama_cpp.server"
    if local:
        model = ["--model", local]
    elif w is not None:
        model = ["--hf_model_repo_id", w.repo, "--model", w.file or f"*{c.quant}*.gguf"]
    else:
        model = ["--model", _local_name(c.model, c.quant)]
    argv = ["python", "-m", "llama_cpp.server", *model, "--n_ctx", str(c.context_tokens),
            "--n_gpu_layers", str(p["layers"]), "--flash_attn", "true" if p["fa"] else "false",
            "--type_k", str(GGML_TYPE_IDS[p["kv"]]), "--type_v", str(GGML_TYPE_IDS[p["kv"]]),
            "--n_batch", str(p["nbatch"]), "--n_ubatch", str(p["ubatch"])]
    if p["split"]:
        argv += ["--split_mode", str({"none": 0, "layer": 1, "row": 2}[p["split"]])]
    if p["ts"]:
        argv += ["--tensor_split", *(f"{x:g}" for x in p["ts"])]
    argv += ["--host", HOST, "--port", str(PORTS[tool])]
    if p["no_mmap"]:
        argv += ["--use_mmap", "false"]
    notes = [f"--type_k/--type_v {GGML_TYPE_IDS[p['kv']]} = ggml type {p['kv']}"]
    if c.batch > 1:
        notes.append(f"llama_cpp.server answers one request at a time: the plan's batch {c.batch} is not reproduced "
                     f"(llama-server -np {c.batch} is)")
    return LaunchCommand(tool=tool, argv=argv, url=f"http://{HOST}:{PORTS[tool]}/v1", notes=notes)


def _ollama(c, p: dict, w, local) -> LaunchCommand:
    tag = f"{c.model.split('/')[-1].lower()}-{c.quant.lower()}-c{c.context_tokens}"
    src = local or (f"hf.co/{w.repo}:{c.quant}" if w is not None else f"./{_local_name(c.model, c.quant)}")
    modelfile = f"FROM {src}\nPARAMETER num_ctx {c.context_tokens}\nPARAMETER num_gpu {p['layers']}\n"
    env = {"OLLAMA_NUM_PARALLEL": str(c.batch), "OLLAMA_FLASH_ATTENTION": "1" if p["fa"] else "0",
           "OLLAMA_KV_CACHE_TYPE": p["kv"]}
    notes = ["the env settings are the server's: start `ollama serve` with them",
             f"Ollama allocates num_ctx x OLLAMA_NUM_PARALLEL = {p['ctx']} tokens of KV cache, as planned"]
    if p["split"]:
        notes.append("Ollama chooses its own multi-GPU split: the plan's split is not reproduced")
    return LaunchCommand(tool="ollama", argv=["ollama", "run", tag], env=env,
                         setup=[["ollama", "create", tag, "-f", "Modelfile"]], files={"Modelfile": modelfile},
                         url=f"http://{HOST}:{PORTS['ollama']}/v1", notes=notes)


def _vllm(c, machine: Optional[MultiGpu], w, local) -> LaunchCommand:
    family = QUANTS[c.quant].family
    repo = local or (w.repo if w is not None else c.model)
    argv = ["vllm", "serve", repo, "--max-model-len", str(c.context_tokens), "--max-num-seqs", str(c.batch),
            "--gpu-memory-utilization", f"{VLLM_GPU_MEMORY_UTILIZATION.value:g}",
            "--max-num-batched-tokens", str(int(VLLM_MAX_NUM_BATCHED_TOKENS.value))]
    env = {}
    n = len(c.devices or [])
    if c.split is not None and c.split.mode == "tensor":
        argv += ["-tp", str(n)]
    elif c.split is not None and c.split.mode == "pipeline":
        argv += ["-pp", str(n)]
    elif machine is not None:
        env["CUDA_VISIBLE_DEVICES"] = "0"
    if c.kv_dtype == "fp8":
        argv += ["--kv-cache-dtype", "fp8"]
    else:
        argv += ["--kv-cache-dtype", "auto", "--dtype", VLLM_DTYPE[c.kv_dtype]]
    q = VLLM_QUANTIZATION.get(family)
    if q:
        argv += ["--quantization", q]
    argv += ["--host", HOST, "--port", str(PORTS["vllm"])]
    notes = [] if w is not None or local else ["no known public checkpoint of this quantization: replace the model "
                                               "with your own folder"]
    return LaunchCommand(tool="vllm", argv=argv, env=env, url=f"http://{HOST}:{PORTS['vllm']}/v1", notes=notes)


def _transformers(c, w, local) -> LaunchCommand:
    repo = local or (w.repo if w is not None else c.model)
    dtype = {"bf16": "torch.bfloat16", "f16": "torch.float16"}.get(c.kv_dtype, "'auto'")
    code = ("import torch; from transformers import AutoModelForCausalLM, AutoTokenizer; "
            f"tok = AutoTokenizer.from_pretrained({repo!r}); "
            f"model = AutoModelForCausalLM.from_pretrained({repo!r}, torch_dtype={dtype}, device_map='auto')")
    return LaunchCommand(tool="transformers", argv=["python", "-c", code],
                         notes=[f"transformers has no server here: generate with batches of {c.batch} and at most "
                                f"{c.context_tokens} tokens of context, as planned"])


def _mlx(c) -> LaunchCommand:
    return LaunchCommand(tool="mlx_lm.server", argv=["mlx_lm.server", "--model", c.model, "--host", HOST, "--port",
                                                     str(PORTS["mlx_lm.server"])],
                         url=f"http://{HOST}:{PORTS['mlx_lm.server']}/v1",
                         notes=["MLX runs the 16-bit checkpoint (or an mlx-community conversion): another engine, the "
                                "plan's figures are llama.cpp's"])


def _sglang(c, machine: Optional[MultiGpu], hw: HardwareProfile, w, local) -> LaunchCommand:
    """`python -m sglang.launch_server` with the plan's context, concurrency, memory fraction, parallelism, KV dtype and
    quantization (flags of sgl-project/sglang python/sglang/srt/server_args.py; the memory fraction is the one
    SGLang would choose on this GPU, predict.engines.sglang.reserve_mib, stated so the pool matches the plan)."""
    family = QUANTS[c.quant].family
    repo = local or (w.repo if w is not None else c.model)
    n = len(c.devices or []) or 1
    act, rest = reserve_mib(hw.memory_bytes, tp=n if c.split is not None and c.split.mode == "tensor" else 1)
    frac = round((hw.memory_bytes / 2**20 - act - rest) / (hw.memory_bytes / 2**20), 3)
    argv = ["python", "-m", "sglang.launch_server", "--model-path", repo, "--context-length", str(c.context_tokens),
            "--max-running-requests", str(c.batch), "--mem-fraction-static", f"{frac:g}"]
    env = {}
    if c.split is not None and c.split.mode == "tensor":
        argv += ["--tp-size", str(n)]
    elif machine is not None:
        env["CUDA_VISIBLE_DEVICES"] = "0"
    if c.kv_dtype == "fp8":
        argv += ["--kv-cache-dtype", "fp8_e4m3"]
    q = VLLM_QUANTIZATION.get(family)  # SGLang takes the same method names (awq, gptq, fp8, bitsandbytes)
    if q:
        argv += ["--quantization", q]
    argv += ["--host", HOST, "--port", str(PORTS["sglang"])]
    notes = [] if w is not None or local else ["no known public checkpoint of this quantization: replace the model "
                                               "with your own folder"]
    return LaunchCommand(tool="sglang", argv=argv, env=env, url=f"http://{HOST}:{PORTS['sglang']}/v1", notes=notes)


def _llama_recipes(c, hw, machine, w, local, load_mode) -> list[LaunchCommand]:
    p = _llama_plan(c, hw, machine, load_mode)
    cmds = [_llama_server(c, p, w, local), _llama_cpp_python(c, p, w, local),
            _llama_server(c, p, w, local, tool="llama-cli"), _ollama(c, p, w, local)]
    if hw.backend == "metal":
        cmds.append(_mlx(c))
    return cmds


# the recipes of each planned engine, by its record's name (core.engines): a new engine adds its entry here
_RECIPES = {
    "llama.cpp": _llama_recipes,
    "vllm": lambda c, hw, machine, w, local, load_mode: [_vllm(c, machine, w, local)],
    "sglang": lambda c, hw, machine, w, local, load_mode: [_sglang(c, machine, hw, w, local)],
    "transformers": lambda c, hw, machine, w, local, load_mode: [_transformers(c, w, local)],
}


def launch_recipe(c, hw: HardwareProfile, machine: Optional[MultiGpu] = None,
                  local_weights: Optional[str] = None, load_mode: str = LLAMA_CPP_DEFAULT_LOAD_MODE) -> Launch:
    """The launch recipe of a candidate (a Prediction: model, quant, engine, context, batch, KV dtype, GPU layers,
    split) planned for ``hw`` (one GPU of ``machine`` when it has several). ``local_weights``: a file or folder on
    this machine to run instead of a download. ``load_mode`` "none": a llama.cpp partial-offload plan runs with
    --no-mmap (its prompt copies were priced at the pinned rate)."""
    catalog_bytes = c.figures["weights_bytes"].value if "weights_bytes" in c.figures else None
    weights = weights_for(c.model, c.quant, c.engine, catalog_bytes)
    w = weights[0] if weights else None
    note = "" if weights else (f"no known public file of {c.model} at {c.quant} for {c.engine} "
                               f"(sources/weights/repos.csv): quantize it yourself or bring your own")
    cmds = _RECIPES[c.engine](c, hw, machine, w, local_weights, load_mode)
    return Launch(engine=c.engine, weights=weights, weights_note=note, commands=cmds)
