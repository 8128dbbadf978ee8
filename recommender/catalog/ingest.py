"""`catalog add` / `catalog refresh`: models from a config.json, an HF-style folder or a GGUF header.

Nothing here loads tensor data: config.json is parsed as JSON, safetensors files are sized from their headers, and
GGUF files are read through the `gguf` package's header parser.
"""

from __future__ import annotations

import json
import re
import stat
import struct
from pathlib import Path
from typing import Optional


from recommender.core.errors import UserError
from recommender.core.records import ModelSpec, Variant
from recommender.model.arch import GGUF_ARCH, spec_from_config, spec_from_gguf
from recommender.model.quant import gguf_file_quant
from recommender.catalog.build import catalog_variants
from recommender.catalog.hub import checkpoint_kind, fetch, HUB_SOURCE_KIND, parse_hub_ref

SIZED_GGUF_ARCHS = frozenset(GGUF_ARCH.values())  # GGUF architectures whose other quantizations can be estimated
_HF_CACHE_RE = re.compile(r"models--(?P<org>[^-][^/]*?)--(?P<name>[^/]+)$")


def _id_for_folder(folder: Path) -> str:
    """HF cache layout (models--Org--Name/snapshots/<rev>) -> Org/Name; any other folder -> local/<folder name>."""
    for p in [folder, *folder.parents][:4]:
        m = _HF_CACHE_RE.search(p.name)
        if m:
            return f"{m['org']}/{m['name']}"
    return f"local/{folder.name}"


CONFIG_MAX_BYTES = 16 * 1024 * 1024  # a config.json is a few KB; a larger "config" is not read


def read_config(path: Path) -> dict:
    path = Path(path)
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):  # a FIFO or a device would block the read forever
            raise UserError(f"{path} is not a regular file", hint="give the model's config.json file")
        if st.st_size > CONFIG_MAX_BYTES:
            raise UserError(f"{path} is {st.st_size:,} bytes, too large for a config.json",
                            hint="give the model's config.json as published with its weights")
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read {path}: {e}", hint="check the path and permissions") from None
    except json.JSONDecodeError as e:
        raise UserError(f"{path} is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})",
                        hint="give the model's config.json as published with its weights") from None
    except RecursionError:
        raise UserError(f"{path} nests too deeply to be a model config",
                        hint="give the model's config.json as published with its weights") from None
    except ValueError as e:  # an integer of more than 4,300 digits (Python's int_max_str_digits)
        raise UserError(f"{path} is not a model config: {str(e).split(';')[0][:120]}",
                        hint="give the model's config.json as published with its weights") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} is not a model config (a JSON object is expected)",
                        hint="give the model's config.json as published with its weights")
    return data


SAFETENSORS_MAX_HEADER = 100 * 1024 * 1024  # the format's own limit on the JSON header (safetensors spec)


