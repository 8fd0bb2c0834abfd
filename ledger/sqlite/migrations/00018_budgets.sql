-- +goose Up
-- budgets holds what approvers approved in advance for many operations of
-- a tenant: a scope (tools by name, as a JSON array, or by prefix; one run
-- ID), ceilings on total cost and remote jobs per period (a calendar day,
-- week or month in time_zone, or none), a per-operation cap (0: none), an
-- expiry and a note. Acceptance locks the rows of the budgets a call
-- matches, in ID order, and reserves against them in its transaction.
-- budget_reservations follow each covered operation's reservation against
-- its own approval (held, settled, released); a period counts those made
-- within it. budget_events records every change and the approver who made
-- it. An older binary ignores the three tables: it covers nothing by
-- budget, and the operations budgets admitted carry approvals it knows.
CREATE TABLE budgets (
    id                       INTEGER PRIMARY KEY,
    tenant                   text    NOT NULL,
    tools                    text    NOT NULL DEFAULT '[]',
    tool_prefix              text    NOT NULL DEFAULT '',
    run_id                   text    NOT NULL DEFAULT '',
    max_cost_micros          bigint  NOT NULL,
    currency                 text    NOT NULL,
    max_remote_jobs          integer NOT NULL,
    period                   text    NOT NULL,
    time_zone                text    NOT NULL,
    per_operation_cap_micros bigint  NOT NULL DEFAULT 0,
    expires_at               integer NOT NULL,
    note                     text    NOT NULL DEFAULT '',
    created_at               integer NOT NULL,
    created_by               text    NOT NULL,
    closed_at                integer,
    closed_by                text    NOT NULL DEFAULT '',
    breached_at              integer
);
CREATE INDEX budgets_tenant ON budgets (tenant, id);

CREATE TABLE budget_reservations (
    id              INTEGER PRIMARY KEY,
    budget_ref      bigint  NOT NULL REFERENCES budgets (id),
    operation_ref   bigint  NOT NULL REFERENCES operations (id),
    amount_micros   bigint  NOT NULL,
    settled_micros  bigint  NOT NULL DEFAULT 0,
    currency        text    NOT NULL,
    jobs            integer NOT NULL,
    status          text    NOT NULL,
    created_at      integer NOT NULL,
    updated_at      integer NOT NULL,
    UNIQUE (budget_ref, operation_ref)
);
CREATE INDEX budget_reservations_period ON budget_reservations (budget_ref, created_at);
CREATE INDEX budget_reservations_operation ON budget_reservations (operation_ref);

CREATE TABLE budget_events (
    id          INTEGER PRIMARY KEY,
    budget_ref  bigint  NOT NULL REFERENCES budgets (id),
    kind        text    NOT NULL,
    by_credential text  NOT NULL DEFAULT '',
    data        text    NOT NULL DEFAULT '{}',
    created_at  integer NOT NULL
);
CREATE INDEX budget_events_budget ON budget_events (budget_ref, id);

-- +goose Down
DROP TABLE budget_events;
DROP TABLE budget_reservations;
DROP TABLE budgets;
