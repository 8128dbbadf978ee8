"""Models from the Hugging Face Hub: `catalog add hf:ORG/NAME` and `catalog refresh --hub`.

Reads, from the Hub's HTTP API (endpoint from ``HF_ENDPOINT``, default https://huggingface.co; huggingface_hub's
headers and token where it is installed), a repository's ``config.json`` and its model-card metadata (GET
/api/models/ORG/NAME: license, base_model, pipeline tag, the repository's creation date and commit). Nothing else is
downloaded, nothing is cached, every request is bounded in time and size (recommender.core.bounded_http) and every
field checked for its type. Every failure -- no network, an unknown repository, no config.json, a server error, a
field of the wrong type -- is one UserError line, raised before anything is written. Credentials in HF_ENDPOINT are
used, never stored (HubModel.endpoint is redacted).
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse
from datetime import datetime
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict

from recommender.core import bounded_http
from recommender.core.errors import UserError
from recommender.core.redact import printable, redact

HUB_PREFIX = "hf:"
DEFAULT_ENDPOINT = "https://huggingface.co"
HUB_SOURCE_KIND = "hub config.json"
HUB_TIMEOUT_S = 20.0  # per request, the whole exchange (huggingface_hub's default is 10 s per recv for metadata)
# The largest config.json in sources/configs is a few tens of kB; a 1.5 GB one was downloaded and loaded whole.
MAX_CONFIG_BYTES = 4 << 20  # 4 MiB
MAX_INFO_BYTES = 16 << 20  # model info lists every file of a repository: 16 MiB


class HubModel(BaseModel):
    """What the Hub says about one repository (the parts the catalog records)."""

    model_config = ConfigDict(extra="forbid")

    repo_id: str
    endpoint: str
    commit: Optional[str] = None
    config: dict[str, Any]
    license: Optional[str] = None
    base_model: Optional[str] = None
    pipeline_tag: Optional[str] = None
    created: Optional[str] = None  # ISO date of the repository's creation (the Hub's createdAt)
    tags: list[str] = []


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def parse_hub_ref(ref: str) -> Optional[str]:
    """'hf:ORG/NAME' -> 'ORG/NAME'; None when ``ref`` is not a Hub reference. UserError on a malformed one."""
    if not ref.startswith(HUB_PREFIX):
        return None
    repo = ref[len(HUB_PREFIX):].strip().strip("/")
    parts = repo.split("/")
    if len(parts) != 2 or not all(parts) or any(c.isspace() for c in repo):
        raise UserError(f"not a Hub model reference: {ref!r}", hint="write hf:ORG/NAME, e.g. hf:Qwen/Qwen3-8B")
    return repo


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:200]


def _hub_headers() -> dict:
    """huggingface_hub's own request headers (its user agent, and the token from HF_TOKEN or `hf auth login`) where it
    is installed; else HF_TOKEN alone."""
    try:
        from huggingface_hub.utils import build_hf_headers  # noqa: PLC0415

        return dict(build_hf_headers())
    except Exception:  # noqa: BLE001 - not installed, or no token file: the public Hub needs none
        tok = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
        return {"Authorization": f"Bearer {tok}"} if tok else {}


def _get(url: str, what: str, repo_id: str, ep_shown: str, max_bytes: int) -> bytes:
    """The body of a 200 answer; one UserError naming what the Hub did otherwise (HTTP status, redirect, timeout,
    size) -- never "has no config.json" for a server error."""
    try:
        ans = bounded_http.request(url, timeout_s=HUB_TIMEOUT_S, max_bytes=max_bytes, headers=_hub_headers())
    except bounded_http.TooBig as e:
        raise UserError(f"the Hub at {ep_shown} sent a {what} for {repo_id} of {e}",
                        hint="no model's config.json is that large; nothing was changed") from None
    except bounded_http.HttpTimeout as e:
        raise UserError(f"the Hub at {ep_shown} did not answer for {repo_id} ({what}): {e}",
                        hint="check the network connection, or set HF_ENDPOINT to a reachable mirror; "
                             "nothing was changed") from None
    except bounded_http.BadRedirect as e:
        raise UserError(f"the Hub at {ep_shown} answered the {what} of {repo_id} with a {e}",
                        hint="set HF_ENDPOINT to the endpoint itself; nothing was changed") from None
    except OSError as e:
        raise UserError(f"cannot reach the Hugging Face Hub at {ep_shown} for {repo_id}: "
                        f"{printable(redact(_first_line(e)))}",
                        hint="check the network connection, or set HF_ENDPOINT to a reachable mirror; "
                             "nothing was changed") from None
    if ans.status == 200:
        return ans.body
    code = ans.headers.get("x-error-code", "")
    if ans.status in (401, 403, 404) and what == "model info" or code == "RepoNotFound":
        raise UserError(f"no model {repo_id} on the Hub at {ep_shown} (HTTP {ans.status})",
                        hint="check the ORG/NAME spelling (gated or private repositories need HF_TOKEN)")
    if ans.status == 404 and what == "config.json":
        raise UserError(f"{repo_id} on the Hub has no config.json",
                        hint="GGUF-only repositories: download the .gguf and `catalog add` the file")
    raise UserError(f"the Hub at {ep_shown} answered HTTP {ans.status} to the {what} of {repo_id}",
                    hint="the Hub failed on its side: try again later; nothing was changed")


def _field(info: dict, key: str, kinds: tuple, repo_id: str, ep_shown: str):
    """info[key] when it is one of ``kinds`` (or missing / null: None); a UserError naming what the Hub sent."""
    v = info.get(key)
    if v is None or (isinstance(v, kinds) and not isinstance(v, bool)):
        if isinstance(v, str) and any(not c.isprintable() for c in v):
            raise UserError(f"the Hub at {ep_shown} sent {key} = {printable(v)[:80]!r} for {repo_id}, with control "
                            "characters", hint="nothing was changed")
        return v
    shown = printable(json.dumps(v))[:60]
    raise UserError(f"the Hub at {ep_shown} sent {key} = {shown} ({type(v).__name__}) for {repo_id}, not "
                    f"{' or '.join(k.__name__ for k in kinds)}", hint="is HF_ENDPOINT a Hub? nothing was changed")


def fetch(repo_id: str) -> HubModel:
    """config.json and card metadata of one repository (GET /api/models/ORG/NAME, then
    /ORG/NAME/resolve/SHA/config.json), each bounded in time (HUB_TIMEOUT_S) and size (MAX_INFO_BYTES,
    MAX_CONFIG_BYTES); every field checked for its type. UserError (one line) on any failure; nothing is cached."""
    ep = endpoint()
    shown = redact(ep)
    quoted = urllib.parse.quote(repo_id, safe="/")
    raw = _get(f"{ep}/api/models/{quoted}", "model info", repo_id, shown, MAX_INFO_BYTES)
    try:
        info = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise UserError(f"the Hub at {shown} sent model info for {repo_id} that is not JSON ({_first_line(e)[:80]})",
                        hint="is HF_ENDPOINT a Hub? nothing was changed") from None
    if not isinstance(info, dict):
        raise UserError(f"the Hub at {shown} sent model info for {repo_id} that is {type(info).__name__}, not an "
                        "object", hint="is HF_ENDPOINT a Hub? nothing was changed")
    sha = _field(info, "sha", (str,), repo_id, shown)
    if sha is not None and not re.fullmatch(r"[0-9a-f]{40}", sha):
        raise UserError(f"the Hub at {shown} sent sha = {printable(sha)[:60]!r} for {repo_id}, not a commit id",
                        hint="is HF_ENDPOINT a Hub? nothing was changed")
    tags = _field(info, "tags", (list,), repo_id, shown) or []
    if not all(isinstance(t, str) and t.isprintable() for t in tags):
        raise UserError(f"the Hub at {shown} sent tags = {printable(json.dumps(tags))[:60]} for {repo_id}, not a "
                        "list of strings", hint="is HF_ENDPOINT a Hub? nothing was changed")
    pipeline = _field(info, "pipeline_tag", (str,), repo_id, shown)
    card = _field(info, "cardData", (dict,), repo_id, shown) or {}
    lic = _field(card, "license", (str, list), repo_id, shown)
    if isinstance(lic, list):
        lic = ", ".join(printable(str(x)) for x in lic)
    base = _field(card, "base_model", (str, list), repo_id, shown)
    if isinstance(base, list):
        base = ", ".join(printable(str(b)) for b in base)
    created_raw = _field(info, "createdAt", (str,), repo_id, shown)
    created = None
    if created_raw:
        try:
            created = datetime.fromisoformat(created_raw.replace("Z", "+00:00")).date().isoformat()
        except ValueError:
            raise UserError(f"the Hub at {shown} sent createdAt = {printable(created_raw)[:60]!r} for {repo_id}, not "
                            "a date", hint="is HF_ENDPOINT a Hub? nothing was changed") from None
    body = _get(f"{ep}/{quoted}/resolve/{sha or 'main'}/config.json", "config.json", repo_id, shown,
                MAX_CONFIG_BYTES)
    try:
        config = json.loads(body)
    except (ValueError, RecursionError) as e:  # 4,301-digit integers are a ValueError too
        raise UserError(f"the Hub's config.json for {repo_id} is not valid JSON ({_first_line(e)[:100]})",
                        hint="report it to the repository's owner; nothing was changed") from None
    if not isinstance(config, dict):
        raise UserError(f"the Hub's config.json for {repo_id} is not a JSON object", hint="nothing was changed")
    return HubModel(repo_id=repo_id, endpoint=shown, commit=sha, config=config,
                    license=str(lic)[:200] if lic else None, base_model=str(base)[:500] if base else None,
                    pipeline_tag=pipeline, created=created, tags=list(tags))


def checkpoint_kind(m: HubModel) -> Optional[str]:
    """instruct / reasoning when the repository name says so (-Instruct, -Chat, -it, -Thinking), else unknown (None:
    a model the user adds is not left out as a base checkpoint on a guess; recommender.rank.candidates)."""
    name = m.repo_id.lower()
    if "thinking" in name:
        return "reasoning"
    if any(name.endswith(k) or f"{k}-" in name for k in ("instruct", "-chat", "-it")):
        return "instruct"
    return None
