"""The vectorized Predictor (issue 26): the figures of many configurations at once, as numpy arrays.

The formulas are the estimator's own (recommender.predict.analytical, .calibrated, .serving and the engines' rules):
they are array-agnostic (recommender.predict.counts), so ``analytical.memory`` / ``analytical.estimate`` /
``Calibrator.values`` / ``serving.serve_point`` called with arrays - one element per configuration - compute what they
compute for one configuration, for every element. This module only gathers the inputs into arrays (a model's fields
through :class:`Columns`), groups the configurations that share what the formulas take as one value (quantization,
engine, KV dtype, batch: the branches on them pick a formula), and spreads the results back:

    analytical terms (arrays) -> calibrated values where this hardware has terms (arrays, NaN: no figure)
      -> measured rows: the few configurations a probe row matches exactly are predicted one by one
         (Predictor.predict) and their figures written over the arrays
      -> derived: E2E = TTFT + (n_out - 1) x TPOT, decode rate = 1000 / TPOT, throughput = batch x decode rate

No record is built here: ``recommender.rank.candidates`` builds the ``Candidate`` (pydantic, with every figure's basis)
of a row only when it is shown. tests/predict/test_vector.py checks every figure of every candidate of several queries
against the one-by-one path (relative tolerance 1e-9).

Unknown figures are NaN. A configuration with a multi-GPU split plan is not predicted here (recommender.predict.split
stays one by one).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Optional, Sequence

from recommender.core.records import ModelSpec, Variant
from recommender.predict import constants as C
from recommender.predict.analytical import estimate, memory
from recommender.predict.predictor import Config
from recommender.predict.serving import Slo, serve_point

NAN = float("nan")


class Columns:
    """Records seen as arrays: ``cols.num_layers`` is the num_layers of each row's record (None read as 0);
    ``map_rows(fn, *args)`` spreads ``fn(record, *args)`` over the rows (counts.per_model). ``records``: the distinct
    records (None: no record, its fields 0); ``index``: each row's position among them. ``shared``: a cache of the
    records' fields and terms that several Columns over the same records share (one per CandidateBuilder), so each
    field is read once per record and each term computed once per record and arguments."""

    def __init__(self, records: Sequence, index: np.ndarray, shared: Optional[dict] = None) -> None:
        self.__dict__["_records"] = records
        self.__dict__["_index"] = index
        self.__dict__["_shared"] = {} if shared is None else shared

    def __getattr__(self, name: str):
        import numpy as np  # noqa: PLC0415  (numpy only where configurations are predicted as arrays)
        if name.startswith("__"):
            raise AttributeError(name)
        full = self._shared.get(name)
        if full is None:
            vals = [None if r is None else getattr(r, name) for r in self._records]
            full = self._shared[name] = np.array([0 if v is None else v for v in vals])
        arr = full[self._index]
        self.__dict__[name] = arr
        return arr

    def take(self, at) -> "Columns":
        """The rows ``at`` (positions into this Columns' rows, repeats allowed) as a Columns over the same records and
        shared cache."""
        return Columns(self._records, self._index[at], self._shared)

    def map_rows(self, fn, *args):
        import numpy as np  # noqa: PLC0415  (numpy only where configurations are predicted as arrays)
        memo = self._shared.get((fn, args))
        if memo is None:  # [values per record (None: not computed yet), their arrays, records computed]
            memo = self._shared[(fn, args)] = [[None] * len(self._records), None, set()]
        vals, arrays, done = memo
        todo = []
        if len(done) < len(self._records):  # else every record's value is in already
            uniq = self.__dict__.get("_unique")  # this Columns' records, found once
            if uniq is None:
                uniq = self.__dict__["_unique"] = sorted(set(self._index.tolist()))  # np.unique's, without numpy.ma
            todo = [p for p in uniq if p not in done]
        if todo:
            for p in todo:
                vals[p] = fn(self._records[p], *args)
                done.add(p)
            sample = next(v for v in vals if v is not None)
            if isinstance(sample, tuple):
                zero = tuple(0 for _ in sample)
                arrays = tuple(np.array(col) for col in zip(*(zero if v is None else v for v in vals)))
            else:
                arrays = np.array([0 if v is None else v for v in vals])
            memo[1] = arrays
        if isinstance(arrays, tuple):
            return tuple(a[self._index] for a in arrays)
        return arrays[self._index]


@dataclass
class Table:
    """The figures of a group of configurations (one element per row; NaN: unknown) and where they came from."""

    weights_bytes: np.ndarray
    kv_cache_bytes: np.ndarray
    overhead_bytes: np.ndarray
    total_vram_bytes: np.ndarray
    ttft_ms: np.ndarray
    tpot_ms: np.ndarray
    e2e_ms: np.ndarray
    decode_tokens_per_s: np.ndarray
    throughput_tokens_per_s: np.ndarray
    # provenance per row: estimated / calibrated / measured (object arrays of strings)
    vram_provenance: np.ndarray
    ttft_provenance: np.ndarray
    tpot_provenance: np.ndarray
    e2e_provenance: np.ndarray


def _f(x, n: int) -> np.ndarray:
    """A figure as a float array of n rows (None: unknown, NaN)."""
    import numpy as np  # noqa: PLC0415  (numpy only where configurations are predicted as arrays)
    if x is None:
        return np.full(n, NAN)
    return np.broadcast_to(np.asarray(x, dtype=float), (n,)).copy()


def predict_group(predictor, spec: Columns, variant: Optional[Columns], quant: str, engine: str,
                  context_tokens: np.ndarray, batch: int, prompt_tokens: np.ndarray, output_tokens: np.ndarray,
                  kv_dtype: Optional[str] = None, gpu_layers: Optional[np.ndarray] = None,
                  rows: Optional[list[tuple[ModelSpec, Optional[Variant]]]] = None,
                  load_mode: Optional[str] = None) -> Table:
    """The figures of configurations sharing quantization, engine, KV dtype and batch on the predictor's (one) GPU:
    row i is the model ``spec`` holds at row i (with its catalog row ``variant``) at ``context_tokens[i]``,
    ``prompt_tokens[i]``, ``output_tokens[i]`` and, with ``gpu_layers``, llama.cpp's n_gpu_layers[i] (1 ..
    num_layers). The same figures as ``Predictor.predict`` of each configuration (module docstring). ``rows``: each
    row's (model, variant) records, for the rows a measured probe row matches (predicted one by one). ``load_mode``:
    llama.cpp's (partial offload's prompt copies; None: its default, mmap)."""
    import numpy as np  # noqa: PLC0415  (numpy only where configurations are predicted as arrays)
    n = len(context_tokens)
    ctx = np.asarray(context_tokens, dtype=np.int64)
    prompt = np.asarray(prompt_tokens, dtype=np.int64)
    out = np.asarray(output_tokens, dtype=np.int64)
    hw = predictor.hw
    gl = None if gpu_layers is None else np.asarray(gpu_layers, dtype=np.int64)
    if not isinstance(batch, (int, np.integer)):  # one batch per row
        batch = np.asarray(batch, dtype=np.int64)
        levels = sorted(set(batch.tolist()))
        if len(levels) == 1:
            batch = levels[0]
        elif (gl is None and predictor.calibrator.has(engine, predictor.hw_key)) or (rows is not None and
                                                                                      predictor.measured):
            # the calibrated terms' features and the measured rows are keyed by one batch: a group per batch
            return _per_batch(predictor, spec, variant, quant, engine, ctx, batch, levels, prompt, out, kv_dtype,
                              gl, rows, load_mode)
    m = memory(spec, quant, engine, hw, context_tokens=ctx, batch=batch, prompt_tokens=prompt, output_tokens=out,
               kv_dtype=kv_dtype, variant=variant, gpu_layers=gl)
    est = estimate(spec, quant, engine, hw, context_tokens=ctx, batch=batch, prompt_tokens=prompt,
                   output_tokens=out, kv_dtype=kv_dtype, variant=variant, gpu_layers=gl, mem=m,
                   load_mode=load_mode or C.LLAMA_CPP_DEFAULT_LOAD_MODE)
    ttft, tpot = _f(est.ttft_ms, n), _f(est.tpot_ms, n)
    vram = _f(est.total_vram_bytes, n)
    est_p = np.array(["estimated"] * n, dtype=object)
    vram_p, ttft_p, tpot_p = est_p.copy(), est_p.copy(), est_p.copy()
    if gl is None and predictor.calibrator.has(engine, predictor.hw_key):  # Predictor.refine: one GPU, every layer
        for metric, (val, _interval, _t) in predictor.calibrator.values(est, spec, hw, predictor.hw_key).items():
            v = _f(val, n)
            ok = ~np.isnan(v)
            if metric == "total_vram_bytes":
                vram, vram_p = np.where(ok, np.rint(v), vram), np.where(ok, "calibrated", vram_p)
            elif metric == "ttft_ms":
                ttft, ttft_p = np.where(ok, v, ttft), np.where(ok, "calibrated", ttft_p)
            else:
                tpot, tpot_p = np.where(ok, v, tpot), np.where(ok, "calibrated", tpot_p)
    t = _derive(np.asarray(est.weights_bytes, dtype=float) + np.zeros(n), _f(est.kv_cache_bytes, n),
                _f(est.overhead_bytes, n), vram, ttft, tpot, out, batch, vram_p, ttft_p, tpot_p)
    if rows is not None and gl is None and predictor.measured:
        _measured_rows(predictor, t, rows, quant, engine, ctx, batch, prompt, out, est.kv_dtype)
    return t


def _per_batch(predictor, spec: Columns, variant: Optional[Columns], quant, engine, ctx, batch, levels, prompt, out,
               kv_dtype, gl, rows, load_mode) -> Table:
    """predict_group of rows with several batches, one call per batch (``levels``: the distinct ones), the rows put
    back in their places."""
    import numpy as np  # noqa: PLC0415
    n = len(ctx)
    parts = []
    for b in levels:
        at = np.flatnonzero(batch == b)
        sub = None if variant is None else variant.take(at)
        parts.append((at, predict_group(predictor, spec.take(at), sub, quant, engine, ctx[at], b, prompt[at],
                                        out[at], kv_dtype=kv_dtype, gpu_layers=None if gl is None else gl[at],
                                        rows=None if rows is None else [rows[i] for i in at.tolist()],
                                        load_mode=load_mode)))
    cols = {}
    for f in fields(Table):
        first = getattr(parts[0][1], f.name)
        col = np.empty(n, dtype=first.dtype)
        for at, t in parts:
            col[at] = getattr(t, f.name)
        cols[f.name] = col
    return Table(**cols)


def _derive(weights, kv, overhead, vram, ttft, tpot, out, batch, vram_p, ttft_p, tpot_p) -> Table:
    """Predictor._derive for arrays: E2E, decode rate and throughput from TTFT and TPOT, with their provenance."""
    import numpy as np  # noqa: PLC0415  (numpy only where configurations are predicted as arrays)
    with np.errstate(divide="ignore", invalid="ignore"):
        dec = 1000.0 / tpot
    e2e = ttft + (out - 1) * tpot
    cal = (ttft_p == "calibrated") | (tpot_p == "calibrated")
    e2e_p = np.where(cal, "calibrated", "estimated").astype(object)
    return Table(weights, kv, overhead, vram, ttft, tpot, e2e, dec, batch * dec, vram_p, ttft_p, tpot_p, e2e_p)


def _measured_rows(predictor, t: Table, rows, quant, engine, ctx, batch, prompt, out, kv_dtype) -> None:
    """The rows a probe row matches exactly: predicted one by one (Predictor.predict) and written over the arrays."""

    key = predictor.hw_key
    measured = {k[1] for k in predictor.measured if k[0] == key and k[2] == quant and k[3] == engine}
    for i, (s, v) in enumerate(rows):
        if s.id not in measured:
            continue
        if (key, s.id, quant, engine, batch, int(ctx[i]), kv_dtype) not in predictor.measured:
            continue
        p = predictor.predict(s, Config(model=s.id, quant=quant, engine=engine, context_tokens=int(ctx[i]),
                                        batch=batch, prompt_tokens=int(prompt[i]), output_tokens=int(out[i]),
                                        kv_dtype=kv_dtype), variant=v)
        write_row(t, i, p)


def write_row(t: Table, i: int, p) -> None:
    """Row ``i`` of a table set to a Prediction's figures."""
    for name in ("weights_bytes", "kv_cache_bytes", "overhead_bytes", "total_vram_bytes", "ttft_ms", "tpot_ms",
                 "e2e_ms", "decode_tokens_per_s", "throughput_tokens_per_s"):
        v = p.figures[name].value
        getattr(t, name)[i] = NAN if v is None else v
    t.vram_provenance[i] = p.figures["total_vram_bytes"].provenance
    t.ttft_provenance[i] = p.figures["ttft_ms"].provenance
    t.tpot_provenance[i] = p.figures["tpot_ms"].provenance
    t.e2e_provenance[i] = p.figures["e2e_ms"].provenance


