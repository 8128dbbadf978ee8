"""One model over several GPUs: llama.cpp's layer and row splits, vLLM's tensor and pipeline parallelism.

Memory is per device (each must fit on its own card); speed reuses the single-GPU model (``analytical.estimate``) of
each device for the work that device does, plus the traffic between devices over the link
(``recommender.hardware.multi.Link``). The derivation is in docs/estimates.md §7; every constant is below with its
source.

llama.cpp ``-sm layer`` (the default with several GPUs; llama-model.cpp load_tensors):
    split points = cumulative ``--tensor-split`` proportions (default: each device's memory), normalized;
    layer il of 0..n_layer (n_layer = the output layer) goes to the first device whose split point exceeds
    il / (n_layer + 1): the blocks fill the devices in order and the output layer lands on the last one.
    per device: its blocks' weights and their KV cache (each layer's cache lives with the layer), its own CUDA context
    and compute buffer (logits of one micro-batch on the device with the output layer, activations elsewhere).
    decode step = sum over devices of (that device's single-GPU step time x its share of the bytes read)
                  + per-token overhead + (devices - 1) hops of the activations (batch x hidden x f32) over the link.
    The devices work one after the other on a token (no overlap at batch 1): llama.cpp pipelines only the
    micro-batches of one prompt, which this model does not credit (TTFT is the sum as well).
llama.cpp ``-sm row``: every matrix of the blocks split by rows over the devices (``--tensor-split`` proportions),
    the KV cache, norms and output layer on the main GPU (device 0); each device reads its rows in parallel, so the
    step takes the slowest device's time plus one synchronization per split matrix multiplication.
vLLM tensor parallel (tensor_parallel_size = t): every weight (embedding and LM head included: VocabParallelEmbedding,
    ParallelLMHead) sharded t ways; KV heads sharded t ways (replicated when t > num_kv_heads; the MLA latent is
    replicated on every device); 2 all-reduces of batch x hidden x bf16 per layer (after attention and after the MLP);
    ring all-reduce time = latency + 2 (t-1)/t x bytes / link bandwidth (Patarasuk & Yuan 2009; NCCL's busbw
    definition, github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md). Each GPU reserves
    gpu_memory_utilization of its memory; what the weights, activations and graphs leave is its KV block budget.
vLLM pipeline parallel (pipeline_parallel_size = p): layers split evenly over p stages, the embedding on the first and
    the LM head on the last; the stages run one after the other for a token, plus (p-1) sends of the activations.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from recommender.core.records import HardwareProfile, ModelSpec, Strict, Variant
from recommender.hardware.multi import MultiGpu
from recommender.predict import constants as C
from recommender.model.quant import QUANTS
from recommender.predict.analytical import Estimate, estimate, fixed_step_ms, output_bytes, tied_output_bytes, variant_bytes

SplitMode = Literal["layer", "row", "tensor", "pipeline"]
ENGINE_MODES: dict[str, tuple[str, ...]] = {"llama.cpp": ("layer", "row"), "vllm": ("tensor", "pipeline")}


class SplitPlan(Strict):
    """How one model is spread over the machine's GPUs."""

    mode: SplitMode
    tensor_split: Optional[list[float]] = None  # llama.cpp --tensor-split proportions; None = by device memory

    @property
    def label(self) -> str:
        names = {"layer": "-sm layer", "row": "-sm row", "tensor": "TP", "pipeline": "PP"}
        ts = f" -ts {','.join(f'{x:g}' for x in self.tensor_split)}" if self.tensor_split else ""
        return names[self.mode] + ts


