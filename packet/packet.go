package packet

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/receipt"
)

// Input is everything a packet is built from.
type Input struct {
	// Selection says how the operations were chosen; the packet repeats it.
	Selection Selection
	// Operations are the selected operations' receipts, in the order the
	// packet lists them.
	Operations []Included
	// JWKS names the file beside the packet that holds the keys the
	// issued receipts verify against; empty when none accompanies it.
	JWKS string
	// Now is when the packet is generated; zero omits generated_at.
	Now time.Time
}

// Included is an operation's receipt as a packet includes it: the latest
// version issued, or a provisional receipt while none is.
type Included struct {
	// Receipt is what the receipt says: the issued version's receipt with
	// its issue line (receipt/issue.Read), or the provisional receipt
	// built from the ledger. It must not be nil.
	Receipt *receipt.Receipt
	// Document is the issued version as the ledger stores it, a DSSE
	// envelope; nil for a provisional receipt.
	Document []byte
	// Approval is the approval the operation ran under as the ledger
	// records it; nil when it ran under none.
	Approval *ledger.Approval
}

// Selection is how a packet's operations were chosen; each zero field
// chose nothing.
type Selection struct {
	RunID     string `json:"run_id,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	Tenant    string `json:"tenant,omitempty"`
	// Since and Until bound when the operations were accepted: at or after
	// Since, before Until.
	Since        time.Time `json:"since,omitzero"`
	Until        time.Time `json:"until,omitzero"`
	OperationIDs []string  `json:"operation_ids,omitempty"`
}

// Packet is the review packet of a run. Field order is the order of the
// JSON rendering.
type Packet struct {
	Selection   Selection   `json:"selection"`
	GeneratedAt time.Time   `json:"generated_at,omitzero"`
	Verdict     Verdict     `json:"verdict"`
	Summary     Summary     `json:"summary"`
	Operations  []Operation `json:"operations"`
	Approvals   []Approval  `json:"approvals"`
	// Budgets are the budgets that covered operations of the run, by ID;
	// omitted when none did.
	Budgets      []Budget     `json:"budgets,omitempty"`
	Verification Verification `json:"verification"`
}

// Budget is a budget that admitted operations of the run: its terms as
// their receipts name them, and what the run's operations hold or settled
// against it.
type Budget struct {
	ID            int64         `json:"id"`
	Tools         []string      `json:"tools,omitempty"`
	ToolPrefix    string        `json:"tool_prefix,omitempty"`
	RunID         string        `json:"run_id,omitempty"`
	Period        string        `json:"period"`
	TimeZone      string        `json:"time_zone"`
	MaxTotalCost  receipt.Money `json:"max_total_cost"`
	MaxRemoteJobs int           `json:"max_remote_jobs"`
	// Spent is the sum, over UsedBy, of what each operation holds or
	// settled against the budget.
	Spent    receipt.Money `json:"spent"`
	Breached bool          `json:"breached,omitempty"`
	// UsedBy are the operation IDs it covered, in the packet's order.
	UsedBy []string `json:"used_by"`
	// NotCovered are the operation IDs in its scope that it did not cover
	// and that waited for an approver instead, in the packet's order.
	NotCovered []string `json:"not_covered,omitempty"`
}

// VerdictStatus is whether the run can be handed off: a CI job refuses a
// merge on anything but ready.
type VerdictStatus string

const (
	VerdictReady    VerdictStatus = "ready"
	VerdictNotReady VerdictStatus = "not_ready"
)

// Verdict is the packet's judgement of the run.
type Verdict struct {
	Status VerdictStatus `json:"status"`
	// NotReady lists the operations whose receipt is not ready, in the
	// packet's order; empty when the verdict is ready.
	NotReady []NotReady `json:"not_ready"`
}

// NotReady is an operation that keeps the verdict from being ready.
type NotReady struct {
	OperationID          string                       `json:"operation_id"`
	Tenant               string                       `json:"tenant"`
	ReviewStatus         receipt.ReviewStatus         `json:"review_status"`
	ReconciliationStatus receipt.ReconciliationStatus `json:"reconciliation_status"`
	// NextActions are the receipt's open next actions as "action target",
	// most urgent first.
	NextActions []string `json:"next_actions"`
}

// Summary adds up the receipts of the packet's operations.
type Summary struct {
	Operations         int `json:"operations"`
	ReadyOperations    int `json:"ready_operations"`
	IntendedRemoteJobs int `json:"intended_remote_jobs"`
	ObservedRemoteJobs int `json:"observed_remote_jobs"`
	// DuplicateJobs counts duplicate remote jobs, whether still open,
	// cancelled or accepted.
	DuplicateJobs    int           `json:"duplicate_jobs"`
	EstimatedCostUSD receipt.Money `json:"estimated_cost_usd"`
	FinalCostUSD     receipt.Money `json:"final_cost_usd"`
	PendingCostUSD   receipt.Money `json:"pending_cost_usd"`
	UnpricedAttempts int           `json:"unpriced_attempts"`
	OpenNextActions  int           `json:"open_next_actions"`
	// Breaches counts the receipts' breaches, OpenBreaches those still
	// open.
	Breaches     int `json:"breaches"`
	OpenBreaches int `json:"open_breaches"`
}

// Operation is one operation of the run, with its receipt.
type Operation struct {
	OperationID          string                       `json:"operation_id"`
	Tenant               string                       `json:"tenant"`
	TaskID               string                       `json:"task_id"`
	Tool                 string                       `json:"tool"`
	ReviewStatus         receipt.ReviewStatus         `json:"review_status"`
	ReconciliationStatus receipt.ReconciliationStatus `json:"reconciliation_status"`
	// ApprovalID is the approval the operation ran under; 0 (omitted) when
	// it ran without one.
	ApprovalID int64 `json:"approval_id,omitempty"`
	// ReceiptVersion and ReceiptDigest name the issued version included:
	// its number and the lowercase hex SHA-256 of its DSSE envelope as
	// stored, which a signed packet lists as a subject ([SubjectName]).
	// Both are omitted for a provisional receipt.
	ReceiptVersion int    `json:"receipt_version,omitempty"`
	ReceiptDigest  string `json:"receipt_digest,omitempty"`
	// Provisional marks a receipt that is not issued yet: built from the
	// ledger, unsigned, and liable to change.
	Provisional bool `json:"provisional,omitempty"`
	// Receipt is the receipt's JSON document, with its issue block when
	// it is issued.
	Receipt json.RawMessage `json:"receipt"`

	// receipt is the receipt Build made, which the Markdown renders.
	receipt *receipt.Receipt
}

// Approval is an approval that operations of the run ran under, and who
// gave it.
type Approval struct {
	ID          int64  `json:"id"`
	Tenant      string `json:"tenant"`
	OperationID string `json:"operation_id"`
	// Tool is qualified by its upstream: "hosted_test.run_suite".
	Tool          string        `json:"tool"`
	MaxTotalCost  receipt.Money `json:"max_total_cost"`
	Currency      string        `json:"currency"`
	MaxRemoteJobs int           `json:"max_remote_jobs"`
	RetryPolicy   string        `json:"retry_policy"`
	CreatedAt     time.Time     `json:"created_at"`
	ExpiresAt     time.Time     `json:"expires_at"`
	RevokedAt     time.Time     `json:"revoked_at,omitzero"`
	// GivenBy is who gave the approval as the ledger recorded it: the
	// approver's credential, or "client_user (unverified)" for a form
	// answer in the protocol ("elicitation" on older approvals); empty when
	// nothing was recorded.
	GivenBy string `json:"given_by"`
	// UsedBy are the operation IDs of the packet's operations that ran
	// under it, in the packet's order.
	UsedBy []string `json:"used_by"`
}

// Verification says how the included receipts can be checked.
type Verification struct {
	// IssuedReceipts counts the receipts included as issued, each named
	// by its digest; ProvisionalReceipts those not issued yet.
	IssuedReceipts      int `json:"issued_receipts"`
	ProvisionalReceipts int `json:"provisional_receipts"`
	// JWKS is the file beside the packet holding the keys that verify the
	// issued receipts; omitted when none accompanies it.
	JWKS string `json:"jwks,omitempty"`
}

// Build assembles the packet of in. It reads nothing but in and does not
// modify it; it fails only when an issued receipt carries no issue line, a
// receipt cannot be rendered or a total does not fit.
func Build(in *Input) (*Packet, error) {
	sel := in.Selection
	sel.Since, sel.Until = utc(sel.Since), utc(sel.Until)
	sel.OperationIDs = slices.Clone(sel.OperationIDs)
	p := &Packet{
		Selection:    sel,
		GeneratedAt:  utc(in.Now),
		Verdict:      Verdict{Status: VerdictReady, NotReady: []NotReady{}},
		Operations:   []Operation{},
		Approvals:    []Approval{},
		Verification: Verification{JWKS: in.JWKS},
	}
	s := &p.Summary
	s.EstimatedCostUSD, s.FinalCostUSD, s.PendingCostUSD = usd(), usd(), usd()
	approvals := map[int64]*Approval{}
	budgets := map[int64]*Budget{}
	for _, inc := range in.Operations {
		op, err := include(inc)
		if err != nil {
			return nil, err
		}
		r := op.receipt
		if op.Provisional {
			p.Verification.ProvisionalReceipts++
		} else {
			p.Verification.IssuedReceipts++
		}
		if a := inc.Approval; a != nil {
			op.ApprovalID = a.ID
			if approvals[a.ID] == nil {
				approvals[a.ID] = &Approval{
					ID: a.ID, Tenant: a.Tenant, OperationID: a.OperationID, Tool: a.Tool,
					MaxTotalCost: receipt.Money{Amount: a.MaxTotalCost}, Currency: currencyOf(a.MaxTotalCost),
					MaxRemoteJobs: a.MaxRemoteJobs, RetryPolicy: string(a.RetryPolicy),
					CreatedAt: utc(a.CreatedAt), ExpiresAt: utc(a.ExpiresAt), RevokedAt: utc(a.RevokedAt),
					GivenBy: a.CreatedBy, UsedBy: []string{},
				}
			}
			approvals[a.ID].UsedBy = append(approvals[a.ID].UsedBy, r.OperationID)
		}
		for _, l := range r.Budgets {
			if err := addBudget(budgets, l, r.OperationID); err != nil {
				return nil, fmt.Errorf("add up budget %d in the review packet: %w", l.ID, err)
			}
		}
		p.Operations = append(p.Operations, op)
		if err := s.add(r); err != nil {
			return nil, fmt.Errorf("add up the receipt of operation %q in the review packet: %w", r.OperationID, err)
		}
		if r.ReviewStatus != receipt.ReviewReady {
			p.Verdict.Status = VerdictNotReady
			p.Verdict.NotReady = append(p.Verdict.NotReady, NotReady{
				OperationID: r.OperationID, Tenant: r.Tenant, ReviewStatus: r.ReviewStatus,
				ReconciliationStatus: r.ReconciliationStatus, NextActions: actions(r),
			})
		}
	}
	for _, a := range approvals {
		p.Approvals = append(p.Approvals, *a)
	}
	slices.SortFunc(p.Approvals, func(a, b Approval) int { return cmp.Compare(a.ID, b.ID) })
	for _, b := range budgets {
		for _, o := range p.Operations {
			if o.receipt.ApprovalRequest != nil && !slices.Contains(b.UsedBy, o.OperationID) && b.scopes(o.Tool, sel.RunID) {
				b.NotCovered = append(b.NotCovered, o.OperationID)
			}
		}
		p.Budgets = append(p.Budgets, *b)
	}
	slices.SortFunc(p.Budgets, func(a, b Budget) int { return cmp.Compare(a.ID, b.ID) })
	return p, nil
}

// include makes the packet's line of one included receipt.
func include(inc Included) (Operation, error) {
	r := *inc.Receipt
	r.Provisional = inc.Document == nil
	op := Operation{
		OperationID: r.OperationID, Tenant: r.Tenant, TaskID: r.TaskID, Tool: r.Tool,
		ReviewStatus: r.ReviewStatus, ReconciliationStatus: r.ReconciliationStatus,
		Provisional: r.Provisional, receipt: &r,
	}
	if !r.Provisional {
		if r.Issue == nil {
			return Operation{}, fmt.Errorf("the issued receipt of operation %q carries no issue line; read it with receipt/issue.Read", r.OperationID)
		}
		op.ReceiptVersion, op.ReceiptDigest = r.Issue.Version, receipt.Digest(inc.Document)
	}
	doc, err := r.JSON()
	if err != nil {
		return Operation{}, fmt.Errorf("include the receipt of operation %q in the review packet: %w", r.OperationID, err)
	}
	op.Receipt = doc
	return op, nil
}

// scopes reports whether a call of tool in run falls in b's scope. A run
// budget scopes only the packet of its own run.
func (b *Budget) scopes(tool, run string) bool {
	if b.RunID != "" && b.RunID != run {
		return false
	}
	return len(b.Tools) == 0 && b.ToolPrefix == "" || slices.Contains(b.Tools, tool) || b.ToolPrefix != "" && strings.HasPrefix(tool, b.ToolPrefix)
}

// addBudget counts what operation opID holds against the budget of line l.
func addBudget(budgets map[int64]*Budget, l receipt.BudgetLine, opID string) error {
	b := budgets[l.ID]
	if b == nil {
		b = &Budget{ID: l.ID, Tools: l.Tools, ToolPrefix: l.ToolPrefix, RunID: l.RunID, Period: l.Period, TimeZone: l.TimeZone,
			MaxTotalCost: l.MaxTotalCost, MaxRemoteJobs: l.MaxRemoteJobs, Spent: receipt.Money{Amount: money.Zero(l.MaxTotalCost.Currency)}, UsedBy: []string{}}
		budgets[l.ID] = b
	}
	spent, err := b.Spent.Add(l.Reserved.Amount)
	if err != nil {
		return err
	}
	b.Spent = receipt.Money{Amount: spent}
	b.Breached = b.Breached || l.Breached
	b.UsedBy = append(b.UsedBy, opID)
	return nil
}

// Ready reports whether the verdict is ready.
func (p *Packet) Ready() bool { return p.Verdict.Status == VerdictReady }

// add counts r into the summary.
func (s *Summary) add(r *receipt.Receipt) error {
	s.Operations++
	if r.ReviewStatus == receipt.ReviewReady {
		s.ReadyOperations++
	}
	s.IntendedRemoteJobs += r.IntendedRemoteJobs
	s.ObservedRemoteJobs += r.ObservedRemoteJobs
	s.DuplicateJobs += r.DuplicateJobs
	s.UnpricedAttempts += r.UnpricedAttempts
	s.OpenNextActions += len(r.NextActions)
	for _, b := range r.Breaches {
		s.Breaches++
		if b.Open {
			s.OpenBreaches++
		}
	}
	sums := []struct {
		total *receipt.Money
		v     receipt.Money
	}{{&s.EstimatedCostUSD, r.EstimatedCostUSD}, {&s.FinalCostUSD, r.FinalCostUSD}, {&s.PendingCostUSD, r.PendingCostUSD}}
	for _, x := range sums {
		if currencyOf(x.v.Amount) != receipt.Currency {
			continue
		}
		sum, err := x.total.Add(x.v.Amount)
		if err != nil {
			return err
		}
		x.total.Amount = sum
	}
	return nil
}

// actions lists r's next actions as "action target".
func actions(r *receipt.Receipt) []string {
	out := []string{}
	for _, a := range r.NextActions {
		out = append(out, a.Action+" "+a.Target)
	}
	return out
}

// currencyOf is a's currency as money spells it: upper case, USD when
// unnamed.
func currencyOf(a money.Amount) string { return money.Zero(a.Currency).Currency }

func usd() receipt.Money { return receipt.Money{Amount: money.Zero(receipt.Currency)} }

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}