def safetensors_bytes(folder: Path) -> Optional[int]:
    """Total tensor bytes of the *.safetensors files in a folder, from their headers (no tensor data read)."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for f in files:
        total += _safetensors_file_bytes(f)
    return total


def _safetensors_file_bytes(f: Path) -> int:
    """One file's tensor bytes from its header, every entry checked (safetensors format: 8-byte little-endian
    header length, a JSON object of name -> {dtype, shape, data_offsets: [begin, end]} relative to the data)."""
    def bad(why: str) -> UserError:
        return UserError(f"{f} is not a valid safetensors file ({why})",
                         hint="the file may be truncated or not safetensors; download it again")

    try:
        st = f.stat()
        if not stat.S_ISREG(st.st_mode):  # a FIFO named model.safetensors would block the read forever
            raise bad("not a regular file")
        with f.open("rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            if n <= 0 or n > SAFETENSORS_MAX_HEADER or 8 + n > st.st_size:
                raise ValueError("bad header length")
            header = json.loads(fh.read(n))
    except UserError:
        raise
    except RecursionError:
        raise bad("the header nests too deeply") from None
    except (OSError, ValueError, struct.error) as e:
        raise bad(str(e)[:200]) from None
    if not isinstance(header, dict):
        raise bad(f"the header is a JSON {type(header).__name__}, not an object")
    data_bytes = st.st_size - 8 - n
    total = 0
    for k, v in header.items():
        if k == "__metadata__":
            continue
        offs = v.get("data_offsets") if isinstance(v, dict) else None
        if not (isinstance(offs, list) and len(offs) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) for x in offs)):
            raise bad(f"tensor {k[:80]!r} has no [begin, end] data_offsets")
        start, end = offs
        if not 0 <= start <= end <= data_bytes:
            raise bad(f"tensor {k[:80]!r} data_offsets {offs} fall outside the file's {data_bytes:,} data bytes")
        total += end - start
    return total


def quant_of_config(config: dict) -> str:
    qc = config.get("quantization_config") or {}
    method = str(qc.get("quant_method", "")).lower()
    bits = qc.get("bits") or qc.get("w_bit")
    if method == "awq" and bits == 4:
        return "AWQ-4bit"
    if method == "gptq" and bits == 4:
        return "GPTQ-4bit"
    if method in {"fp8", "compressed-tensors"} and "fp8" in json.dumps(qc).lower():
        return "FP8"
    dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16").lower()
    return "F16" if dtype in {"float16", "fp16", "half"} else "BF16"


def from_config(path: Path, model_id: Optional[str] = None) -> tuple[ModelSpec, list[Variant], dict[str, str]]:

    path = Path(path)
    folder = path if path.is_dir() else path.parent
    cfg_path = path / "config.json" if path.is_dir() else path
    if not cfg_path.is_file():
        raise UserError(f"no config.json in {folder}", hint="give a config.json, an HF model folder or a .gguf file")
    config = read_config(cfg_path)
    hf_id = config.get("_name_or_path")  # transformers writes the hub id here when it saved the config
    if model_id:
        mid = model_id
    elif isinstance(hf_id, str) and hf_id.count("/") == 1 and not hf_id.startswith(("/", ".")):
        mid = hf_id
    else:
        mid = _id_for_folder(folder)
    spec = spec_from_config(config, model_id=mid, source=str(cfg_path.resolve()), source_kind="user config.json")
    variants = catalog_variants(spec)
    paths: dict[str, str] = {}
    on_disk = safetensors_bytes(folder) if path.is_dir() else None
    if on_disk:
        q = quant_of_config(config)
        variants = [v if v.quant != q else v.model_copy(update={
            "weights_bytes": on_disk, "weights_bytes_provenance": "measured",
            "bits_per_weight": round(8 * on_disk / spec.params_total, 4) if spec.params_total else 0.0,
            "basis": f"sum of tensor sizes in the safetensors headers under {folder}"}) for v in variants]
        paths[q] = str(folder.resolve())
    return spec, variants, paths


def from_gguf(path: Path, model_id: Optional[str] = None) -> tuple[ModelSpec, list[Variant], dict[str, str]]:

    path = Path(path)
    spec, info = spec_from_gguf(path)
    if model_id:
        spec = spec.model_copy(update={"id": model_id})
    variants = catalog_variants(spec)
    quant = gguf_file_quant(info)
    embd = sum(t.n_bytes for t in info.tensors if t.name == "token_embd.weight")
    experts = sum(t.n_bytes for t in info.tensors if "_exps." in t.name)
    measured = Variant(model_id=spec.id, quant=quant, weights_bytes=info.tensor_data_bytes, embedding_bytes=embd,
                       expert_bytes=experts,
                       bits_per_weight=round(8 * info.tensor_data_bytes / spec.params_total, 4)
                       if spec.params_total else 0.0,
                       weights_bytes_provenance="measured", basis=f"tensor sizes in the GGUF header of {path.name}")
    if info.architecture not in SIZED_GGUF_ARCHS:
        # the file's own tensors are exact; other quantizations would be sized from a layout this code does not
        # have for the architecture, so none is estimated
        variants = [measured]
        spec = spec.model_copy(update={"notes": f"{spec.notes}; architecture {info.architecture} is not modelled: "
                                                "only this file's quantization (measured) is in the catalog"})
    else:
        variants = [v for v in variants if v.quant != quant] + [measured]
    return spec, variants, {quant: str(path.resolve())}


def from_hub(repo_id: str, model_id: Optional[str] = None) -> tuple[ModelSpec, list[Variant], dict[str, str]]:
    """A model from the Hub's config.json and card metadata (recommender.catalog.hub), every quant sized."""
    m = fetch(repo_id)
    kind = checkpoint_kind(m)
    notes = "; ".join(x for x in (f"base_model {m.base_model}" if m.base_model else "",
                                  f"pipeline_tag {m.pipeline_tag}" if m.pipeline_tag else "",
                                  f"checkpoint kind {kind} inferred from the repository name" if kind else "")
                      if x) or None
    spec = spec_from_config(m.config, model_id=model_id or repo_id,
                            source=f"{m.endpoint}/{repo_id}@{(m.commit or 'unknown')[:12]}:config.json",
                            source_kind=HUB_SOURCE_KIND, license=m.license, notes=notes)
    spec = spec.model_copy(update={"release_date": m.created, "checkpoint": kind,
                                   "modality": "text" if m.pipeline_tag in (None, "text-generation") else
                                   m.pipeline_tag})
    return spec, catalog_variants(spec), {}


