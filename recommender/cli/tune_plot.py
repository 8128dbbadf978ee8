"""The Pareto front of `recommender tune --pareto` as a PNG (matplotlib, Agg backend, imported lazily)."""

from __future__ import annotations

from pathlib import Path


from recommender.core.errors import UserError


def plot_front(res, path: str) -> Path:
    """Every feasible trial in grey, the front in colour (quality cost), latency against memory."""
    try:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        raise UserError("matplotlib is not installed", hint="pip install 'llm-recommender[tune]'") from None
    out = Path(path).expanduser()
    if not out.parent.is_dir():
        raise UserError(f"cannot write {out}: no folder {out.parent}", hint="create the folder or pick another path")
    feas = [r for r in res.trials if r.status == "feasible" and r.latency_ms is not None and r.memory_bytes]
    front = res.pareto_front
    metric = res.query.latency_metric.upper()
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=110)
    ax.scatter([r.memory_bytes / 1024**3 for r in feas], [r.latency_ms for r in feas], s=12, c="#bbbbbb",
               label=f"feasible trials ({len(feas)})")
    if front:
        sc = ax.scatter([r.memory_bytes / 1024**3 for r in front], [r.latency_ms for r in front], s=42,
                        c=[r.quality_cost or 0.0 for r in front], cmap="viridis_r", edgecolors="black",
                        label=f"Pareto front ({len(front)})")
        fig.colorbar(sc, ax=ax, label="quality cost (normalized, lower is better)")
        extremes = {id(min(front, key=key)): min(front, key=key) for key in
                    (lambda r: r.latency_ms, lambda r: r.memory_bytes, lambda r: r.quality_cost or 0.0)}
        for r in extremes.values():  # the fastest, the smallest and the best-quality configurations
            ax.annotate(f"{r.config.model.split('/')[-1]} {r.config.quant}", (r.memory_bytes / 1024**3, r.latency_ms),
                        fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("memory (GiB)")
    ax.set_ylabel(f"{metric} (ms)")
    ax.set_title(f"tune --pareto · {res.query.hardware.name} · {res.n_trials} trials ({res.mode})")
    ax.legend(loc="upper right", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    try:
        fig.savefig(out, format="png")
    except OSError as e:
        raise UserError(f"cannot write {out}: {e.strerror or e}", hint="pick a writable path for --plot") from None
    finally:
        plt.close(fig)
    return out
