package reconcile_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/reconcile"
)

var t0 = time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)

func usd(s string) money.Amount { return money.MustParse(s, "USD") }

// base is a finished operation under an approval with one completed,
// intended job and no charges: complete, the neutral start of each case.
func base() *reconcile.Facts {
	return &reconcile.Facts{
		Operation: &ledger.Operation{ID: 42, OperationID: "op-1", State: ledger.StateCompleted, Estimate: usd("5.00"),
			IntendedRemoteJobs: 1, SendCount: 1, ApprovalID: 7},
		Currency: "USD",
		Jobs:     []reconcile.Job{{ID: "job-a", Attempt: 1, Status: ledger.JobCompleted, Intended: true}},
	}
}

// priced makes the tool priced, with charges.
func priced(charges ...reconcile.Charge) func(*reconcile.Facts) {
	return func(f *reconcile.Facts) {
		f.Priced = true
		f.Charges = charges
	}
}

// failedWithoutJob makes f a failed operation with no known job and the
// given events.
func failedWithoutJob(f *reconcile.Facts, events ...*ledger.Event) {
	f.Operation.State = ledger.StateFailed
	f.Jobs = nil
	f.Events = events
}

func charge(id, job, amount string, s ledger.ChargeStatus) reconcile.Charge {
	return reconcile.Charge{ID: id, RemoteJobID: job, Amount: usd(amount), Status: s}
}

func event(kind ledger.EventKind, data string) *ledger.Event {
	return &ledger.Event{OperationRef: 42, Kind: kind, Data: json.RawMessage(data)}
}

// want is what a case checks of an Outcome; empty fields are the neutral
// expectation (Status complete, Reservation Settle, no duplicates).
type want struct {
	status      reconcile.Status
	reservation reconcile.Reservation
	final       string
	duplicates  []int // indices of jobs that are duplicates after Assess
	newDups     []int
	uninvoiced  []int
	cancel      []int
	unpriced    int
	sentUnknown bool
	authority   bool
	charged     ledger.Knowledge
	missing     int
}

