package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/daemon"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
)

// benchTenant is the tenant of every gateway call.
const benchTenant = "bench"

// stage is what an acceptance measurement runs on: the simulated provider,
// the daemon in this process in front of it and the key to reach it.
type stage struct {
	dir     string
	sim     *providersim.Sim
	simSrv  *httptest.Server
	simURL  string
	gate    *daemon.Daemon
	gateURL string
	key     string
	// sync is the ledger's PRAGMA synchronous, as its store opened it.
	sync string
}

// role labels the CPU profile samples of everything started under it.
func role(ctx context.Context, name string, f func(context.Context)) {
	pprof.Do(ctx, pprof.Labels("role", name), f)
}

// startStage starts the simulated provider on an httptest server and the
// real daemon in front of it on a fresh SQLite ledger in a new directory
// under dir, listening on loopback.
func startStage(ctx context.Context, o *options, log *slog.Logger) (_ *stage, err error) {
	s := &stage{}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.dir, err = os.MkdirTemp(o.dir, "taskgate-proxybench-"); err != nil {
		return nil, fmt.Errorf("create a scratch directory in %s: %w", o.dir, err)
	}
	role(ctx, "upstream", func(context.Context) {
		s.sim = providersim.New(&providersim.Options{Logger: log, JobDuration: o.jobDuration})
		s.simSrv = httptest.NewServer(s.sim.HTTPHandler())
	})
	s.simURL = s.simSrv.URL + "/mcp"

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen on loopback for the gateway: %w", err)
	}
	db := "sqlite:" + filepath.Join(s.dir, "taskgate.db")
	file := filepath.Join(s.dir, "taskgate.yaml")
	cfg, err := config.Parse(strings.NewReader(fixtures.ConfigYAML(s.simURL, ln.Addr().String(), db, fixtures.ConfigOptions{})+liftedLimits), file, nil)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("gateway configuration: %w", err)
	}
	// The harness's timings suit tests that wait for jobs to end; a
	// benchmark wants the shipped defaults.
	cfg.Worker = config.Worker{
		Lease:        30 * time.Second,
		Sweep:        5 * time.Second,
		UpstreamPoll: o.upstreamPoll,
		Reconcile:    time.Minute,
		FetchPoll:    50 * time.Millisecond,
		Workers:      16,
	}
	role(ctx, "gateway", func(ctx context.Context) {
		s.gate, err = daemon.Start(ctx, &daemon.Options{Config: cfg, Logger: log, Listener: ln})
	})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("start the gateway: %w", err)
	}
	s.gateURL = s.gate.URL + "/mcp"
	if s.key, _, err = authn.NewAPIKey(ctx, s.gate.Store, benchTenant, "proxybench"); err != nil {
		return nil, err
	}
	s.sync = "unknown"
	if withDB, ok := s.gate.Store.(interface{ DB() *sql.DB }); ok {
		var n int
		if err := withDB.DB().QueryRowContext(ctx, "PRAGMA synchronous").Scan(&n); err == nil {
			s.sync = map[int]string{0: "off", 1: "normal", 2: "full", 3: "extra"}[n]
		}
	}
	return s, nil
}

func (s *stage) close() {
	if s.gate != nil {
		// The worker holds a job that follows a running remote job until
		// its context ends; a short deadline makes Stop cancel it instead
		// of waiting the daemon's full grace period. The measurements
		// are taken by then.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = s.gate.Stop(ctx)
		cancel()
	}
	if s.simSrv != nil {
		s.simSrv.CloseClientConnections()
		s.simSrv.Close()
	}
	if s.sim != nil {
		_ = s.sim.Close()
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// session is one client: its own HTTP connections, as a separate agent
// process would have, so that no session waits for another's connection.
type session struct {
	cs *mcp.ClientSession
	// transport is nil for a stdio session.
	transport *http.Transport
	// asked counts the questions (elicitations) the session's client was
	// asked.
	asked atomic.Int64
}

// dial opens a 2026-07-28 session with the Tasks extension to url, with
// key.
func dial(ctx context.Context, url, key string) (*session, error) {
	base, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return nil, errors.New("http.DefaultTransport is not an *http.Transport")
	}
	tr := base.Clone()
	tr.MaxIdleConnsPerHost = 8
	cs, err := fixtures.Dial(ctx, url, key, fixtures.EraExtension, &http.Client{Transport: tr})
	if err != nil {
		tr.CloseIdleConnections()
		return nil, fmt.Errorf("connect to %s: %w", url, err)
	}
	return &session{cs: cs, transport: tr}, nil
}

func (s *session) close() {
	_ = s.cs.Close()
	if s.transport != nil {
		s.transport.CloseIdleConnections()
	}
}

// dialAll opens n sessions and checks that each negotiated 2026-07-28.
func dialAll(ctx context.Context, n int, url, key string) ([]*session, error) {
	want := versionExtension
	var out []*session
	for range n {
		s, err := dial(ctx, url, key)
		if err != nil {
			closeAll(out)
			return nil, err
		}
		out = append(out, s)
		if got := s.cs.InitializeResult().ProtocolVersion; got != want {
			closeAll(out)
			return nil, fmt.Errorf("the session to %s negotiated protocol %s, want %s", url, got, want)
		}
	}
	return out, nil
}

func closeAll(ss []*session) {
	for _, s := range ss {
		s.close()
	}
}
