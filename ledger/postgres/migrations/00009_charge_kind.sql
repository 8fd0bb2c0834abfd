-- +goose Up
-- A charge may come from a nested paid service that the provider reports
-- as its own kind of charge (a browser grid a test matrix rents, say):
-- kind keeps what the provider called it, so that receipts list such
-- charges as what they are. '' is a charge the provider gave no kind,
-- which every charge recorded before this migration is. Older binaries
-- never read it, so the minimum schema version stays where an earlier migration set it.
ALTER TABLE charges ADD COLUMN kind text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE charges DROP COLUMN kind;
