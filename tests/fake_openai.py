"""A scripted OpenAI-compatible server on 127.0.0.1 for `probe serve` tests and bench/hostile.py: it answers like
llama-server / llama-cpp-python (GET /v1/models, POST /v1/completions streaming SSE chunks), or misbehaves the way
``mode`` says (no streaming, wrong JSON types, never-ending streams, slow drips, huge lines, credentials echoed).

    with FakeOpenAI("ok") as srv:  # srv.url is http://127.0.0.1:PORT/v1
        ...

Runs in a thread of the test process; the CLI under test is a separate process that connects to it.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SERVED = "SmolLM2-135M-Instruct-Q4_K_M.gguf"  # names a catalog model and its quantization

# Modes for POST /v1/completions (the warm-up and every measured request).
STREAM_MODES = ("ok", "json_body", "one_chunk", "huge_usage", "negative_usage", "usage_str", "usage_more",
                "choices_str", "choices_int", "choices_dict", "choices_list_int", "text_int", "text_list",
                "never_ending", "keepalive", "drip", "big_line", "big_body", "timings_str", "escapes")
# Modes for discovery (GET /v1/models, /props).
DISCOVERY_MODES = ("props_list", "n_ctx_lots", "n_ctx_huge", "n_ctx_str_num", "models_drip", "models_big",
                   "models_int", "data_str")
MODES = STREAM_MODES + DISCOVERY_MODES


def _chunk(text, finish=None, **extra) -> bytes:
    return b"data: " + json.dumps({"choices": [{"text": text, "index": 0, "finish_reason": finish}], **extra}).encode() \
        + b"\n\n"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a) -> None:  # quiet
        pass

    @property
    def mode(self) -> str:
        return self.server.mode  # type: ignore[attr-defined]

    def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _stop(self) -> bool:
        return self.server.stopping.is_set()  # type: ignore[attr-defined]

    def do_GET(self) -> None:  # noqa: N802
        m = self.mode
        if self.path.endswith("/v1/models"):
            if m == "models_drip":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                while not self._stop():
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(2)
                return
            if m == "models_big":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                blob = b" " * (1 << 20)
                try:
                    for _ in range(64):  # 64 MiB of whitespace before any JSON
                        if self._stop():
                            return
                        self.wfile.write(blob)
                except OSError:
                    pass
                return
            data = 7 if m == "models_int" else ("junk" if m == "data_str" else
                                                [{"id": SERVED, "object": "model", "owned_by": "me"}])
            return self._send(200, json.dumps({"object": "list", "data": data}).encode())
        if self.path.endswith("/props"):
            if m == "props_list":
                return self._send(200, b"[1, 2, 3]")
            n_ctx = {"n_ctx_lots": "lots", "n_ctx_huge": 1e38, "n_ctx_str_num": "2048"}.get(m, 2048)
            build = "fake-1\x1b]0;pwned\x07\x1b[2J" if m == "escapes" else "fake-1"
            return self._send(200, json.dumps({"default_generation_settings": {"n_ctx": n_ctx},
                                               "build_info": build, "total_slots": 1}).encode())
        return self._send(404, b'{"error": "not found"}')

    def do_POST(self) -> None:  # noqa: N802
        n = int(self.headers.get("Content-Length") or 0)
        req = json.loads(self.rfile.read(n) or b"{}")
        if self.path.endswith("/tokenize"):
            return self._send(404, b"{}")
        m = self.mode
        k = int(req.get("max_tokens") or 16)
        usage = {"prompt_tokens": 32, "completion_tokens": k, "total_tokens": 32 + k}
        if m == "json_body":
            return self._send(200, json.dumps({"choices": [{"text": "x " * k, "finish_reason": "length"}],
                                               "usage": usage}).encode())
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        w = self.wfile
        try:
            if m == "one_chunk":
                w.write(_chunk("x " * k, "length"))
                w.write(b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n")
            elif m == "never_ending":
                while not self._stop():
                    w.write(_chunk("x"))
                    w.flush()
                    time.sleep(0.01)
            elif m == "keepalive":
                while not self._stop():
                    w.write(b": ping\n\n")
                    w.flush()
                    time.sleep(0.2)
            elif m == "drip":
                w.write(b"data: ")
                while not self._stop():
                    w.write(b"x")
                    w.flush()
                    time.sleep(2)
            elif m == "big_line":
                blob = b"x" * (1 << 20)
                w.write(b"data: ")
                for _ in range(64):
                    if self._stop():
                        break
                    w.write(blob)
            elif m == "big_body":
                line = b": " + b"y" * 1000 + b"\n"
                for _ in range(40_000):  # 40 MB of comment lines
                    if self._stop():
                        break
                    w.write(line)
            else:
                bad = {"choices_str": {"choices": "oops"}, "choices_int": {"choices": 5},
                       "choices_dict": {"choices": {"text": "a"}}, "choices_list_int": {"choices": [1, 2]},
                       "text_int": {"choices": [{"text": 5}]}, "text_list": {"choices": [{"text": ["a"]}]}}
                for i in range(k):
                    if m in bad:
                        w.write(b"data: " + json.dumps(bad[m]).encode() + b"\n\n")
                    else:
                        w.write(_chunk("x", "length" if i == k - 1 else None))
                    w.flush()
                    time.sleep(0.001)
                if m == "huge_usage":
                    usage["completion_tokens"] = 2 ** 31
                elif m == "negative_usage":
                    usage["completion_tokens"] = -5
                elif m == "usage_str":
                    usage = {"prompt_tokens": "many", "completion_tokens": "lots"}
                elif m == "usage_more":
                    usage["completion_tokens"] = k * 50
                extra = {"timings": {"predicted_per_token_ms": "fast", "prompt_ms": [1]}} if m == "timings_str" \
                    else {}
                w.write(b"data: " + json.dumps({"choices": [], "usage": usage, **extra}).encode() + b"\n\n")
            w.write(b"data: [DONE]\n\n")
            w.flush()
        except OSError:
            pass
        self.close_connection = True


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:  # a client that hung up: expected, not printed
        pass


class FakeOpenAI:
    def __init__(self, mode: str = "ok", port: int = 0) -> None:
        if mode not in MODES:
            raise ValueError(mode)
        self.httpd = _Server(("127.0.0.1", port), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.mode = mode  # type: ignore[attr-defined]
        self.httpd.stopping = threading.Event()  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def set_mode(self, mode: str) -> None:
        self.httpd.mode = mode  # type: ignore[attr-defined]

    def __enter__(self) -> "FakeOpenAI":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.stopping.set()  # type: ignore[attr-defined]
        self.httpd.shutdown()
        self.httpd.server_close()


if __name__ == "__main__":  # a server for manual runs: python tests/fake_openai.py MODE [PORT]
    import sys

    with FakeOpenAI(sys.argv[1] if len(sys.argv) > 1 else "ok", int(sys.argv[2]) if len(sys.argv) > 2 else 0) as s:
        print(s.url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
