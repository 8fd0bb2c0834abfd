package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/taskgate/taskgate/bench/internal/load"
	"github.com/taskgate/taskgate/bench/internal/report"
)

// The targets the pass-through path is held to.
const (
	// targetThroughput is the minimum calls/s through the gateway as a
	// fraction of direct calls, at the concurrent session count.
	targetThroughput = 0.65
	// targetAddedP50Ms is the most the gateway may add to the median
	// latency of one session's sequential calls.
	targetAddedP50Ms = 0.5
)

// results are everything one run measured; -json prints them as they are.
type results struct {
	Machine      machine       `json:"machine"`
	Measurements []measurement `json:"measurements"`
	Comparisons  []comparison  `json:"comparisons"`
}

type machine struct {
	report.Machine
	// GOGC and GOMEMLIMIT are the garbage collector's settings: the whole
	// run allocates heavily, so they move every figure.
	GOGC       string `json:"gogc"`
	GOMEMLIMIT string `json:"gomemlimit"`
	// Upstream names the upstream tool the pass-through calls make.
	Upstream    string  `json:"upstream"`
	Ledger      string  `json:"ledger"`
	Synchronous string  `json:"synchronous"`
	DurationSec float64 `json:"duration_seconds"`
	WarmupSec   float64 `json:"warmup_seconds"`
	Sessions    int     `json:"sessions"`
	Rounds      int     `json:"rounds"`
	// Accept says whether acceptances were measured, with the provider's
	// remote job duration and the worker's upstream_poll.
	Accept          bool    `json:"accept"`
	JobDurationSec  float64 `json:"job_duration_seconds,omitempty"`
	UpstreamPollSec float64 `json:"upstream_poll_seconds,omitempty"`
}

