-- +goose Up
-- A receipt reads the approval request that an approver approved for an
-- operation (by its approval) and the attempts of a client that cannot
-- take a task, refused while that request waited: they point at no
-- operation, so they are found by tenant and operation ID. Older
-- binaries never read through these indexes, so the minimum schema
-- version stays where an earlier migration set it.
CREATE INDEX approval_requests_approval ON approval_requests (approval_ref) WHERE approval_ref IS NOT NULL;
CREATE INDEX attempts_refused ON attempts (tenant, operation_id)
    WHERE operation_ref IS NULL AND related_ref IS NULL;

-- +goose Down
DROP INDEX attempts_refused;
DROP INDEX approval_requests_approval;