class DeviceShare(Strict):
    """One GPU's part of a split plan: what it holds, whether that fits, and its share of a decode step."""

    index: int
    name: str
    memory_bytes: int
    layers: int  # repeating blocks held (row/tensor split: every device holds a slice of every block)
    output_layer: bool
    weights_bytes: int
    kv_cache_bytes: int
    compute_buffer_bytes: int
    runtime_overhead_bytes: int
    total_bytes: int
    budget_bytes: int  # what this device may use: its memory (llama.cpp), gpu_memory_utilization x memory (vLLM)
    fits: bool
    kv_budget_bytes: Optional[int] = None  # vLLM: the budget left for KV cache after weights, activations, graphs
    kv_blocks: Optional[int] = None  # vLLM: KV blocks of VLLM_BLOCK_SIZE tokens that budget holds
    decode_ms: Optional[float] = None  # this device's part of one decode step (its bytes at its bandwidth)
    prefill_ms: Optional[float] = None


class SplitEstimate(Estimate):
    """An Estimate of a configuration spread over several GPUs: the totals in the Estimate's fields (memory summed
    over the devices), the per-device shares and the link traffic beside them."""

    plan: SplitPlan
    machine: str
    link: str
    devices: list[DeviceShare] = Field(default_factory=list)
    comm_ms_per_token: float = 0.0  # link time in one decode step
    comm_ms_prefill: float = 0.0


# --- constants (with sources) ---------------------------------------------------------------------------------
# The latency of one activation hand-off between two GPUs in a llama.cpp layer split (cudaMemcpyPeerAsync of a few KB
# plus the event synchronization); the bytes' own transfer time is added from the link bandwidth.
LLAMA_CPP_HOP_MS = C.Const(0.143, "ms per device boundary per token",
                           "fitted by bench/multigpu.py on its fit rows of sources/published_perf/multigpu_llamacpp.csv "
                           "(XiongjieDai/GPU-Benchmarks-on-LLM-Inference, llama-bench tg512 of LLaMA-3-8B Q4_K_M and "
                           "F16 on 1, 2, 4 and 6 RTX 3090s): median over the 6 rows of (1/tg_n - 1/tg_1)/(n - 1) less "
                           "the transfer time (0.290, -0.142, 0.179, 0.049, 0.187, 0.106 ms)")
# llama.cpp row split: one synchronization (gather of the partial results on the main GPU) per split matrix
# multiplication; seven matrices per block (q, k, v, o, gate, up, down).
LLAMA_CPP_ROW_SYNC_MS = C.Const(0.056, "ms per split matmul per token",
                                "derived from one published pair, ikawrakow/ik_llama.cpp commit a719349982 (PR #1022, "
                                "its message): LLaMA-70B, mainline -sm row TG 19.3 t/s against -sm "
                                "layer 24.4 t/s, on the author's 2x RTX 3090 machine (named in the PR #1022 thread; "
                                "sources/published_perf/multigpu_row_split.csv; "
                                "the quantization is not stated): (1/19.3 - 1/24.4/2) s / (80 blocks x 7 matmuls) = "
                                "0.056 ms, taking row's bandwidth part as half the layer-split step; no held-out "
                                "check")
ROW_SPLIT_MATMULS_PER_BLOCK = 7
LLAMA_CPP_SPLIT_ACTIVATION_COPIES = C.Const(3, "tensors of n_ubatch x intermediate x f32",
                                            "assumption: the compute buffer of a device without the output layer "
                                            "holds the MLP's gate, up and product of one micro-batch; to be measured "
                                            "by the multi-GPU probe issue")
# vLLM all-reduce: the latency term of its custom all-reduce / NCCL ring, fitted on aiconfigurator's measured
# vLLM 0.14 custom_allreduce_perf tables (H100 SXM fit; H200 SXM and A100 SXM held out, bench/multigpu.py).
VLLM_ALLREDUCE_LATENCY_MS = C.Const(0.00449, "ms per all-reduce of 2 GPUs",
                                    "fitted by bench/multigpu.py on ai-dynamo/aiconfigurator "
                                    "systems/data/h100_sxm/comm/vllm/0.14.0/custom_allreduce_perf (CUDA-graph rows, "
                                    "messages <= 64 Ki bf16 elements, least squares a + b (n - 2)); copied to "
                                    "sources/published_perf/aiconfigurator_allreduce.csv")
