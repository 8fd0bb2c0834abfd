// Package report holds what the benchmark programs' reports share: the
// facts about the machine every figure depends on, the ratio of one rate to
// another, how a table shows a measurement's rounds, a figure's verdict
// against its target and a list of ratios, and how a report is printed, as
// JSON or as a table. It must never judge a run: a
// figure below its target is printed as such, never turned into a failure.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// Machine are the Go runtime's and the host's facts. A report embeds them
// first, so that its JSON document opens with them.
type Machine struct {
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
}

// ThisMachine returns the facts of the running process.
func ThisMachine() Machine {
	return Machine{
		GoVersion:  runtime.Version(),
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		NumCPU:     runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
	}
}

// String is the facts in one line, as a table's heading shows them.
func (m Machine) String() string {
	return fmt.Sprintf("%s %s/%s, NumCPU %d, GOMAXPROCS %d", m.GoVersion, m.OS, m.Arch, m.NumCPU, m.GOMAXPROCS)
}

// Seconds is the duration of s seconds, as a report's JSON holds a
// duration, for a table to show.
func Seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Rounds is a table cell with the rate of every round, or "-" when there
// was a single round.
func Rounds(rates []float64) string {
	if len(rates) == 0 {
		return "-"
	}
	parts := make([]string, len(rates))
	for i, v := range rates {
		parts[i] = fmt.Sprintf("%.0f", v)
	}
	return strings.Join(parts, " ")
}

// Target is a table cell with a figure's target and whether it was met,
// or "-" when the figure has no target (met is nil).
func Target(target string, met *bool) string {
	if met == nil {
		return "-"
	}
	verdict := "BELOW"
	if *met {
		verdict = "PASS"
	}
	return target + "  " + verdict
}

// Print writes the report doc to w as one indented JSON document when
// asJSON is set, and as table prints it otherwise.
func Print(w io.Writer, asJSON bool, doc any, table func(io.Writer)) error {
	if !asJSON {
		table(w)
		return nil
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

// Ratio is one measurement's rate as a multiple of another's, with the
// minimum it is wanted to reach when it has one.
type Ratio struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	// Target is the minimum wanted; zero means informational only.
	Target float64 `json:"target,omitempty"`
	Met    *bool   `json:"met,omitempty"`
}

// NewRatio is the ratio called name of the rate num to the rate den (zero
// when den is not positive), held to target when target is positive.
func NewRatio(name string, num, den, target float64) Ratio {
	r := Ratio{Name: name, Target: target}
	if den > 0 {
		r.Value = num / den
	}
	if target > 0 {
		met := r.Value >= target
		r.Met = &met
	}
	return r
}

// PrintRatios prints rs as a table of name, value and target, each value
// and target followed by unit ("" or "x").
func PrintRatios(w io.Writer, rs []Ratio, unit string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ratio\tvalue\ttarget\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%.2f%s\t%s\t\n", r.Name, r.Value, unit, Target(fmt.Sprintf(">= %.2f%s", r.Target, unit), r.Met))
	}
	tw.Flush()
}
