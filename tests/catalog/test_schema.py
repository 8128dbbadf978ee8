"""One column list for the probe-row tables: the columns of measurements, accuracy_scores and perplexity_scores are
their records' fields (core/records.py; a dict field ``x`` stored as JSON text ``x_json``, catalog/store.py
record_columns), and the tables the migrations make (catalog/migrations.py) must have exactly those columns, in that
order. A field added to a record without a migration fails here, where _encode would otherwise have dropped it."""

from pathlib import Path

import pytest

from recommender.catalog import store
from recommender.catalog.migrations import migrate
from recommender.core.paths import SHIPPED_CATALOG
from recommender.core.records import AccuracyRow, Measurement, PerplexityRow

TABLES = {"measurements": Measurement, "accuracy_scores": AccuracyRow, "perplexity_scores": PerplexityRow}


def _ddl_columns(table: str) -> list[str]:
    import duckdb  # noqa: PLC0415

    con = duckdb.connect(":memory:")
    migrate(con)
    cols = [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()]
    con.close()
    return cols


@pytest.mark.parametrize("table", sorted(TABLES))
def test_the_migrations_make_the_records_columns(table):
    assert _ddl_columns(table) == store.record_columns(TABLES[table])


def test_the_codecs_use_the_records_columns():
    assert store._MEASUREMENT_COLS == store.record_columns(Measurement)
    assert store._ACCURACY_COLS == store.record_columns(AccuracyRow)
    assert store._PERPLEXITY_COLS == store.record_columns(PerplexityRow)


def test_a_field_without_a_column_is_caught():
    """The check can fail: a record with one more field than the table has is told apart."""

    class Grown(Measurement):
        energy_joules: float = 0.0

    assert _ddl_columns("measurements") != store.record_columns(Grown)


def test_every_field_survives_a_write_and_a_read(tmp_path: Path):
    """A row with every field set (none left at its default) reads back equal, through the writer and the reader."""
    m = Measurement(id="m1", hardware_fingerprint="fp", hardware_name="Test GPU", engine="llama.cpp",
                    engine_version="0.3.36", model_id="test/a", quant="Q4_K_M", batch=2, context_tokens=4096,
                    prompt_tokens=512, output_tokens=64, kv_dtype="q8_0", gpu_layers=12, ttft_ms=1.5, tpot_ms=2.5,
                    itl_ms_p50=2.4, decode_tokens_per_s=400.0, prefill_tokens_per_s=3000.0,
                    throughput_tokens_per_s=800.0, peak_vram_bytes=123, peak_rss_bytes=456, raw={"repeats": [1, 2]},
                    status="failed", failure_reason="oom", synthetic=True, provenance="measured",
                    measured_at="2026-12-01T00:00:00+00:00")
    assert not {f for f, info in Measurement.model_fields.items() if getattr(m, f) == info.get_default(
        call_default_factory=True)} - {"provenance"}, "set every field"
    path = tmp_path / "u.duckdb"
    with store.CatalogWriter(path, origin="user") as w:
        w.put_measurements([m])
    cat = store.Catalog(SHIPPED_CATALOG, path)
    got = [r for r in cat.measurements(model_id="test/a")]
    cat.close()
    assert got == [m]
