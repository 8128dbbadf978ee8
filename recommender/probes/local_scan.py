"""What is already on this machine: model files in the usual caches and folders, and OpenAI-compatible servers
listening on loopback.

Folders (each only if it exists):
- the Hugging Face hub cache: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub
  (models--ORG--NAME/snapshots/REV/: *.gguf files, or config.json + *.safetensors = an HF folder of ORG/NAME)
- Ollama: $OLLAMA_MODELS, else ~/.ollama/models (manifests/REGISTRY/NAMESPACE/MODEL/TAG, a JSON whose layer of
  mediaType application/vnd.ollama.image.model names the GGUF blob blobs/sha256-HEX)
- LM Studio: ~/.lmstudio/models and ~/.cache/lm-studio/models (PUBLISHER/REPO/*.gguf)
- any folder given (``dirs``): *.gguf files and HF folders below it

A GGUF is matched to a catalog model by its header (the architecture, general.name / basename preferred:
recommender.probes.perf.match_catalog_model) and its quantization by its file type (gguf_file_quant); an HF folder by
its hub name (models--ORG--NAME) or its config. Servers: GET http://127.0.0.1:PORT/v1/models with a short timeout on
llama-server's 8080, Ollama's 11434, LM Studio's 1234 and vLLM's 8000 (and any port given).
"""

from __future__ import annotations

import json
import os
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from recommender.core.errors import UserError
from recommender.model.arch import spec_from_config, spec_from_gguf
from recommender.model.quant import gguf_file_quant
from recommender.catalog.ingest import quant_of_config, read_config
from recommender.catalog.store import Catalog
from recommender.probes.perf import match_catalog_model

SERVER_PORTS = {8080: "llama-server", 11434: "ollama", 1234: "lm-studio", 8000: "vllm"}
PROBE_TIMEOUT_S = 0.5
MAX_FILES = 2000  # per folder: a folder of a whole disk is not walked to its end
OLLAMA_MODEL_LAYER = "application/vnd.ollama.image.model"


@dataclass
class LocalModel:
    path: str
    source: str  # hf-cache | ollama | lm-studio | dir
    format: str  # gguf | hf
    size_bytes: int
    model: Optional[str]  # the catalog model it is, None = not in the catalog
    quant: Optional[str]
    name: str  # what it is called where it was found (hub repo, ollama tag, file name)
    note: str = ""

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class LocalServer:
    url: str  # the OpenAI base URL
    port: int
    kind: str  # the usual owner of that port
    models: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)


def default_folders() -> list[tuple[str, Path]]:
    home = Path.home()
    hf = os.environ.get("HF_HUB_CACHE") or (str(Path(os.environ["HF_HOME"]) / "hub") if os.environ.get("HF_HOME")
                                            else str(home / ".cache" / "huggingface" / "hub"))
    ollama = os.environ.get("OLLAMA_MODELS") or str(home / ".ollama" / "models")
    return [("hf-cache", Path(hf)), ("ollama", Path(ollama)), ("lm-studio", home / ".lmstudio" / "models"),
            ("lm-studio", home / ".cache" / "lm-studio" / "models")]


def _size(p: Path) -> int:
    try:
        if p.is_dir():
            return sum(f.stat().st_size for f in p.glob("*.safetensors"))
        return p.stat().st_size
    except OSError:
        return 0


def _gguf(path: Path, source: str, name: str, catalog: Catalog) -> LocalModel:
    try:
        spec, info = spec_from_gguf(path)
    except (UserError, OSError, ValueError) as e:
        return LocalModel(str(path), source, "gguf", _size(path), None, None, name, f"unreadable GGUF: {e}"[:200])
    quant = gguf_file_quant(info)
    mid = match_catalog_model(spec, catalog)
    return LocalModel(str(path), source, "gguf", _size(path), mid, quant, name,
                      "" if mid else f"no catalog model has its architecture ({spec.architecture}, {spec.id})")