func TestAssess(t *testing.T) {
	tests := []struct {
		name string
		edit func(f *reconcile.Facts)
		want want
	}{
		{
			name: "one completed job, nothing priced: complete, reservation settled at zero",
			want: want{status: reconcile.Complete, reservation: reconcile.Settle, final: "0.00"},
		},
		{
			name: "the operation still running: incomplete, but the final cost is known",
			edit: func(f *reconcile.Facts) { f.Operation.State = ledger.StateRunning },
			want: want{status: reconcile.Incomplete, reservation: reconcile.Settle, final: "0.00"},
		},
		{
			name: "a job still running: incomplete, reservation held",
			edit: func(f *reconcile.Facts) { f.Jobs[0].Status = ledger.JobRunning },
			want: want{status: reconcile.Incomplete, reservation: reconcile.Hold, final: "0.00"},
		},
		{
			name: "a job of unknown status: indeterminate",
			edit: func(f *reconcile.Facts) { f.Jobs[0].Status = "" },
			want: want{status: reconcile.Indeterminate, reservation: reconcile.Hold, final: "0.00"},
		},
		{
			name: "the provider could not be asked: indeterminate, reservation held",
			edit: func(f *reconcile.Facts) { f.Indeterminate = true },
			want: want{status: reconcile.Indeterminate, reservation: reconcile.Hold, final: "0.00"},
		},
		{
			name: "priced and invoiced: complete, settled at the final cost, charged",
			edit: priced(charge("ch-1", "job-a", "17.84", ledger.ChargeFinal)),
			want: want{status: reconcile.Complete, reservation: reconcile.Settle, final: "17.84", charged: ledger.Yes},
		},
		{
			name: "priced, completed, no charge: a missing invoice keeps it incomplete and the attempt unpriced",
			edit: func(f *reconcile.Facts) { f.Priced = true },
			want: want{status: reconcile.Incomplete, reservation: reconcile.Hold, final: "0.00", uninvoiced: []int{0}, unpriced: 1},
		},
		{
			name: "a pending charge keeps it incomplete and the reservation held",
			edit: priced(charge("ch-1", "job-a", "17.84", ledger.ChargePending)),
			want: want{status: reconcile.Incomplete, reservation: reconcile.Hold, final: "0.00", uninvoiced: []int{0}},
		},
		{
			name: "a priced job refunded in full: complete, nothing charged",
			edit: priced(charge("ch-1", "job-a", "17.84", ledger.ChargeRefunded)),
			want: want{status: reconcile.Complete, reservation: reconcile.Settle, final: "0.00", charged: ledger.No},
		},
		{
			name: "a final charge in another currency: incomplete, the reservation cannot settle, nothing charged in USD",
			edit: priced(reconcile.Charge{ID: "ch-eur", RemoteJobID: "job-a", Amount: money.MustParse("7.00", "EUR"), Status: ledger.ChargeFinal}),
			want: want{status: reconcile.Incomplete, reservation: reconcile.Hold, final: "0.00", charged: ledger.No},
		},
		{
			name: "a refund in another currency: the final cost is known, reconciliation is not complete",
			edit: func(f *reconcile.Facts) {
				f.Priced = true
				f.Charges = []reconcile.Charge{
					charge("ch-1", "job-a", "17.84", ledger.ChargeFinal),
					{ID: "ch-eur", RemoteJobID: "job-a", Amount: money.MustParse("1.00", "EUR"), Status: ledger.ChargeRefunded},
				}
			},
			want: want{status: reconcile.Incomplete, reservation: reconcile.Settle, final: "17.84", charged: ledger.Yes},
		},
		{
			name: "without an approval nothing settles",
			edit: func(f *reconcile.Facts) { f.Operation.ApprovalID = 0 },
			want: want{status: reconcile.Complete, reservation: reconcile.Hold, final: "0.00"},
		},
		{
			name: "a second job beyond the one intended is a new duplicate",
			edit: func(f *reconcile.Facts) {
				f.Jobs = append(f.Jobs, reconcile.Job{ID: "job-b", Attempt: 2, Status: ledger.JobRunning, New: true})
			},
			want: want{status: reconcile.Incomplete, reservation: reconcile.Hold, final: "0.00", duplicates: []int{1}, newDups: []int{1}},
		},
		{
			name: "a duplicate already marked is not marked again",
			edit: func(f *reconcile.Facts) {
				f.Jobs = append(f.Jobs, reconcile.Job{ID: "job-b", Attempt: 2, Status: ledger.JobCancelled, Duplicate: true})
			},
			want: want{status: reconcile.Complete, reservation: reconcile.Settle, final: "0.00", duplicates: []int{1}},
		},
		{
			name: "with none bound, the first job is the intended one",
			edit: func(f *reconcile.Facts) {
				f.Jobs[0].Intended = false
				f.Jobs = append(f.Jobs, reconcile.Job{ID: "job-b", Attempt: 1, Status: ledger.JobCompleted})
			},
			want: want{status: reconcile.Complete, reservation: reconcile.Settle, final: "0.00", duplicates: []int{1}, newDups: []int{1}},
		},
		{
			name: "two jobs intended, two found: no duplicate",
			edit: func(f *reconcile.Facts) {
				f.Operation.IntendedRemoteJobs = 2
				f.Jobs = append(f.Jobs, reconcile.Job{ID: "job-b", Attempt: 1, Status: ledger.JobCompleted})
			},
			want: want{status: reconcile.Complete, reservation: reconcile.Settle, final: "0.00"},
		},
		{
			name: "four runners intended, three completed: complete as accounted, one missing",
			edit: func(f *reconcile.Facts) {
				f.Operation.IntendedRemoteJobs = 4
				f.Jobs = append(f.Jobs,
					reconcile.Job{ID: "job-b", Attempt: 1, Status: ledger.JobCompleted, Intended: true},
					reconcile.Job{ID: "job-c", Attempt: 1, Status: ledger.JobCompleted, Intended: true})
			},
			want: want{status: reconcile.Complete, reservation: reconcile.Settle, final: "0.00", missing: 1},
		},
		{
			name: "four runners intended, three so far while it runs: none missing yet",
			edit: func(f *reconcile.Facts) {
				f.Operation.State, f.Operation.IntendedRemoteJobs = ledger.StateRunning, 4
				f.Jobs = append(f.Jobs, reconcile.Job{ID: "job-b", Attempt: 1, Status: ledger.JobRunning, Intended: true})
			},
			want: want{status: reconcile.Incomplete, reservation: reconcile.Hold, final: "0.00"},
		},
		{
			name: "four runners intended, one found, and the provider could not be asked about all: none counted missing",
			edit: func(f *reconcile.Facts) {
				f.Operation.IntendedRemoteJobs = 4
				f.Indeterminate = true
			},
			want: want{status: reconcile.Indeterminate, reservation: reconcile.Hold, final: "0.00"},
		},
		{
			name: "four runners intended, five found: the fifth is a duplicate",
			edit: func(f *reconcile.Facts) {
				f.Operation.IntendedRemoteJobs = 4
				for _, id := range []string{"job-b", "job-c", "job-d", "job-e"} {
					f.Jobs = append(f.Jobs, reconcile.Job{ID: id, Attempt: 1, Status: ledger.JobCompleted, New: true})
				}
			},
			want: want{status: reconcile.Complete, reservation: reconcile.Settle, final: "0.00", duplicates: []int{4}, newDups: []int{4}},
		},
		{
			name: "unpriced attempts count per attempt; a charged job prices its attempt",
			edit: func(f *reconcile.Facts) {
				f.Priced = true
				f.Jobs = append(f.Jobs,
					reconcile.Job{ID: "job-b", Attempt: 1, Status: ledger.JobCancelled, Duplicate: true},
					reconcile.Job{ID: "job-c", Attempt: 2, Status: ledger.JobCancelled, Duplicate: true},
					reconcile.Job{ID: "job-d", Status: ledger.JobFailed, Duplicate: true})
				f.Charges = []reconcile.Charge{charge("ch-1", "job-a", "1.00", ledger.ChargeFinal)}
			},
			want: want{status: reconcile.Complete, reservation: reconcile.Settle, final: "1.00", duplicates: []int{1, 2, 3}, unpriced: 2, charged: ledger.Yes},
		},
		{
			name: "a new job while cancellation was requested is asked to stop",
			edit: func(f *reconcile.Facts) {
				f.Operation.CancelRequestedAt = t0
				f.Jobs[0].New = true
				f.Jobs = append(f.Jobs, reconcile.Job{ID: "job-b", Status: ledger.JobCancelled, New: true})
			},
			want: want{status: reconcile.Complete, reservation: reconcile.Settle, final: "0.00", duplicates: []int{1}, newDups: []int{1}, cancel: []int{0}},
		},
		{
			name: "ended with no job after a send that refused: released, authoritative",
			edit: func(f *reconcile.Facts) {
				failedWithoutJob(f, event(ledger.EventSendStarted, `{}`), event(ledger.EventFailed, `{"nothing_started":true}`))
			},
			want: want{status: reconcile.Complete, reservation: reconcile.Release, final: "0.00", authority: true},
		},
		{
			name: "ended with no job, never sent: released",
			edit: func(f *reconcile.Facts) {
				f.Operation.State, f.Operation.SendCount = ledger.StateFailed, 0
				f.Jobs = nil
			},
			want: want{status: reconcile.Complete, reservation: reconcile.Release, final: "0.00"},
		},
		{
			name: "sent, no job known, nothing shows none started: indeterminate, held",
			edit: func(f *reconcile.Facts) {
				failedWithoutJob(f, event(ledger.EventSendStarted, `{}`))
			},
			want: want{status: reconcile.Indeterminate, reservation: reconcile.Hold, final: "0.00", sentUnknown: true},
		},
		{
			name: "sent, no job known, a lookup not_found past the safe delay: released",
			edit: func(f *reconcile.Facts) {
				failedWithoutJob(f, event(ledger.EventSendStarted, `{}`))
				f.NotFoundProven = true
			},
			want: want{status: reconcile.Complete, reservation: reconcile.Release, final: "0.00", authority: true},
		},
		{
			name: "no job, but the provider could not be asked: held even though nothing started",
			edit: func(f *reconcile.Facts) {
				failedWithoutJob(f, event(ledger.EventLookup, `{"answer":"not_sent"}`))
				f.Indeterminate = true
			},
			want: want{status: reconcile.Indeterminate, reservation: reconcile.Hold, final: "0.00", authority: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := base()
			if tt.edit != nil {
				tt.edit(f)
			}
			out := reconcile.Assess(f)
			got := want{
				status: out.Status, reservation: out.Reservation, final: out.Totals.Final.String(),
				unpriced: out.UnpricedAttempts, sentUnknown: out.SentWithoutKnownJob, authority: out.Authoritative, charged: out.Charged,
				missing: out.MissingJobs,
			}
			for i, j := range out.Jobs {
				if j.Duplicate {
					got.duplicates = append(got.duplicates, i)
				}
				if j.NewDuplicate {
					got.newDups = append(got.newDups, i)
				}
				if j.Uninvoiced {
					got.uninvoiced = append(got.uninvoiced, i)
				}
				if j.Cancel {
					got.cancel = append(got.cancel, i)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Assess =\n  %+v\nwant\n  %+v", got, tt.want)
			}
		})
	}
}

// A lookup's job list, in order, matched to the intended number of the
// route: which jobs are intended, which duplicates, and how many missing.
func TestMatchRoute(t *testing.T) {
	// Each job is written as a letter: i intended, d a duplicate already
	// marked, - neither.
	tests := []struct {
		name     string
		jobs     string
		intended int
		want     string // i intended, d duplicate, D a new duplicate
		missing  int
	}{
		{"one intended, one found", "i", 1, "i", 0},
		{"one intended, none bound: the first is intended", "--", 1, "iD", 0},
		{"one intended, the second bound: the first is a duplicate", "-i", 1, "Di", 0},
		{"an intended number below one counts as one", "--", 0, "iD", 0},
		{"four intended, four bound", "iiii", 4, "iiii", 0},
		{"four intended, four found before any is bound", "----", 4, "iiii", 0},
		{"four intended, five found: one duplicate", "iiii-", 4, "iiiiD", 0},
		{"four intended, two bound and three more found: the earliest fill the route", "ii---", 4, "iiiiD", 0},
		{"four intended, three found: one missing", "iii", 4, "iii", 1},
		{"four intended, none found: all missing", "", 4, "", 4},
		{"a duplicate already marked stays one and fills no place", "iid", 4, "iid", 2},
		{"six found of four, two bound late", "--ii--", 4, "iiiiDD", 0},
		{"two bound of one intended: the later is a duplicate", "ii", 1, "iD", 0},
		{"five bound of four intended: the fifth is a duplicate", "iiiii", 4, "iiiiD", 0},
	}
	for _, tt := range tests {
		jobs := make([]reconcile.JobOutcome, len(tt.jobs))
		for i, c := range tt.jobs {
			jobs[i] = reconcile.JobOutcome{Intended: c == 'i', Duplicate: c == 'd'}
		}
		missing := reconcile.MatchRoute(jobs, tt.intended)
		got := make([]byte, len(jobs))
		for i, j := range jobs {
			switch {
			case j.Intended && !j.Duplicate:
				got[i] = 'i'
			case j.NewDuplicate:
				got[i] = 'D'
			case j.Duplicate:
				got[i] = 'd'
			default:
				got[i] = '-'
			}
		}
		if string(got) != tt.want || missing != tt.missing {
			t.Errorf("%s: MatchRoute(%q, %d) = %q, %d missing; want %q, %d missing", tt.name, tt.jobs, tt.intended, got, missing, tt.want, tt.missing)
		}
	}
}

// The intended job that completed is the creating attempt's effect; any job
// at all means the remote side accepted it.
func TestAssessKnowledge(t *testing.T) {
	f := base()
	f.Jobs = append(f.Jobs, reconcile.Job{ID: "job-b", Status: ledger.JobRunning})
	out := reconcile.Assess(f)
	if out.Accepted != ledger.Yes || out.Effect != ledger.Yes {
		t.Errorf("accepted, effect = %q, %q, want yes, yes", out.Accepted, out.Effect)
	}
	f = base()
	f.Jobs[0].Status = ledger.JobFailed
	if out := reconcile.Assess(f); out.Accepted != ledger.Yes || out.Effect != "" {
		t.Errorf("failed job: accepted, effect = %q, %q, want yes, unset", out.Accepted, out.Effect)
	}
	f.Jobs = nil
	f.Operation.SendCount = 0
	if out := reconcile.Assess(f); out.Accepted != "" {
		t.Errorf("no job: accepted = %q, want unset", out.Accepted)
	}
}

func TestSendMayHaveStarted(t *testing.T) {
	sent := event(ledger.EventSendStarted, `{"send":1}`)
	tests := []struct {
		name    string
		sends   int
		refused bool // the creating attempt is known to have started nothing
		events  []*ledger.Event
		mayHave bool
	}{
		{name: "a send and nothing since", sends: 1, events: []*ledger.Event{sent}, mayHave: true},
		{name: "no record at all", sends: 1, mayHave: true},
		{name: "refused before any work began", sends: 1, events: []*ledger.Event{sent, event(ledger.EventFailed, `{"nothing_started":true}`)}},
		{name: "answered with a question", sends: 1, events: []*ledger.Event{sent, event(ledger.EventInputRequested, `{"send":1}`)}},
		{name: "the send that carried the answer", sends: 2, events: []*ledger.Event{sent, event(ledger.EventInputRequested, `{"send":1}`), event(ledger.EventInputAnswered, `{"send":1}`), sent}, mayHave: true},
		{name: "a question asked within the call", sends: 1, events: []*ledger.Event{sent, event(ledger.EventInputRequested, `{"send":1,"in_flight":true}`)}, mayHave: true},
		{name: "a failure that may have started work", sends: 1, events: []*ledger.Event{sent, event(ledger.EventFailed, `{"message":"internal"}`)}, mayHave: true},
		{name: "never left the gateway", sends: 1, events: []*ledger.Event{sent, event(ledger.EventLookup, `{"answer":"not_sent"}`)}},
		{name: "an authoritative reconciliation", sends: 1, events: []*ledger.Event{sent, event(ledger.EventReconciled, `{"lookup":"answered","authoritative":true}`)}},
		{name: "a reconciliation that found nothing proves nothing", sends: 1, events: []*ledger.Event{sent, event(ledger.EventReconciled, `{"lookup":"answered","jobs":0}`)}, mayHave: true},
		{name: "proof before a later send", sends: 2, events: []*ledger.Event{sent, event(ledger.EventLookup, `{"answer":"not_sent"}`), sent}, mayHave: true},
		{name: "one send, the creating attempt started nothing", sends: 1, refused: true, events: []*ledger.Event{sent}},
		{name: "two sends: the creating attempt speaks for the first only", sends: 2, refused: true, events: []*ledger.Event{sent}, mayHave: true},
		{name: "unreadable data proves nothing", sends: 1, events: []*ledger.Event{sent, event(ledger.EventFailed, `not json`)}, mayHave: true},
		{name: "data read in part proves nothing", sends: 1, events: []*ledger.Event{sent, event(ledger.EventLookup, `{"answer":"not_sent","detail":5}`)}, mayHave: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := &ledger.Operation{ID: 42, SendCount: tt.sends}
			accepted := ledger.Unknown
			if tt.refused {
				accepted = ledger.No
			}
			attempts := []*ledger.Attempt{{ID: 1, OperationRef: 42, Decision: ledger.DecisionCreated, RemoteAccepted: accepted}}
			if got := reconcile.SendMayHaveStarted(op, attempts, tt.events); got != tt.mayHave {
				t.Errorf("SendMayHaveStarted = %v, want %v", got, tt.mayHave)
			}
		})
	}
}

