"""A fast GGUF header reader (v2/v3, little-endian): metadata and tensor infos without touching the tensor data.

Used by ``catalog add`` (``recommender.model.arch.read_gguf_header``) and by the synthetic-model builder. gguf-py's
``GGUFReader`` makes one numpy object per array item (seconds for a 150k-token vocabulary); this reads the same
header in about 0.1 s. tests/probes/test_synthetic.py checks it against ``GGUFReader`` on real and synthetic files.
Format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

ALIGNMENT = 32  # GGUF default alignment (gguf.GGUF_DEFAULT_ALIGNMENT), when a file has no general.alignment key

# Bounds on the counts a header declares (a 9 KB file can claim 2^64 tensors): far above real files (~2,000 tensors,
# ~50 keys, a 262,144-token vocabulary), checked before anything of that size is built (check_counts).
MAX_TENSORS = 1 << 17
MAX_KV = 1 << 16
MAX_ARRAY_LEN = 1 << 25  # items of one array (tokenizer merges ~10^6)
MAX_KEPT_ARRAY_LEN = 1 << 16  # items of an array turned into a Python list (per-layer values); longer: skipped
MAX_DIMS = 8  # GGML_MAX_DIMS is 4
MAX_STRING_BYTES = 1 << 28
MAX_ALIGNMENT = 1 << 16


class GgufHeader:
    """Metadata and tensor infos of a GGUF file, read without touching the tensor data."""

    def __init__(self, kv: dict[str, tuple[Any, int, Optional[int]]],
                 tensors: list[tuple[str, tuple[int, ...], int, int]], data_offset: int, alignment: int,
                 file_bytes: int, version: int = 3, array_lengths: Optional[dict[str, int]] = None) -> None:
        self.kv = kv  # key -> (value, GGUF value type, array item type or None)
        self.tensors = tensors  # (name, shape ggml order, ggml type id, offset from data_offset)
        self.data_offset = data_offset
        self.alignment = alignment
        self.file_bytes = file_bytes
        self.version = version
        self.array_lengths = array_lengths or {}  # key -> item count of every array, kept or skipped

    def get(self, key: str, default: Any = None) -> Any:
        v = self.kv.get(key)
        return default if v is None or v[0] is None else v[0]

    def array_len(self, key: str) -> int:
        return self.array_lengths.get(key, 0)


# GGUF value types (gguf.GGUFValueType / ggml gguf.h) -> struct format of a scalar
_GGUF_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_GGUF_NP = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "<u1", 10: "<u8", 11: "<i8",
            12: "<f8"}
_GGUF_STRING, _GGUF_ARRAY = 8, 9


def check_count(what: str, n: int, limit: int) -> None:
    """A count read from the file, refused (ValueError) when larger than any real file has."""
    if n > limit:
        raise ValueError(f"{what} {n:,} exceeds the limit of {limit:,}")


def read_header(path: Path, keep_arrays: Any = None) -> GgufHeader:
    """Parse a GGUF header (v2/v3, little-endian) fast. Arrays are skipped (value None) unless ``keep_arrays(key)``
    is true. gguf.GGUFReader makes one numpy object per array item: seconds for a 150k-token vocab; this takes
    about 0.1 s. Raises ValueError on a malformed or truncated header."""
    import mmap  # noqa: PLC0415
    import struct  # noqa: PLC0415

    import numpy as np  # noqa: PLC0415

    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        pos = 0

        def unpack(fmt: str) -> Any:
            nonlocal pos
            v = struct.unpack_from(fmt, mm, pos)[0]
            pos += struct.calcsize(fmt)
            return v

        def string() -> str:
            nonlocal pos
            n = unpack("<Q")
            if n > MAX_STRING_BYTES or pos + n > size:
                raise ValueError("string past the end of the file")
            v = mm[pos:pos + n].decode("utf-8", "replace")
            pos += n
            return v

        def skip_strings(count: int) -> None:
            nonlocal pos
            for _ in range(count):
                pos += 8 + struct.unpack_from("<Q", mm, pos)[0]

        if mm[:4] != b"GGUF":
            raise ValueError("not a GGUF file")
        pos = 4
        version = unpack("<I")
        if version not in (2, 3):
            raise ValueError(f"unsupported GGUF version {version}")
        n_tensors, n_kv = unpack("<Q"), unpack("<Q")
        check_count("tensor count", n_tensors, MAX_TENSORS)
        check_count("metadata key count", n_kv, MAX_KV)
        kv: dict[str, tuple[Any, int, Optional[int]]] = {}
        lengths: dict[str, int] = {}
        for _ in range(n_kv):
            key = string()
            vtype = unpack("<I")
            if vtype == _GGUF_STRING:
                kv[key] = (string(), vtype, None)
            elif vtype == _GGUF_ARRAY:
                sub, count = unpack("<I"), unpack("<Q")
                check_count(f"{key}: array length", count, MAX_ARRAY_LEN)
                lengths[key] = count
                keep = keep_arrays is not None and keep_arrays(key) and count <= MAX_KEPT_ARRAY_LEN
                if sub == _GGUF_STRING:
                    if keep:
                        kv[key] = ([string() for _ in range(count)], vtype, sub)
                    else:
                        skip_strings(count)
                        kv[key] = (None, vtype, sub)
                elif sub in _GGUF_NP:
                    width = np.dtype(_GGUF_NP[sub]).itemsize
                    if pos + width * count > size:
                        raise ValueError(f"{key}: array past the end of the file")
                    if keep:
                        arr = np.frombuffer(mm, dtype=_GGUF_NP[sub], count=count, offset=pos)
                        kv[key] = ((arr.astype(bool) if sub == 7 else arr).tolist(), vtype, sub)
                        del arr
                    else:
                        kv[key] = (None, vtype, sub)
                    pos += width * count
                else:
                    raise ValueError(f"{key}: nested arrays are not supported")
            elif vtype in _GGUF_SCALAR:
                kv[key] = (unpack(_GGUF_SCALAR[vtype]), vtype, None)
            else:
                raise ValueError(f"{key}: unknown GGUF value type {vtype}")
            if pos > size:
                raise ValueError("metadata past the end of the file")
        tensors = []
        for _ in range(n_tensors):
            name = string()
            n_dims = unpack("<I")
            check_count(f"{name}: dimension count", n_dims, MAX_DIMS)
            shape = tuple(unpack("<Q") for _ in range(n_dims))
            ttype = unpack("<I")
            offset = unpack("<Q")
            tensors.append((name, shape, ttype, offset))
        alignment = kv.get("general.alignment", (ALIGNMENT,))[0]
        if not isinstance(alignment, int) or isinstance(alignment, bool) or not 1 <= alignment <= MAX_ALIGNMENT:
            raise ValueError(f"general.alignment {alignment!r} is not a positive integer up to {MAX_ALIGNMENT}")
        data_offset = pos + (-pos) % alignment
    return GgufHeader(kv, tensors, data_offset, alignment, size, version, lengths)
