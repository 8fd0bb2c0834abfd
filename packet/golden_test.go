package packet_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/packet"
	"github.com/taskgate/taskgate/receipt"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata from the current renderings")

// t0 is when the run began.
var t0 = time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func usd(s string) money.Amount { return money.MustParse(s, "USD") }

// run is the run ID every golden operation's attempts carried.
const run = "ci-4711"

// operation is the ledger's record of one finished operation of the run:
// accepted at start under approval approvalID (given by givenBy), one
// intended remote job completed and charged charge.
func operation(id int64, operationID string, start time.Duration, approvalID int64, givenBy, charge string) *receipt.Input {
	job, chargeID := operationID+"-job-1", operationID+"-charge-1"
	ev := func(n int64, kind ledger.EventKind, when time.Duration, data string) *ledger.Event {
		return &ledger.Event{ID: id*100 + n, OperationRef: id, Kind: kind, Data: json.RawMessage(data), CreatedAt: at(start + when)}
	}
	return &receipt.Input{
		Operation: &ledger.Operation{
			ID: id, Tenant: "acme", OperationID: operationID, TaskID: "task-" + operationID,
			Upstream: "hosted_test", Tool: "run_suite", Fingerprint: "sha256:" + operationID, State: ledger.StateCompleted,
			ApprovalID: approvalID, RetryPolicy: ledger.RetryLookupThenAttach, Estimate: usd("18.00"), IntendedRemoteJobs: 1, SendCount: 1,
			Priced: true, CreatedAt: at(start), UpdatedAt: at(start + 6*time.Minute), EndedAt: at(start + 6*time.Minute),
		},
		Attempts: []*ledger.Attempt{{
			ID: id*10 + 1, RequestID: "req-" + operationID, Tenant: "acme", OperationID: operationID, OperationRef: id,
			Decision: ledger.DecisionCreated, Source: "mcp/2026-07-28", ClientResult: ledger.ClientDelivered,
			RemoteAccepted: ledger.Yes, RemoteEffect: ledger.Yes, ChargeStatus: ledger.Yes, RunID: run,
			CreatedAt: at(start), UpdatedAt: at(start + 6*time.Minute),
		}},
		RemoteJobs: []*ledger.RemoteJob{{
			ID: id*10 + 2, OperationRef: id, AttemptRef: id*10 + 1, Upstream: "hosted_test", Endpoint: "https://suite.example.test/mcp",
			RemoteJobID: job, Kind: ledger.JobKindProviderJob, Status: ledger.JobCompleted, Intended: true,
			EffectReversed: ledger.Unknown, CreatedAt: at(start + 10*time.Second), UpdatedAt: at(start + 6*time.Minute),
		}},
		Charges: []*ledger.Charge{{
			ID: id*10 + 3, OperationRef: id, RemoteJobRef: id*10 + 2, ProviderChargeID: chargeID, Amount: usd(charge),
			Status: ledger.ChargeFinal, Source: "provider", CreatedAt: at(start + 7*time.Minute), UpdatedAt: at(start + 7*time.Minute),
		}},
		Approval: &ledger.Approval{
			ID: approvalID, Tenant: "acme", OperationID: operationID, Tool: "hosted_test.run_suite",
			MaxTotalCost: usd("20.00"), MaxRemoteJobs: 1, RetryPolicy: ledger.RetryLookupThenAttach,
			CreatedAt: at(start - time.Hour), ExpiresAt: at(start + 24*time.Hour), CreatedBy: givenBy,
		},
		Reservations: []*ledger.Reservation{{
			ID: id*10 + 4, ApprovalRef: approvalID, OperationRef: id, Amount: usd("18.00"), Settled: usd(charge), RemoteJobs: 1,
			Status: ledger.ReservationSettled, CreatedAt: at(start), UpdatedAt: at(start + 7*time.Minute),
		}},
		Events: []*ledger.Event{
			ev(1, ledger.EventSendStarted, 5*time.Second, `{}`),
			ev(2, ledger.EventRemoteJobBound, 10*time.Second, `{"remote_job_id":"`+job+`"}`),
			ev(3, ledger.EventRemoteJobObserved, 6*time.Minute, `{"remote_job_id":"`+job+`","status":"completed"}`),
			ev(4, ledger.EventResultStored, 6*time.Minute, `{}`),
			ev(5, ledger.EventChargeRecorded, 7*time.Minute, `{"charge_id":"`+chargeID+`","status":"final"}`),
			ev(9, ledger.EventReconciled, 8*time.Minute, `{"lookup":"answered","detail":"1 remote job, 1 charge"}`),
		},
		Priced: true,
		Now:    at(time.Hour),
	}
}

// clean: one remote job, charged 17.84 under a 20.00 ceiling.
func clean() *receipt.Input {
	return operation(41, "suite-clean", 0, 7, "dana", "17.84")
}

