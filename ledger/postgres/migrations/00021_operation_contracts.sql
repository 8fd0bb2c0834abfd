-- +goose Up
-- contract is the provider contract an operation was accepted under when
-- the provider declared it (_meta["dev.taskgate/contract"]), as the JSON
-- it was given, byte for byte: text, not jsonb, which would reorder keys
-- and drop whitespace. It is written once, when the operation is created,
-- and never changed: an operation keeps its contract for its whole life,
-- whatever the provider declares later. NULL is an operation whose
-- contract is the configuration's, which every operation accepted before
-- this migration is; an older binary's acceptance leaves it NULL, which
-- is what that binary means (it knows no declared contracts), so the
-- minimum schema version stays where an earlier migration set it.
ALTER TABLE operations ADD COLUMN contract text;

-- +goose Down
ALTER TABLE operations DROP COLUMN contract;
