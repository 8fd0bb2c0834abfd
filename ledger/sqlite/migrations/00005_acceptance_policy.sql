-- +goose Up
-- What the tool's policy said at acceptance (whether its provider prices
-- it, which arguments are secret) is kept on the operation, beside the
-- retry policy and estimate taken at the same moment. It was the data of
-- an accepted event; the operation and its created attempt already record
-- the acceptance, and an acceptance now writes one row fewer. Operations
-- accepted before keep their accepted events; their facts are copied here.
ALTER TABLE operations ADD COLUMN priced integer NOT NULL DEFAULT 0;
ALTER TABLE operations ADD COLUMN secret_arguments text;
UPDATE operations SET
    priced = coalesce((SELECT json_extract(e.data, '$.priced') FROM events e
        WHERE e.operation_ref = operations.id AND e.kind = 'accepted' ORDER BY e.id LIMIT 1), 0),
    secret_arguments = (SELECT json_extract(e.data, '$.secret_arguments') FROM events e
        WHERE e.operation_ref = operations.id AND e.kind = 'accepted' ORDER BY e.id LIMIT 1);

-- +goose Down
ALTER TABLE operations DROP COLUMN secret_arguments;
ALTER TABLE operations DROP COLUMN priced;
