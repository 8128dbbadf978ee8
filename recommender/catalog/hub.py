"""Models from the Hugging Face Hub: `catalog add hf:ORG/NAME` and `catalog refresh --hub`.

Reads, through ``huggingface_hub`` (the real client; endpoint from ``HF_ENDPOINT``, default https://huggingface.co),
a repository's ``config.json`` and its model-card metadata (``model_info``: license, base_model, pipeline tag, the
repository's creation date and commit). Nothing else is downloaded. Every failure -- no network, an unknown
repository, no config.json -- is one UserError line, raised before anything is written.
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict

from recommender.core.errors import UserError

HUB_PREFIX = "hf:"
DEFAULT_ENDPOINT = "https://huggingface.co"
HUB_SOURCE_KIND = "hub config.json"
HUB_TIMEOUT_S = 20.0  # per request (huggingface_hub's default is 10 s for metadata)


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


def fetch(repo_id: str) -> HubModel:
    """config.json and card metadata of one repository. UserError (one line) on any failure."""
    try:
        import huggingface_hub as hh  # noqa: PLC0415
        from huggingface_hub import errors as hh_errors  # noqa: PLC0415
    except ImportError:
        raise UserError("reading from the Hugging Face Hub needs the 'huggingface_hub' package",
                        hint="pip install huggingface_hub") from None
    ep = endpoint()
    try:
        api = hh.HfApi(endpoint=ep)
        info = api.model_info(repo_id, timeout=HUB_TIMEOUT_S)
        path = hh.hf_hub_download(repo_id, "config.json", revision=info.sha, endpoint=ep,
                                  etag_timeout=HUB_TIMEOUT_S)
    except hh_errors.RepositoryNotFoundError:
        raise UserError(f"no model {repo_id} on the Hub at {ep}",
                        hint="check the ORG/NAME spelling (gated or private repositories need HF_TOKEN)") from None
    except hh_errors.EntryNotFoundError:
        raise UserError(f"{repo_id} on the Hub has no config.json",
                        hint="GGUF-only repositories: download the .gguf and `catalog add` the file") from None
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 - network, TLS, timeouts, offline mode: all "cannot reach"
        raise UserError(f"cannot reach the Hugging Face Hub at {ep} for {repo_id}: {_first_line(e)}",
                        hint="check the network connection, or set HF_ENDPOINT to a reachable mirror; "
                             "nothing was changed") from None
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        raise UserError(f"the Hub's config.json for {repo_id} is not valid JSON ({_first_line(e)})",
                        hint="report it to the repository's owner; nothing was changed") from None
    if not isinstance(config, dict):
        raise UserError(f"the Hub's config.json for {repo_id} is not a JSON object", hint="nothing was changed")
    card = info.card_data.to_dict() if getattr(info, "card_data", None) is not None else {}
    lic = card.get("license")
    base = card.get("base_model")
    if isinstance(base, list):
        base = ", ".join(str(b) for b in base)
    created = getattr(info, "created_at", None)
    return HubModel(repo_id=repo_id, endpoint=ep, commit=info.sha, config=config,
                    license=str(lic) if lic else None, base_model=str(base) if base else None,
                    pipeline_tag=info.pipeline_tag, created=created.date().isoformat() if created else None,
                    tags=list(info.tags or []))


def checkpoint_kind(m: HubModel) -> Optional[str]:
    """instruct / reasoning when the repository name says so (-Instruct, -Chat, -it, -Thinking), else unknown (None:
    a model the user adds is not left out as a base checkpoint on a guess; recommender.rank.candidates)."""
    name = m.repo_id.lower()
    if "thinking" in name:
        return "reasoning"
    if any(name.endswith(k) or f"{k}-" in name for k in ("instruct", "-chat", "-it")):
        return "instruct"
    return None
