-- +goose Up
-- Every operation records the schema version of the binary that accepted
-- it, and the trigger refuses a new operation from a binary older than
-- this schema: one from before this migration writes no version, and it
-- would leave the columns of 00005 unset (a secret argument unredacted, a
-- priced tool unpriced). A process left running while a newer one
-- migrates then answers ledger_unavailable with nothing started, until it
-- is upgraded. A later migration that changes what an acceptance writes
-- raises the minimum by recreating the trigger. Rows from before keep no
-- version; the trigger looks only at inserts.
ALTER TABLE operations ADD COLUMN schema_version integer;

-- +goose StatementBegin
CREATE TRIGGER operations_schema_version BEFORE INSERT ON operations
WHEN NEW.schema_version IS NULL OR NEW.schema_version < 6
BEGIN
    SELECT RAISE(ABORT, 'this taskgate is older than the ledger schema (version 6) and may not accept operations; upgrade it');
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER operations_schema_version;
ALTER TABLE operations DROP COLUMN schema_version;
