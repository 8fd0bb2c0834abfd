package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/bench/internal/child"
	"github.com/taskgate/taskgate/internal/otlptest"
	"github.com/taskgate/taskgate/sim/fixtures"
)

// passStage is what the pass-through measurements share: the echo
// upstreams, each a child process of this binary, and one gateway process
// in front of all of them. An HTTP upstream is one process that direct
// clients and the gateway call alike; a stdio upstream is a process per
// direct session, and one the gateway supervises.
type passStage struct {
	dir     string
	self    string // this binary, which serves the echo upstreams
	bin     string // the taskgate binary the gateway runs
	servers map[upstreamKind]*echoProcess
	gw      *gateway
	// traced is the gateway that exports spans to receiver (-traces).
	traced   *gateway
	receiver *otlptest.Receiver
	// peer is the peer proxy in front of the same upstreams (-peer).
	peer *peerProxy
	// stderr receives the echo servers' stderr (with -v).
	stderr io.Writer
}

// echoProcess is an HTTP echo upstream's process and its MCP endpoint.
type echoProcess struct {
	proc *child.Process
	url  string
}

// echoCommand is this binary run as the echo upstream of kind.
func (s *passStage) echoCommand(kind upstreamKind) *exec.Cmd {
	cmd := exec.Command(s.self)
	cmd.Env = append(os.Environ(), echoEnv+"="+string(kind))
	cmd.Stderr = s.stderr
	return cmd
}

// startEchoProcess starts the HTTP echo upstream of kind and waits for the
// address it listens on.
func (s *passStage) startEchoProcess(ctx context.Context, kind upstreamKind) (*echoProcess, error) {
	proc, addr, err := child.StartServer(ctx, s.echoCommand(kind), fmt.Sprintf("the %s echo upstream", kind), 30*time.Second)
	if err != nil {
		return nil, err
	}
	return &echoProcess{proc: proc, url: "http://" + addr + "/mcp"}, nil
}

