package providersim

import (
	"strings"
	"testing"
	"time"
)

func TestParseFault(t *testing.T) {
	tests := []struct {
		in      string
		want    Fault
		wantErr string // a substring of the error; empty for success
	}{
		{in: "drop_response_after_accept", want: Fault{Name: FaultDropResponseAfterAccept, Count: 1}},
		{in: "drop_response_after_accept=3", want: Fault{Name: FaultDropResponseAfterAccept, Count: 3}},
		{in: "drop_response_after_accept=0", wantErr: "drop_response_after_accept needs a whole number"},
		{in: "drop_response_after_accept=many", wantErr: "drop_response_after_accept needs a whole number"},
		{in: "ignore_idempotency_key", want: Fault{Name: FaultIgnoreIdempotencyKey}},
		{in: "ignore_idempotency_key=yes", wantErr: "ignore_idempotency_key takes no value"},
		{in: "lookup_indeterminate", want: Fault{Name: FaultLookupIndeterminate}},
		{in: "lookup_delay=2s", want: Fault{Name: FaultLookupDelay, Duration: 2 * time.Second}},
		{in: "lookup_delay", wantErr: "lookup_delay needs a positive duration"},
		{in: "lookup_delay=-1s", wantErr: "lookup_delay needs a positive duration"},
		{in: "lookup_delay=soon", wantErr: "lookup_delay needs a positive duration"},
		{in: "overcharge=23.10", want: Fault{Name: FaultOvercharge, Amount: USD(23, 10)}},
		{in: "overcharge", wantErr: "overcharge needs the final charge"},
		{in: "overcharge=lots", wantErr: "overcharge needs the final charge"},
		{in: "no_invoice", want: Fault{Name: FaultNoInvoice}},
		{in: "slow", want: Fault{Name: FaultSlow, Factor: 10}},
		{in: "slow=4", want: Fault{Name: FaultSlow, Factor: 4}},
		{in: "slow=2.5x", want: Fault{Name: FaultSlow, Factor: 2.5}},
		{in: "slow=1500ms", want: Fault{Name: FaultSlow, Duration: 1500 * time.Millisecond}},
		{in: "slow=0.5", wantErr: "slow needs a factor of at least 1"},
		{in: "slow=glacial", wantErr: "slow needs a factor of at least 1"},
		{in: "fail_jobs", want: Fault{Name: FaultFailJobs}},
		{in: "crash_after_accept", want: Fault{Name: FaultCrashAfterAccept}},
		{in: "extra_runner", want: Fault{Name: FaultExtraRunner}},
		{in: "extra_runner=2", wantErr: "extra_runner takes no value"},
		{in: "missing_runner", want: Fault{Name: FaultMissingRunner}},
		{in: "missing_runner=1", wantErr: "missing_runner takes no value"},
		{in: " no_invoice ", want: Fault{Name: FaultNoInvoice}},
		{in: "explode", wantErr: `unknown fault "explode"; use one of drop_response_after_accept,`},
		{in: "", wantErr: "empty fault name"},
	}
	for _, tt := range tests {
		got, err := ParseFault(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseFault(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseFault(%q) error = %v, want none", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseFault(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
		// What String prints must parse back to the same fault.
		again, err := ParseFault(got.String())
		if err != nil || again != got {
			t.Errorf("ParseFault(%q) = %+v, %v; want %+v (round trip of %q)", got.String(), again, err, got, tt.in)
		}
	}
}

func TestParseFaults(t *testing.T) {
	got, err := ParseFaults("drop_response_after_accept=2", "overcharge=23.10", "lookup_delay=1s", "slow=3", "no_invoice")
	if err != nil {
		t.Fatal(err)
	}
	want := Faults{
		DropResponseAfterAccept: 2,
		Overcharge:              USD(23, 10),
		LookupDelay:             time.Second,
		SlowFactor:              3,
		NoInvoice:               true,
	}
	if got != want {
		t.Errorf("ParseFaults = %+v, want %+v", got, want)
	}
	if got, want := got.String(), "drop_response_after_accept=2,lookup_delay=1s,overcharge=23.10,no_invoice,slow=3x"; got != want {
		t.Errorf("Faults.String() = %q, want %q", got, want)
	}
	if got, want := (Faults{}).String(), "none"; got != want {
		t.Errorf("Faults{}.String() = %q, want %q", got, want)
	}
	if _, err := ParseFaults("fail_jobs", "lookup_delay"); err == nil || !strings.Contains(err.Error(), "lookup_delay") {
		t.Errorf("ParseFaults with a bad fault: error = %v, want one naming lookup_delay", err)
	}
	// Every fault that is on can be listed, printed and parsed back.
	all := Faults{
		DropResponseAfterAccept: 1, IgnoreIdempotencyKey: true, LookupIndeterminate: true,
		LookupDelay: time.Second, Overcharge: USD(23, 10), NoInvoice: true, SlowBy: time.Second,
		FailJobs: true, CrashAfterAccept: true, ExtraRunner: true, MissingRunner: true,
	}
	var specs []string
	for _, f := range all.List() {
		specs = append(specs, f.String())
	}
	if len(specs) != len(FaultNames()) {
		t.Errorf("Faults.List() has %d faults, want one per name (%d)", len(specs), len(FaultNames()))
	}
	back, err := ParseFaults(specs...)
	if err != nil || back != all {
		t.Errorf("ParseFaults(%q) = %+v, %v; want %+v", specs, back, err, all)
	}
}

func TestSlowJobDuration(t *testing.T) {
	tests := []struct {
		faults Faults
		want   time.Duration
	}{
		{Faults{}, time.Second},
		{Faults{SlowFactor: 4}, 4 * time.Second},
		{Faults{SlowBy: 2 * time.Second}, 3 * time.Second},
	}
	for _, tt := range tests {
		if got := tt.faults.jobDuration(time.Second); got != tt.want {
			t.Errorf("%v: jobDuration(1s) = %s, want %s", tt.faults, got, tt.want)
		}
	}
}

func TestMatrixRunners(t *testing.T) {
	tests := []struct {
		faults Faults
		asked  int
		want   int
	}{
		{Faults{}, 4, 4},
		{Faults{ExtraRunner: true}, 4, 5},
		{Faults{MissingRunner: true}, 4, 3},
		{Faults{MissingRunner: true}, 1, 0},
		{Faults{ExtraRunner: true, MissingRunner: true}, 4, 4},
	}
	for _, tt := range tests {
		if got := tt.faults.matrixRunners(tt.asked); got != tt.want {
			t.Errorf("%v: matrixRunners(%d) = %d, want %d", tt.faults, tt.asked, got, tt.want)
		}
	}
}
