// Command acceptbench measures how many durable acceptances per second the
// SQLite ledger store commits, against the physical limit of the disk: a raw
// single-writer loop that commits one operations row per transaction with
// the store's own settings (WAL, synchronous FULL, one write connection).
//
// Every measurement runs on its own fresh database file and counts only
// calls that completed inside its measured window; every row it claims is
// checked in the database afterwards. It prints ratios against the
// acceptance targets but exits non-zero only when something failed, never
// for a number below target. It must never touch a ledger it did not create.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/taskgate/taskgate/bench/internal/command"
	"github.com/taskgate/taskgate/bench/internal/report"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the command's flags.
type options struct {
	duration    time.Duration
	warmup      time.Duration
	dir         string
	json        bool
	concurrency int
	rounds      int
	cpuProfile  string
}

func (o *options) validate() error {
	if err := command.CheckWindow(o.duration, o.warmup, o.rounds); err != nil {
		return err
	}
	if o.concurrency < 2 {
		return fmt.Errorf("-concurrency must be at least 2 (c=1 is always measured), got %d", o.concurrency)
	}
	return command.CheckDir(o.dir, "; point it at a directory on the disk to measure")
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	return command.Run(ctx, args, stdout, stderr, command.Program[*results]{
		Name: "acceptbench",
		Flags: func(fs *flag.FlagSet) {
			fs.DurationVar(&o.duration, "duration", 3*time.Second, "measured time of each measurement")
			fs.DurationVar(&o.warmup, "warmup", 500*time.Millisecond, "unmeasured warm-up before each measurement")
			fs.StringVar(&o.dir, "dir", os.TempDir(), "directory (on the disk to measure) for the temporary database files")
			fs.BoolVar(&o.json, "json", false, "print one JSON document instead of the table")
			fs.IntVar(&o.concurrency, "concurrency", 64, "goroutines of the concurrent measurements")
			fs.IntVar(&o.rounds, "rounds", 1, "run every measurement this many times, interleaved, and report the median")
			fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
		},
		Check:      o.validate,
		JSON:       &o.json,
		CPUProfile: &o.cpuProfile,
		Measure: func(ctx context.Context, progress io.Writer) (*results, error) {
			return measureAll(ctx, &o, progress)
		},
		Table: printTable,
	})
}

// results are everything one run measured; -json prints them as they are.
type results struct {
	Machine      machine        `json:"machine"`
	Measurements []measurement  `json:"measurements"`
	Ratios       []report.Ratio `json:"ratios"`
}

type machine struct {
	report.Machine
	Dir           string  `json:"dir"`
	Filesystem    string  `json:"filesystem,omitempty"`
	SQLiteVersion string  `json:"sqlite_version"`
	Synchronous   string  `json:"synchronous"`
	JournalMode   string  `json:"journal_mode"`
	DurationSec   float64 `json:"duration_seconds"`
	WarmupSec     float64 `json:"warmup_seconds"`
	Concurrency   int     `json:"concurrency"`
	Rounds        int     `json:"rounds"`
}

// measurement is one row of the table.
type measurement struct {
	Name        string  `json:"name"`
	Concurrency int     `json:"concurrency"`
	Ops         int64   `json:"ops"`
	Seconds     float64 `json:"seconds"`
	OpsPerSec   float64 `json:"ops_per_second"`
	// Commits is how many write transactions SQLite committed in the
	// window; OpsPerCommit is the group-commit batch size achieved.
	Commits      int64   `json:"commits,omitempty"`
	OpsPerCommit float64 `json:"ops_per_commit,omitempty"`
	P50Ms        float64 `json:"p50_ms"`
	P99Ms        float64 `json:"p99_ms"`
	// Rounds holds the rate of every round when there were several; the
	// other fields are those of the median round.
	Rounds []float64 `json:"rounds_ops_per_second,omitempty"`
}

// newRatio is the rate of num as a multiple of den's.
func newRatio(name string, num, den measurement, target float64) report.Ratio {
	return report.NewRatio(name, num.OpsPerSec, den.OpsPerSec, target)
}

func printTable(w io.Writer, rep *results) {
	m := rep.Machine
	fmt.Fprintf(w, "taskgate acceptance benchmark: SQLite ledger store\n")
	fmt.Fprintf(w, "%s\n", m.Machine)
	fs := m.Filesystem
	if fs == "" {
		fs = "unknown filesystem"
	}
	fmt.Fprintf(w, "dir %s (%s); SQLite %s, journal_mode %s, synchronous %s\n", m.Dir, fs, m.SQLiteVersion, m.JournalMode, m.Synchronous)
	fmt.Fprintf(w, "each measurement: fresh database, %s warm-up, %s measured; %d round(s), median shown\n\n",
		report.Seconds(m.WarmupSec), report.Seconds(m.DurationSec), m.Rounds)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "measurement\tc\tops\tops/s\tcommits\tops/commit\tp50 ms\tp99 ms\trounds ops/s\t")
	for _, r := range rep.Measurements {
		commits, perCommit := "n/a", "n/a"
		if r.Commits > 0 {
			commits, perCommit = fmt.Sprint(r.Commits), fmt.Sprintf("%.1f", r.OpsPerCommit)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%s\t%s\t%.2f\t%.2f\t%s\t\n",
			r.Name, r.Concurrency, r.Ops, r.OpsPerSec, commits, perCommit, r.P50Ms, r.P99Ms, report.Rounds(r.Rounds))
	}
	tw.Flush()
	fmt.Fprintln(w)

	report.PrintRatios(w, rep.Ratios, "")
}

func machineFacts(o *options) machine {
	return machine{
		Machine:     report.ThisMachine(),
		Dir:         o.dir,
		Filesystem:  filesystemOf(o.dir),
		DurationSec: o.duration.Seconds(),
		WarmupSec:   o.warmup.Seconds(),
		Concurrency: o.concurrency,
		Rounds:      o.rounds,
	}
}
