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

// A Charge is the provider's own record of what it billed for one job. A job
// has at most one charge: it appears as pending (at the estimate) when the job
// starts running, becomes final (at the final amount) when the job succeeds,
// and becomes refunded with amount 0.00 when the job fails or is cancelled.
type Charge struct {
	ID        string       `json:"charge_id"`
	JobID     string       `json:"job_id"`
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
	// FinalCharges counts charges in state final.
	FinalCharges int `json:"final_charges"`
	// FinalChargeUSD sums the final charges.
	FinalChargeUSD Micros `json:"final_charge_usd"`
}

// Record is the provider's whole authoritative record, as served at
// GET /sim/record. Jobs and charges are oldest first.
type Record struct {
	Jobs    []Job    `json:"jobs"`
	Charges []Charge `json:"charges"`
	Totals  Totals   `json:"totals"`
}