def _hf_folder(path: Path, source: str, name: str, catalog: Catalog, hub_id: Optional[str]) -> LocalModel:
    try:
        config = read_config(path / "config.json")
        quant = quant_of_config(config)
    except (UserError, OSError, ValueError) as e:
        return LocalModel(str(path), source, "hf", _size(path), None, None, name, f"unreadable config.json: {e}"[:200])
    models = catalog.models()
    mid = hub_id if hub_id in models else None
    if mid is None:
        try:
            mid = match_catalog_model(spec_from_config(config, model_id=f"local/{path.name}", source=str(path)),
                                      catalog)
        except (UserError, ValueError, KeyError):
            mid = None
    return LocalModel(str(path), source, "hf", _size(path), mid, quant, name, "" if mid else "not in the catalog")


def _scan_tree(root: Path, source: str, catalog: Catalog) -> list[LocalModel]:
    out, n = [], 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        d = Path(dirpath)
        dirnames[:] = sorted(x for x in dirnames if not x.startswith(".") and x != "blobs")
        hub = next((part for part in d.parts if part.startswith("models--")), None)
        hub_id = hub[len("models--"):].replace("--", "/", 1) if hub else None
        if "config.json" in filenames and any(f.endswith(".safetensors") for f in filenames):
            out.append(_hf_folder(d, source, hub_id or d.name, catalog, hub_id))
        for f in sorted(filenames):
            if not f.lower().endswith(".gguf"):
                continue
            n += 1
            if n > MAX_FILES:
                return out
            if "-of-" in f and not f.split("-of-")[0].endswith("00001"):
                continue  # a later shard of a split file: the first one stands for it
            out.append(_gguf(d / f, source, f"{hub_id}/{f}" if hub_id else f, catalog))
    return out


def _scan_ollama(root: Path, catalog: Catalog) -> list[LocalModel]:
    out = []
    manifests = root / "manifests"
    if not manifests.is_dir():
        return out
    for m in sorted(p for p in manifests.rglob("*") if p.is_file()):
        try:
            doc = json.loads(m.read_text(encoding="utf-8"))
            digest = next(la["digest"] for la in doc.get("layers", []) if la.get("mediaType") == OLLAMA_MODEL_LAYER)
        except (OSError, ValueError, StopIteration, KeyError, TypeError):
            continue
        blob = root / "blobs" / digest.replace(":", "-")
        rel = m.relative_to(manifests).parts  # registry, namespace, model, tag
        tag = f"{rel[-2]}:{rel[-1]}" if len(rel) >= 2 else m.name
        if blob.is_file():
            out.append(_gguf(blob, "ollama", tag, catalog))
    return out


def scan_models(catalog: Catalog, dirs: tuple[str, ...] = (), defaults: bool = True) -> list[LocalModel]:
    """The model files on this machine (the usual folders and ``dirs``), each matched to the catalog."""
    folders = default_folders() if defaults else []
    folders += [("dir", Path(d).expanduser()) for d in dirs]
    out, seen = [], set()
    for source, root in folders:
        if not root.is_dir():
            continue
        found = _scan_ollama(root, catalog) if source == "ollama" else _scan_tree(root, source, catalog)
        for m in found:
            key = os.path.realpath(m.path)
            if key not in seen:
                seen.add(key)
                out.append(m)
    return out


def scan_servers(ports: tuple[int, ...] = (), timeout_s: float = PROBE_TIMEOUT_S) -> list[LocalServer]:
    """OpenAI-compatible servers answering GET /v1/models on loopback."""
    out = []
    for port in dict.fromkeys((*SERVER_PORTS, *ports)):
        url = f"http://127.0.0.1:{port}/v1"
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=timeout_s) as r:
                if r.status != 200:
                    continue
                doc = json.loads(r.read(1 << 20) or b"{}")
        except (OSError, ValueError):
            continue
        models = [str(m.get("id")) for m in doc.get("data", []) if isinstance(m, dict)] if isinstance(doc, dict) \
            else []
        out.append(LocalServer(url, port, SERVER_PORTS.get(port, "openai-compatible"), models))
    return out


def installed_variants(models: list[LocalModel]) -> list[tuple[str, str, str, str]]:
    """(catalog model, quant, path, engine that runs it: llama.cpp for a GGUF, vllm for an HF folder) of the files
    that are catalog variants."""
    return [(m.model, m.quant, m.path, "llama.cpp" if m.format == "gguf" else "vllm") for m in models
            if m.model and m.quant]
