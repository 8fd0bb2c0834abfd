-- +goose Up
-- An operation is open until it ends, and ended_at is set exactly when it
-- does. The recovery sweep names that condition, so the index serves it;
-- the old predicate (state NOT IN the terminal states) could not be proven
-- from the sweep's bound states, and the sweep read every operation.
DROP INDEX operations_open;
CREATE INDEX operations_open ON operations (state, lease_until) WHERE ended_at IS NULL;

-- +goose Down
DROP INDEX operations_open;
CREATE INDEX operations_open ON operations (state, lease_until) WHERE state NOT IN ('completed', 'failed', 'cancelled');