func TestSum(t *testing.T) {
	eur := money.MustParse("7.00", "EUR")
	tests := []struct {
		name                     string
		charges                  []reconcile.Charge
		final, pending, refunded string
		uncounted, uncountedFin  []string
	}{
		{name: "none", final: "0.00", pending: "0.00", refunded: "0.00"},
		{
			name: "final, pending and refunded apart; estimated in none",
			charges: []reconcile.Charge{
				charge("a", "j", "10.00", ledger.ChargeFinal), charge("b", "j", "7.84", ledger.ChargeFinal),
				charge("c", "j", "3.00", ledger.ChargePending), charge("d", "j", "1.50", ledger.ChargeRefunded),
				charge("e", "j", "99.00", ledger.ChargeEstimated),
			},
			final: "17.84", pending: "3.00", refunded: "1.50",
		},
		{
			name: "another currency is listed, never added",
			charges: []reconcile.Charge{
				charge("a", "j", "10.00", ledger.ChargeFinal),
				{ID: "eur-final", Amount: eur, Status: ledger.ChargeFinal},
				{ID: "eur-refund", Amount: eur, Status: ledger.ChargeRefunded},
			},
			final: "10.00", pending: "0.00", refunded: "0.00",
			uncounted: []string{"eur-final", "eur-refund"}, uncountedFin: []string{"eur-final"},
		},
		{
			name: "a sum out of range is left out",
			charges: []reconcile.Charge{
				{ID: "big", Amount: money.FromMicros(1<<62, "USD"), Status: ledger.ChargeFinal},
				{ID: "bigger", Amount: money.FromMicros(1<<62, "USD"), Status: ledger.ChargeFinal},
			},
			final: money.FromMicros(1<<62, "USD").String(), pending: "0.00", refunded: "0.00",
			uncounted: []string{"bigger"}, uncountedFin: []string{"bigger"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := reconcile.Sum(tt.charges, "usd")
			if got.Final.String() != tt.final || got.Pending.String() != tt.pending || got.Refunded.String() != tt.refunded {
				t.Errorf("final, pending, refunded = %s, %s, %s, want %s, %s, %s",
					got.Final, got.Pending, got.Refunded, tt.final, tt.pending, tt.refunded)
			}
			if got.Final.Currency != "USD" {
				t.Errorf("currency = %q, want USD", got.Final.Currency)
			}
			var ids []string
			for _, c := range got.Uncounted {
				ids = append(ids, c.ID)
			}
			if !slices.Equal(ids, tt.uncounted) || !slices.Equal(got.UncountedFinal(), tt.uncountedFin) {
				t.Errorf("uncounted = %q (final %q), want %q (final %q)", ids, got.UncountedFinal(), tt.uncounted, tt.uncountedFin)
			}
		})
	}
}
