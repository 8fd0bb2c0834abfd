-- +goose Up
-- provider_key is the idempotency key the provider receives for an
-- operation, drawn at random when the operation is accepted
-- (ledger.NewProviderKey), so that no tenant can compute another's and
-- find its job through a tool of the provider. It is NULL for an operation
-- accepted before this migration, whose key stays the one derived from
-- tenant, operation ID and row (ledger.Operation.ProviderKey), so that a
-- lookup for it still finds its job. The trigger now refuses a new
-- operation from a binary older than this schema, which would leave the
-- key NULL and so computable.
ALTER TABLE operations ADD COLUMN provider_key text;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION taskgate_operations_schema_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.schema_version IS NULL OR NEW.schema_version < 14 THEN
        RAISE EXCEPTION 'this taskgate is older than the ledger schema (version 14) and may not accept operations; upgrade it'
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
    IF NEW.schema_version IS NULL OR NEW.schema_version < 10 THEN
        RAISE EXCEPTION 'this taskgate is older than the ledger schema (version 10) and may not accept operations; upgrade it'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
ALTER TABLE operations DROP COLUMN provider_key;