def from_path(path, model_id: Optional[str] = None) -> tuple[ModelSpec, list[Variant], dict[str, str]]:
    repo = parse_hub_ref(str(path))
    if repo:
        return from_hub(repo, model_id)
    path = Path(path)
    if not path.exists():
        raise UserError(f"no such file or folder: {path}", hint="give a config.json, an HF model folder or a .gguf file")
    if path.is_file() and path.suffix.lower() == ".gguf":
        return from_gguf(path, model_id)
    if path.is_dir() or path.suffix.lower() == ".json":
        return from_config(path, model_id)
    raise UserError(f"don't know how to read {path}", hint="give a config.json, an HF model folder or a .gguf file")


DISCOVER_MAX_DEPTH = 32  # folders below the one given (an HF cache: models--Org--Name/snapshots/<rev> is 3)
DISCOVER_MAX_ENTRIES = 200_000  # directory entries looked at


def discover(directory: Path) -> list[Path]:
    """Every model under a folder: folders holding a config.json, and .gguf files (regular files only; symlinked
    folders are not followed; at most DISCOVER_MAX_DEPTH levels deep, iteratively: no recursion limit to hit)."""
    import os  # noqa: PLC0415

    directory = Path(directory)
    if not directory.is_dir():
        raise UserError(f"not a folder: {directory}", hint="give a folder that holds model folders or .gguf files")
    found: set[Path] = set()
    stack = [(directory, 0)]
    seen = 0
    while stack:
        folder, depth = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue  # unreadable folder: nothing found there
        seen += len(entries)
        if seen > DISCOVER_MAX_ENTRIES:
            raise UserError(f"{directory} holds more than {DISCOVER_MAX_ENTRIES:,} files and folders",
                            hint="give the folder that holds the models themselves")
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    if depth + 1 > DISCOVER_MAX_DEPTH:
                        raise UserError(f"{directory} nests folders more than {DISCOVER_MAX_DEPTH} levels deep",
                                        hint="give the folder that holds the models themselves")
                    stack.append((Path(e.path), depth + 1))
                elif e.name == "config.json":
                    found.add(folder)
                elif e.name.lower().endswith(".gguf") and e.is_file():
                    found.add(Path(e.path))
            except OSError:
                continue
    return sorted(found)
