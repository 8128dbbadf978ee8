"""Name resolution with "did you mean" for models, GPUs, engines, quantizations."""

from __future__ import annotations

import difflib
from typing import Iterable, Mapping


from recommender.core.errors import UserError


MIN_SUBSTRING_CHARS = 2  # a one-character name is matched exactly or not at all


def _norm(s: str) -> str:
    return s.strip().lower()


def resolve(name: str, choices: Iterable[str], kind: str, aliases: Mapping[str, str] | None = None,
            hint_cmd: str = "") -> str:
    """Return the one choice that ``name`` designates, or raise UserError with suggestions.

    Matches, in order: exact (case-insensitive) on a choice or an alias; exact on the part after the last
    '/' (HF ids); a unique substring of that part.
    """
    choices = list(choices)
    aliases = {_norm(k): v for k, v in (aliases or {}).items()}
    key = _norm(name)
    if not key:
        raise UserError(f"empty {kind} name", hint=hint_cmd or f"give a {kind} name")
    by_norm = {_norm(c): c for c in choices}
    if key in by_norm:
        return by_norm[key]
    if key in aliases:
        return aliases[key]
    tail = {}
    for c in choices:
        tail.setdefault(_norm(c.rsplit("/", 1)[-1]), []).append(c)
    if key in tail and len(tail[key]) == 1:
        return tail[key][0]
    sub: list[str] = []
    if len(key) >= MIN_SUBSTRING_CHARS and any(ch.isalnum() for ch in key):  # '_' or '-' designates nothing
        sub = [c for c in choices if key in _norm(c.rsplit("/", 1)[-1])]
        sub += [v for a, v in aliases.items() if key in a and v not in sub]
    if len(sub) == 1:
        return sub[0]
    if len(sub) > 1:
        shown = ", ".join(sorted(sub)[:6])
        raise UserError(f"{kind} {name!r} is ambiguous: it matches {shown}",
                        hint=f"give more of the name, e.g. {sorted(sub)[0]!r}")
    pool = list(by_norm) + list(tail) + list(aliases)
    close = difflib.get_close_matches(key, pool, n=3, cutoff=0.5)
    names = []
    for c in close:
        full = by_norm.get(c) or aliases.get(c) or tail[c][0]
        if full not in names:
            names.append(full)
    if names:
        raise UserError(f"unknown {kind} {name!r}; did you mean {' or '.join(repr(n) for n in names)}?",
                        hint=hint_cmd or f"check the {kind} name")
    raise UserError(f"unknown {kind} {name!r}", hint=hint_cmd or f"check the {kind} name")
