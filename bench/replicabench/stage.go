package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/bench/internal/child"
	"github.com/taskgate/taskgate/bench/internal/cpu"
	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/daemon"
	"github.com/taskgate/taskgate/ledger/dburl"
	"github.com/taskgate/taskgate/ledger/postgres"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"

	"github.com/taskgate/taskgate/internal/syncbuf"
)

// benchTenant is the tenant of every gateway call.
const benchTenant = "bench"

// world is what every measurement of a run shares: the run's schema, the
// ledger migrated in it once, the simulated provider and the taskgate
// binary the replicas run.
type world struct {
	o      *options
	log    *slog.Logger
	dir    string
	base   string // the server URL as given
	schema string
	url    string // base with search_path set to schema
	// appName is the application_name of every connection of the run.
	appName string
	store   *postgres.Store
	key     string
	bin     string
	sim     *providersim.Sim
	simSrv  *httptest.Server
	simURL  string
	// echoURL is the MCP call ceiling's server: a child process
	// (echoProc), or with -inprocess an httptest server here (echoSrv).
	echoURL  string
	echoProc *echoProcess
	echoSrv  *httptest.Server
}

// role labels the CPU profile samples of everything started under it.
func role(ctx context.Context, name string, f func(context.Context)) {
	pprof.Do(ctx, pprof.Labels("role", name), f)
}

// newWorld creates the run's schema, migrates the ledger into it, creates
// the API key every client uses, starts the provider and builds taskgate
// unless a binary was given.
func newWorld(ctx context.Context, o *options, progress io.Writer) (_ *world, err error) {
	w := &world{o: o, base: o.postgres, log: slog.New(slog.DiscardHandler)}
	if o.verbose {
		w.log = slog.New(slog.NewTextHandler(progress, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	if w.dir, err = os.MkdirTemp("", "taskgate-replicabench-"); err != nil {
		return nil, err
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "taskgate_replicabench_" + hex.EncodeToString(b)
	if err := w.exec(ctx, "CREATE SCHEMA "+name); err != nil {
		return nil, fmt.Errorf("create schema %s: %w", name, err)
	}
	w.schema = name
	u, err := url.Parse(w.base)
	if err != nil {
		return nil, fmt.Errorf("-postgres is not a URL: %w", err)
	}
	q := u.Query()
	q.Set("search_path", name)
	// Every connection of the run carries the schema's name, so that the
	// database's backends serving this run can be told from others'.
	w.appName = name
	q.Set("application_name", name)
	u.RawQuery = q.Encode()
	w.url = u.String()

	if w.store, err = postgres.Open(ctx, w.url, &postgres.Options{Logger: w.log}); err != nil {
		return nil, err
	}
	// Once, here: the replicas then find nothing to apply.
	if err := w.store.Migrate(ctx); err != nil {
		return nil, err
	}
	if w.key, _, err = authn.NewAPIKey(ctx, w.store, benchTenant, "replicabench"); err != nil {
		return nil, err
	}
	role(ctx, "upstream", func(context.Context) {
		// No job may start: a dispatch reaching the provider would be
		// counted as one and fail the run.
		w.sim = providersim.New(&providersim.Options{Logger: w.log, JobDuration: time.Hour})
		w.simSrv = httptest.NewServer(w.sim.HTTPHandler())
	})
	w.simURL = w.simSrv.URL + "/mcp"
	if o.inProcess {
		role(ctx, "upstream", func(context.Context) { w.echoSrv = httptest.NewServer(echoHandler()) })
		w.echoURL = w.echoSrv.URL + "/mcp"
	} else {
		if w.echoProc, err = startEchoProcess(ctx); err != nil {
			return nil, err
		}
		w.echoURL = "http://" + w.echoProc.addr + "/mcp"
	}
	if !o.inProcess {
		if w.bin = o.taskgate; w.bin == "" {
			if w.bin, err = child.BuildTaskgate(ctx, w.dir); err != nil {
				return nil, err
			}
		}
	}
	return w, nil
}

// exec runs one statement on a connection of its own to the server as
// given, outside the run's schema.
func (w *world) exec(ctx context.Context, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, w.base)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", dburl.Describe(w.base), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// close stops the provider, closes the ledger and drops the run's schema.
func (w *world) close() {
	if w.echoSrv != nil {
		w.echoSrv.CloseClientConnections()
		w.echoSrv.Close()
	}
	if w.echoProc != nil {
		w.echoProc.stop()
	}
	if w.simSrv != nil {
		w.simSrv.CloseClientConnections()
		w.simSrv.Close()
	}
	if w.sim != nil {
		_ = w.sim.Close()
	}
	if w.store != nil {
		_ = w.store.Close()
	}
	if w.schema != "" {
		if err := w.exec(context.Background(), "DROP SCHEMA "+w.schema+" CASCADE"); err != nil {
			fmt.Fprintf(os.Stderr, "replicabench: drop schema %s: %v (drop it by hand)\n", w.schema, err)
		}
	}
	if w.dir != "" {
		_ = os.RemoveAll(w.dir)
	}
}

// backendsCPU is the CPU time the database's backends serving this run's
// connections have used, or 0 when the server's processes cannot be read
// (a server on another host, or another platform).
func (w *world) backendsCPU(ctx context.Context) time.Duration {
	rows, err := w.store.Pool().Query(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", w.appName)
	if err != nil {
		return 0
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return 0
	}
	var t time.Duration
	for _, pid := range pids {
		t += cpu.Of(int(pid))
	}
	return t
}

// liftedLimits takes the gateway's per-tenant call limits out of the way:
// one tenant drives every measurement, and what is measured is the
// gateway's own cost, not its limits (bench/fairness measures those).
const liftedLimits = "limits: {calls_per_tenant: 100000, call_rate: 1000000000, call_burst: 1000000000}\n"

// replica is one running gateway: a child process or, with -inprocess, a
// daemon in this process.
type replica struct {
	addr string
	proc *exec.Cmd
	done chan error
	out  *syncbuf.Buffer
	gate *daemon.Daemon
}

func (r *replica) mcpURL() string { return "http://" + r.addr + "/mcp" }

// cpu is the CPU time the replica's process has used; zero in process.
func (r *replica) cpu() time.Duration {
	if r.proc == nil {
		return 0
	}
	return cpu.Of(r.proc.Process.Pid)
}

// startReplicas starts n gateways on the run's ledger at once and waits
// until each answers.
func (w *world) startReplicas(ctx context.Context, n int) ([]*replica, error) {
	rs := make([]*replica, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { rs[i], errs[i] = w.startReplica(ctx, i) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		stopReplicas(rs)
		return nil, err
	}
	return rs, nil
}

func (w *world) startReplica(ctx context.Context, i int) (*replica, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen on loopback for replica %d: %w", i, err)
	}
	r := &replica{addr: ln.Addr().String()}
	// The echo server is a second upstream, its tool a pass-through one.
	y := fixtures.ConfigYAML(w.simURL, r.addr, w.url, fixtures.ConfigOptions{}) +
		fmt.Sprintf("  - name: %s\n    url: %s\n    tools:\n      %s: {}\n", echoUpstream, w.echoURL, echoTool) + liftedLimits
	path := filepath.Join(w.dir, fmt.Sprintf("replica-%d.yaml", i))
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	if w.o.inProcess {
		cfg, err := config.Parse(strings.NewReader(y), path, nil)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("replica %d configuration: %w", i, err)
		}
		role(ctx, "gateway", func(ctx context.Context) {
			r.gate, err = daemon.Start(ctx, &daemon.Options{Config: cfg, Logger: w.log, Listener: ln, NoWorker: true})
		})
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("start replica %d: %w", i, err)
		}
		return r, nil
	}
	// The child binds the address itself; a port just released is
	// almost never taken again this quickly on loopback.
	ln.Close()
	level := "error"
	if w.o.verbose {
		level = "warn"
	}
	r.out = &syncbuf.Buffer{}
	r.proc = exec.Command(w.bin, "serve", "--config", path, "--no-worker", "--log-level", level)
	r.proc.Stdout = io.Discard
	r.proc.Stderr = r.out
	if w.o.verbose {
		r.proc.Stderr = io.MultiWriter(r.out, prefixed{os.Stderr, fmt.Sprintf("replica %d: ", i)})
	}
	r.proc.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.proc.Start(); err != nil {
		return nil, fmt.Errorf("start replica %d (%s): %w", i, w.bin, err)
	}
	r.done = make(chan error, 1)
	go func() { r.done <- r.proc.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + r.addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return r, nil
			}
		}
		select {
		case err := <-r.done:
			r.proc = nil
			return nil, fmt.Errorf("replica %d exited before it answered (%v):\n%s", i, err, r.out.String())
		case <-ctx.Done():
			r.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.stop()
			return nil, fmt.Errorf("replica %d did not answer /healthz within 30s:\n%s", i, r.out.String())
		}
	}
}

// stop ends the replica gracefully, or kills it when it does not end in
// time.
func (r *replica) stop() error {
	if r.gate != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		err := r.gate.Stop(ctx)
		r.gate = nil
		return err
	}
	if r.proc == nil {
		return nil
	}
	defer func() { r.proc = nil }()
	_ = r.proc.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-r.done:
		if err != nil {
			return fmt.Errorf("replica at %s: %w\n%s", r.addr, err, r.out.String())
		}
		return nil
	case <-time.After(20 * time.Second):
		_ = r.proc.Process.Signal(syscall.SIGKILL)
		<-r.done
		return fmt.Errorf("replica at %s did not stop within 20s of SIGTERM and was killed", r.addr)
	}
}

