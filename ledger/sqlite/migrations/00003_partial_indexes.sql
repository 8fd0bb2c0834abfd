-- +goose Up
-- Most operations run without an approval and most attempts relate to no
-- other operation: index only the rows the lookups ask for, so that an
-- acceptance writes two fewer index pages.
DROP INDEX operations_fingerprint;
CREATE INDEX operations_fingerprint ON operations (tenant, fingerprint) WHERE approval_ref IS NOT NULL;
DROP INDEX attempts_related;
CREATE INDEX attempts_related ON attempts (related_ref) WHERE related_ref IS NOT NULL;

-- +goose Down
DROP INDEX attempts_related;
CREATE INDEX attempts_related ON attempts (related_ref);
DROP INDEX operations_fingerprint;
CREATE INDEX operations_fingerprint ON operations (tenant, fingerprint);
