package providersim

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Fault names, as accepted by [ParseFault] and on a command line
// (--fault NAME or --fault NAME=VALUE).
const (
	// FaultDropResponseAfterAccept[=N]: the next N (default 1) run_suite or
	// run_matrix calls are accepted (a job or a matrix of runners is created,
	// or the key's existing jobs are found) and then never answered: the
	// handler waits until the caller gives up, so the caller sees a lost
	// response after the provider accepted. A run_matrix call counts once,
	// however many runners it started.
	FaultDropResponseAfterAccept = "drop_response_after_accept"
	// FaultIgnoreIdempotencyKey: every run_suite starts a new job, and every
	// run_matrix a new matrix, even when its idempotency key already has jobs.
	FaultIgnoreIdempotencyKey = "ignore_idempotency_key"
	// FaultLookupIndeterminate: lookup_operation answers isError "index
	// unavailable" and cannot say whether a key has a job.
	FaultLookupIndeterminate = "lookup_indeterminate"
	// FaultLookupDelay=DURATION: lookup_operation does not see jobs younger
	// than DURATION (a lagging index) and answers not_found for them.
	FaultLookupDelay = "lookup_delay"
	// FaultOvercharge=AMOUNT: a successful job's own final charge is AMOUNT
	// (e.g. 23.10) instead of the configured final charge; a browser grid
	// charge keeps its amount.
	FaultOvercharge = "overcharge"
	// FaultNoInvoice: jobs run and complete without any charge record, of
	// the job or of the browser grid.
	FaultNoInvoice = "no_invoice"
	// FaultSlow=FACTOR|DURATION: jobs take longer. A plain number or one
	// ending in "x" multiplies the job duration ("slow=4", "slow=4x"); a
	// duration is added to it ("slow=2s"). Without a value, jobs take ten
	// times as long.
	FaultSlow = "slow"
	// FaultFailJobs: jobs, matrix runners among them, end failed; their
	// pending charges, browser grid charges among them, are refunded.
	FaultFailJobs = "fail_jobs"
	// FaultCrashAfterAccept: after recording a new job, or all the runners of
	// a new matrix, the simulator calls [Options.Crash] (by default the
	// process exits with status 3).
	FaultCrashAfterAccept = "crash_after_accept"
	// FaultExtraRunner: each new matrix starts one runner more than its
	// run_matrix call asked for; estimate_matrix still prices what was asked.
	FaultExtraRunner = "extra_runner"
	// FaultMissingRunner: each new matrix starts one runner fewer than its
	// run_matrix call asked for, never fewer than none; a matrix left with no
	// runner answers failed at once, with no job and no charge.
	// estimate_matrix still prices what was asked.
	FaultMissingRunner = "missing_runner"
)

// FaultNames lists every fault name [ParseFault] accepts.
func FaultNames() []string {
	return []string{
		FaultDropResponseAfterAccept, FaultIgnoreIdempotencyKey, FaultLookupIndeterminate,
		FaultLookupDelay, FaultOvercharge, FaultNoInvoice, FaultSlow, FaultFailJobs,
		FaultCrashAfterAccept, FaultExtraRunner, FaultMissingRunner,
	}
}

// defaultSlowFactor is how much longer jobs take under a bare "slow" fault.
const defaultSlowFactor = 10

// A Fault is one parsed fault: a name and, for faults that take one, its value.
// Only the field that belongs to the fault is set.
type Fault struct {
	// Name is one of the Fault* constants.
	Name string
	// Count is how many calls drop_response_after_accept drops.
	Count int
	// Duration is lookup_delay's delay, or the time slow=DURATION adds.
	Duration time.Duration
	// Factor is slow=FACTOR's multiplier.
	Factor float64
	// Amount is overcharge's final charge.
	Amount Micros
}