// duplicateCancelled: a lost response made the provider start a second
// job, which the reconciler found and cancelled before it was charged.
func duplicateCancelled() *receipt.Input {
	in := operation(42, "suite-duplicate", 10*time.Minute, 8, "dana", "17.84")
	start := 10 * time.Minute
	in.Operation.SendCount = 2
	in.Attempts = append(in.Attempts, &ledger.Attempt{
		ID: 423, RequestID: "req-suite-duplicate-retry", Tenant: "acme", OperationID: "suite-duplicate", OperationRef: 42,
		Decision: ledger.DecisionAttached, Source: "mcp/2026-07-28", ClientResult: ledger.ClientDelivered,
		RemoteAccepted: ledger.Yes, RemoteEffect: ledger.Yes, ChargeStatus: ledger.Yes, RunID: run,
		CreatedAt: at(start + 2*time.Minute), UpdatedAt: at(start + 6*time.Minute),
	})
	in.Attempts[0].ClientResult = ledger.ClientDisconnected
	in.RemoteJobs = append(in.RemoteJobs, &ledger.RemoteJob{
		ID: 425, OperationRef: 42, AttemptRef: 423, Upstream: "hosted_test", Endpoint: "https://suite.example.test/mcp",
		RemoteJobID: "suite-duplicate-job-2", Kind: ledger.JobKindProviderJob, Status: ledger.JobCancelled, Duplicate: true,
		DuplicateResolved: "cancelled", CancelRequestedAt: at(start + 3*time.Minute), EffectReversed: ledger.Yes,
		CreatedAt: at(start + 2*time.Minute), UpdatedAt: at(start + 4*time.Minute),
	})
	in.Events = append(in.Events[:5],
		&ledger.Event{ID: 4206, OperationRef: 42, Kind: ledger.EventDuplicateJob, Data: json.RawMessage(`{"remote_job_id":"suite-duplicate-job-2"}`), CreatedAt: at(start + 3*time.Minute)},
		&ledger.Event{ID: 4207, OperationRef: 42, Kind: ledger.EventCancelSent, Data: json.RawMessage(`{"remote_job_id":"suite-duplicate-job-2"}`), CreatedAt: at(start + 3*time.Minute)},
		&ledger.Event{ID: 4208, OperationRef: 42, Kind: ledger.EventEffectReversed, Data: json.RawMessage(`{"remote_job_id":"suite-duplicate-job-2"}`), CreatedAt: at(start + 4*time.Minute)},
		&ledger.Event{ID: 4209, OperationRef: 42, Kind: ledger.EventReconciled, Data: json.RawMessage(`{"lookup":"answered","detail":"2 remote jobs, 1 charge"}`), CreatedAt: at(start + 8*time.Minute)},
	)
	return in
}

// costBreach: the provider charged 23.10 against a ceiling of 20.00 that
// the user gave when asked in the protocol.
func costBreach() *receipt.Input {
	in := operation(43, "suite-breach", 20*time.Minute, 9, "elicitation", "23.10")
	in.Operation.CostBreach = true
	in.Events = append(in.Events[:5],
		&ledger.Event{ID: 4306, OperationRef: 43, Kind: ledger.EventCostBoundaryBreach, Data: json.RawMessage(`{"charge_id":"suite-breach-charge-1"}`), CreatedAt: at(27 * time.Minute)},
		&ledger.Event{ID: 4309, OperationRef: 43, Kind: ledger.EventReconciled, Data: json.RawMessage(`{"lookup":"answered","detail":"1 remote job, 1 charge"}`), CreatedAt: at(28 * time.Minute)},
	)
	return in
}

// goldenRun is a golden packet: the run's operations, as the command line
// would gather them, and what the packet must conclude.
type goldenRun struct {
	name       string
	operations func() []packet.Included
	verdict    packet.VerdictStatus
	notReady   []string
}

var goldenRuns = []goldenRun{
	{"clean", func() []packet.Included { return provisional(clean()) }, packet.VerdictReady, nil},
	{"duplicate_cancelled", func() []packet.Included { return provisional(duplicateCancelled()) }, packet.VerdictReady, nil},
	{"cost_breach", func() []packet.Included { return provisional(costBreach()) }, packet.VerdictNotReady, []string{"suite-breach"}},
	{"run", func() []packet.Included { return provisional(clean(), duplicateCancelled(), costBreach()) }, packet.VerdictNotReady, []string{"suite-breach"}},
}

// provisional includes each input's receipt as a provisional one, built
// from the ledger, with the approval it ran under.
func provisional(ins ...*receipt.Input) []packet.Included {
	out := make([]packet.Included, len(ins))
	for i, in := range ins {
		out[i] = packet.Included{Receipt: receipt.Build(in), Approval: in.Approval}
	}
	return out
}

func build(t *testing.T, g goldenRun) *packet.Packet {
	t.Helper()
	p, err := packet.Build(&packet.Input{
		Selection:  packet.Selection{RunID: run, Tenant: "acme"},
		Operations: g.operations(),
		Now:        at(time.Hour),
	})
	if err != nil {
		t.Fatalf("Build(%s): %v", g.name, err)
	}
	return p
}

func TestGolden(t *testing.T) {
	for _, g := range goldenRuns {
		t.Run(g.name, func(t *testing.T) {
			p := build(t, g)
			var notReady []string
			for _, n := range p.Verdict.NotReady {
				notReady = append(notReady, n.OperationID)
			}
			if p.Verdict.Status != g.verdict || p.Ready() != (g.verdict == packet.VerdictReady) || !slices.Equal(notReady, g.notReady) {
				t.Errorf("verdict = %s, not ready %v; want %s, %v", p.Verdict.Status, notReady, g.verdict, g.notReady)
			}
			for _, format := range []string{"md", "json"} {
				got, err := packet.Render(p, format)
				if err != nil {
					t.Fatal(err)
				}
				path := filepath.Join("testdata", g.name+"."+format+".golden")
				if *update {
					if err := os.WriteFile(path, got, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test ./packet -update to create it)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s rendering differs from %s:\n--- got ---\n%s\n--- want ---\n%s", format, path, got, want)
				}
			}
		})
	}
}
