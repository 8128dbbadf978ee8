"""`catalog add hf:ORG/NAME` and `catalog refresh --hub` through the real huggingface_hub client, against a loopback
HTTP server on 127.0.0.1 that answers the Hub API's shape (GET /api/models/ORG/NAME, HEAD/GET
/ORG/NAME/resolve/REV/config.json) for a few repositories whose config.json files are the shipped real ones."""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from recommender.core.paths import SOURCES_DIR

CONFIGS = SOURCES_DIR / "configs"
REPOS = {
    "Qwen/Qwen2.5-7B-Instruct": {"license": "apache-2.0", "base_model": "Qwen/Qwen2.5-7B",
                                 "pipeline_tag": "text-generation", "createdAt": "2024-09-16T11:55:40.000Z"},
    "openai/gpt-oss-20b": {"license": "apache-2.0", "pipeline_tag": "text-generation",
                           "createdAt": "2025-08-04T22:33:29.000Z"},
    # a model type the estimator refuses (MiniMax-M3's block-sparse attention indexer is not sized)
    "MiniMaxAI/MiniMax-M3": {"license": "other", "pipeline_tag": "text-generation",
                             "createdAt": "2026-06-03T00:00:00.000Z"},
}
SHA = "0123456789abcdef0123456789abcdef01234567"
# a release newer than every shipped Kimi (the Hub date is what makes it one)
REPOS["moonshotai/Kimi-K2.6"] = {"license": "other", "pipeline_tag": "image-text-to-text",
                                 "createdAt": "2026-11-20T08:00:00.000Z"}


def _config_bytes(repo: str) -> bytes:
    return (CONFIGS / (repo.replace("/", "__") + ".json")).read_bytes()


class _Hub(BaseHTTPRequestHandler):
    requests: list[str] = []

    def log_message(self, *_a) -> None:  # quiet
        pass

    def _send(self, code: int, body: bytes, headers: dict[str, str], head: bool = False) -> None:
        self.send_response(code)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _route(self, head: bool) -> None:
        type(self).requests.append(f"{self.command} {self.path}")
        path = self.path.split("?", 1)[0]
        if path.startswith("/api/models/"):
            repo = path[len("/api/models/"):].split("/revision/")[0]
            if repo not in REPOS:
                return self._send(404, b'{"error":"Repository not found"}',
                                  {"Content-Type": "application/json", "X-Error-Code": "RepoNotFound"}, head)
            meta = REPOS[repo]
            card = {k: meta[k] for k in ("license", "base_model") if k in meta}
            body = json.dumps({"_id": "x", "id": repo, "modelId": repo, "sha": SHA, "private": False,
                               "pipeline_tag": meta["pipeline_tag"], "tags": ["transformers"],
                               "cardData": card, "createdAt": meta["createdAt"],
                               "siblings": [{"rfilename": "config.json"}]}).encode()
            return self._send(200, body, {"Content-Type": "application/json"}, head)
        for repo in REPOS:
            if path == f"/{repo}/resolve/{SHA}/config.json":
                body = _config_bytes(repo)
                etag = '"' + hashlib.sha1(body).hexdigest() + '"'
                return self._send(200, body, {"Content-Type": "application/json", "ETag": etag,
                                              "X-Repo-Commit": SHA}, head)
        return self._send(404, b"not found", {"X-Error-Code": "EntryNotFound"}, head)

    def do_GET(self) -> None:  # noqa: N802
        self._route(head=False)

    def do_HEAD(self) -> None:  # noqa: N802
        self._route(head=True)


@pytest.fixture()
def hub(monkeypatch, tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    _Hub.requests = []
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    yield server
    server.shutdown()
    server.server_close()


def test_add_from_the_hub_reads_config_and_card(cli, user_catalog, hub):
    r = cli("catalog", "add", "hf:Qwen/Qwen2.5-7B-Instruct", "--json")
    assert r.code == 0, r.err
    assert r.json()["added"] == "Qwen/Qwen2.5-7B-Instruct"
    shown = cli("catalog", "show", "Qwen/Qwen2.5-7B-Instruct", "--json").json()
    m = shown["model"]
    assert shown["origin"] == "user" and m["source_kind"] == "hub config.json"
    assert m["license"] == "apache-2.0" and m["release_date"] == "2024-09-16"
    assert "base_model Qwen/Qwen2.5-7B" in m["notes"] and m["checkpoint"].startswith("instruct")
    assert m["params_total"] == 7615616512  # the same config as the shipped copy
    quants = {v["quant"] for v in shown["variants"]}
    assert {"Q4_K_M", "IQ4_XS", "Q3_K_M", "AWQ-4bit", "BNB-NF4"} <= quants  # every quant sized
    assert any(q.startswith("GET /api/models/Qwen/Qwen2.5-7B-Instruct") for q in _Hub.requests)


def test_refresh_hub_rereads_every_hub_model(cli, user_catalog, hub):
    assert cli("catalog", "add", "hf:openai/gpt-oss-20b").code == 0
    n = len(_Hub.requests)
    r = cli("catalog", "refresh", "--hub", "--json")
    assert r.code == 0, r.err
    assert r.json()["added_or_updated"] == ["openai/gpt-oss-20b"]
    assert len(_Hub.requests) > n


def test_a_new_hub_release_is_listed_since_and_outdates_its_sibling(cli, user_catalog, hub):
    """`catalog add hf:` keeps the Hub's createdAt as the release date, so a model released after the shipped
    catalog was built shows in `catalog list --since` and `catalog outdated` names it as the newer sibling."""
    r = cli("catalog", "add", "hf:moonshotai/Kimi-K2.6", "--id", "moonshotai/Kimi-K2.9", "--json")
    assert r.code == 0, r.err
    listed = {m["id"]: m for m in cli("catalog", "list", "--since", "2026-11", "--json").json()}
    assert listed["moonshotai/Kimi-K2.9"]["release_date"] == "2026-11-20"
    assert listed["moonshotai/Kimi-K2.9"]["family"] == "kimi"
    pairs = {p["model"]: p["newer"] for p in cli("catalog", "outdated", "--json").json()}
    assert pairs["moonshotai/Kimi-K2.5"] == "moonshotai/Kimi-K2.9"


def test_hub_refusals_are_one_line_and_change_nothing(cli, user_catalog, hub):
    before = cli("catalog", "list", "--json").json()
    for ref, fragment in (("hf:nobody/nothing", "no model nobody/nothing"),
                          ("hf:MiniMaxAI/MiniMax-M3", "not supported"),
                          ("hf:not-a-ref", "not a Hub model reference")):
        r = cli("catalog", "add", ref)
        assert r.code == 2 and fragment in r.err and "Traceback" not in r.err, r.err
        assert r.err.count("error:") == 1
    assert cli("catalog", "list", "--json").json() == before


def test_no_network_is_one_clear_line(cli, user_catalog, monkeypatch, tmp_path):
    # a port nothing listens on: connection refused, like a machine without network
    import socket  # noqa: PLC0415

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    before = cli("catalog", "list", "--json").json()
    r = cli("catalog", "add", "hf:Qwen/Qwen2.5-7B-Instruct")
    assert r.code == 2 and "cannot reach the Hugging Face Hub" in r.err and "Traceback" not in r.err, r.err
    assert r.err.count("error:") == 1
    assert cli("catalog", "list", "--json").json() == before