// String prints the fault as ParseFault accepts it: NAME or NAME=VALUE.
func (f Fault) String() string {
	switch f.Name {
	case FaultDropResponseAfterAccept:
		return fmt.Sprintf("%s=%d", f.Name, f.Count)
	case FaultLookupDelay:
		return fmt.Sprintf("%s=%s", f.Name, f.Duration)
	case FaultOvercharge:
		return fmt.Sprintf("%s=%s", f.Name, f.Amount)
	case FaultSlow:
		if f.Duration > 0 {
			return fmt.Sprintf("%s=%s", f.Name, f.Duration)
		}
		return fmt.Sprintf("%s=%sx", f.Name, strconv.FormatFloat(f.Factor, 'g', -1, 64))
	}
	return f.Name
}

// ParseFault parses one fault as given on a command line: NAME or NAME=VALUE.
// The error names the fault and says what value it expects.
func ParseFault(s string) (Fault, error) {
	name, value, hasValue := strings.Cut(strings.TrimSpace(s), "=")
	name = strings.TrimSpace(name)
	value = strings.TrimSpace(value)
	f := Fault{Name: name}
	switch name {
	case FaultIgnoreIdempotencyKey, FaultLookupIndeterminate, FaultNoInvoice, FaultFailJobs, FaultCrashAfterAccept,
		FaultExtraRunner, FaultMissingRunner:
		if hasValue {
			return Fault{}, fmt.Errorf("fault %s takes no value (got %q)", name, value)
		}
	case FaultDropResponseAfterAccept:
		f.Count = 1
		if hasValue {
			n, err := strconv.Atoi(value)
			if err != nil || n < 1 {
				return Fault{}, fmt.Errorf("fault %s needs a whole number of calls of at least 1, e.g. %s=2 (got %q)", name, name, value)
			}
			f.Count = n
		}
	case FaultLookupDelay:
		d, err := time.ParseDuration(value)
		if !hasValue || err != nil || d <= 0 {
			return Fault{}, fmt.Errorf("fault %s needs a positive duration, e.g. %s=2s (got %q)", name, name, value)
		}
		f.Duration = d
	case FaultOvercharge:
		if !hasValue {
			return Fault{}, fmt.Errorf("fault %s needs the final charge in USD, e.g. %s=23.10", name, name)
		}
		amount, err := ParseMicros(value)
		if err != nil {
			return Fault{}, fmt.Errorf("fault %s needs the final charge in USD, e.g. %s=23.10: %w", name, name, err)
		}
		f.Amount = amount
	case FaultSlow:
		if !hasValue {
			f.Factor = defaultSlowFactor
			break
		}
		if d, err := time.ParseDuration(value); err == nil && d > 0 {
			f.Duration = d
			break
		}
		factor, err := strconv.ParseFloat(strings.TrimSuffix(value, "x"), 64)
		if err != nil || factor < 1 {
			return Fault{}, fmt.Errorf("fault %s needs a factor of at least 1 (e.g. %s=4x) or a positive duration to add (e.g. %s=2s) (got %q)", name, name, name, value)
		}
		f.Factor = factor
	case "":
		return Fault{}, fmt.Errorf("empty fault name; use one of %s", strings.Join(FaultNames(), ", "))
	default:
		return Fault{}, fmt.Errorf("unknown fault %q; use one of %s", name, strings.Join(FaultNames(), ", "))
	}
	return f, nil
}

// Faults is the set of faults a [Sim] injects. The zero value injects none.
// Field comments name the fault each field stands for.
type Faults struct {
	DropResponseAfterAccept int           // drop_response_after_accept: calls left to drop
	IgnoreIdempotencyKey    bool          // ignore_idempotency_key
	LookupIndeterminate     bool          // lookup_indeterminate
	LookupDelay             time.Duration // lookup_delay
	Overcharge              Micros        // overcharge; zero means off
	NoInvoice               bool          // no_invoice
	SlowFactor              float64       // slow=FACTOR; zero or one means off
	SlowBy                  time.Duration // slow=DURATION
	FailJobs                bool          // fail_jobs
	CrashAfterAccept        bool          // crash_after_accept
	ExtraRunner             bool          // extra_runner
	MissingRunner           bool          // missing_runner
}

