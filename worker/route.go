package worker

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/taskgate/taskgate/ledger"
)

// fansOut reports whether op's call may start more than one remote job,
// or its answer named more than one: then its jobs are bound and followed
// together.
func fansOut(op *ledger.Operation, ids []string) bool {
	return op.IntendedRemoteJobs > 1 || len(ids) > 1
}

// boundJob is one remote job as a result or a lookup names it.
type boundJob struct {
	id     string
	status ledger.JobStatus
}

// bindJobs are the records of the remote jobs a call's result or a lookup
// names, in the provider's order: the first the operation intends are
// bound as intended; any beyond are recorded as they are, and
// reconciliation makes them duplicates. via names how they were learnt
// ("" for the call's own answer).
func bindJobs(l *lease, t *target, jobs []boundJob, result json.RawMessage, via string) ([]*ledger.RemoteJobUpsert, []ledger.EventParams) {
	var ups []*ledger.RemoteJobUpsert
	var events []ledger.EventParams
	for i, j := range jobs {
		u := &ledger.RemoteJobUpsert{
			Upstream: l.op.Upstream, Endpoint: t.up.Endpoint(), RemoteJobID: j.id, Kind: ledger.JobKindProviderJob,
			Status: j.status, AttemptRef: t.creator, Result: result,
		}
		if i < max(l.op.IntendedRemoteJobs, 1) {
			u.Intended = new(true)
		}
		ups = append(ups, u)
		events = append(events, ledger.EventParams{Kind: ledger.EventRemoteJobBound, Data: ledger.RemoteJobData{Kind: ledger.JobKindProviderJob, RemoteJobID: j.id, Via: via}})
	}
	return ups, events
}

// jobNames names jobs for a status message: one by its ID, several by
// their count and IDs.
func jobNames(jobs []boundJob) string {
	if len(jobs) == 1 {
		return jobs[0].id
	}
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.id
	}
	return fmt.Sprintf("%d remote jobs (%s)", len(jobs), strings.Join(ids, ", "))
}
