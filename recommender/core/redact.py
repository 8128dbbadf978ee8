"""Credentials out of everything the recommender writes: stored rows, log and error lines, crash files.

A URL may carry ``user:password@`` or a token in its query (``?api_key=...``, ``&token=...``); a Hugging Face token
(``hf_...``) may appear in an endpoint or an error a library raised; HF_TOKEN's value may be echoed back by a server.
``redact`` replaces each with ``***`` and keeps the rest of the text, so an error still says which host failed.
"""

from __future__ import annotations

import os
import re
import unicodedata

# user:password@ (or a bare token@) between a scheme and a host
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@?#]+@")
# query or fragment parameters that carry a secret
_SECRET_KEYS = ("api_key", "apikey", "api-key", "key", "token", "access_token", "auth", "authorization", "password",
                "passwd", "pwd", "secret", "client_secret", "sig", "signature", "hf_token", "x-api-key", "session")
_QUERY = re.compile(r"(?i)([?&#;](?:" + "|".join(re.escape(k) for k in _SECRET_KEYS) + r")=)[^&#\s'\"]*")
# Hugging Face user / org tokens (hf_ + 30-40 letters), OpenAI-style keys (sk-...)
_TOKENS = re.compile(r"\b(hf_|sk-)[A-Za-z0-9_-]{16,}")
# environment variables whose values are secrets wherever they show up
SECRET_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_TOKEN", "OPENAI_API_KEY", "RECOMMENDER_API_KEY")
MIN_SECRET_LEN = 6  # shorter values would redact ordinary words


def redact(text: str) -> str:
    """``text`` with URL credentials, secret query parameters, token-looking words and the values of SECRET_ENV
    replaced by ``***``."""
    if not text:
        return text
    out = _USERINFO.sub(r"\1***@", text)
    out = _QUERY.sub(r"\1***", out)
    out = _TOKENS.sub(r"\1***", out)
    for name in SECRET_ENV:
        v = os.environ.get(name)
        if v and len(v) >= MIN_SECRET_LEN and v in out:
            out = out.replace(v, "***")
    return out


def redact_obj(obj):
    """Every string inside a JSON-like value redacted (dict keys included)."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {redact_obj(k): redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_obj(v) for v in obj]
    return obj


def printable(text: str, lines: bool = False) -> str:
    """``text`` safe for a terminal: control characters (ESC, BEL, CR, the C1 range, bidi overrides ...) shown as
    ``\\xNN`` / ``\\uNNNN`` escapes, so a server's answer or a Hub field cannot move the cursor, retitle the window
    or hide text. Tabs stay, and newlines when ``lines`` (a block of lines the caller means to print)."""
    if not text:
        return text
    keep = "\t\n" if lines else "\t"
    out = []
    for ch in str(text):
        if ch in keep or (unicodedata.category(ch) not in ("Cc", "Cf") and ch not in "\u2028\u2029"):
            out.append(ch)
        else:
            o = ord(ch)
            out.append(f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}")
    return "".join(out)
