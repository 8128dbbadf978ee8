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
                  + per-token overhead + (devices - 1) hops of the activations (batch x hidden x f32) over the link
                  + devices x each device's own step time (llama_cpp.LLAMA_CPP_SPLIT_DEVICE_STEP_MS, fitted).
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

from recommender.core.engines import ENGINE_SPECS, engine_spec
from recommender.core.records import HardwareProfile, ModelSpec, Strict, Variant
from recommender.hardware.multi import MultiGpu
from recommender.model.quant import QUANTS
from recommender.predict.analytical import (Estimate, estimate, fixed_step_ms, output_bytes, tied_output_bytes,
                                            variant_bytes)
from recommender.predict.counts import tp_supported  # noqa: F401  (named here for its callers)
from recommender.predict.engines import rules_for
from recommender.predict.engines.base import EngineRules
from recommender.predict.engines.vllm import ring_allreduce_ms  # noqa: F401  (named here for its callers)

SplitMode = Literal["layer", "row", "tensor", "pipeline"]
ENGINE_MODES: dict[str, tuple[str, ...]] = {e.name: e.split_modes for e in ENGINE_SPECS if e.split_modes}


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


# --- constants: each engine's split terms are its rules' (recommender.predict.engines: llama_cpp.LLAMA_CPP_HOP_MS,
# LLAMA_CPP_ROW_SYNC_MS; vllm.VLLM_ALLREDUCE_*, PCIE_ALLREDUCE_LATENCY_MS, VLLM_BLOCK_SIZE), with their sources


def default_plan(engine: str, spec: ModelSpec, machine: MultiGpu) -> Optional[SplitPlan]:
    """The plan an engine uses by default on this machine (its rules: llama.cpp's layer split; vLLM's tensor
    parallelism when the heads divide over the GPUs, else pipeline parallelism). None: the engine has no multi-GPU
    plan here."""
    if not ENGINE_MODES.get(engine):
        return None
    mode = rules_for(engine).default_plan_mode(spec, machine.count, machine.homogeneous)
    return None if mode is None else SplitPlan(mode=mode)


def check_plan(engine: str, plan: SplitPlan, spec: ModelSpec, machine: MultiGpu) -> Optional[str]:
    """None when this engine can run this plan, else the reason it cannot (a user error)."""
    if plan.mode not in ENGINE_MODES.get(engine, ()):
        modes = ENGINE_MODES.get(engine)
        return (f"{engine} has no '{plan.mode}' split" + (f" (it has: {', '.join(modes)})" if modes else
                                                           f" (multi-GPU plans cover {_split_engines()})"))
    if plan.tensor_split is not None:
        if not set(ENGINE_MODES[engine]) & {"layer", "row"}:
            return "--tensor-split is llama.cpp's option"
        if len(plan.tensor_split) != machine.count or any(x < 0 for x in plan.tensor_split) \
                or not sum(plan.tensor_split) > 0:
            return f"--tensor-split needs {machine.count} non-negative proportions, not all zero"
    if plan.mode == "tensor":
        if not machine.homogeneous:
            return f"{engine_spec(engine).label} tensor parallelism needs identical GPUs"
        return tp_supported(spec, machine.count)
    if plan.mode == "pipeline" and spec.num_layers < machine.count:
        return f"{spec.num_layers} layers cannot fill {machine.count} pipeline stages"
    return None


def _split_engines() -> str:
    return " and ".join(engine_spec(e).label for e in ENGINE_MODES)


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


