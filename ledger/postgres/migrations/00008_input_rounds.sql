-- +goose Up
-- A consequential call whose upstream asks a question waits in
-- input_required: the question (input_requests, with the upstream's
-- request_state) is kept on the operation so that any replica, after any
-- restart, can show it and send the answer (input_responses) back.
-- input_channel records at acceptance how the client can answer at all.
-- An older binary's acceptance leaves it '' (the client cannot be asked),
-- which keeps that binary's behaviour, so the minimum schema version
-- stays where 00007 set it.
ALTER TABLE operations ADD COLUMN input_channel text NOT NULL DEFAULT '';
ALTER TABLE operations ADD COLUMN input_requests text;
ALTER TABLE operations ADD COLUMN request_state text NOT NULL DEFAULT '';
ALTER TABLE operations ADD COLUMN input_responses text;

-- +goose Down
ALTER TABLE operations DROP COLUMN input_responses;
ALTER TABLE operations DROP COLUMN request_state;
ALTER TABLE operations DROP COLUMN input_requests;
ALTER TABLE operations DROP COLUMN input_channel;
