-- ASAP's shared experiment log (issue 19): the tables of server/services/experiments.py, plus who wrote each row.
-- Applied once by server/common/pg_store.py under an advisory lock; recorded in schema_version.
CREATE TABLE IF NOT EXISTS experiments (
    id text PRIMARY KEY,
    created double precision NOT NULL,
    user_name text NOT NULL,
    config_path text,
    config_hash text,
    slice text,
    generation text,
    mesh text,
    profile text,
    measured_step_s double precision,
    measured_mfu double precision,
    estimate text,
    diagnosis text,
    proposals text,
    backend text
);

CREATE TABLE IF NOT EXISTS applications (
    id text PRIMARY KEY,
    user_name text NOT NULL,
    experiment_id text NOT NULL,
    rank integer NOT NULL,
    config_path text,
    applied_at double precision NOT NULL,
    ici text,
    dcn text,
    other_changes text
);
CREATE INDEX IF NOT EXISTS applications_config ON applications (config_path, applied_at DESC);

CREATE TABLE IF NOT EXISTS outcomes (
    id text PRIMARY KEY,
    user_name text NOT NULL,
    experiment_id text NOT NULL,
    application_id text NOT NULL,
    rank integer NOT NULL,
    created double precision NOT NULL,
    generation text,
    slice text,
    profile text NOT NULL,
    predicted_step_s double precision,
    measured_step_s double precision,
    step_error double precision,
    predicted_mfu double precision,
    measured_mfu double precision,
    predicted_hbm_bytes double precision,
    measured_hbm_bytes double precision,
    memory_error double precision,
    baseline_step_s double precision,
    predicted_speedup double precision,
    measured_speedup double precision,
    delivered boolean,
    stated_confidence double precision,
    bottleneck_before text,
    bottleneck_after text,
    bottleneck_moved boolean,
    -- one outcome per run of an applied proposal, whoever records it and however often
    CONSTRAINT outcomes_once UNIQUE (application_id, profile)
);
CREATE INDEX IF NOT EXISTS outcomes_created ON outcomes (created);

-- knowledge records added with `asap kb add` (kb/history schema, the YAML as written)
CREATE TABLE IF NOT EXISTS kb_records (
    id text PRIMARY KEY,
    user_name text NOT NULL,
    created double precision NOT NULL,
    sha256 text NOT NULL,
    yaml text NOT NULL
);
