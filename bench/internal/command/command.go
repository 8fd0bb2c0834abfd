// Package command holds the frame every benchmark program's run shares:
// parsing its flags, refusing stray arguments, checking the flags that mean
// the same in every program (the measured window, the rounds, a scratch
// directory), recording the profiles the flags ask for, printing the report
// and the exit code each outcome gets. It must never define what a program
// measures, what its flags default to or how its report reads, and never
// turn a figure below its target into a failure: only a usage error (exit
// 2) or a failed measurement, profile or report (exit 1) makes a run fail.
package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/taskgate/taskgate/bench/internal/profile"
	"github.com/taskgate/taskgate/bench/internal/report"
)

// Program is what one benchmark program brings to a run. R is its report.
type Program[R any] struct {
	// Name is the program's name, in its usage and before each error.
	Name string
	// Flags registers the program's flags on the program's flag set.
	Flags func(fs *flag.FlagSet)
	// Check runs once the flags are parsed; its error is a usage error.
	Check func() error
	// JSON, CPUProfile, Trace and MemProfile are where Flags stores the
	// flags of those names (-json, -cpuprofile, -trace, -memprofile); nil
	// where the program has no such flag.
	JSON       *bool
	CPUProfile *string
	Trace      *string
	MemProfile *string
	// Measure takes every measurement, writing its progress to progress.
	Measure func(ctx context.Context, progress io.Writer) (R, error)
	// Table prints the report as a table, when -json is not set.
	Table func(w io.Writer, rep R)
}

// Run runs p with the command-line arguments args and returns the exit
// code: 0 when the report was printed (or help was asked for), 2 for a
// usage error, 1 when a profile, a measurement or the report failed.
func Run[R any](ctx context.Context, args []string, stdout, stderr io.Writer, p Program[R]) int {
	fs := flag.NewFlagSet(p.Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	p.Flags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected arguments %q; all settings are flags (see -h)\n", p.Name, fs.Args())
		return 2
	}
	if err := p.Check(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", p.Name, err)
		return 2
	}
	stopProfile, err := profile.Start(value(p.CPUProfile), value(p.Trace))
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", p.Name, err)
		return 1
	}
	defer stopProfile()
	rep, err := p.Measure(ctx, stderr)
	if mem := value(p.MemProfile); err == nil && mem != "" {
		err = profile.WriteAllocs(mem)
	}
	if err == nil {
		err = report.Print(stdout, p.JSON != nil && *p.JSON, rep, func(w io.Writer) { p.Table(w, rep) })
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", p.Name, err)
		return 1
	}
	return 0
}

func value(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// CheckWindow checks the flags -duration, -warmup and -rounds: every
// measurement's measured window, its warm-up and how many times it runs.
func CheckWindow(duration, warmup time.Duration, rounds int) error {
	switch {
	case duration <= 0:
		return fmt.Errorf("-duration must be positive, got %s", duration)
	case warmup < 0:
		return fmt.Errorf("-warmup may not be negative, got %s", warmup)
	case rounds < 1:
		return fmt.Errorf("-rounds must be at least 1, got %d", rounds)
	}
	return nil
}

// CheckDir checks the flag -dir, the directory a run puts its scratch
// databases in; hint, when not empty, follows the error that it is not a
// directory.
func CheckDir(dir, hint string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("-dir %s: %w", dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("-dir %s is not a directory%s", dir, hint)
	}
	return nil
}

// List reads a comma-separated flag value: each item in order, blanks
// skipped, repeats dropped. parse turns one item into a value or says why
// it is not one.
func List[T comparable](s string, parse func(item string) (T, error)) ([]T, error) {
	var out []T
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		v, err := parse(item)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out, nil
}