def serve_arrays(single_ttft: np.ndarray, ttft: np.ndarray, tpot: np.ndarray, batch: int, out: np.ndarray,
                 slo: Optional[Slo]) -> dict:
    """serving.serve_figures' values for arrays (the one serving model, serving.serve_point, with arrays) from the
    TTFT at batch 1, the TTFT and TPOT at ``batch``: serve_ttft_ms, serve_tpot_ms, serve_e2e_ms,
    request_throughput_per_s, output_throughput_tokens_per_s, goodput_requests_per_s (NaN: TTFT or TPOT unknown)."""
    import numpy as np  # noqa: PLC0415  (numpy only where configurations are predicted as arrays)
    pt = serve_point(batch, single_ttft, ttft, tpot, out)
    rps = np.round(pt.request_throughput_per_s, 6)
    res = {"serve_ttft_ms": pt.ttft_ms, "serve_tpot_ms": pt.tpot_ms, "serve_e2e_ms": pt.e2e_ms,
           "request_throughput_per_s": rps,
           "output_throughput_tokens_per_s": np.round(pt.output_throughput_tokens_per_s, 6)}
    if slo is not None:
        res["goodput_requests_per_s"] = np.where(np.isnan(pt.ttft_ms) | np.isnan(pt.tpot_ms), NAN,
                                                 np.round(pt.goodput(slo), 6))
    return res