// ParseFaults parses faults as given on a command line and combines them.
// A later fault of the same name replaces an earlier one.
func ParseFaults(specs ...string) (Faults, error) {
	var fs Faults
	for _, s := range specs {
		f, err := ParseFault(s)
		if err != nil {
			return Faults{}, err
		}
		fs.Add(f)
	}
	return fs, nil
}

// Add switches one fault on, replacing an earlier fault of the same name.
func (fs *Faults) Add(f Fault) {
	switch f.Name {
	case FaultDropResponseAfterAccept:
		fs.DropResponseAfterAccept = f.Count
	case FaultIgnoreIdempotencyKey:
		fs.IgnoreIdempotencyKey = true
	case FaultLookupIndeterminate:
		fs.LookupIndeterminate = true
	case FaultLookupDelay:
		fs.LookupDelay = f.Duration
	case FaultOvercharge:
		fs.Overcharge = f.Amount
	case FaultNoInvoice:
		fs.NoInvoice = true
	case FaultSlow:
		fs.SlowFactor, fs.SlowBy = f.Factor, f.Duration
	case FaultFailJobs:
		fs.FailJobs = true
	case FaultCrashAfterAccept:
		fs.CrashAfterAccept = true
	case FaultExtraRunner:
		fs.ExtraRunner = true
	case FaultMissingRunner:
		fs.MissingRunner = true
	}
}

// List returns the faults that are on, in the order of [FaultNames].
func (fs Faults) List() []Fault {
	var out []Fault
	if fs.DropResponseAfterAccept > 0 {
		out = append(out, Fault{Name: FaultDropResponseAfterAccept, Count: fs.DropResponseAfterAccept})
	}
	if fs.IgnoreIdempotencyKey {
		out = append(out, Fault{Name: FaultIgnoreIdempotencyKey})
	}
	if fs.LookupIndeterminate {
		out = append(out, Fault{Name: FaultLookupIndeterminate})
	}
	if fs.LookupDelay > 0 {
		out = append(out, Fault{Name: FaultLookupDelay, Duration: fs.LookupDelay})
	}
	if fs.Overcharge > 0 {
		out = append(out, Fault{Name: FaultOvercharge, Amount: fs.Overcharge})
	}
	if fs.NoInvoice {
		out = append(out, Fault{Name: FaultNoInvoice})
	}
	if fs.SlowBy > 0 {
		out = append(out, Fault{Name: FaultSlow, Duration: fs.SlowBy})
	} else if fs.SlowFactor > 1 {
		out = append(out, Fault{Name: FaultSlow, Factor: fs.SlowFactor})
	}
	if fs.FailJobs {
		out = append(out, Fault{Name: FaultFailJobs})
	}
	if fs.CrashAfterAccept {
		out = append(out, Fault{Name: FaultCrashAfterAccept})
	}
	if fs.ExtraRunner {
		out = append(out, Fault{Name: FaultExtraRunner})
	}
	if fs.MissingRunner {
		out = append(out, Fault{Name: FaultMissingRunner})
	}
	return out
}

// String lists the faults that are on, comma-separated, or "none".
func (fs Faults) String() string {
	list := fs.List()
	if len(list) == 0 {
		return "none"
	}
	parts := make([]string, len(list))
	for i, f := range list {
		parts[i] = f.String()
	}
	return strings.Join(parts, ",")
}

// jobDuration applies the slow fault to a base job duration.
func (fs Faults) jobDuration(base time.Duration) time.Duration {
	if fs.SlowFactor > 1 {
		base = time.Duration(float64(base) * fs.SlowFactor)
	}
	return base + fs.SlowBy
}

// matrixRunners applies extra_runner and missing_runner to the number of
// runners a run_matrix call asked for. With both on, they cancel out.
func (fs Faults) matrixRunners(asked int) int {
	n := asked
	if fs.ExtraRunner {
		n++
	}
	if fs.MissingRunner {
		n--
	}
	return max(n, 0)
}
