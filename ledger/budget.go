package ledger

import (
	"encoding/json"
	"time"

	"github.com/taskgate/taskgate/money"
)

// BudgetPeriod is how a budget's ceiling renews: never, or each calendar
// day, week (from Monday) or month in the budget's time zone. Its values are
// stable strings: the command line, the API and the ledger spell them alike.
type BudgetPeriod string

const (
	BudgetPeriodNone  BudgetPeriod = "none"
	BudgetPeriodDay   BudgetPeriod = "day"
	BudgetPeriodWeek  BudgetPeriod = "week"
	BudgetPeriodMonth BudgetPeriod = "month"
)

// Valid reports whether p is a period this version knows.
func (p BudgetPeriod) Valid() bool {
	switch p {
	case BudgetPeriodNone, BudgetPeriodDay, BudgetPeriodWeek, BudgetPeriodMonth:
		return true
	}
	return false
}

// Budget is what an approver approved in advance for many operations of
// one tenant: every call its scope matches may reserve against it, within
// its ceilings for the current period, without a person deciding the call.
type Budget struct {
	ID     int64
	Tenant string
	// Tools and ToolPrefix narrow the scope to tools qualified by their
	// upstream ("hosted_test.run_suite"): a tool matches when it is one of
	// Tools or starts with ToolPrefix. With neither, every tool matches.
	Tools      []string
	ToolPrefix string
	// RunID, when set, narrows the scope to calls that carry this run ID
	// (_meta["dev.taskgate/run-id"]).
	RunID string
	// MaxTotalCost and MaxRemoteJobs bound what the operations it covers
	// commit within one period.
	MaxTotalCost  money.Amount
	MaxRemoteJobs int
	Period        BudgetPeriod
	// TimeZone is the IANA zone whose midnights begin the periods.
	TimeZone string
	// PerOperationCap, when not zero, is the highest estimate of a call
	// the budget covers.
	PerOperationCap money.Amount
	ExpiresAt       time.Time
	Note            string
	CreatedAt       time.Time
	// CreatedBy and ClosedBy are approvers' credential IDs.
	CreatedBy string
	ClosedAt  time.Time
	ClosedBy  string
	// BreachedAt is when a final charge first took the budget over its
	// ceiling; zero while it never has.
	BreachedAt time.Time
}

// Open reports whether the budget covers new work at now.
func (b *Budget) Open(now time.Time) bool {
	return b.ClosedAt.IsZero() && now.Before(b.ExpiresAt)
}

// BudgetReservation holds what one operation the budget covers committed
// against it: its estimate and remote jobs while held, its final cost
// once settled, nothing once released. It follows the operation's own
// reservation against its approval.
type BudgetReservation struct {
	ID           int64
	BudgetRef    int64
	OperationRef int64
	Amount       money.Amount
	Settled      money.Amount
	RemoteJobs   int
	Status       ReservationStatus
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// BudgetEventKind names a change to a budget. Its values are stable
// strings.
type BudgetEventKind string

const (
	BudgetCreated  BudgetEventKind = "budget_created"
	BudgetClosed   BudgetEventKind = "budget_closed"
	BudgetBreached BudgetEventKind = "budget_breached"
)

// BudgetEvent is one change to a budget: By is the approver's credential
// ID, empty for a breach, which no person caused.
type BudgetEvent struct {
	ID        int64
	BudgetRef int64
	Kind      BudgetEventKind
	By        string
	Data      json.RawMessage
	CreatedAt time.Time
}

// BudgetListParams filter BudgetList.
type BudgetListParams struct {
	Tenant string // empty: every tenant
	// IncludeClosed lists closed and expired budgets too.
	IncludeClosed bool
	// Now decides expiry; zero means the store's clock.
	Now time.Time
}

// BudgetReservationListParams select budget reservations: those against
// one budget, or those of one operation; at least one is required.
type BudgetReservationListParams struct {
	BudgetRef    int64
	OperationRef int64
}

// BudgetApprover begins the CreatedBy of an approval that budgets gave an
// operation they cover: "budget:3,5" names budgets 3 and 5, not a person.
const BudgetApprover = "budget:"