def estimate_split(spec: ModelSpec, quant: str, engine: str, machine: MultiGpu, plan: SplitPlan, *,
                   context_tokens: int, batch: int = 1, prompt_tokens: Optional[int] = None,
                   output_tokens: int = 256, kv_dtype: Optional[str] = None,
                   variant: Optional[Variant] = None) -> SplitEstimate:
    """Memory per device and latency of one configuration spread over the machine's GPUs by ``plan``."""
    why = check_plan(engine, plan, spec, machine)
    if why:
        raise ValueError(why)
    r = rules_for(engine)
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
            comp = r.split_compute_buffer(spec, plan.mode, has_out, base.compute_buffer_bytes)
            rt = r.split_runtime_overhead(d, n)
            byte_share = byte_share_of(w, frac)
            dec, pre = dev_times(i, byte_share, frac)
            shares.append(_share(i, d, r, layers, has_out, w, kv, comp, rt, dec, pre, spec, kv_dtype or
                                 base.kv_dtype, context_tokens, batch, n_dev=1))
        hops = sum(1 for il in range(1, n_layer + 1) if owner[il] != owner[il - 1])
        hop_lat, act = r.split_hop()
        dev_step = r.split_device_step_ms()  # each device's own per-token step (llama.cpp: fitted, engines.llama_cpp)
        comm_tok = hops * (hop_lat + batch * spec.hidden_size * act / link.bytes_per_s * 1e3) + n * dev_step
        n_tok = prompt * batch
        ubatches = r.prefill_chunks(n_tok)
        comm_pre = hops * (ubatches * hop_lat + n_tok * spec.hidden_size * act / link.bytes_per_s * 1e3)
        combine = sum  # the devices work one after the other
        basis["split_latency"] = (f"sum of the {n} devices' times (each: its single-GPU step x its share of the bytes"
                                  f" / FLOPs) + {hops} hop(s) x ({hop_lat} ms + batch x hidden x {act} B / link)"
                                  + (f" + {n} x {dev_step} ms (each device's step)" if dev_step else ""))
    elif plan.mode == "row":
        props = plan.tensor_split or [float(d.memory_bytes) for d in devs]
        tot = sum(props)
        for i, d in enumerate(devs):
            frac = props[i] / tot
            main = i == 0
            w = int(blocks_b * frac) + (out_b if main else 0)
            kv = kv_total if main else 0
            comp = r.split_compute_buffer(spec, plan.mode, main, base.compute_buffer_bytes)
            rt = r.split_runtime_overhead(d, n)
            byte_share = byte_share_of(w, 1.0 if main else 0.0)
            dec, pre = dev_times(i, byte_share, frac)
            shares.append(_share(i, d, r, n_layer, main, w, kv, comp, rt, dec, pre, spec, kv_dtype or
                                 base.kv_dtype, context_tokens, batch, n_dev=1))
        syncs, sync_ms = r.row_syncs(n_layer)
        _, act = r.split_hop()
        comm_tok = syncs * sync_ms
        n_tok = prompt * batch
        ubatches = r.prefill_chunks(n_tok)
        comm_pre = syncs * ubatches * sync_ms + syncs * n_tok * spec.hidden_size * act / link.bytes_per_s * 1e3
        combine = max  # every device reads its rows at once
        basis["split_latency"] = (f"slowest device's rows + {syncs} synchronizations x "
                                  f"{sync_ms} ms per token")
    else:  # tensor
        kv_dev_frac = _kv_tp_fraction(spec, n)
        if spec.num_kv_heads < n and not spec.is_mla:
            notes.append(f"{spec.num_kv_heads} KV heads over {n} GPUs: {r.spec.label} replicates each KV head on "
                         f"{n // spec.num_kv_heads} GPUs")
        for i, d in enumerate(devs):
            w = int(wbytes / n)
            kv = int(round(kv_total * kv_dev_frac))
            comp = int(base.compute_buffer_bytes / n)
            rt = r.split_runtime_overhead(d, n)
            byte_share = byte_share_of(w, kv_dev_frac)
            dec, pre = dev_times(i, byte_share, 1 / n)
            shares.append(_share(i, d, r, n_layer, True, w, kv, comp, rt, dec, pre, spec, kv_dtype or
                                 base.kv_dtype, context_tokens, batch, n_dev=n))
        nv = link.kind == "nvlink"
        per_layer, act = r.allreduce()
        per_tok = r.allreduce_ms(batch * spec.hidden_size * act, n, link.bytes_per_s, nv)
        comm_tok = per_layer * n_layer * per_tok
        comm_pre = per_layer * n_layer * r.allreduce_ms(prompt * batch * spec.hidden_size * act, n, link.bytes_per_s,
                                                        nv)
        combine = max
        basis["split_latency"] = (f"slowest GPU's shard + {per_layer} x {n_layer} ring all-reduces of "
                                  f"batch x hidden x 2 B ({per_tok * 1e3:.1f} us each over {link.label})")
    decs = [s.decode_ms for s in shares]
    pres = [s.prefill_ms for s in shares]
    tpot = None if any(x is None for x in decs) else combine(decs) + ovh_dec + comm_tok
    ttft = None if any(x is None for x in pres) else combine(pres) + ovh_pre + comm_pre
    if plan.mode == "tensor" and link.kind == "pcie" and n > 2:
        notes.append(f"{r.spec.label} disables its custom all-reduce on PCIe-only machines of more than two GPUs: NCCL's ring "
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


def _share(i: int, d: HardwareProfile, r: EngineRules, layers: int, out: bool, w: int, kv: int, comp: int, rt: int,
           dec: Optional[float], pre: Optional[float], spec: ModelSpec, kv_dtype: str, ctx: int, batch: int,
           n_dev: int) -> DeviceShare:
    total = w + kv + comp + rt
    kv_budget = blocks = None
    budget, kv_blocks = r.split_budget(d.memory_bytes)
    if kv_blocks:  # vLLM: the reservation left after weights, activations and graphs is KV blocks
        kv_budget = budget - (w + comp + rt)
        # KV bytes one token takes on this device: its share of the cache per token of context
        per_token = kv / max(ctx * batch, 1)
        blocks = max(int(kv_budget // (per_token * r.block_size.value)), 0) if per_token > 0 else None
    return DeviceShare(index=i, name=d.name, memory_bytes=d.memory_bytes, layers=layers, output_layer=out,
                       weights_bytes=w, kv_cache_bytes=kv, compute_buffer_bytes=comp, runtime_overhead_bytes=rt,
                       total_bytes=total, budget_bytes=budget, fits=total <= budget, kv_budget_bytes=kv_budget,
                       kv_blocks=blocks, decode_ms=dec, prefill_ms=pre)
