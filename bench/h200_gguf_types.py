"""Tensor inventory of GGUF files: file bytes, tensor count, parameters, bytes and count per ggml type.

    python3 bench/h200_gguf_types.py FILE.gguf [KEY=VALUE ...]   -> one JSON line (KEY=VALUE pairs are added to it)

Reads only the header and tensor infos (gguf-py's GGUFReader memory-maps the file; no tensor data is touched).
bits_per_weight is 8 x (bytes of all tensors) / (elements of all tensors), the figure llama.cpp prints as BPW.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter


def main() -> None:
    from gguf import GGUFReader  # noqa: PLC0415

    path = sys.argv[1]
    r = GGUFReader(path)
    counts, nbytes, nelem = Counter(), Counter(), Counter()
    for t in r.tensors:
        name = t.tensor_type.name
        counts[name] += 1
        nbytes[name] += int(t.n_bytes)
        nelem[name] += int(t.n_elements)
    ftype = r.fields.get("general.file_type")
    row = {"path": os.path.basename(path).removesuffix(".part"), "file_bytes": os.path.getsize(path), "n_tensors": len(r.tensors),
           "n_params": sum(nelem.values()), "tensor_bytes": sum(nbytes.values()),
           "bits_per_weight": round(8 * sum(nbytes.values()) / sum(nelem.values()), 4),
           "general_file_type": int(ftype.parts[-1][0]) if ftype is not None else None,
           "type_counts": dict(counts), "type_bytes": dict(nbytes)}
    for kv in sys.argv[2:]:
        k, v = kv.split("=", 1)
        row[k] = v
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
