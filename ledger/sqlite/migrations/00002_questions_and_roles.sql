-- +goose Up
-- approval_questions holds each approval question the gateway asked a
-- client (the 2026-07-28 input_required round trip), so that any replica can
-- tell a genuine answer from an invented one: an answer counts only when it
-- names an unexpired, unanswered question asked of the same tenant about the
-- same operation, tool and arguments, and it is taken exactly once.
CREATE TABLE approval_questions (
    id              INTEGER PRIMARY KEY,
    nonce           text    NOT NULL UNIQUE,
    tenant          text    NOT NULL,
    operation_id    text    NOT NULL,
    tool            text    NOT NULL,
    fingerprint     text    NOT NULL,
    estimate_micros bigint  NOT NULL,
    currency        text    NOT NULL,
    created_at      integer NOT NULL,
    expires_at      integer NOT NULL,
    answered_at     integer
);

-- An API key's role: agent keys call tools, approver keys may also write
-- approvals.
ALTER TABLE api_keys ADD COLUMN role text NOT NULL DEFAULT 'agent';

-- +goose Down
ALTER TABLE api_keys DROP COLUMN role;
DROP TABLE approval_questions;
