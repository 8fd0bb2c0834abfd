package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/taskgate/taskgate/bench/internal/load"
	"github.com/taskgate/taskgate/bench/internal/report"
)

// targetAcceptRaw is the minimum of accepts/s as a fraction of the raw
// commit rate, at every replica count.
const targetAcceptRaw = 0.5

// results are everything one run measured; -json prints them as they are.
type results struct {
	Machine      machine        `json:"machine"`
	Measurements []measurement  `json:"measurements"`
	Ratios       []report.Ratio `json:"ratios"`
}

type machine struct {
	report.Machine
	// Postgres is the server's version and the settings that decide
	// what a commit costs.
	Postgres          string `json:"postgres"`
	SynchronousCommit string `json:"synchronous_commit"`
	Fsync             string `json:"fsync"`
	WALSyncMethod     string `json:"wal_sync_method"`
	// TLS says whether the run's connections are encrypted (the URL's
	// sslmode decides).
	TLS bool `json:"tls"`
	// Database is the server and database, password hidden; Schema is
	// the run's own schema in it.
	Database string `json:"database"`
	Schema   string `json:"schema"`
	// Gateways says how the replicas ran: "child processes" or
	// "in this process"; GOGC is theirs, the echo server's and this
	// process's.
	Gateways    string  `json:"gateways"`
	GOGC        string  `json:"gogc"`
	DurationSec float64 `json:"duration_seconds"`
	WarmupSec   float64 `json:"warmup_seconds"`
	Clients     int     `json:"clients"`
	Rounds      int     `json:"rounds"`
}

