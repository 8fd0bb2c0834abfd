package providersim

import "time"

// JobStatus is where a remote job is in its life:
// queued -> running -> succeeded | failed | cancelled.
type JobStatus string

// Job states.
const (
	StatusQueued    JobStatus = "queued"
	StatusRunning   JobStatus = "running"
	StatusSucceeded JobStatus = "succeeded"
	StatusFailed    JobStatus = "failed"
	StatusCancelled JobStatus = "cancelled"
)

// Terminal reports whether the job has ended.
func (s JobStatus) Terminal() bool {
	return s == StatusSucceeded || s == StatusFailed || s == StatusCancelled
}

// KeySource says how a run_suite or run_matrix call carried its idempotency
// key.
type KeySource string

// Key sources. When a call carries several, the first in this order wins.
const (
	KeyFromArgument KeySource = "argument" // the idempotency_key argument
	KeyFromMeta     KeySource = "meta"     // _meta["com.example.hosted-test/idempotency-key"]
	KeyFromHeader   KeySource = "header"   // the HTTP header Idempotency-Key
	KeyNone         KeySource = "none"     // no key: every call is a new job
)

// ChargeStatus is where a charge is in its life: pending -> final | refunded.
type ChargeStatus string

// Charge states.
const (
	ChargePending  ChargeStatus = "pending"
	ChargeFinal    ChargeStatus = "final"
	ChargeRefunded ChargeStatus = "refunded"
)

// Currency is the only currency the simulated provider bills in.
const Currency = "USD"

// A Job is the provider's own record of one remote job.
type Job struct {
	ID             string    `json:"job_id"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	KeySource      KeySource `json:"key_source"`
	// Protocol is the MCP protocol version of the call that started the job.
	Protocol string `json:"protocol_version,omitempty"`
	Suite    string `json:"suite"`
	Commit   string `json:"commit,omitempty"`
	// Token is the credential the call carried: what a provider receives
	// of a secret argument.
	Token string `json:"token,omitempty"`
	// Matrix is the run_matrix call (hosted-matrix-1, …) whose runner this
	// job is; empty for a job run_suite started.
	Matrix string `json:"matrix,omitempty"`
	// Runner is the job's place in its matrix, from 1; zero outside one.
	Runner    int       `json:"runner,omitempty"`
	Status    JobStatus `json:"status"`
	Passed    int       `json:"passed"`
	Failed    int       `json:"failed"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ChargeKind says what a charge bills: the job itself or a service the job
// paid for on the caller's behalf.
type ChargeKind string

// Charge kinds.
const (
	// ChargeKindSuite bills a job run_suite started (charge-N).
	ChargeKindSuite ChargeKind = "suite"
	// ChargeKindRunner bills a matrix runner's own machine time (charge-N).
	ChargeKindRunner ChargeKind = "runner"
	// ChargeKindBrowserGrid bills the browser time a matrix runner rented
	// from the browser grid, a nested service, when run_matrix was called
	// with browser_grid (grid-charge-N).
	ChargeKindBrowserGrid ChargeKind = "browser_grid"
)

// A Charge is the provider's own record of one thing it billed for a job. A
// job has its own charge (kind suite or runner) and, as a runner of a matrix
// with browser_grid, a second one of kind browser_grid. Every charge of a job
// appears as pending (at its estimate) when the job starts running, becomes
// final (at its final amount) when the job succeeds, and becomes refunded
// with amount 0.00 when the job fails or is cancelled.
type Charge struct {
	ID    string `json:"charge_id"`
	JobID string `json:"job_id"`
	// Kind is what the charge bills. A state file written before kinds
	// existed loads with the kind the job's own charge has: runner for a
	// matrix runner, suite otherwise.
	Kind      ChargeKind   `json:"kind"`
	Amount    Micros       `json:"amount_usd"`
	Currency  string       `json:"currency"`
	Status    ChargeStatus `json:"status"`
	CreatedAt time.Time    `json:"created_at"`
	UpdatedAt time.Time    `json:"updated_at"`
}

// Totals sums up the record.
type Totals struct {
	// JobsStarted counts every job ever created, whatever its state.
	JobsStarted int `json:"jobs_started"`
	// FinalCharges counts charges in state final, of every kind.
	FinalCharges int `json:"final_charges"`
	// FinalChargeUSD sums the final charges, of every kind.
	FinalChargeUSD Micros `json:"final_charge_usd"`
}

// Record is the provider's whole authoritative record, as served at
// GET /sim/record. Jobs are oldest first, and charges are in the order of
// their jobs, a job's own charge before its browser grid charge.
type Record struct {
	Jobs    []Job    `json:"jobs"`
	Charges []Charge `json:"charges"`
	Totals  Totals   `json:"totals"`
}