VLLM_ALLREDUCE_LATENCY_PER_GPU_MS = C.Const(0.00014, "ms per all-reduce per GPU beyond 2",
                                            "fitted with VLLM_ALLREDUCE_LATENCY_MS (same rows)")
VLLM_ALLREDUCE_BUS_EFFICIENCY = C.Const(0.692, "fraction of the link's per-direction bandwidth",
                                        "fitted with VLLM_ALLREDUCE_LATENCY_MS on the same H100 SXM table, messages "
                                        ">= 4 Mi elements: median of bus bandwidth (2 (n-1)/n x bytes / time) over "
                                        "NVLink's 450 GB/s per direction")
PCIE_ALLREDUCE_LATENCY_MS = C.Const(0.030, "ms per all-reduce",
                                    "assumption: NCCL ring over PCIe through the host (vLLM turns its custom "
                                    "all-reduce off on PCIe-only machines of more than two GPUs); nccl-tests report "
                                    "tens of microseconds for small messages over PCIe; no published row checked")
VLLM_BLOCK_SIZE = C.Const(16, "tokens per KV block", "vLLM CacheConfig.block_size default 16 on CUDA")
ALLREDUCES_PER_LAYER = 2  # Megatron-LM tensor parallelism: after the attention output and the MLP down projection
ACT_BYTES_LLAMA_CPP = C.F32_BYTES  # ggml hands activations between backends in f32
ACT_BYTES_VLLM = 2  # bf16/f16 activations


def default_plan(engine: str, spec: ModelSpec, machine: MultiGpu) -> Optional[SplitPlan]:
    """The plan an engine uses by default on this machine: llama.cpp's layer split; vLLM's tensor parallelism when
    the heads divide over the GPUs, else pipeline parallelism. None: the engine has no multi-GPU plan here."""
    if engine == "llama.cpp":
        return SplitPlan(mode="layer")
    if engine == "vllm":
        n = machine.count
        if not machine.homogeneous:
            return SplitPlan(mode="pipeline")
        return SplitPlan(mode="tensor") if tp_supported(spec, n) is None else SplitPlan(mode="pipeline")
    return None


def tp_supported(spec: ModelSpec, n: int) -> Optional[str]:
    """None when vLLM can shard this model n ways, else why not (vLLM: num_attention_heads % tp == 0; KV heads
    divide by tp or tp by the KV heads, which are then replicated)."""
    if spec.num_attention_heads % n:
        return f"{spec.num_attention_heads} attention heads do not divide over {n} GPUs"
    if not spec.is_mla and spec.num_kv_heads % n and n % spec.num_kv_heads:
        return f"{spec.num_kv_heads} KV heads and {n} GPUs: neither divides the other"
    return None


def check_plan(engine: str, plan: SplitPlan, spec: ModelSpec, machine: MultiGpu) -> Optional[str]:
    """None when this engine can run this plan, else the reason it cannot (a user error)."""
    if plan.mode not in ENGINE_MODES.get(engine, ()):
        modes = ENGINE_MODES.get(engine)
        return (f"{engine} has no '{plan.mode}' split" + (f" (it has: {', '.join(modes)})" if modes else
                                                           " (multi-GPU plans cover llama.cpp and vLLM)"))
    if plan.tensor_split is not None:
        if engine != "llama.cpp":
            return "--tensor-split is llama.cpp's option"
        if len(plan.tensor_split) != machine.count or any(x < 0 for x in plan.tensor_split) \
                or not sum(plan.tensor_split) > 0:
            return f"--tensor-split needs {machine.count} non-negative proportions, not all zero"
    if plan.mode == "tensor":
        if not machine.homogeneous:
            return "vLLM tensor parallelism needs identical GPUs"
        return tp_supported(spec, machine.count)
    if plan.mode == "pipeline" and spec.num_layers < machine.count:
        return f"{spec.num_layers} layers cannot fill {machine.count} pipeline stages"
    return None


