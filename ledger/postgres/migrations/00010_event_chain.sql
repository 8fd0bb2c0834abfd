-- +goose Up
-- Each operation's events form a hash chain: an event stores its hash
-- (ledger.EventHash: SHA-256 of its canonical content, which names the
-- link before it) and prev_hash, that link; the operation's chain_head is
-- its latest event's hash, and '' while it has none. Events recorded
-- before this migration keep no hash: the chain of every operation that
-- exists now starts here, at 'migration-00010' (ledger.ChainStartMigration),
-- which taskgate verify reports as such. Events of no operation (a denial
-- that named none) belong to no chain and keep no hash.
-- The default given with the column is what existing rows read, without
-- rewriting them; new operations then start with ''.
ALTER TABLE operations ADD COLUMN chain_head text NOT NULL DEFAULT 'migration-00010';
ALTER TABLE operations ALTER COLUMN chain_head SET DEFAULT '';
ALTER TABLE events ADD COLUMN hash text;
ALTER TABLE events ADD COLUMN prev_hash text;

-- An event of an operation must carry its link and follow the
-- operation's head; inserting it moves the head. The writer holds the
-- operation's row lock when it reads the head, so the check fails only
-- for a writer that did not: its transaction is retried (serialization
-- failure) rather than fork the chain. A binary older than this schema
-- writes events without a hash: it is refused, as is a new operation from
-- it, rather than leave a gap in a chain.
-- +goose StatementBegin
CREATE FUNCTION taskgate_events_chain() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.operation_ref IS NULL THEN
        RETURN NEW;
    END IF;
    IF NEW.hash IS NULL OR NEW.prev_hash IS NULL THEN
        RAISE EXCEPTION 'this taskgate is older than the ledger schema (version 10) and may not record events; upgrade it'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    UPDATE operations SET chain_head = NEW.hash WHERE id = NEW.operation_ref AND chain_head = NEW.prev_hash;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'the event does not follow the head of the hash chain of operation %', NEW.operation_ref
            USING ERRCODE = 'serialization_failure';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER events_chain BEFORE INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION taskgate_events_chain();

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION taskgate_operations_schema_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.schema_version IS NULL OR NEW.schema_version < 10 THEN
        RAISE EXCEPTION 'this taskgate is older than the ledger schema (version 10) and may not accept operations; upgrade it'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION taskgate_operations_schema_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.schema_version IS NULL OR NEW.schema_version < 7 THEN
        RAISE EXCEPTION 'this taskgate is older than the ledger schema (version 7) and may not accept operations; upgrade it'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
DROP TRIGGER events_chain ON events;
DROP FUNCTION taskgate_events_chain();
ALTER TABLE events DROP COLUMN prev_hash;
ALTER TABLE events DROP COLUMN hash;
ALTER TABLE operations DROP COLUMN chain_head;
