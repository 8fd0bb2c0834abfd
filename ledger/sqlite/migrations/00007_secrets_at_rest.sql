-- +goose Up
-- secrets_at_rest says how the values of an operation's secret arguments
-- are kept in its arguments column: plaintext, sealed (encrypted under a
-- key of the gateway's secrets key ring) or erased (replaced by
-- "[redacted]" once no re-send can need them); NULL when it has none.
-- Operations accepted before this migration kept them in plain text; a
-- gateway with a key configured seals them when it starts, one without
-- warns that they are there. The trigger now refuses a new operation from
-- a binary older than this schema, which would write secrets in plain text.
ALTER TABLE operations ADD COLUMN secrets_at_rest text;
UPDATE operations SET secrets_at_rest = 'plaintext' WHERE secret_arguments IS NOT NULL;

DROP TRIGGER operations_schema_version;
-- +goose StatementBegin
CREATE TRIGGER operations_schema_version BEFORE INSERT ON operations
WHEN NEW.schema_version IS NULL OR NEW.schema_version < 7
BEGIN
    SELECT RAISE(ABORT, 'this taskgate is older than the ledger schema (version 7) and may not accept operations; upgrade it');
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER operations_schema_version;
-- +goose StatementBegin
CREATE TRIGGER operations_schema_version BEFORE INSERT ON operations
WHEN NEW.schema_version IS NULL OR NEW.schema_version < 6
BEGIN
    SELECT RAISE(ABORT, 'this taskgate is older than the ledger schema (version 6) and may not accept operations; upgrade it');
END;
-- +goose StatementEnd
ALTER TABLE operations DROP COLUMN secrets_at_rest;