def layer_assignment(n_layer: int, proportions: list[float]) -> list[int]:
    """The device of each of llama.cpp's n_layer + 1 layers (the last is the output layer), as load_tensors assigns
    them: upper_bound(split points, il / (n_layer + 1))."""
    total = sum(proportions)
    points, acc = [], 0.0
    for p in proportions:
        acc += p
        points.append(acc / total)
    out = []
    for il in range(n_layer + 1):
        x = il / (n_layer + 1)
        dev = next((i for i, pt in enumerate(points) if pt > x), len(points) - 1)
        out.append(dev)
    return out


def _full(spec: ModelSpec, quant: str, engine: str, hw: HardwareProfile, kw: dict) -> Estimate:
    """The single-GPU estimate of the whole model on one of the devices (its speed model; memory not checked)."""
    return estimate(spec, quant, engine, hw, **kw)


def ring_allreduce_ms(nbytes: float, n: int, link_bytes_per_s: float, nvlink: bool) -> float:
    """One all-reduce of nbytes over n GPUs: latency + 2 (n-1)/n x bytes / (link bandwidth x bus efficiency)."""
    if n < 2:
        return 0.0
    if nvlink:
        lat = VLLM_ALLREDUCE_LATENCY_MS.value + VLLM_ALLREDUCE_LATENCY_PER_GPU_MS.value * (n - 2)
    else:
        lat = PCIE_ALLREDUCE_LATENCY_MS.value
    return lat + 2 * (n - 1) / n * nbytes / (link_bytes_per_s * VLLM_ALLREDUCE_BUS_EFFICIENCY.value) * 1e3


def _runtime(engine: str) -> int:
    base = int(C.CUDA_CONTEXT_BYTES.value)
    return base + (int(C.VLLM_CUDA_GRAPH_BYTES.value) if engine == "vllm" else 0)