// startPassStage starts the echo upstreams of kinds and a gateway in
// front of them, in a new directory under o.dir.
func startPassStage(ctx context.Context, o *options, kinds []upstreamKind, progress io.Writer) (_ *passStage, err error) {
	s := &passStage{servers: map[upstreamKind]*echoProcess{}}
	defer func() {
		if err != nil {
			_ = s.close()
		}
	}()
	if s.dir, err = os.MkdirTemp(o.dir, "taskgate-proxybench-"); err != nil {
		return nil, fmt.Errorf("create a scratch directory in %s: %w", o.dir, err)
	}
	if s.self, err = os.Executable(); err != nil {
		return nil, fmt.Errorf("find this binary to serve the echo upstreams: %w", err)
	}
	if o.verbose {
		s.stderr = progress
	}
	var ups []gatewayUpstream
	for _, k := range kinds {
		u := gatewayUpstream{name: string(k)}
		switch k {
		case upstreamSessions, upstreamStateless:
			fmt.Fprintf(progress, "starting the %s echo upstream ...\n", k)
			srv, err := s.startEchoProcess(ctx, k)
			if err != nil {
				return nil, err
			}
			s.servers[k] = srv
			u.url = srv.url
		case upstreamStdio:
			u.command = []string{s.self}
			u.env = map[string]string{echoEnv: string(upstreamStdio)}
		}
		ups = append(ups, u)
	}
	if s.bin = o.taskgate; s.bin == "" {
		fmt.Fprintln(progress, "building cmd/taskgate ...")
		if s.bin, err = child.BuildTaskgate(ctx, s.dir); err != nil {
			return nil, err
		}
	}
	if o.peer != "" {
		fmt.Fprintf(progress, "starting the peer proxy %s in front of the echo upstreams ...\n", o.peer)
		if s.peer, err = startPeer(ctx, o.peer, s.dir, ups, o.verbose, progress); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(progress, "starting %s serve in front of the echo upstreams ...\n", s.bin)
	if s.gw, err = startGateway(ctx, s.bin, s.dir, ups, nil, o.verbose, progress); err != nil {
		return nil, err
	}
	if o.traces {
		if s.receiver, err = otlptest.Start(); err != nil {
			return nil, fmt.Errorf("start the OTLP receiver: %w", err)
		}
		dir := filepath.Join(s.dir, "traced")
		if err := os.Mkdir(dir, 0o700); err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "starting a second gateway that exports its spans to %s ...\n", s.receiver.URL())
		env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + s.receiver.URL(), "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"}
		if s.traced, err = startGateway(ctx, s.bin, dir, ups, env, o.verbose, progress); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// close stops the gateway, then the echo upstreams it was connected to,
// and removes the directory; it reports every process that did not end
// cleanly.
func (s *passStage) close() error {
	var errs []error
	if s.gw != nil {
		errs = append(errs, s.gw.stop())
	}
	if s.traced != nil {
		errs = append(errs, s.traced.stop())
	}
	if s.receiver != nil {
		errs = append(errs, s.receiver.Close())
	}
	if s.peer != nil {
		errs = append(errs, s.peer.stop())
	}
	for _, srv := range s.servers {
		errs = append(errs, srv.proc.Stop(10*time.Second))
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
	return errors.Join(errs...)
}

// endpoint is where a pass-through client connects: an HTTP url, or a
// stdio command it starts (url empty); key, if any, is its API key, and
// tool the echo tool's name there.
type endpoint struct {
	url     string
	command func() *exec.Cmd
	key     string
	tool    string
}

// gateway is the gateway path goes through, nil for direct calls and the
// peer.
func (s *passStage) gateway(path string) *gateway {
	switch path {
	case pathTaskgate:
		return s.gw
	case pathTraced:
		return s.traced
	}
	return nil
}

// proxy is the process path goes through, nil for direct calls.
func (s *passStage) proxy(path string) proxy {
	if path == pathPeer {
		return s.peer
	}
	if gw := s.gateway(path); gw != nil {
		return gw
	}
	return nil
}

// endpoint is where p's clients connect on path.
func (s *passStage) endpoint(p pairing, path string) endpoint {
	if gw := s.gateway(path); gw != nil {
		return endpoint{url: gw.mcpURL(), key: gw.key, tool: string(p.upstream) + "." + echoTool}
	}
	if path == pathPeer {
		return endpoint{url: s.peer.url(p.upstream), tool: echoTool}
	}
	if p.upstream == upstreamStdio {
		return endpoint{tool: echoTool, command: func() *exec.Cmd { return s.echoCommand(upstreamStdio) }}
	}
	return endpoint{url: s.servers[p.upstream].url, tool: echoTool}
}

// dialEcho opens one session of p's client to ep, built the same way
// whether ep is the upstream or the gateway: the go-sdk client with its
// defaults, an ElicitationHandler when p declares elicitation, and
// 2025-11-25 pinned for the legacy client.
func dialEcho(ctx context.Context, ep endpoint, p pairing) (*session, error) {
	s := &session{}
	var opts *mcp.ClientOptions
	if p.elicitation {
		opts = &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			s.asked.Add(1)
			return &mcp.ElicitResult{Action: "decline"}, nil
		}}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "proxybench", Version: "v1"}, opts)
	var t mcp.Transport
	where := ep.url
	if ep.url == "" {
		t = &mcp.CommandTransport{Command: ep.command()}
		where = "the stdio echo server"
	} else {
		base, ok := http.DefaultTransport.(*http.Transport)
		if !ok {
			return nil, errors.New("http.DefaultTransport is not an *http.Transport")
		}
		// Its own connections, as a separate agent process would have.
		s.transport = base.Clone()
		s.transport.MaxIdleConnsPerHost = 8
		t = &mcp.StreamableClientTransport{Endpoint: ep.url, HTTPClient: &http.Client{Transport: fixtures.Bearer{Key: ep.key, Next: s.transport}}}
	}
	var so *mcp.ClientSessionOptions
	if p.client == clientLegacy {
		so = &mcp.ClientSessionOptions{ProtocolVersion: versionLegacy}
	}
	cs, err := client.Connect(ctx, t, so)
	if err != nil {
		if s.transport != nil {
			s.transport.CloseIdleConnections()
		}
		return nil, fmt.Errorf("connect to %s: %w", where, err)
	}
	s.cs = cs
	return s, nil
}

// dialEchoAll opens n sessions of p on path and checks that each
// negotiated the protocol version expected there; the peer's sessions must
// all negotiate the same one, whichever it is.
func (s *passStage) dialEchoAll(ctx context.Context, n int, p pairing, path string) ([]*session, endpoint, error) {
	ep := s.endpoint(p, path)
	want := expectedVersion(p, path)
	var out []*session
	for range n {
		ss, err := dialEcho(ctx, ep, p)
		if err != nil {
			closeAll(out)
			return nil, ep, err
		}
		out = append(out, ss)
		if want == "" {
			want = ss.cs.InitializeResult().ProtocolVersion
		}
		if got := ss.cs.InitializeResult().ProtocolVersion; got != want {
			closeAll(out)
			return nil, ep, fmt.Errorf("a session %s negotiated protocol %s, want %s", path, got, want)
		}
	}
	return out, ep, nil
}

// passStep is one pass-through measurement of a pairing.
type passStep struct {
	path     string
	sessions int
}

