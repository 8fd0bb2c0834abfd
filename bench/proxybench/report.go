package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/taskgate/taskgate/bench/internal/load"
	"github.com/taskgate/taskgate/bench/internal/report"
)

// The targets the pass-through path is held to, in every pairing.
const (
	// targetThroughput is the minimum calls/s through the gateway as a
	// fraction of direct calls, at the concurrent session count.
	targetThroughput = 0.75
	// targetAddedP50Ms is the most the gateway may add to the median
	// latency of one session's sequential calls.
	targetAddedP50Ms = 0.3
	// targetIdleCPUPercent is the most of one core a gateway serving no
	// call may use.
	targetIdleCPUPercent = 1.0
)

// results are everything one run measured; -json prints them as they are.
type results struct {
	Machine machine `json:"machine"`
	// Pairings are the pass-through figures: two rows per pairing, at one
	// session and at the concurrent session count.
	Pairings []pairingRow `json:"pairings"`
	// Measurements are the acceptance path's.
	Measurements []measurement `json:"measurements"`
}

type machine struct {
	report.Machine
	// GOGC and GOMEMLIMIT are the garbage collector's settings, of this
	// process and of the gateway process alike (taskgate serve applies
	// the same default): the whole run allocates heavily, so they move
	// every figure. The echo upstream processes run with Go's default
	// unless GOGC is set, as a go-sdk server would.
	GOGC       string `json:"gogc"`
	GOMEMLIMIT string `json:"gomemlimit"`
	// Gateway is the taskgate binary the pass-through gateway process
	// runs, and GatewayPeakRSSBytes its peak resident set size (VmHWM)
	// over the whole run; nil where the platform does not report it.
	Gateway             string `json:"gateway,omitempty"`
	GatewayPeakRSSBytes *int64 `json:"gateway_peak_rss_bytes,omitempty"`
	// Peer is the peer proxy's binary (-peer), if one was measured.
	Peer string `json:"peer,omitempty"`
	// UpstreamPeakRSSBytes is the peak resident set size (VmHWM) of each
	// HTTP echo upstream's process over the whole run, by upstream;
	// empty where the platform does not report it. The stdio upstream's
	// processes, one per direct session and one under the gateway, are
	// not measured.
	UpstreamPeakRSSBytes map[string]int64 `json:"upstream_peak_rss_bytes,omitempty"`
	// SpansReceived counts the spans the gateway with traces on exported
	// (-traces).
	SpansReceived int `json:"spans_received,omitempty"`
	// GatewayIdleCPUPercent is the share of one core the pass-through
	// gateway used over -idle while it served no call (its worker polling
	// the ledger, its metrics, its upstream sessions' pings).
	GatewayIdleCPUPercent *float64 `json:"gateway_idle_cpu_percent,omitempty"`
	IdleSec               float64  `json:"idle_seconds,omitempty"`
	// Upstream names the upstream tool the acceptance calls make.
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

// measurement is one measured window of calls.
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
	// CPUMsPerCall is this process's CPU time per call in the window: the
	// clients' only for pass-through calls, whose upstreams and gateway
	// are processes of their own; the clients', the gateway's and the
	// provider's for acceptances. CPUCores is how many cores that CPU time
	// kept busy.
	CPUMsPerCall float64 `json:"cpu_ms_per_call"`
	CPUCores     float64 `json:"cpu_cores"`
	// AllocKBPerCall is the heap allocated per call and GCPerSec the GC
	// cycles per second in the window, for this process.
	AllocKBPerCall float64 `json:"alloc_kb_per_call"`
	GCPerSec       float64 `json:"gc_per_second"`
	// GatewayAllocKBPerCall and GatewayCPUMsPerCall are the gateway
	// process's heap allocation and CPU time per call in the window, from
	// its /metrics; set for pass-through calls through taskgate only. For
	// calls through the peer proxy, GatewayCPUMsPerCall is the peer's
	// CPU time per call, from /proc.
	GatewayAllocKBPerCall *float64 `json:"gateway_alloc_kb_per_call,omitempty"`
	GatewayCPUMsPerCall   *float64 `json:"gateway_cpu_ms_per_call,omitempty"`
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

// pairingRow is one pairing at one session count: the same client
// calling the upstream directly and through taskgate, and the verdict.
type pairingRow struct {
	// Client is the protocol version the client offers: 2026-07-28 for
	// the go-sdk default client, 2025-11-25 for the pinned one.
	Client      string      `json:"client"`
	Elicitation bool        `json:"elicitation"`
	Upstream    string      `json:"upstream"`
	Sessions    int         `json:"sessions"`
	Direct      measurement `json:"direct"`
	Taskgate    measurement `json:"taskgate"`
	// Ratio is taskgate's calls/s over direct calls/s; AddedP50Ms is
	// taskgate's p50 less direct p50.
	Ratio      float64 `json:"ratio"`
	AddedP50Ms float64 `json:"added_p50_ms"`
	// Target is the bound this row is held to: added p50 at one session,
	// the ratio at the concurrent session count.
	Target string `json:"target"`
	Met    bool   `json:"met"`
	// Traced is the same calls through a gateway exporting every span
	// (-traces), and TracedCPUAddedMs the gateway CPU per call it adds.
	Traced           *measurement `json:"taskgate_traced,omitempty"`
	TracedRatio      float64      `json:"traced_ratio,omitempty"`
	TracedCPUAddedMs *float64     `json:"traced_gateway_cpu_added_ms_per_call,omitempty"`
	// Peer is the same calls through the peer proxy (-peer), PeerRatio
	// its calls/s over direct calls/s and PeerAddedP50Ms its p50 less
	// direct p50. AtLeastPeer says whether taskgate did as well: a ratio
	// at least the peer's, and at one session an added p50 at most the
	// peer's.
	Peer           *measurement `json:"peer,omitempty"`
	PeerRatio      float64      `json:"peer_ratio,omitempty"`
	PeerAddedP50Ms float64      `json:"peer_added_p50_ms,omitempty"`
	AtLeastPeer    *bool        `json:"at_least_peer,omitempty"`
}

// peer adds the measurement through the peer proxy.
func (r *pairingRow) peer(m measurement) {
	r.Peer, r.PeerRatio, r.PeerAddedP50Ms = &m, safeDiv(m.CallsPerSec, r.Direct.CallsPerSec), m.P50Ms-r.Direct.P50Ms
	ok := r.Ratio >= r.PeerRatio
	if r.Sessions == 1 {
		ok = ok && r.AddedP50Ms <= r.PeerAddedP50Ms
	}
	r.AtLeastPeer = &ok
}

// traced adds the measurement through the gateway that exports spans.
func (r *pairingRow) traced(m measurement) {
	r.Traced, r.TracedRatio = &m, safeDiv(m.CallsPerSec, r.Direct.CallsPerSec)
	if m.GatewayCPUMsPerCall != nil && r.Taskgate.GatewayCPUMsPerCall != nil {
		added := *m.GatewayCPUMsPerCall - *r.Taskgate.GatewayCPUMsPerCall
		r.TracedCPUAddedMs = &added
	}
}

// comparePairing compares the direct and taskgate measurements of p at
// one session count and holds them to that count's target.
func comparePairing(p pairing, direct, gate measurement) pairingRow {
	r := pairingRow{
		Client: string(p.client), Elicitation: p.elicitation, Upstream: string(p.upstream), Sessions: direct.Sessions,
		Direct: direct, Taskgate: gate,
		Ratio: safeDiv(gate.CallsPerSec, direct.CallsPerSec), AddedP50Ms: gate.P50Ms - direct.P50Ms,
	}
	if r.Sessions == 1 {
		r.Target, r.Met = fmt.Sprintf("added p50 <= %.2f ms", targetAddedP50Ms), r.AddedP50Ms <= targetAddedP50Ms
	} else {
		r.Target, r.Met = fmt.Sprintf("ratio >= %.2fx", targetThroughput), r.Ratio >= targetThroughput
	}
	return r
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

// verdict is a row's target cell: "met" or "below".
func verdict(r pairingRow) string {
	if r.Met {
		return "met"
	}
	return "below"
}

// optional shows a figure that only some rows have, "-" where absent.
func optional(v *float64, format string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}

// megabytes shows a byte count in MB, or "n/a" when it is unknown.
func megabytes(b *int64) string {
	if b == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.1f MB", float64(*b)/(1<<20))
}

func printTable(w io.Writer, rep *results) {
	m := rep.Machine
	fmt.Fprintf(w, "taskgate proxy benchmark\n")
	fmt.Fprintf(w, "%s, GOGC %s, GOMEMLIMIT %s\n", m.Machine, m.GOGC, m.GOMEMLIMIT)
	fmt.Fprintf(w, "each measurement: %s warm-up, %s measured; %d round(s), median shown\n",
		report.Seconds(m.WarmupSec), report.Seconds(m.DurationSec), m.Rounds)
	if len(rep.Pairings) > 0 {
		printPairings(w, rep)
	}
	if m.Accept {
		printAccept(w, rep)
	}
}

func printPairings(w io.Writer, rep *results) {
	m := rep.Machine
	fmt.Fprintln(w)
	fmt.Fprintf(w, "pass-through: the echo tool of a go-sdk server, called through taskgate vs. directly by the same client\n")
	fmt.Fprintf(w, "client 2026-07-28: the go-sdk default client (no version pinned); 2025-11-25: pinned in ClientSessionOptions; elicitation yes: an ElicitationHandler set\n")
	fmt.Fprintf(w, "upstream sessions / stateless: Streamable HTTP with / without sessions, each one child process that direct clients and the gateway call alike; stdio: a child process (one per direct session, one the gateway supervises)\n")
	fmt.Fprintf(w, "gateway: taskgate serve (%s), one child process for the whole run, API key auth, fresh SQLite ledger; gw alloc and gw cpu from its /metrics over each window\n", m.Gateway)
	fmt.Fprintf(w, "targets: added p50 <= %.2f ms at 1 session; taskgate/direct calls/s >= %.2fx at %d sessions\n\n", targetAddedP50Ms, targetThroughput, m.Sessions)

	rounds := m.Rounds > 1
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "client\telicitation\tupstream\tsessions\tnegotiated direct/taskgate\tdirect calls/s\ttaskgate calls/s\tratio\tp50 ms direct/taskgate\tadded p50 ms\tp99 ms direct/taskgate\tgw alloc KB/call\tgw cpu ms/call\ttarget\t"
	traced := len(rep.Pairings) > 0 && rep.Pairings[0].Traced != nil
	if traced {
		head += "traced calls/s\ttraced ratio\ttraced gw cpu ms/call\tadded by traces\t"
	}
	peer := len(rep.Pairings) > 0 && rep.Pairings[0].Peer != nil
	if peer {
		head += "negotiated peer\tpeer calls/s\tpeer ratio\tpeer added p50 ms\tpeer cpu ms/call\ttaskgate >= peer\t"
	}
	if rounds {
		head += "rounds calls/s direct | taskgate\t"
	}
	fmt.Fprintln(tw, head)
	for _, r := range rep.Pairings {
		d, g := r.Direct, r.Taskgate
		line := fmt.Sprintf("%s\t%s\t%s\t%d\t%s / %s\t%.0f\t%.0f\t%.2fx\t%.3f / %.3f\t%+.3f\t%.3f / %.3f\t%s\t%s\t%s (%s)\t",
			r.Client, yesNo(r.Elicitation), r.Upstream, r.Sessions, d.Era, g.Era, d.CallsPerSec, g.CallsPerSec, r.Ratio,
			d.P50Ms, g.P50Ms, r.AddedP50Ms, d.P99Ms, g.P99Ms,
			optional(g.GatewayAllocKBPerCall, "%.1f"), optional(g.GatewayCPUMsPerCall, "%.3f"), verdict(r), r.Target)
		if traced && r.Traced != nil {
			line += fmt.Sprintf("%.0f\t%.2fx\t%s\t%s\t", r.Traced.CallsPerSec, r.TracedRatio, optional(r.Traced.GatewayCPUMsPerCall, "%.3f"), optional(r.TracedCPUAddedMs, "%+.3f"))
		}
		if peer && r.Peer != nil {
			line += fmt.Sprintf("%s\t%.0f\t%.2fx\t%+.3f\t%s\t%s\t", r.Peer.Era, r.Peer.CallsPerSec, r.PeerRatio, r.PeerAddedP50Ms,
				optional(r.Peer.GatewayCPUMsPerCall, "%.3f"), yesNo(*r.AtLeastPeer))
		}
		if rounds {
			line += report.Rounds(d.Rounds) + " | " + report.Rounds(g.Rounds) + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
	met := 0
	for _, r := range rep.Pairings {
		if r.Met {
			met++
		}
	}
	fmt.Fprintf(w, "\ntargets met: %d of %d\n", met, len(rep.Pairings))
	if peer {
		atLeast := 0
		for _, r := range rep.Pairings {
			if r.AtLeastPeer != nil && *r.AtLeastPeer {
				atLeast++
			}
		}
		fmt.Fprintf(w, "peer: %s, one child process in front of the same echo upstreams, no authentication; peer cpu from /proc over each window; taskgate >= peer (ratio at least the peer's, and at 1 session added p50 at most the peer's) in %d of %d rows\n",
			m.Peer, atLeast, len(rep.Pairings))
	}
	if traced {
		fmt.Fprintf(w, "traced: a second taskgate serve exporting a server and a client span of every call over OTLP/HTTP (sampling 1) to a receiver in this process; %d spans received\n", m.SpansReceived)
	}
	if m.GatewayIdleCPUPercent != nil {
		fmt.Fprintf(w, "gateway idle CPU, serving no call for %s before the calls: %.2f%% of one core (target below %g%%)\n", report.Seconds(m.IdleSec), *m.GatewayIdleCPUPercent, targetIdleCPUPercent)
	}
	fmt.Fprintf(w, "gateway peak RSS (VmHWM) over the whole run: %s; one gateway process fronts every pairing, so its high-water mark cannot be told apart per pairing\n",
		megabytes(m.GatewayPeakRSSBytes))
	if len(m.UpstreamPeakRSSBytes) > 0 {
		var each []string
		for _, k := range slices.Sorted(maps.Keys(m.UpstreamPeakRSSBytes)) {
			rss := m.UpstreamPeakRSSBytes[k]
			each = append(each, k+" "+megabytes(&rss))
		}
		fmt.Fprintf(w, "echo upstream peak RSS (VmHWM) over the whole run: %s; stdio's processes are not measured\n", strings.Join(each, ", "))
	}
}

func printAccept(w io.Writer, rep *results) {
	m := rep.Machine
	fmt.Fprintln(w)
	fmt.Fprintf(w, "accept: %s with a new operation_id per call, a fresh gateway and ledger per measurement; remote jobs run %s, worker upstream_poll %s\n",
		acceptTool, report.Seconds(m.JobDurationSec), report.Seconds(m.UpstreamPollSec))
	fmt.Fprintf(w, "upstream %s; gateway: the daemon in this process, API key auth, ledger %s (synchronous %s); cpu, alloc and GC figures are this whole process's\n\n",
		m.Upstream, m.Ledger, m.Synchronous)
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
}