// measurement is one row of the table.
type measurement struct {
	// Path is "direct", "taskgate" or "accept".
	Path string `json:"path"`
	// Era is the protocol version the clients negotiated.
	Era      string `json:"era"`
	Sessions int    `json:"sessions"`
	// Worker says, for acceptances, whether the gateway's worker was
	// dispatching the accepted operations meanwhile.
	Worker      string  `json:"worker,omitempty"`
	Calls       int64   `json:"calls"`
	Seconds     float64 `json:"seconds"`
	CallsPerSec float64 `json:"calls_per_second"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	// CPUMsPerCall is the process's CPU time per call in the window (the
	// client, the gateway and the upstream share the process); CPUCores
	// is how many cores that CPU time kept busy.
	CPUMsPerCall float64 `json:"cpu_ms_per_call"`
	CPUCores     float64 `json:"cpu_cores"`
	// AllocKBPerCall is the heap allocated per call and GCPerSec the GC
	// cycles per second in the window, for the whole process.
	AllocKBPerCall float64 `json:"alloc_kb_per_call"`
	GCPerSec       float64 `json:"gc_per_second"`
	// Created is how many operations the calls created, warm-up
	// included, and Undispatched how many of them still waited for the
	// worker when the window closed.
	Created      int64 `json:"created,omitempty"`
	Undispatched *int  `json:"undispatched,omitempty"`
	// Rounds holds the rate of every round when there were several; the
	// other fields are those of the median round.
	Rounds []float64 `json:"rounds_calls_per_second,omitempty"`
}

func (m *measurement) label() string {
	if m.Worker != "" {
		return fmt.Sprintf("%s (worker %s)", m.Path, m.Worker)
	}
	return m.Path
}

// comparison is a figure derived from two measurements, with its target
// when it has one.
type comparison struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	// Unit is "ms" for a latency difference, "x" for a ratio.
	Unit string `json:"unit"`
	// Target is the bound wanted, "" when the figure is informational.
	Target string `json:"target,omitempty"`
	Met    *bool  `json:"met,omitempty"`
}

// compareEra derives the gateway's overhead for one era from its four
// pass-through measurements.
func compareEra(era string, direct1, gate1, directN, gateN measurement) []comparison {
	added := gate1.P50Ms - direct1.P50Ms
	addedMet := added <= targetAddedP50Ms
	ratio := 0.0
	if directN.CallsPerSec > 0 {
		ratio = gateN.CallsPerSec / directN.CallsPerSec
	}
	ratioMet := ratio >= targetThroughput
	return []comparison{
		{Name: era + " added p50, 1 session", Value: added, Unit: "ms", Target: fmt.Sprintf("<= %.2f ms", targetAddedP50Ms), Met: &addedMet},
		{Name: era + " added p99, 1 session", Value: gate1.P99Ms - direct1.P99Ms, Unit: "ms"},
		{Name: era + " p50 taskgate/direct, 1 session", Value: safeDiv(gate1.P50Ms, direct1.P50Ms), Unit: "x"},
		{Name: fmt.Sprintf("%s calls/s taskgate/direct, %d sessions", era, gateN.Sessions), Value: ratio, Unit: "x", Target: fmt.Sprintf(">= %.2fx", targetThroughput), Met: &ratioMet},
		{Name: fmt.Sprintf("%s calls/s taskgate/direct, 1 session", era), Value: safeDiv(gate1.CallsPerSec, direct1.CallsPerSec), Unit: "x"},
		// When the cores are the limit, throughput goes as the inverse of
		// CPU per call; this ratio is far steadier on a shared machine
		// than calls/s.
		{Name: fmt.Sprintf("%s cpu/call direct/taskgate, %d sessions", era, gateN.Sessions), Value: safeDiv(directN.CPUMsPerCall, gateN.CPUMsPerCall), Unit: "x"},
	}
}

func safeDiv(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// median returns the measurement with the median rate, carrying the rate of
// every round.
func median(ms []measurement) measurement {
	m, rounds := load.Median(ms, func(m measurement) float64 { return m.CallsPerSec })
	m.Rounds = rounds
	return m
}

func printTable(w io.Writer, rep *results) {
	m := rep.Machine
	fmt.Fprintf(w, "taskgate proxy benchmark: tools/call through the gateway vs. direct to the same upstream\n")
	fmt.Fprintf(w, "%s, GOGC %s, GOMEMLIMIT %s\n", m.Machine, m.GOGC, m.GOMEMLIMIT)
	fmt.Fprintf(w, "upstream %s; gateway: the daemon in this process, API key auth, ledger %s (synchronous %s)\n", m.Upstream, m.Ledger, m.Synchronous)
	fmt.Fprintf(w, "each measurement: %s warm-up, %s measured; %d round(s), median shown; cpu, alloc and GC figures are the whole process's\n",
		report.Seconds(m.WarmupSec), report.Seconds(m.DurationSec), m.Rounds)
	if m.Accept {
		fmt.Fprintf(w, "accept: %s with a new operation_id per call, a fresh gateway and ledger per measurement; remote jobs run %s, worker upstream_poll %s\n",
			acceptTool, report.Seconds(m.JobDurationSec), report.Seconds(m.UpstreamPollSec))
	}
	fmt.Fprintln(w)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "path\tera\tsessions\tcalls\tcalls/s\tp50 ms\tp99 ms\tcpu ms/call\tcores\talloc KB/call\tGC/s\tundispatched\trounds calls/s\t")
	for _, r := range rep.Measurements {
		undispatched := "-"
		if r.Undispatched != nil {
			undispatched = fmt.Sprintf("%d of %d", *r.Undispatched, r.Created)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%.3f\t%.3f\t%.3f\t%.2f\t%.0f\t%.0f\t%s\t%s\t\n",
			r.label(), r.Era, r.Sessions, r.Calls, r.CallsPerSec, r.P50Ms, r.P99Ms, r.CPUMsPerCall, r.CPUCores, r.AllocKBPerCall, r.GCPerSec, undispatched, report.Rounds(r.Rounds))
	}
	tw.Flush()

	if len(rep.Comparisons) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "comparison\tvalue\ttarget\t")
	for _, c := range rep.Comparisons {
		value := fmt.Sprintf("%.3f ms", c.Value)
		if c.Unit == "x" {
			value = fmt.Sprintf("%.2fx", c.Value)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", c.Name, value, report.Target(c.Target, c.Met))
	}
	tw.Flush()
}
