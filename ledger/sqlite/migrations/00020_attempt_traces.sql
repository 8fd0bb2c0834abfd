-- +goose Up
-- Each attempt records the W3C traceparent of the span that served it, so
-- that a reviewer can go from an operation's attempts and receipt to its
-- trace, and the worker's spans, on any replica, join the trace of the
-- attempt that created the operation. '' is an attempt served with tracing
-- off, which every attempt recorded before this migration is; an older
-- binary's acceptance leaves it '', which loses only the link, so the
-- minimum schema version stays where an earlier migration set it.
ALTER TABLE attempts ADD COLUMN trace_parent text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE attempts DROP COLUMN trace_parent;
