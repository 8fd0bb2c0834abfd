-- +goose Up
CREATE TABLE providerkit_jobs (
    id              TEXT PRIMARY KEY,
    -- One job per key: the key and its job are one row, written in one
    -- statement, so a lookup sees a job as soon as it exists.
    idempotency_key TEXT NOT NULL UNIQUE,
    tool            TEXT NOT NULL,
    arguments       TEXT NOT NULL,
    status          TEXT NOT NULL,
    result          TEXT NOT NULL,
    error           TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
CREATE INDEX providerkit_jobs_status ON providerkit_jobs (status, created_at);

CREATE TABLE providerkit_charges (
    id            TEXT PRIMARY KEY,
    job_id        TEXT NOT NULL REFERENCES providerkit_jobs (id),
    amount_micros INTEGER NOT NULL,
    currency      TEXT NOT NULL,
    kind          TEXT NOT NULL,
    status        TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
CREATE INDEX providerkit_charges_job ON providerkit_charges (job_id, created_at);

-- +goose Down
DROP TABLE providerkit_charges;
DROP TABLE providerkit_jobs;