// measurement is one row of the table.
type measurement struct {
	// Name is "raw insert", "MCP ceiling", "pass-through" or "accept".
	Name string `json:"name"`
	// Replicas is how many gateways served the clients (0 for raw and
	// the ceiling).
	Replicas int `json:"replicas"`
	// Clients is how many clients (or raw connections) made calls.
	Clients   int     `json:"clients"`
	Calls     int64   `json:"calls"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
	// Commits is how many transactions the measurement's calls, warm-up
	// included, committed, and CallsPerCommit the calls per commit: the
	// raw loop's are one each, the gateways' group commits share them.
	// Zero for the calls that commit nothing (ceiling, pass-through).
	Commits        int64   `json:"commits"`
	CallsPerCommit float64 `json:"calls_per_commit"`
	// CPU is where the machine's cores went in the window; zero when the
	// platform does not tell.
	CPU cpuShare `json:"cpu"`
	// The CPU time per call of the gateways, of the database's backends
	// serving the run and of this process.
	GatewayMsPerCall  float64 `json:"gateway_cpu_ms_per_call"`
	UpstreamMsPerCall float64 `json:"upstream_cpu_ms_per_call"`
	PostgresMsPerCall float64 `json:"postgres_cpu_ms_per_call"`
	BenchMsPerCall    float64 `json:"bench_cpu_ms_per_call"`
	// Rounds holds the rate of every round when there were several; the
	// other fields are those of the median round.
	Rounds []float64 `json:"rounds_per_second,omitempty"`
}

// cpuShare is cores kept busy over a window (CPU seconds per second).
type cpuShare struct {
	// Gateways are the replica processes together (zero in process:
	// they are part of Bench then).
	Gateways float64 `json:"gateways"`
	// Upstream is the echo server's process (zero in process: it is
	// part of Bench then), busy in the ceiling and pass-through.
	Upstream float64 `json:"upstream"`
	// Postgres is the database's backends serving this run's
	// connections (not its background processes: WAL writer,
	// checkpointer; those count in Other). Zero when the server's
	// processes cannot be read, e.g. on another host.
	Postgres float64 `json:"postgres"`
	// Bench is this process: clients, the provider and the raw loop.
	Bench float64 `json:"bench"`
	// Machine is every core's busy time, PostgreSQL and whatever else
	// runs on the host included.
	Machine float64 `json:"machine"`
}

// Other is the machine's busy cores that are neither the gateways, nor the
// backends serving the run, nor this process: PostgreSQL's background
// processes, the kernel's work for them all, and any other work on the host.
func (c cpuShare) Other() float64 {
	return max(c.Machine-c.Gateways-c.Upstream-c.Postgres-c.Bench, 0)
}

func (m *measurement) label() string {
	if m.Replicas > 0 {
		return fmt.Sprintf("%s, %d replica(s)", m.Name, m.Replicas)
	}
	return m.Name
}

// newRatio is the rate of num as a multiple of den's.
func newRatio(name string, num, den measurement, target float64) report.Ratio {
	return report.NewRatio(name, num.PerSecond, den.PerSecond, target)
}

// ratios derives, from the measurements (raw insert first, then the MCP
// ceiling, the pass-through when measured and the accepts, the first at
// one replica): per replica count accept/raw, against its target, and
// accept/ceiling; pass-through/ceiling; and the scaling of each count
// against one replica.
func ratios(ms []measurement) []report.Ratio {
	var (
		raw, ceiling measurement
		pass         *measurement
		accepts      []measurement
	)
	for _, m := range ms {
		switch m.Name {
		case stepRaw:
			raw = m
		case stepCeiling:
			ceiling = m
		case stepPass:
			pass = &m
		case stepAccept:
			accepts = append(accepts, m)
		}
	}
	var out []report.Ratio
	for _, a := range accepts {
		out = append(out,
			newRatio(fmt.Sprintf("accept %d replica(s) / raw, %d clients", a.Replicas, a.Clients), a, raw, targetAcceptRaw),
			newRatio(fmt.Sprintf("accept %d replica(s) / MCP ceiling, %d clients", a.Replicas, a.Clients), a, ceiling, 0))
	}
	if pass != nil {
		out = append(out, newRatio(fmt.Sprintf("pass-through %d replica(s) / MCP ceiling, %d clients", pass.Replicas, pass.Clients), *pass, ceiling, 0))
	}
	if len(accepts) > 0 {
		for _, a := range accepts[1:] {
			out = append(out, newRatio(fmt.Sprintf("scaling: accept %d replicas / 1 replica", a.Replicas), a, accepts[0], 0))
		}
	}
	return out
}

// median returns the measurement with the median rate, carrying the rate of
// every round.
func median(ms []measurement) measurement {
	m, rounds := load.Median(ms, func(m measurement) float64 { return m.PerSecond })
	m.Rounds = rounds
	return m
}

func printTable(w io.Writer, rep *results) {
	m := rep.Machine
	fmt.Fprintf(w, "taskgate replica benchmark: durable accepts on PostgreSQL with 1..N gateway replicas vs. the raw commit rate and the MCP call ceiling\n")
	fmt.Fprintf(w, "%s; gateways: %s; GOGC %s in the gateways, the echo server and the clients\n", m.Machine, m.Gateways, m.GOGC)
	tls := "without TLS"
	if m.TLS {
		tls = "over TLS"
	}
	fmt.Fprintf(w, "%s (synchronous_commit %s, fsync %s, wal_sync_method %s); %s %s, schema %s, dropped afterwards\n",
		m.Postgres, m.SynchronousCommit, m.Fsync, m.WALSyncMethod, m.Database, tls, m.Schema)
	fmt.Fprintf(w, "accept: 2026-07-28 tools/call with the Tasks extension, a new operation_id per call (each one created), worker off (--no-worker);\n")
	fmt.Fprintf(w, "        %d clients spread evenly over the replicas, fresh replicas per measurement; raw insert: %d pgx connections, one INSERT per transaction\n", m.Clients, m.Clients)
	fmt.Fprintf(w, "MCP ceiling: the same %d clients calling a tool that returns its argument at once on a go-sdk MCP server (Streamable HTTP, defaults but stateless, as 2026-07-28 needs), no gateway, no database;\n", m.Clients)
	fmt.Fprintf(w, "        pass-through: that tool through one replica as a non-consequential tool\n")
	fmt.Fprintf(w, "each measurement: %s warm-up, %s measured; %d round(s), median shown\n\n",
		report.Seconds(m.WarmupSec), report.Seconds(m.DurationSec), m.Rounds)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "measurement\tclients\tcalls\tcalls/s\tp50 ms\tp99 ms\tcalls/commit\tcores: gateways\tupstream\tpostgres\tbench\tother\tmachine\tcpu ms/call: gateways\tupstream\tpostgres\tbench\trounds calls/s\t")
	for _, r := range rep.Measurements {
		perCommit := "-"
		if r.CallsPerCommit > 0 {
			perCommit = fmt.Sprintf("%.2f", r.CallsPerCommit)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.2f\t%.2f\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.3f\t%.3f\t%.3f\t%.3f\t%s\t\n",
			r.label(), r.Clients, r.Calls, r.PerSecond, r.P50Ms, r.P99Ms, perCommit,
			r.CPU.Gateways, r.CPU.Upstream, r.CPU.Postgres, r.CPU.Bench, r.CPU.Other(), r.CPU.Machine,
			r.GatewayMsPerCall, r.UpstreamMsPerCall, r.PostgresMsPerCall, r.BenchMsPerCall, report.Rounds(r.Rounds))
	}
	tw.Flush()
	fmt.Fprintln(w, "calls/commit: calls (warm-up included) per transaction their rows were written in; an accepted call writes in two, its acceptance and what its client got")
	fmt.Fprintln(w, "cores: CPU seconds per second in the window; upstream: the echo server's process; postgres: the backends serving this run; bench: this process (clients, provider, raw loop);")
	fmt.Fprintln(w, "other: the rest of the machine's busy time (PostgreSQL's WAL writer and other background processes, other work on the host)")
	fmt.Fprintln(w)

	fmt.Fprintln(w, "baselines: raw insert is what the database alone commits, one row per transaction, with no MCP call at all;")
	fmt.Fprintln(w, "           MCP ceiling is what the same clients' MCP calls reach with nothing behind the server; an accept is such a call with a gateway and commits behind it")
	fmt.Fprintln(w)

	report.PrintRatios(w, rep.Ratios, "x")
}
