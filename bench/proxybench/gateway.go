package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/taskgate/taskgate/bench/internal/child"
)

// gatewayUpstream is one upstream of the child gateway's configuration:
// url for Streamable HTTP, or command (with env) for stdio. Its name is
// also its tools' prefix.
type gatewayUpstream struct {
	name    string
	url     string
	command []string
	env     map[string]string
}

// liftedLimits takes the gateway's per-tenant call limits out of the way:
// one tenant drives every measurement, and what is measured is the
// gateway's own cost, not its limits (bench/fairness measures those).
const liftedLimits = "limits: {calls_per_tenant: 100000, call_rate: 1000000000, call_burst: 1000000000}\n"

// gatewayConfig is the YAML configuration of a gateway listening on listen
// with the ledger db in front of ups, none of whose tools is listed, so
// that every one passes straight through.
func gatewayConfig(listen, db string, ups []gatewayUpstream) string {
	var b strings.Builder
	// JSON strings are YAML strings, quoted so that no path is misread.
	q := func(v any) string {
		out, _ := json.Marshal(v)
		return string(out)
	}
	fmt.Fprintf(&b, "listen: %s\ndatabase: %s\n%supstreams:\n", q(listen), q(db), liftedLimits)
	for _, u := range ups {
		fmt.Fprintf(&b, "  - name: %s\n", q(u.name))
		if u.url != "" {
			fmt.Fprintf(&b, "    url: %s\n", q(u.url))
		} else {
			fmt.Fprintf(&b, "    command: %s\n", q(u.command))
			if len(u.env) > 0 {
				fmt.Fprintf(&b, "    env: %s\n", q(u.env))
			}
		}
	}
	return b.String()
}

// gateway is `taskgate serve` running as a child process, with the agent
// API key its clients present.
type gateway struct {
	proc *child.Process
	base string // http://HOST:PORT
	key  string
}

func (g *gateway) mcpURL() string { return g.base + "/mcp" }

// startGateway creates an agent key for benchTenant in a fresh SQLite
// ledger in dir, starts bin serve in front of ups on a free loopback port
// and waits until /readyz says every upstream is connected. With verbose
// the gateway's warnings go to progress too.
// env is added to the gateway's environment.
func startGateway(ctx context.Context, bin, dir string, ups []gatewayUpstream, env []string, verbose bool, progress io.Writer) (_ *gateway, err error) {
	db := "sqlite:" + filepath.Join(dir, "gateway.db")
	var stdout, stderr bytes.Buffer
	keys := exec.CommandContext(ctx, bin, "keys", "create", "--tenant", benchTenant, "--label", "proxybench", "--db", db)
	keys.Stdout, keys.Stderr = &stdout, &stderr
	if err := keys.Run(); err != nil {
		return nil, fmt.Errorf("create the gateway's API key with %s keys create: %w\n%s", bin, err, stderr.String())
	}
	key := strings.TrimSpace(stdout.String())
	if key == "" {
		return nil, fmt.Errorf("%s keys create printed no key:\n%s", bin, stderr.String())
	}

	addr, err := freeLoopbackAddr("the gateway")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(path, []byte(gatewayConfig(addr, db, ups)), 0o600); err != nil {
		return nil, fmt.Errorf("write the gateway's configuration: %w", err)
	}

	level := "error"
	if verbose {
		level = "warn"
	}
	cmd := exec.Command(bin, "serve", "--config", path, "--log-level", level)
	cmd.Stdout = io.Discard
	cmd.Env = append(os.Environ(), env...)
	if verbose {
		cmd.Stderr = progress
	}
	proc, err := child.Start(cmd, "the gateway")
	if err != nil {
		return nil, err
	}
	g := &gateway{proc: proc, base: "http://" + addr, key: key}
	defer func() {
		if err != nil {
			_ = g.stop()
		}
	}()
	if err := g.waitReady(ctx, 60*time.Second); err != nil {
		return nil, err
	}
	return g, nil
}

// freeLoopbackAddr is a loopback address for a child to listen on, which
// names in errors. The child binds it itself; a port just released is
// almost never taken again this quickly on loopback.
func freeLoopbackAddr(which string) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free loopback port for %s: %w", which, err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitReady polls /readyz until it answers 200, the process exits, ctx
// ends or within has passed.
func (g *gateway) waitReady(ctx context.Context, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	last := "no answer yet"
	for {
		code, err := g.get(ctx, "/readyz", io.Discard)
		if err == nil && code == http.StatusOK {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("status %d", code)
		}
		select {
		case <-g.proc.Done():
			return fmt.Errorf("the gateway exited (%v) before it was ready:\n%s", g.proc.Err(), g.proc.Output())
		case <-ctx.Done():
			return fmt.Errorf("the gateway was not ready at %s/readyz (%s): %w\n%s", g.base, last, ctx.Err(), g.proc.Output())
		case <-tick.C:
		}
	}
}

// get fetches path from the gateway into w and returns the status code.
func (g *gateway) get(ctx context.Context, path string, w io.Writer) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.base+path, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return resp.StatusCode, err
}

// gatewayCounters are a proxy's cumulative counters: the gateway's as its
// /metrics reports them, the peer's CPU time alone (allocUnknown).
type gatewayCounters struct {
	allocBytes   float64
	cpuSeconds   float64
	allocUnknown bool
}

// proxy is a process in front of the echo upstreams whose counters a
// measurement reads before and after its window: the gateway, or the peer
// proxy (-peer). Direct calls have none.
type proxy interface {
	counters(context.Context) (gatewayCounters, error)
}

// Metric names of the gateway's Go and process collectors.
const (
	metricAllocBytes = "go_memstats_alloc_bytes_total"
	metricCPUSeconds = "process_cpu_seconds_total"
)

// counters scrapes the gateway's /metrics.
func (g *gateway) counters(ctx context.Context) (gatewayCounters, error) {
	var body bytes.Buffer
	code, err := g.get(ctx, "/metrics", &body)
	if err != nil {
		return gatewayCounters{}, fmt.Errorf("scrape the gateway's /metrics: %w", err)
	}
	if code != http.StatusOK {
		return gatewayCounters{}, fmt.Errorf("the gateway's /metrics answered status %d", code)
	}
	var c gatewayCounters
	if c.allocBytes, err = metricValue(body.String(), metricAllocBytes); err != nil {
		return gatewayCounters{}, err
	}
	if c.cpuSeconds, err = metricValue(body.String(), metricCPUSeconds); err != nil {
		return gatewayCounters{}, err
	}
	return c, nil
}

// metricValue reads the value of the unlabelled sample name from a
// Prometheus text exposition.
func metricValue(text, name string) (float64, error) {
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '\t') {
			continue
		}
		// A sample line is NAME VALUE [TIMESTAMP].
		fields := strings.Fields(rest)
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("metric %s has the value %q, not a number", name, fields[0])
		}
		return v, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read the metrics: %w", err)
	}
	return 0, fmt.Errorf("the metrics have no sample %s", name)
}

// stop ends the gateway with SIGTERM, as an operator would, and kills it
// when it has not ended within 20s; it reports a gateway that did not end
// cleanly.
func (g *gateway) stop() error { return g.proc.Stop(20 * time.Second) }