def estimate_split(spec: ModelSpec, quant: str, engine: str, machine: MultiGpu, plan: SplitPlan, *,
                   context_tokens: int, batch: int = 1, prompt_tokens: Optional[int] = None,
                   output_tokens: int = 256, kv_dtype: Optional[str] = None,
                   variant: Optional[Variant] = None) -> SplitEstimate:
    """Memory per device and latency of one configuration spread over the machine's GPUs by ``plan``."""
    why = check_plan(engine, plan, spec, machine)
    if why:
        raise ValueError(why)
    kw = dict(context_tokens=context_tokens, batch=batch, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
              kv_dtype=kv_dtype, variant=variant)
    devs = machine.devices
    same: dict[tuple, Estimate] = {}  # identical cards share one single-GPU estimate
    for d in devs:
        if (d.name, d.memory_bytes) not in same:
            same[(d.name, d.memory_bytes)] = _full(spec, quant, engine, d, kw)
    fulls = [same[(d.name, d.memory_bytes)] for d in devs]
    base = fulls[0]
    n = len(devs)
    n_layer = max(spec.num_layers, 1)
    if variant is not None:
        wbytes, embd_b = variant.weights_bytes, variant.embedding_bytes
    else:
        wbytes, embd_b, _ = variant_bytes(spec, quant)
    out_b = output_bytes(spec, quant) + (tied_output_bytes(spec, quant, embd_b) if spec.tie_word_embeddings else 0)
    blocks_b = max(wbytes - embd_b - output_bytes(spec, quant), 0)
    kv_total = base.kv_cache_bytes
    link = machine.link
    ovh_dec, ovh_pre, _ = fixed_step_ms(spec, engine, QUANTS[quant].family)  # once per step, whatever the split
    notes = list(base.notes)
    basis = dict(base.basis)
    basis["split"] = f"{plan.label} over {machine.name} ({link.label}) [docs/estimates.md §7]"
    prompt = base.prompt_tokens
    shares: list[DeviceShare] = []
    comm_tok = comm_pre = 0.0
    host = base.host_weights_bytes

    def dev_times(i: int, byte_share: float, flop_share: float) -> tuple[Optional[float], Optional[float]]:
        f = fulls[i]
        dec = None if f.tpot_ms is None else (f.tpot_ms - ovh_dec) * byte_share
        pre = None if f.ttft_ms is None else (f.ttft_ms - ovh_pre) * flop_share
        return dec, pre

    step_full = base.decode_bytes_per_step  # bytes one device would read for the whole model
    kv_read_full = base.decode_kv_bytes_per_step
    w_read_full = max(step_full - kv_read_full, 1)
    gpu_w_full = max(base.weights_gpu_bytes, 1)

    def byte_share_of(w_dev: int, kv_frac: float) -> float:
        """This device's share of the bytes one device would read per step for the whole model."""
        return (w_read_full * min(w_dev / gpu_w_full, 1.0) + kv_read_full * kv_frac) / step_full

    if plan.mode in ("layer", "pipeline"):
        if plan.mode == "layer":
            props = plan.tensor_split or [float(d.memory_bytes) for d in devs]
            owner = layer_assignment(n_layer, props)
        else:  # vLLM get_pp_indices: layers split evenly, the remainder to the later stages
            per, rem = divmod(n_layer, n)
            owner = []
            for s in range(n):
                owner += [s] * (per + (1 if s >= n - rem else 0))
            owner.append(n - 1)  # the LM head with the last stage
        for i, d in enumerate(devs):
            layers = sum(1 for il in range(n_layer) if owner[il] == i)
            has_out = owner[n_layer] == i
            frac = layers / n_layer
            w = int(blocks_b * frac) + (out_b if has_out else 0)
            if plan.mode == "pipeline" and i == 0:
                w += embd_b if not spec.tie_word_embeddings else 0
            kv = int(round(kv_total * frac))
            if engine == "llama.cpp":
                if has_out:
                    comp = spec.vocab_size * int(C.LLAMA_CPP_N_UBATCH.value) * C.F32_BYTES
                else:
                    width = max(spec.intermediate_size, spec.moe_intermediate_size * max(spec.num_experts_per_tok, 1))
                    comp = int(C.LLAMA_CPP_N_UBATCH.value) * width * C.F32_BYTES * \
                        int(LLAMA_CPP_SPLIT_ACTIVATION_COPIES.value)
            else:
                comp = base.compute_buffer_bytes
            rt = _runtime(engine)
            byte_share = byte_share_of(w, frac)
            dec, pre = dev_times(i, byte_share, frac)
            shares.append(_share(i, d, engine, layers, has_out, w, kv, comp, rt, dec, pre, spec, kv_dtype or
                                 base.kv_dtype, context_tokens, batch, n_dev=1))
        hops = sum(1 for il in range(1, n_layer + 1) if owner[il] != owner[il - 1])
        act = ACT_BYTES_LLAMA_CPP if engine == "llama.cpp" else ACT_BYTES_VLLM
        hop_lat = LLAMA_CPP_HOP_MS.value if engine == "llama.cpp" else PCIE_ALLREDUCE_LATENCY_MS.value
        comm_tok = hops * (hop_lat + batch * spec.hidden_size * act / link.bytes_per_s * 1e3)
        n_tok = prompt * batch
        ubatches = -(-n_tok // int(C.LLAMA_CPP_N_UBATCH.value)) if engine == "llama.cpp" else 1
        comm_pre = hops * (ubatches * hop_lat + n_tok * spec.hidden_size * act / link.bytes_per_s * 1e3)
        combine = sum  # the devices work one after the other
        basis["split_latency"] = (f"sum of the {n} devices' times (each: its single-GPU step x its share of the bytes"
                                  f" / FLOPs) + {hops} hop(s) x ({hop_lat} ms + batch x hidden x {act} B / link)")
    elif plan.mode == "row":
        props = plan.tensor_split or [float(d.memory_bytes) for d in devs]
        tot = sum(props)
        for i, d in enumerate(devs):
            frac = props[i] / tot
            main = i == 0
            w = int(blocks_b * frac) + (out_b if main else 0)
            kv = kv_total if main else 0
            comp = spec.vocab_size * int(C.LLAMA_CPP_N_UBATCH.value) * C.F32_BYTES if main else 0
            rt = _runtime(engine)
            byte_share = byte_share_of(w, 1.0 if main else 0.0)
            dec, pre = dev_times(i, byte_share, frac)
            shares.append(_share(i, d, engine, n_layer, main, w, kv, comp, rt, dec, pre, spec, kv_dtype or
                                 base.kv_dtype, context_tokens, batch, n_dev=1))
        syncs = n_layer * ROW_SPLIT_MATMULS_PER_BLOCK
        comm_tok = syncs * LLAMA_CPP_ROW_SYNC_MS.value
        n_tok = prompt * batch
        ubatches = -(-n_tok // int(C.LLAMA_CPP_N_UBATCH.value))
        comm_pre = syncs * ubatches * LLAMA_CPP_ROW_SYNC_MS.value + syncs * n_tok * spec.hidden_size * \
            ACT_BYTES_LLAMA_CPP / link.bytes_per_s * 1e3
        combine = max  # every device reads its rows at once
        basis["split_latency"] = (f"slowest device's rows + {syncs} synchronizations x "
                                  f"{LLAMA_CPP_ROW_SYNC_MS.value} ms per token")
    else:  # tensor
        kv_dev_frac = _kv_tp_fraction(spec, n)
        if engine == "vllm" and spec.num_kv_heads < n and not spec.is_mla:
            notes.append(f"{spec.num_kv_heads} KV heads over {n} GPUs: vLLM replicates each KV head on "
                         f"{n // spec.num_kv_heads} GPUs")
        for i, d in enumerate(devs):
            w = int(wbytes / n)
            kv = int(round(kv_total * kv_dev_frac))
            comp = int(base.compute_buffer_bytes / n)
            rt = _runtime(engine)
            byte_share = byte_share_of(w, kv_dev_frac)
            dec, pre = dev_times(i, byte_share, 1 / n)
            shares.append(_share(i, d, engine, n_layer, True, w, kv, comp, rt, dec, pre, spec, kv_dtype or
                                 base.kv_dtype, context_tokens, batch, n_dev=n))
        nv = link.kind == "nvlink"
        per_tok = ring_allreduce_ms(batch * spec.hidden_size * ACT_BYTES_VLLM, n, link.bytes_per_s, nv)
        comm_tok = ALLREDUCES_PER_LAYER * n_layer * per_tok
        comm_pre = ALLREDUCES_PER_LAYER * n_layer * ring_allreduce_ms(prompt * batch * spec.hidden_size *
                                                                      ACT_BYTES_VLLM, n, link.bytes_per_s, nv)
        combine = max
        basis["split_latency"] = (f"slowest GPU's shard + {ALLREDUCES_PER_LAYER} x {n_layer} ring all-reduces of "
                                  f"batch x hidden x 2 B ({per_tok * 1e3:.1f} us each over {link.label})")
    decs = [s.decode_ms for s in shares]
    pres = [s.prefill_ms for s in shares]
    tpot = None if any(x is None for x in decs) else combine(decs) + ovh_dec + comm_tok
    ttft = None if any(x is None for x in pres) else combine(pres) + ovh_pre + comm_pre
    if plan.mode == "tensor" and link.kind == "pcie" and n > 2:
        notes.append("vLLM disables its custom all-reduce on PCIe-only machines of more than two GPUs: NCCL's ring "
                     "(PCIE_ALLREDUCE_LATENCY_MS, an assumption) is used")
    if plan.mode in ("layer", "pipeline") and batch > 1:
        notes.append("layer/pipeline splits: the devices take turns on a step; throughput is not credited with "
                     "overlapping sequences across the stages")
    bad = [s for s in shares if not s.fits]
    for s in bad:
        notes.append(f"GPU {s.index} ({s.name}) needs {s.total_bytes / 1024**3:.1f} GiB of its "
                     f"{s.budget_bytes / 1024**3:.1f} GiB")
    weights_gpu = sum(s.weights_bytes for s in shares)
    comp_sum = sum(s.compute_buffer_bytes for s in shares)
    rt_sum = sum(s.runtime_overhead_bytes for s in shares)
    kv_sum = sum(s.kv_cache_bytes for s in shares)
    total = sum(s.total_bytes for s in shares)
    basis["memory"] = "per device: its weights + its layers' KV + its compute buffer + its CUDA context (summed here)"
    # bytes read from GPU memory per step, all devices together (tensor parallel reads replicated KV heads twice)
    kv_copies = _kv_tp_fraction(spec, n) * n if plan.mode == "tensor" else 1.0
    step_bytes = int(w_read_full + kv_read_full * kv_copies)
    return SplitEstimate(
        model=spec.id, quant=quant, engine=engine, hardware=machine.name, context_tokens=context_tokens, batch=batch,
        prompt_tokens=prompt, output_tokens=base.output_tokens, kv_dtype=base.kv_dtype, gpu_layers=None,
        weights_bytes=base.weights_bytes, weights_gpu_bytes=weights_gpu, host_weights_bytes=host,
        kv_bytes_per_token=base.kv_bytes_per_token, kv_cache_bytes=kv_sum, compute_buffer_bytes=comp_sum,
        runtime_overhead_bytes=rt_sum, overhead_bytes=comp_sum + rt_sum, total_vram_bytes=total, ttft_ms=ttft,
        tpot_ms=tpot, decode_bytes_per_step=step_bytes, decode_kv_bytes_per_step=kv_read_full,
        host_bytes_per_step=0, prefill_flops=base.prefill_flops, prefill_attention_flops=base.prefill_attention_flops,
        weights_bytes_provenance=base.weights_bytes_provenance, basis=basis, notes=notes, plan=plan,
        machine=machine.name, link=link.label, devices=shares, comm_ms_per_token=comm_tok, comm_ms_prefill=comm_pre)


def _kv_tp_fraction(spec: ModelSpec, n: int) -> float:
    """Share of the KV cache each of n tensor-parallel GPUs holds: kv_heads/n heads each (at least one: vLLM
    replicates a KV head over tp/kv_heads GPUs); the MLA latent is not sharded."""
    if spec.is_mla:
        return 1.0
    return max(spec.num_kv_heads // n, 1) / spec.num_kv_heads


def _share(i: int, d: HardwareProfile, engine: str, layers: int, out: bool, w: int, kv: int, comp: int, rt: int,
           dec: Optional[float], pre: Optional[float], spec: ModelSpec, kv_dtype: str, ctx: int, batch: int,
           n_dev: int) -> DeviceShare:
    total = w + kv + comp + rt
    kv_budget = blocks = None
    if engine == "vllm":
        budget = int(d.memory_bytes * C.VLLM_GPU_MEMORY_UTILIZATION.value)
        kv_budget = budget - (w + comp + rt)
        # KV bytes one token takes on this device: its share of the cache per token of context
        per_token = kv / max(ctx * batch, 1)
        blocks = max(int(kv_budget // (per_token * VLLM_BLOCK_SIZE.value)), 0) if per_token > 0 else None
    else:
        budget = d.memory_bytes
    return DeviceShare(index=i, name=d.name, memory_bytes=d.memory_bytes, layers=layers, output_layer=out,
                       weights_bytes=w, kv_cache_bytes=kv, compute_buffer_bytes=comp, runtime_overhead_bytes=rt,
                       total_bytes=total, budget_bytes=budget, fits=total <= budget, kv_budget_bytes=kv_budget,
                       kv_blocks=blocks, decode_ms=dec, prefill_ms=pre)
