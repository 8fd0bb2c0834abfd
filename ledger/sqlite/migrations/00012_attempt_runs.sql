-- +goose Up
-- Each attempt records the run its client named (_meta
-- "dev.taskgate/run-id") and the MCP session it came on, so that a review
-- packet can gather the operations one agent run caused. '' is an attempt
-- that named no run or came on no session, which every attempt recorded
-- before this migration is. An older binary's acceptance leaves both '',
-- which loses only the run of its attempts, so the minimum schema version
-- stays where an earlier migration set it. The indexes hold only attempts that name one.
ALTER TABLE attempts ADD COLUMN run_id text NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN session_id text NOT NULL DEFAULT '';
CREATE INDEX attempts_run ON attempts (run_id) WHERE run_id <> '';
CREATE INDEX attempts_session ON attempts (session_id) WHERE session_id <> '';

-- +goose Down
DROP INDEX attempts_session;
DROP INDEX attempts_run;
ALTER TABLE attempts DROP COLUMN session_id;
ALTER TABLE attempts DROP COLUMN run_id;
