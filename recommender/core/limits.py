"""Bounds on every count read from a model file, and the checks that refuse impossible architectures.

A 9 KB GGUF can claim 2^32 - 1 blocks and a config.json 10^9 layers; left alone, the per-layer tensor inventory is
built until memory runs out. Every count is bounded here, far above any published model (the largest in 2025:
126 layers, 128 heads, 384 experts, a 262,144-token vocabulary, a 10M-token context), with one clear error. The
parsers call these after parsing (``check_config``: the raw config.json; ``check_spec``: every ModelSpec, through its
validator; ``guard_parse``: any other failure of a parser on a malformed file becomes a UserError, not a traceback).
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, TypeVar

from recommender.core.errors import UserError

MAX_LAYERS = 4096
MAX_HEADS = 4096
MAX_HEAD_DIM = 1 << 14
MAX_HIDDEN = 1 << 20
MAX_INTERMEDIATE = 1 << 22
MAX_VOCAB = 1 << 24
MAX_CONTEXT = 1 << 30  # tokens
MAX_EXPERTS = 1 << 14
MAX_LORA_RANK = 1 << 16
MAX_INT_VALUE = (1 << 63) - 1  # a BIGINT column: anything larger cannot be stored
MAX_JSON_DEPTH = 64  # config.json / safetensors headers nest a few levels; 3,000 levels is an attack

# ModelSpec field -> (low, high): counts a real architecture has
SPEC_BOUNDS: dict[str, tuple[int, int]] = {
    "hidden_size": (1, MAX_HIDDEN),
    "num_layers": (1, MAX_LAYERS),
    "num_attention_heads": (1, MAX_HEADS),
    "num_kv_heads": (1, MAX_HEADS),
    "head_dim": (1, MAX_HEAD_DIM),
    "intermediate_size": (0, MAX_INTERMEDIATE),
    "vocab_size": (1, MAX_VOCAB),
    "max_position_embeddings": (0, MAX_CONTEXT),
    "num_swa_layers": (0, MAX_LAYERS),
    "num_experts": (0, MAX_EXPERTS),
    "num_experts_per_tok": (0, MAX_EXPERTS),
    "moe_intermediate_size": (0, MAX_INTERMEDIATE),
    "num_shared_experts": (0, MAX_EXPERTS),
    "shared_expert_intermediate_size": (0, MAX_INTERMEDIATE * 64),
    "first_k_dense_layers": (0, MAX_LAYERS),
    "kv_lora_rank": (0, MAX_LORA_RANK),
    "q_lora_rank": (0, MAX_LORA_RANK),
    "qk_rope_head_dim": (0, MAX_HEAD_DIM),
    "qk_nope_head_dim": (0, MAX_HEAD_DIM),
    "v_head_dim": (0, MAX_HEAD_DIM),
    "extra_norms_per_layer": (0, 64),
    "swa_num_attention_heads": (0, MAX_HEADS),
    "params_total": (0, MAX_INT_VALUE),
    "params_active": (0, MAX_INT_VALUE),
}
_HINT = "the model file declares an impossible architecture; re-download it or give the model's own config.json"


MAX_NAME_CHARS = 512  # a model id / architecture name


def has_control_chars(text: str) -> bool:
    """C0/C1 control characters (ESC starts an ANSI escape that would reach the terminal raw), DEL included."""
    return any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in text)


def spec_problems(spec: Any) -> list[str]:
    """What makes this architecture impossible (empty: none)."""
    out = []
    for field in ("id", "architecture", "model_type"):
        v = getattr(spec, field, "") or ""
        if has_control_chars(v):
            out.append(f"{field} {v!r} contains control characters (terminal escapes)")
        elif len(v) > MAX_NAME_CHARS or (field == "id" and not v.strip()):
            out.append(f"{field} is empty or longer than {MAX_NAME_CHARS} characters")
    for field, (lo, hi) in SPEC_BOUNDS.items():
        v = getattr(spec, field, None)
        if v is None:
            continue
        if not lo <= v <= hi:
            out.append(f"{field} {v} is outside {lo}..{hi}")
    if out:
        return out
    if spec.num_kv_heads > spec.num_attention_heads:
        out.append(f"num_kv_heads {spec.num_kv_heads} exceeds num_attention_heads {spec.num_attention_heads}")
    if spec.num_experts and not 1 <= spec.num_experts_per_tok <= spec.num_experts:
        out.append(f"num_experts_per_tok {spec.num_experts_per_tok} is not within 1..num_experts "
                   f"({spec.num_experts})")
    if spec.num_swa_layers > spec.num_layers or spec.first_k_dense_layers > spec.num_layers:
        out.append("more sliding-window or dense layers than layers")
    if spec.sliding_window is not None and not 1 <= spec.sliding_window <= MAX_CONTEXT:
        out.append(f"sliding_window {spec.sliding_window} is outside 1..{MAX_CONTEXT}")
    return out


def check_spec(spec: Any) -> Any:
    """``spec`` itself, or a ValueError naming the impossible fields (ModelSpec's validator raises it)."""
    problems = spec_problems(spec)
    if problems:
        raise ValueError(f"impossible architecture for {spec.id}: {'; '.join(problems[:3])}")
    return spec


def json_depth_ok(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether a parsed JSON value nests at most ``limit`` levels (iteratively: no recursion on hostile input)."""
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            if d > limit:
                return False
            stack.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v))
    return True


# Config keys whose value is a numeric range that may be open-ended (+/-Infinity, as Python's json writes it): Mamba-2's
# clamp on the discretization step, `time_step_limit` (transformers Mamba2Config / NemotronH default (0.0, inf); the
# published nvidia/NVIDIA-Nemotron-3-Super-120B-A12B config.json holds [0.0, Infinity]). Never read as a size.
UNBOUNDED_RANGE_KEYS = frozenset({"time_step_limit"})


def check_config(config: Any, model_id: str) -> None:
    """Raw config.json checks before any field is used: nesting depth, every number finite (but the open ends of
    UNBOUNDED_RANGE_KEYS) and within BIGINT, and a
    hidden size that splits into the heads when no head_dim says otherwise."""
    if not isinstance(config, dict):
        return  # the parser's own error says so
    if not json_depth_ok(config):
        raise UserError(f"config for {model_id} nests deeper than {MAX_JSON_DEPTH} levels", hint=_HINT)
    stack = [config]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            for k, x in v.items():
                if k in UNBOUNDED_RANGE_KEYS and isinstance(x, list) and all(
                        isinstance(e, (int, float)) and not isinstance(e, bool) and not math.isnan(e) for e in x):
                    continue  # a range with an open end, never a size
                stack.append(x)
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, float) and not math.isfinite(v):
            raise UserError(f"config for {model_id} holds a non-finite number ({v})", hint=_HINT)
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) > MAX_INT_VALUE:
            raise UserError(f"config for {model_id} holds a number too large to be a size ({v:.3g})", hint=_HINT)
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) and "hidden_size" not in config \
        else config
    hidden, heads = text.get("hidden_size"), text.get("num_attention_heads")
    if (isinstance(hidden, int) and isinstance(heads, int) and not isinstance(hidden, bool) and heads > 0
            and not text.get("head_dim") and not text.get("kv_lora_rank") and hidden % heads):
        raise UserError(f"config for {model_id}: hidden_size {hidden} is not divisible by num_attention_heads "
                        f"{heads} (and no head_dim is given)", hint=_HINT)


F = TypeVar("F", bound=Callable[..., Any])

# what a parser raises on a malformed file it did not anticipate: never a traceback for the user
_PARSE_ERRORS = (ValueError, TypeError, KeyError, IndexError, AttributeError, ZeroDivisionError, OverflowError,
                 RecursionError, MemoryError)


def guard_parse(what: str) -> Callable[[F], F]:
    """Decorator for a model-file parser: a malformed input's ValueError/TypeError/... (a pydantic ValidationError
    from ``check_spec`` included) becomes one UserError naming the input."""

    def deco(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except UserError:
                raise
            except _PARSE_ERRORS as e:
                name = kwargs.get("model_id") or (args[0] if args and isinstance(args[0], (str,)) else None) \
                    or (str(args[0]) if args and not isinstance(args[0], dict) else None) \
                    or (args[1] if len(args) > 1 and isinstance(args[1], str) else "the model")
                raise UserError(f"cannot read {what} of {str(name)[:200]}: {_reason(e)}", hint=_HINT) from None

        return wrapper  # type: ignore[return-value]

    return deco


def _reason(e: BaseException) -> str:
    errors = getattr(e, "errors", None)
    if callable(errors):  # pydantic: the first problem, without the URL lines
        try:
            first = errors()[0]
            return str(first.get("msg", e))[:300]
        except Exception:  # noqa: BLE001
            pass
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0][:300] if lines else ''}"

# -- measured rows (recommender.core.records.measurement_problems) ----------------------------------------------------
# A probe row is input like any other: a server that does not stream, or claims 2^31 output tokens, must not become a
# "measured" TPOT of 0 or 2e-11 ms that every later prediction divides by.
MAX_ROW_BATCH = 1 << 16  # sequences in flight: probe serve allows 256 per level, probe perf 1024
MAX_ROW_MS = 7 * 24 * 3600 * 1000.0  # a week, the longest --timeout a probe takes (cli.common.MAX_PROBE_TIMEOUT_S)
# 0.01 ms per token is 100,000 tokens/s for ONE sequence: ~50x the fastest single-stream decode published in 2025
# (Cerebras' ~2,000-2,500 tokens/s on Llama models, cerebras.ai/blog); a smaller TPOT is a measuring error.
MIN_ROW_TPOT_MS = 0.01
MAX_ROW_TOKENS_PER_S = 1e9  # prefill or throughput of a whole machine: ~1,000x an H200's prefill of a 1B model
MAX_ROW_BYTES = 1 << 50  # 1 PiB of memory
