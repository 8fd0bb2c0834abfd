-- +goose Up
-- The ledger: operations, their attempts, remote jobs, charges, approvals,
-- reservations and an append-only event log. Times are integer Unix
-- microseconds (UTC); JSON is kept as text so stored results replay byte for
-- byte. SQLite has no boolean type: 0 and 1.
CREATE TABLE operations (
    id                   INTEGER PRIMARY KEY,
    tenant               text    NOT NULL,
    operation_id         text    NOT NULL,
    task_id              text    NOT NULL UNIQUE,
    upstream             text    NOT NULL,
    tool                 text    NOT NULL,
    fingerprint          text    NOT NULL,
    arguments            text    NOT NULL,
    state                text    NOT NULL,
    status_message       text    NOT NULL DEFAULT '',
    review_reason        text    NOT NULL DEFAULT '',
    result               text,
    error                text,
    approval_ref         bigint,
    retry_policy         text    NOT NULL DEFAULT '',
    estimate_micros      bigint  NOT NULL DEFAULT 0,
    currency             text    NOT NULL DEFAULT 'USD',
    intended_remote_jobs integer NOT NULL DEFAULT 1,
    send_count           integer NOT NULL DEFAULT 0,
    cost_breach          integer NOT NULL DEFAULT 0,
    ttl_ms               bigint  NOT NULL DEFAULT 0,
    cancel_requested_at  integer,
    lease_owner          text    NOT NULL DEFAULT '',
    lease_until          integer,
    created_at           integer NOT NULL,
    updated_at           integer NOT NULL,
    ended_at             integer,
    -- Once an ended operation is older than the retention period its
    -- operation ID may be used again; the row itself stays.
    key_expired          integer NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX operations_key ON operations (tenant, operation_id) WHERE NOT key_expired;
CREATE INDEX operations_fingerprint ON operations (tenant, fingerprint);
CREATE INDEX operations_open ON operations (state, lease_until) WHERE state NOT IN ('completed', 'failed', 'cancelled');

CREATE TABLE attempts (
    id              INTEGER PRIMARY KEY,
    request_id      text   NOT NULL UNIQUE,
    tenant          text   NOT NULL,
    operation_id    text   NOT NULL,
    operation_ref   bigint REFERENCES operations (id),
    related_ref     bigint REFERENCES operations (id),
    decision        text   NOT NULL,
    reason          text   NOT NULL DEFAULT '',
    fingerprint     text   NOT NULL DEFAULT '',
    source          text   NOT NULL DEFAULT '',
    client_result   text   NOT NULL DEFAULT 'unknown',
    remote_accepted text   NOT NULL DEFAULT 'unknown',
    remote_effect   text   NOT NULL DEFAULT 'unknown',
    charge_status   text   NOT NULL DEFAULT 'unknown',
    created_at      integer NOT NULL,
    updated_at      integer NOT NULL
);
CREATE INDEX attempts_operation ON attempts (operation_ref);
CREATE INDEX attempts_related ON attempts (related_ref);

CREATE TABLE remote_jobs (
    id                  INTEGER PRIMARY KEY,
    operation_ref       bigint NOT NULL REFERENCES operations (id),
    attempt_ref         bigint REFERENCES attempts (id),
    upstream            text   NOT NULL,
    endpoint            text   NOT NULL,
    remote_id           text   NOT NULL,
    upstream_task_id    text   NOT NULL DEFAULT '',
    kind                text   NOT NULL,
    status              text   NOT NULL,
    intended            integer NOT NULL DEFAULT 0,
    duplicate           integer NOT NULL DEFAULT 0,
    duplicate_resolved  text   NOT NULL DEFAULT '',
    result              text,
    cancel_requested_at integer,
    effect_reversed     text   NOT NULL DEFAULT 'unknown',
    created_at          integer NOT NULL,
    updated_at          integer NOT NULL,
    UNIQUE (operation_ref, upstream, remote_id)
);

CREATE TABLE charges (
    id                 INTEGER PRIMARY KEY,
    operation_ref      bigint NOT NULL REFERENCES operations (id),
    remote_job_ref     bigint REFERENCES remote_jobs (id),
    provider_charge_id text   NOT NULL,
    amount_micros      bigint NOT NULL,
    currency           text   NOT NULL,
    status             text   NOT NULL,
    source             text   NOT NULL DEFAULT '',
    created_at         integer NOT NULL,
    updated_at         integer NOT NULL,
    UNIQUE (operation_ref, provider_charge_id)
);

CREATE TABLE approvals (
    id                 INTEGER PRIMARY KEY,
    tenant             text   NOT NULL,
    operation_id       text   NOT NULL,
    tool               text   NOT NULL,
    max_cost_micros    bigint NOT NULL,
    currency           text   NOT NULL,
    max_remote_jobs    integer NOT NULL,
    retry_policy       text   NOT NULL,
    expires_at         integer NOT NULL,
    created_at         integer NOT NULL,
    revoked_at         integer,
    created_by         text   NOT NULL DEFAULT ''
);
CREATE INDEX approvals_lookup ON approvals (tenant, operation_id, tool);

CREATE TABLE reservations (
    id              INTEGER PRIMARY KEY,
    approval_ref    bigint NOT NULL REFERENCES approvals (id),
    operation_ref   bigint NOT NULL REFERENCES operations (id),
    amount_micros   bigint NOT NULL,
    settled_micros  bigint NOT NULL DEFAULT 0,
    currency        text   NOT NULL,
    jobs            integer NOT NULL,
    status          text   NOT NULL,
    created_at      integer NOT NULL,
    updated_at      integer NOT NULL
);
CREATE INDEX reservations_approval ON reservations (approval_ref);
CREATE INDEX reservations_operation ON reservations (operation_ref);

CREATE TABLE events (
    id            INTEGER PRIMARY KEY,
    operation_ref bigint REFERENCES operations (id),
    attempt_ref   bigint REFERENCES attempts (id),
    kind          text   NOT NULL,
    data          text   NOT NULL DEFAULT '{}',
    created_at    integer NOT NULL
);
CREATE INDEX events_operation ON events (operation_ref);

CREATE TABLE api_keys (
    id         INTEGER PRIMARY KEY,
    tenant     text NOT NULL,
    key_hash   text NOT NULL UNIQUE,
    label      text NOT NULL DEFAULT '',
    created_at integer NOT NULL,
    revoked_at integer
);

-- +goose Down
DROP TABLE api_keys;
DROP TABLE events;
DROP TABLE reservations;
DROP TABLE approvals;
DROP TABLE charges;
DROP TABLE remote_jobs;
DROP TABLE attempts;
DROP TABLE operations;