func stopReplicas(rs []*replica) error {
	var errs []error
	for _, r := range rs {
		if r != nil {
			errs = append(errs, r.stop())
		}
	}
	return errors.Join(errs...)
}

// prefixed writes each write to w after a prefix naming its replica.
type prefixed struct {
	w      io.Writer
	prefix string
}

func (p prefixed) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, p.prefix+string(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// session is one client: its own HTTP connections, as a separate agent
// process would have, so that no session waits for another's connection.
type session struct {
	cs        *mcp.ClientSession
	transport *http.Transport
}

// dial opens a 2026-07-28 session with the Tasks extension to url.
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
	if got := cs.InitializeResult().ProtocolVersion; got != versionExtension {
		_ = cs.Close()
		tr.CloseIdleConnections()
		return nil, fmt.Errorf("the session to %s negotiated protocol %s, want %s", url, got, versionExtension)
	}
	return &session{cs: cs, transport: tr}, nil
}

func (s *session) close() {
	_ = s.cs.Close()
	s.transport.CloseIdleConnections()
}

// dialSpread opens n sessions, the i-th to urls[i mod len(urls)], so that
// the servers share the clients evenly.
func dialSpread(ctx context.Context, n int, urls []string, key string) ([]*session, error) {
	var out []*session
	for i := range n {
		s, err := dial(ctx, urls[i%len(urls)], key)
		if err != nil {
			closeAll(out)
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func replicaURLs(rs []*replica) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.mcpURL())
	}
	return out
}

func closeAll(ss []*session) {
	for _, s := range ss {
		s.close()
	}
}
