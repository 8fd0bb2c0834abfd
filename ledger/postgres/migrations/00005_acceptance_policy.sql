-- +goose Up
-- What the tool's policy said at acceptance (whether its provider prices
-- it, which arguments are secret) is kept on the operation, beside the
-- retry policy and estimate taken at the same moment. It was the data of
-- an accepted event; the operation and its created attempt already record
-- the acceptance, and an acceptance now writes one row fewer. Operations
-- accepted before keep their accepted events; their facts are copied here.
ALTER TABLE operations ADD COLUMN priced boolean NOT NULL DEFAULT false;
ALTER TABLE operations ADD COLUMN secret_arguments text;
UPDATE operations o SET
    priced = coalesce((a.data::jsonb ->> 'priced')::boolean, false),
    secret_arguments = (a.data::jsonb -> 'secret_arguments')::text
FROM (SELECT DISTINCT ON (operation_ref) operation_ref, data FROM events
      WHERE kind = 'accepted' ORDER BY operation_ref, id) a
WHERE a.operation_ref = o.id;

-- +goose Down
ALTER TABLE operations DROP COLUMN secret_arguments;
ALTER TABLE operations DROP COLUMN priced;
