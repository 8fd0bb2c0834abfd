-- +goose Up
-- approval_requests holds each consequential call waiting for a human's
-- approval: what an approver needs to decide (the tool, the arguments with
-- secret values redacted, the fingerprint, the priced route), who asked,
-- and the one decision recorded for it. operation_ref is the operation
-- that waits (state awaiting_approval); it is NULL for the request of a
-- client that cannot take a task, which retries once a human approves.
-- A decision is a compare-and-set on status, so approve, decline and
-- expiry race to exactly one outcome. An older binary ignores the table
-- and the waiting operations (it neither dispatches nor recovers them),
-- so the minimum schema version stays where an earlier migration set it.
CREATE TABLE approval_requests (
    id              INTEGER PRIMARY KEY,
    tenant          text    NOT NULL,
    operation_id    text    NOT NULL,
    operation_ref   bigint  REFERENCES operations (id),
    tool            text    NOT NULL,
    arguments       text    NOT NULL,
    fingerprint     text    NOT NULL,
    estimate_micros bigint  NOT NULL,
    currency        text    NOT NULL,
    remote_jobs     integer NOT NULL,
    requested_by    text    NOT NULL DEFAULT '',
    status          text    NOT NULL,
    created_at      integer NOT NULL,
    expires_at      integer NOT NULL,
    decided_at      integer,
    decided_by      text    NOT NULL DEFAULT '',
    note            text    NOT NULL DEFAULT '',
    approval_ref    bigint  REFERENCES approvals (id)
);
CREATE UNIQUE INDEX approval_requests_operation ON approval_requests (operation_ref) WHERE operation_ref IS NOT NULL;
CREATE UNIQUE INDEX approval_requests_retry ON approval_requests (tenant, operation_id, fingerprint)
    WHERE operation_ref IS NULL AND status = 'pending';
CREATE INDEX approval_requests_tenant ON approval_requests (tenant, status, id);
CREATE INDEX approval_requests_expiry ON approval_requests (expires_at) WHERE status = 'pending';

-- +goose Down
DROP TABLE approval_requests;
