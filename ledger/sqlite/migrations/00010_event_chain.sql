-- +goose Up
-- Each operation's events form a hash chain: an event stores its hash
-- (ledger.EventHash: SHA-256 of its canonical content, which names the
-- link before it) and prev_hash, that link; the operation's chain_head is
-- its latest event's hash, and '' while it has none. Events recorded
-- before this migration keep no hash: the chain of every operation that
-- exists now starts here, at 'migration-00010' (ledger.ChainStartMigration),
-- which taskgate verify reports as such. Events of no operation (a denial
-- that named none) belong to no chain and keep no hash.
ALTER TABLE operations ADD COLUMN chain_head text NOT NULL DEFAULT '';
UPDATE operations SET chain_head = 'migration-00010';
ALTER TABLE events ADD COLUMN hash text;
ALTER TABLE events ADD COLUMN prev_hash text;

-- An event of an operation must carry its link and follow the
-- operation's head; inserting it moves the head. A binary older than
-- this schema writes events without a hash: it is refused, as is a new
-- operation from it, rather than leave a gap in a chain.
-- +goose StatementBegin
CREATE TRIGGER events_chain BEFORE INSERT ON events
WHEN NEW.operation_ref IS NOT NULL
BEGIN
    SELECT RAISE(ABORT, 'this taskgate is older than the ledger schema (version 10) and may not record events; upgrade it')
    WHERE NEW.hash IS NULL OR NEW.prev_hash IS NULL;
    SELECT RAISE(ABORT, 'the event does not follow the head of its operation''s hash chain')
    WHERE NOT EXISTS (SELECT 1 FROM operations WHERE id = NEW.operation_ref AND chain_head = NEW.prev_hash);
    UPDATE operations SET chain_head = NEW.hash WHERE id = NEW.operation_ref;
END;
-- +goose StatementEnd

DROP TRIGGER operations_schema_version;
-- +goose StatementBegin
CREATE TRIGGER operations_schema_version BEFORE INSERT ON operations
WHEN NEW.schema_version IS NULL OR NEW.schema_version < 10
BEGIN
    SELECT RAISE(ABORT, 'this taskgate is older than the ledger schema (version 10) and may not accept operations; upgrade it');
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER operations_schema_version;
-- +goose StatementBegin
CREATE TRIGGER operations_schema_version BEFORE INSERT ON operations
WHEN NEW.schema_version IS NULL OR NEW.schema_version < 7
BEGIN
    SELECT RAISE(ABORT, 'this taskgate is older than the ledger schema (version 7) and may not accept operations; upgrade it');
END;
-- +goose StatementEnd
DROP TRIGGER events_chain;
ALTER TABLE events DROP COLUMN prev_hash;
ALTER TABLE events DROP COLUMN hash;
ALTER TABLE operations DROP COLUMN chain_head;