// measureEcho makes echo calls on step's sessions of p and checks every
// answer, and that the echo tool asked no client anything.
func (s *passStage) measureEcho(ctx context.Context, o *options, p pairing, step passStep) (measurement, error) {
	sessions, ep, err := s.dialEchoAll(ctx, step.sessions, p, step.path)
	if err != nil {
		return measurement{}, err
	}
	defer closeAll(sessions)
	m, _, err := drive(ctx, o, sessions, s.proxy(step.path), func(ctx context.Context, ss *session, worker, seq int) error {
		return echo(ctx, ss.cs, ep.tool, fmt.Sprintf("proxybench %d/%d", worker, seq))
	})
	if err != nil {
		return measurement{}, err
	}
	for _, ss := range sessions {
		if n := ss.asked.Load(); n > 0 {
			return measurement{}, fmt.Errorf("a client was asked %d question(s) (elicitation), but the echo tool never asks", n)
		}
	}
	m.Path, m.Era = step.path, sessions[0].cs.InitializeResult().ProtocolVersion
	return m, nil
}

// measurePairings measures every pairing directly and through the
// gateway, at one session and at o.sessions. Rounds run every step of
// every pairing in turn, so that a burst of load from elsewhere on the
// machine spreads over all of them instead of one.
func measurePairings(ctx context.Context, o *options, rep *results, progress io.Writer) (err error) {
	st, err := startPassStage(ctx, o, o.upstreams, progress)
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := st.close(); err == nil && stopErr != nil {
			err = stopErr
		}
	}()
	rep.Machine.Gateway = st.bin
	rep.Machine.Peer = o.peer
	if o.idle > 0 {
		fmt.Fprintf(progress, "measuring the gateway's CPU while it serves no call for %s ...\n", o.idle)
		if rep.Machine.GatewayIdleCPUPercent, err = idleCPU(ctx, st.gw, o.idle); err != nil {
			return err
		}
	}
	ps := pairings(o.clients, o.upstreams, o.elicitation)
	steps := []passStep{{pathDirect, 1}, {pathTaskgate, 1}, {pathDirect, o.sessions}, {pathTaskgate, o.sessions}}
	if o.traces {
		steps = append(steps, passStep{pathTraced, 1}, passStep{pathTraced, o.sessions})
	}
	peerAt := len(steps)
	if st.peer != nil {
		steps = append(steps, passStep{pathPeer, 1}, passStep{pathPeer, o.sessions})
	}
	got := make([][][]measurement, len(ps))
	for i := range got {
		got[i] = make([][]measurement, len(steps))
	}
	for round := 1; round <= o.rounds; round++ {
		for i, p := range ps {
			for j, step := range steps {
				fmt.Fprintf(progress, "round %d/%d: %s: %s, %d session(s) ...\n", round, o.rounds, p, step.path, step.sessions)
				m, err := st.measureEcho(ctx, o, p, step)
				if err != nil {
					return fmt.Errorf("%s: %s, %d session(s): %w", p, step.path, step.sessions, err)
				}
				got[i][j] = append(got[i][j], m)
			}
		}
	}
	for i, p := range ps {
		direct1, gate1 := median(got[i][0]), median(got[i][1])
		directN, gateN := median(got[i][2]), median(got[i][3])
		one, many := comparePairing(p, direct1, gate1), comparePairing(p, directN, gateN)
		if o.traces {
			one.traced(median(got[i][4]))
			many.traced(median(got[i][5]))
		}
		if st.peer != nil {
			one.peer(median(got[i][peerAt]))
			many.peer(median(got[i][peerAt+1]))
		}
		rep.Pairings = append(rep.Pairings, one, many)
	}
	if o.traces {
		rep.Machine.SpansReceived = len(st.receiver.Spans())
		if rep.Machine.SpansReceived == 0 {
			return errors.New("the gateway with traces on exported no span")
		}
	}
	return st.peakRSS(rep)
}

// idleCPU is the share of one core gw's process used over d while it
// serves no call, in percent, from its /metrics before and after.
func idleCPU(ctx context.Context, gw *gateway, d time.Duration) (*float64, error) {
	before, err := gw.counters(ctx)
	if err != nil {
		return nil, err
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	after, err := gw.counters(ctx)
	if err != nil {
		return nil, err
	}
	pct := (after.cpuSeconds - before.cpuSeconds) / d.Seconds() * 100
	return &pct, nil
}

// peakRSS records the peak RSS of the gateway and of every HTTP echo
// upstream, where the platform reports it; the processes must still run.
func (s *passStage) peakRSS(rep *results) error {
	rss, err := s.gw.proc.PeakRSS()
	switch {
	case errors.Is(err, child.ErrNoProc):
		return nil
	case err != nil:
		return err
	}
	rep.Machine.GatewayPeakRSSBytes = &rss
	for k, srv := range s.servers {
		rss, err := srv.proc.PeakRSS()
		if err != nil {
			return err
		}
		if rep.Machine.UpstreamPeakRSSBytes == nil {
			rep.Machine.UpstreamPeakRSSBytes = map[string]int64{}
		}
		rep.Machine.UpstreamPeakRSSBytes[string(k)] = rss
	}
	return nil
}
