-- +goose Up
-- receipt_versions holds each operation's issued receipts: the signed
-- document (a DSSE envelope) byte for byte as issued, so that every read
-- returns the same bytes and needs no key. version counts from 1 per
-- operation; previous is the digest of the version before (NULL for the
-- first); substance is the digest of what the receipt says, apart from
-- when it was built and its chain head, by which the issuer sees that a
-- later fact changed it. Older binaries never read the table, so the
-- minimum schema version stays where an earlier migration set it.
CREATE TABLE receipt_versions (
    id            INTEGER PRIMARY KEY,
    operation_ref bigint NOT NULL REFERENCES operations (id),
    version       integer NOT NULL,
    digest        text NOT NULL UNIQUE,
    previous      text,
    substance     text NOT NULL,
    kid           text NOT NULL,
    document      text NOT NULL,
    issued_at     integer NOT NULL,
    UNIQUE (operation_ref, version)
);

-- +goose Down
DROP TABLE receipt_versions;
