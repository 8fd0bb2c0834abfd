package providerkit

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/taskgate/taskgate/money"
)

// Status is what a job is doing. The kit's contract tools answer with
// these words, and its declared contract maps each answer to itself.
type Status string

const (
	StatusRunning   Status = "running"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
)

// Ended reports whether a job in status s has stopped for good.
func (s Status) Ended() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// Job is one run of a tool's work, created by the first call with its key.
type Job struct {
	// ID is the job's handle, chosen by the kit: the remote job ID the
	// gateway binds to its operation.
	ID string
	// Key is the idempotency key of the call that created the job.
	Key string
	// Tool is the name of the tool whose work the job runs.
	Tool string
	// Arguments are the call's arguments, as the client sent them.
	Arguments json.RawMessage
	Status    Status
	// Result is the work's result (JSON) once the job completed.
	Result json.RawMessage
	// Error says why a failed or cancelled job ended so.
	Error     string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ChargeStatus is where a charge stands.
type ChargeStatus string

const (
	ChargePending  ChargeStatus = "pending"
	ChargeFinal    ChargeStatus = "final"
	ChargeRefunded ChargeStatus = "refunded"
)

// Valid reports whether s is one of the charge statuses.
func (s ChargeStatus) Valid() bool {
	return s == ChargePending || s == ChargeFinal || s == ChargeRefunded
}

// Charge is a priced effect of a job.
type Charge struct {
	// ID names the charge; recording a charge with an ID that exists
	// updates it, so work that runs again records each charge once.
	ID    string
	JobID string
	// Amount is integer micro-units of a currency, never a float.
	Amount money.Amount
	// Kind is what the provider calls the charge ("compute", or a nested
	// service passed on); empty for none.
	Kind      string
	Status    ChargeStatus
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ErrNotFound is returned for a job that does not exist.
var ErrNotFound = errors.New("no such job")

// Store keeps jobs and their charges durably. Every method is safe for
// concurrent use, by one process or, for a store several processes share,
// by all of them.
type Store interface {
	// Start records a running job for key, with a new ID, unless key has
	// a job already: then it returns that job and created false. The key
	// and the job are recorded in one transaction, and a lookup by key
	// finds the job as soon as Start returns.
	Start(ctx context.Context, id, key, tool string, arguments json.RawMessage, now time.Time) (job *Job, created bool, err error)
	// Job returns the job with id, or ErrNotFound.
	Job(ctx context.Context, id string) (*Job, error)
	// JobsByKey returns the jobs of key, oldest first; none when key has
	// no job.
	JobsByKey(ctx context.Context, key string) ([]*Job, error)
	// End records that the job ended in status with result or errText,
	// unless it had ended already; it returns the job as it now is.
	End(ctx context.Context, id string, status Status, result json.RawMessage, errText string, now time.Time) (*Job, error)
	// Unended returns every job that has not ended, oldest first.
	Unended(ctx context.Context) ([]*Job, error)
	// RecordCharge records c, or updates the charge with c's ID (its
	// amount, kind and status; never its job).
	RecordCharge(ctx context.Context, c *Charge, now time.Time) error
	// Charges returns the job's charges in the order they were first
	// recorded.
	Charges(ctx context.Context, jobID string) ([]*Charge, error)
}
