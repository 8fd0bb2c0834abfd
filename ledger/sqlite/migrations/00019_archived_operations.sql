-- +goose Up
-- archived_operations holds a tombstone for each operation moved out of the
-- live ledger into an archive: who it belonged to, when it ended, the chain
-- head the archive holds and the archive file it is in. Until key_until
-- (its end plus the operation ID's retention) a retry of its operation ID
-- is refused rather than started anew. Times are integer Unix microseconds.
-- Older binaries never read the table, so the minimum schema version stays
-- where an earlier migration set it.
CREATE TABLE archived_operations (
    id            INTEGER PRIMARY KEY,
    operation_ref bigint  NOT NULL UNIQUE,
    tenant        text    NOT NULL,
    operation_id  text    NOT NULL,
    task_id       text    NOT NULL,
    ended_at      integer NOT NULL,
    chain_head    text    NOT NULL,
    archive_file  text    NOT NULL,
    key_until     integer NOT NULL,
    archived_at   integer NOT NULL
);
CREATE INDEX archived_operations_key ON archived_operations (tenant, operation_id, key_until);

-- Deleting an archived operation's attempts and remote jobs has the
-- database look for rows that still point at them: without these indexes
-- each deleted row scans every event, remote job or charge, and a batch
-- holds the write lock for seconds.
CREATE INDEX events_attempt ON events (attempt_ref) WHERE attempt_ref IS NOT NULL;
CREATE INDEX remote_jobs_attempt ON remote_jobs (attempt_ref) WHERE attempt_ref IS NOT NULL;
CREATE INDEX charges_remote_job ON charges (remote_job_ref) WHERE remote_job_ref IS NOT NULL;

-- +goose Down
DROP INDEX charges_remote_job;
DROP INDEX remote_jobs_attempt;
DROP INDEX events_attempt;
DROP TABLE archived_operations;
