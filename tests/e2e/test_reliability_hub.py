"""Issue 28, the Hub path: `catalog add hf:ORG/NAME` against a fake Hub on 127.0.0.1 (HF_ENDPOINT) that misbehaves
(huge or slow config.json, fields of the wrong JSON type, HTTP 500, redirects off the host, a 4,301-digit integer,
escape sequences), and an HF_ENDPOINT with a password that must not be stored or printed."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from recommender.core.paths import SOURCES_DIR

REPO = "Qwen/Qwen2.5-7B-Instruct"
SHA = "0123456789abcdef0123456789abcdef01234567"
CONFIG = (SOURCES_DIR / "configs" / (REPO.replace("/", "__") + ".json")).read_bytes()


class _Hub(BaseHTTPRequestHandler):
    mode = "ok"
    stop = threading.Event()

    def log_message(self, *_a) -> None:
        pass

    def _send(self, code: int, body: bytes, **headers: str) -> None:
        self.send_response(code)
        for k, v in headers.items():
            self.send_header(k.replace("_", "-"), v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        m = type(self).mode
        path = self.path.split("?", 1)[0]
        if path.startswith("/api/models/"):
            info = {"id": REPO, "sha": SHA, "pipeline_tag": "text-generation", "tags": ["transformers"],
                    "cardData": {"license": "apache-2.0"}, "createdAt": "2024-09-16T11:55:40.000Z"}
            info.update({"tags_int": {"tags": 5}, "tags_int_list": {"tags": [1, 2]}, "pipeline_int": {"pipeline_tag": 7},
                         "card_str": {"cardData": "license: mit"}, "card_list": {"cardData": ["mit"]},
                         "sha_escape": {"sha": "\x1b]0;pwned\x07"},
                         "license_escape": {"cardData": {"license": "mit\x1b[2J"}}}.get(m, {}))
            if m == "info_list":
                return self._send(200, b"[1, 2]")
            if m == "info_drip":
                self.send_response(200)
                self.send_header("Content-Length", "100000")
                self.end_headers()
                while not type(self).stop.is_set():
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(2)
                return
            return self._send(200, json.dumps(info).encode(), Content_Type="application/json")
        if path == f"/{REPO}/resolve/{SHA}/config.json":
            if m == "config_500":
                return self._send(500, b"internal error")
            if m == "config_redirect":
                return self._send(302, b"", Location="http://example.invalid/config.json")
            if m == "config_huge":  # claims 1.5 GB; nothing may be read
                self.send_response(200)
                self.send_header("Content-Length", str(1_500_000_000))
                self.end_headers()
                return
            if m == "config_big":  # 5 MiB, no Content-Length
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"{" + b" " * (5 << 20) + b"}")
                self.close_connection = True
                return
            if m == "config_digits":
                return self._send(200, b'{"hidden_size": ' + b"9" * 4301 + b"}")
            return self._send(200, CONFIG, Content_Type="application/json", ETag='"x"')
        return self._send(404, b"not found", X_Error_Code="EntryNotFound")


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:  # a client that hung up: expected, not printed
        pass


@pytest.fixture()
def hub(monkeypatch, tmp_path):
    server = _Server(("127.0.0.1", 0), _Hub)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Hub.mode, _Hub.stop = "ok", threading.Event()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    yield server
    _Hub.stop.set()
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("mode,fragment", [
    ("tags_int", "tags = 5"), ("tags_int_list", "tags = [1, 2]"), ("pipeline_int", "pipeline_tag = 7"),
    ("card_str", "cardData = \"license: mit\""), ("card_list", "cardData = [\"mit\"]"), ("info_list", "not an object"),
    ("sha_escape", "control characters"), ("license_escape", "control characters"),
    ("config_500", "HTTP 500"), ("config_redirect", "redirect to another host"),
    ("config_huge", "1,500,000,000 bytes"), ("config_big", "over the 4,194,304-byte limit"),
    ("config_digits", "not valid JSON")])
def test_a_misbehaving_hub_is_one_line_naming_what_it_sent(cli, user_catalog, hub, mode, fragment):
    _Hub.mode = mode
    r = cli("catalog", "add", f"hf:{REPO}")
    assert r.code == 2 and r.err.count("error:") == 1 and "Traceback" not in r.err, r.err
    assert fragment in r.err and "\x1b" not in r.err, r.err
    assert "has no config.json" not in r.err
    assert not user_catalog.exists()


def test_a_slow_hub_ends_within_the_limit(hub, monkeypatch):
    from recommender.catalog import hub as H
    from recommender.core.errors import UserError

    _Hub.mode = "info_drip"  # a byte every 2 s: a socket timeout alone never fires
    monkeypatch.setattr(H, "HUB_TIMEOUT_S", 3.0)
    t0 = time.monotonic()
    with pytest.raises(UserError, match="did not answer"):
        H.fetch(REPO)
    assert time.monotonic() - t0 < 3.0 + 1.5


def test_an_endpoint_password_is_used_but_never_stored_or_printed(cli, user_catalog, hub, monkeypatch):
    ep = f"http://bob:s3cretpw@127.0.0.1:{hub.server_port}"
    r = cli("catalog", "add", f"hf:{REPO}", env={"HF_ENDPOINT": ep})
    assert r.code == 0, r.err
    for args in (("list",), ("list", "--json"), ("show", REPO), ("show", REPO, "--json")):
        out = cli("catalog", *args)
        assert out.code == 0 and "s3cretpw" not in out.out + out.err, out.out
    assert b"s3cretpw" not in user_catalog.read_bytes()
    r = cli("catalog", "refresh", "--hub", env={"HF_ENDPOINT": ep})
    assert r.code == 0 and "s3cretpw" not in r.out + r.err, r.err
