-- +goose Up
-- console_session_ends holds the console sign-ins that ended before their
-- time (signed out, or ended by an approver), by the session ID their
-- sealed cookie carries, until the time they would have ended: any replica
-- that reads the cookie refuses it. Rows past expires_at are deleted as
-- new ones are written. Older binaries never read the table, so the
-- minimum schema version stays where an earlier migration set it.
CREATE TABLE console_session_ends (
    session_id text PRIMARY KEY,
    expires_at integer NOT NULL
);
CREATE INDEX console_session_ends_expires ON console_session_ends (expires_at);

-- +goose Down
DROP TABLE console_session_ends;
