"""Numbered schema migrations (the simonw/llm pattern): each runs once, in order, inside a transaction, and is
recorded in ``schema_migrations``. Never edit a migration that has shipped; add a new one."""

from __future__ import annotations

MIGRATIONS: list[tuple[int, str, str]] = [
    (1, "initial", """
CREATE TABLE catalog_meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL);
CREATE TABLE models (
    id VARCHAR PRIMARY KEY,
    architecture VARCHAR NOT NULL,
    model_type VARCHAR NOT NULL,
    params_total BIGINT NOT NULL,
    params_active BIGINT NOT NULL,
    max_position_embeddings BIGINT NOT NULL,
    source VARCHAR NOT NULL,
    source_kind VARCHAR NOT NULL,
    license VARCHAR,
    notes VARCHAR,
    origin VARCHAR NOT NULL,            -- 'shipped' | 'user'
    added_at TIMESTAMP NOT NULL,
    spec_json VARCHAR NOT NULL          -- the full recommender.core.records.ModelSpec
);
CREATE TABLE variants (
    model_id VARCHAR NOT NULL,
    quant VARCHAR NOT NULL,
    weights_bytes BIGINT NOT NULL,
    embedding_bytes BIGINT NOT NULL,     -- token-embedding table, part of weights_bytes
    expert_bytes BIGINT NOT NULL,        -- routed-expert tensors (MoE), part of weights_bytes
    bits_per_weight DOUBLE NOT NULL,
    provenance VARCHAR NOT NULL,        -- 'estimated' (per-tensor rule) | 'measured' (file on disk)
    basis VARCHAR NOT NULL,
    file_path VARCHAR,
    PRIMARY KEY (model_id, quant)
);
CREATE TABLE published_scores (
    source_model VARCHAR NOT NULL,      -- the checkpoint the publisher scored (may differ from a catalog id)
    benchmark VARCHAR NOT NULL,
    shots VARCHAR,
    score DOUBLE NOT NULL,
    source_url VARCHAR NOT NULL,
    source_note VARCHAR NOT NULL,
    flags VARCHAR NOT NULL              -- comma-separated: THIRD-PARTY, SECONDARY, INFERRED
);
CREATE TABLE measurements (
    id VARCHAR PRIMARY KEY,
    hardware_fingerprint VARCHAR NOT NULL,
    hardware_name VARCHAR NOT NULL,
    engine VARCHAR NOT NULL,
    engine_version VARCHAR NOT NULL,
    model_id VARCHAR NOT NULL,
    quant VARCHAR NOT NULL,
    batch INTEGER NOT NULL,
    context_tokens INTEGER NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    kv_dtype VARCHAR NOT NULL,
    gpu_layers INTEGER,
    ttft_ms DOUBLE,
    tpot_ms DOUBLE,
    itl_ms_p50 DOUBLE,
    decode_tokens_per_s DOUBLE,
    prefill_tokens_per_s DOUBLE,
    throughput_tokens_per_s DOUBLE,
    peak_vram_bytes BIGINT,
    peak_rss_bytes BIGINT,
    raw_json VARCHAR NOT NULL,          -- per-repeat timings and settings
    status VARCHAR NOT NULL,            -- 'ok' | 'failed'
    failure_reason VARCHAR,
    synthetic BOOLEAN NOT NULL,
    provenance VARCHAR NOT NULL,
    measured_at VARCHAR NOT NULL
);
"""),
    (2, "accuracy", """
CREATE TABLE accuracy_scores (
    id VARCHAR PRIMARY KEY,
    run_id VARCHAR NOT NULL,
    model_id VARCHAR NOT NULL,
    quant VARCHAR NOT NULL,
    variant VARCHAR NOT NULL,           -- the file / folder scored
    engine VARCHAR NOT NULL,
    engine_version VARCHAR NOT NULL,
    task VARCHAR NOT NULL,              -- ceval | cmmlu | mmlu
    shots INTEGER NOT NULL,
    items_file VARCHAR NOT NULL,        -- e.g. ceval-val-v1-50.jsonl
    items_version VARCHAR NOT NULL,
    items_sha256 VARCHAR NOT NULL,      -- checksum of the item file the score was computed on
    n INTEGER NOT NULL,
    correct INTEGER NOT NULL,
    accuracy DOUBLE,                    -- fraction 0..1
    ci_low DOUBLE,                      -- 95 % interval, fraction
    ci_high DOUBLE,
    chance DOUBLE NOT NULL,
    flags VARCHAR NOT NULL,             -- comma-separated guards: chance, broken-logprobs, position-bias
    per_subject_json VARCHAR NOT NULL,
    raw_json VARCHAR NOT NULL,          -- per-item picks and log-likelihoods, settings
    hardware_fingerprint VARCHAR NOT NULL,
    hardware_name VARCHAR NOT NULL,
    status VARCHAR NOT NULL,
    failure_reason VARCHAR,
    provenance VARCHAR NOT NULL,
    measured_at VARCHAR NOT NULL
);
CREATE TABLE perplexity_scores (
    id VARCHAR PRIMARY KEY,
    run_id VARCHAR NOT NULL,
    model_id VARCHAR NOT NULL,
    quant VARCHAR NOT NULL,
    variant VARCHAR NOT NULL,
    engine VARCHAR NOT NULL,
    engine_version VARCHAR NOT NULL,
    text_file VARCHAR NOT NULL,
    text_sha256 VARCHAR NOT NULL,
    language VARCHAR NOT NULL,
    tokens INTEGER,
    bytes INTEGER,
    nll_nats DOUBLE,
    bits_per_byte DOUBLE,
    perplexity DOUBLE,
    window_tokens INTEGER NOT NULL,
    kl_reference VARCHAR,
    kl_mean DOUBLE,                     -- nats per token, KL(reference || this variant)
    kl_p99 DOUBLE,
    top1_agreement DOUBLE,
    raw_json VARCHAR NOT NULL,
    hardware_fingerprint VARCHAR NOT NULL,
    hardware_name VARCHAR NOT NULL,
    status VARCHAR NOT NULL,
    failure_reason VARCHAR,
    provenance VARCHAR NOT NULL,
    measured_at VARCHAR NOT NULL
);
"""),
    (3, "comparable quality", """
CREATE TABLE model_quality (            -- sources/quality/model_quality.csv (docs/quality-method.md)
    model_id VARCHAR NOT NULL,
    grp VARCHAR NOT NULL,               -- en (OLL v2 average scale) | zh (C-Eval %, Qwen3 report harness) | general
    value_points DOUBLE NOT NULL,
    interval_low DOUBLE NOT NULL,       -- 95 % interval, points
    interval_high DOUBLE NOT NULL,
    sd_points DOUBLE NOT NULL,
    provenance VARCHAR NOT NULL,        -- published | bridged | estimated
    kind VARCHAR NOT NULL,              -- base | instruct | hybrid | reasoning
    method VARCHAR NOT NULL,
    sources VARCHAR NOT NULL,
    flags VARCHAR NOT NULL,
    PRIMARY KEY (model_id, grp)
);
CREATE TABLE quant_quality (            -- sources/quality/quant_quality.csv: accuracy-point cost per quantization
    quant VARCHAR PRIMARY KEY,
    bits_per_weight DOUBLE,
    points_8b DOUBLE NOT NULL,          -- cost at 8B parameters, accuracy points
    points_low DOUBLE NOT NULL,
    points_high DOUBLE NOT NULL,
    size_exponent DOUBLE NOT NULL,      -- cost(P) = points_8b * (P / 8e9) ** -size_exponent
    provenance VARCHAR NOT NULL,
    basis VARCHAR NOT NULL,
    sources VARCHAR NOT NULL
);
"""),
    (4, "variant byte sums", """
-- per-tensor-rule byte sums a question needs of each variant besides its total (recommender.predict.analytical
-- VariantBytes): stored at build so a ranking does not type every tensor again (issue 26); NULL: compute when asked
ALTER TABLE variants ADD COLUMN output_bytes BIGINT;
ALTER TABLE variants ADD COLUMN ple_bytes BIGINT;
ALTER TABLE variants ADD COLUMN mtp_bytes BIGINT;
ALTER TABLE variants ADD COLUMN mtp_expert_bytes BIGINT;
"""),
]

LATEST_VERSION = MIGRATIONS[-1][0]


def applied_versions(con) -> set[int]:
    exists = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_migrations' "
        "AND table_catalog = current_database()").fetchone()[0]
    if not exists:
        return set()
    return {r[0] for r in con.execute("SELECT version FROM schema_migrations").fetchall()}


def migrate(con) -> list[int]:
    """Apply every pending migration, each in its own transaction. Returns the versions applied."""
    con.execute("CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)")
    done = applied_versions(con)
    ran = []
    for version, name, sql in MIGRATIONS:
        if version in done:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(sql)
            con.execute("INSERT INTO schema_migrations VALUES (?, ?, now())", [version, name])
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
        ran.append(version)
    return ran
