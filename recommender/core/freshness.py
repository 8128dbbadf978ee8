"""Release dates and model lines: which catalog model is a newer sibling of another (Qwen3-8B -> Qwen3.5-9B).

Pure functions over ids, release dates and parameter counts (no catalog access), so `catalog list --since`,
`catalog outdated` and the note `recommend` prints all use the same definition:

* a model's **line** is its publisher (the HF org) plus the words of its name that are neither versions, sizes,
  checkpoint kinds, dates nor formats: ``Qwen/Qwen3-30B-A3B-Instruct-2507`` and ``Qwen/Qwen3.6-35B-A3B`` are both
  (qwen, [qwen]); ``Qwen/Qwen3-Coder-30B-A3B-Instruct`` is (qwen, [qwen, coder]), another line;
* its **family** is the first word of the line (qwen, gemma, glm, deepseek ...);
* a **newer sibling** of model A is a model B of the same line, released later (both dates known), in the same size
  class (B's total parameters within SIZE_CLASS_RATIO of A's, and both dense or both MoE), and of the same checkpoint
  group (chat-like vs base) when both kinds are known. The newest such B is the one named (ties: the closest in
  size).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Optional

from recommender.core.records import CHAT_CHECKPOINTS

# B's total parameters within [A / ratio, A x ratio]: Qwen3-8B (8.2 B) -> Qwen3.5-9B (9.7 B), Qwen3-32B (32.8 B) ->
# Qwen3.6-27B (27.8 B), but not Qwen3-8B -> Qwen3.6-27B.
SIZE_CLASS_RATIO = 1.5

_DATE = re.compile(r"^\s*(\d{4})(?:-(\d{2}))?(?:-(\d{2}))?")
# words of a model name that say what a checkpoint is rather than which line it belongs to
_KIND_WORDS = frozenset({
    "instruct", "it", "chat", "base", "thinking", "reasoning", "hf", "sft", "dpo", "rl", "preview", "exp", "bf16",
    "fp16", "fp8", "fp4", "nvfp4", "mxfp4", "int4", "int8", "awq", "gptq", "gguf", "mlx", "qat", "dynamic", "static",
    "pertensor", "4bit", "8bit"})
# a version (3, 3.6, v4, k2.5, m2.5, 2507), a size (27b, a3b, e4b, 0.8b, 270m, 8x7b, 16e, 128e) or a date code
# publisher names some ids start with (meta-llama/Meta-Llama-3-8B, nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B)
_PUBLISHER_WORDS = frozenset({"meta", "nvidia"})
_NOT_LINE = re.compile(r"^(?:[a-z]?\d[\d.]*[a-z]?|\d+x\d+[bm]|[a-z]?\d+(?:\.\d+)?[bmk]|\d+e|\d{4,6})$")


def release_key(date: Optional[str]) -> Optional[tuple[int, int, int]]:
    """(year, month, day) of a release date written YYYY, YYYY-MM or YYYY-MM-DD (missing parts as 0); None when the
    text does not start with a year."""
    if not date:
        return None
    m = _DATE.match(str(date))
    if not m:
        return None
    return int(m.group(1)), int(m.group(2) or 0), int(m.group(3) or 0)


def parse_since(text: str) -> tuple[int, int, int]:
    """`--since` value (YYYY, YYYY-MM or YYYY-MM-DD) as a release_key; ValueError if it is not one."""
    key = release_key(text)
    if key is None or not re.fullmatch(r"\d{4}(-\d{2}(-\d{2})?)?", text.strip()) or not 1 <= (key[1] or 1) <= 12 \
            or not 1 <= (key[2] or 1) <= 31:
        raise ValueError(f"not a date: {text!r}")
    return key


def released_since(date: Optional[str], since: tuple[int, int, int]) -> bool:
    """True when a model's release date is on or after ``since``. A date known only to the month is compared by month
    (a model dated 2026-06 counts as released since 2026-06-15); no date: False."""
    key = release_key(date)
    if key is None:
        return False
    pad = lambda k: (k[0], k[1] or 1, k[2] or 1)  # noqa: E731
    a, s = pad(key), pad(since)
    if key[2] == 0:  # month precision: compare months
        return (a[0], a[1]) >= (s[0], s[1])
    return a >= s


def model_line(model_id: str) -> tuple[str, tuple[str, ...]]:
    """(publisher, line words) of an HF id; see the module docstring."""
    org, _, name = model_id.rpartition("/")
    words = [w for w in re.split(r"[-_\s]+", name.lower()) if w]
    if len(words) > 1 and words[0] in _PUBLISHER_WORDS:
        words = words[1:]  # "Meta-Llama-3", "NVIDIA-Nemotron-3": the publisher repeated in the name
    line: list[str] = []
    for w in words:
        if w in _KIND_WORDS or _NOT_LINE.match(w):
            continue
        stem = re.match(r"^([a-z]+)\d", w)  # qwen3.6 -> qwen, phi4 -> phi
        line.append(stem.group(1) if stem else w)
    return org.lower(), tuple(line or [name.lower()])


def model_family(model_id: str) -> str:
    """First word of the model's line (qwen, gemma, glm, deepseek, kimi ...)."""
    return model_line(model_id)[1][0]


@dataclass(frozen=True)
class Dated:
    """What the sibling rule needs of one catalog model."""
    id: str
    release_date: Optional[str]
    params_total: int
    moe: bool
    chat: Optional[bool]  # None: checkpoint kind unknown (a Hub model whose name does not say)


def newer_sibling(model: Dated, others: Iterable[Dated]) -> Optional[Dated]:
    """The newest model of the same line, size class and checkpoint group released after ``model`` (None when the
    catalog has none, or when ``model`` has no release date)."""
    key = release_key(model.release_date)
    if key is None or model.params_total <= 0:
        return None
    line = model_line(model.id)
    best: Optional[tuple] = None
    for o in others:
        ok = release_key(o.release_date)
        if o.id == model.id or ok is None or ok <= key or model_line(o.id) != line:
            continue
        if o.moe != model.moe or o.params_total <= 0 or (None not in (o.chat, model.chat) and o.chat != model.chat):
            continue
        ratio = o.params_total / model.params_total
        if not 1 / SIZE_CLASS_RATIO <= ratio <= SIZE_CLASS_RATIO:
            continue
        rank = (ok, -abs(ratio - 1.0))
        if best is None or rank > best[0]:
            best = (rank, o)
    return best[1] if best else None


def dated_of(spec) -> Dated:
    """The sibling rule's view of a ModelSpec (recommender.core.records)."""
    return Dated(id=spec.id, release_date=spec.release_date, params_total=spec.params_total,
                 moe=spec.num_experts > 0,
                 chat=None if spec.checkpoint is None else spec.checkpoint in CHAT_CHECKPOINTS)


def newer_siblings(specs: Iterable) -> dict[str, Dated]:
    """model id -> its newer sibling (see newer_sibling), for every ModelSpec that has one."""
    views = [dated_of(s) for s in specs]
    out = {}
    for v in views:
        sib = newer_sibling(v, views)
        if sib is not None:
            out[v.id] = sib
    return out
