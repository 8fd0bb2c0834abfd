// Package serve starts the simulated provider on loopback and `taskgate
// serve` as a child process in front of it, on a fresh SQLite ledger with
// an agent key per tenant, for benchmarks that measure the gateway as
// shipped. The configuration is the
// fixtures harness's (sim/fixtures.ConfigYAML) plus what Options add; it
// never changes anything else.
package serve

import (
	"bufio"
	"bytes"
	"context"
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

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/bench/internal/child"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
)

// Options say which gateway to start.
type Options struct {
	// Bin is the taskgate binary.
	Bin string
	// Dir holds the configuration and the ledger.
	Dir string
	// ProviderURL is the MCP endpoint of the provider (hosted_test).
	ProviderURL string
	// Tenants get an agent key each.
	Tenants []string
	// Label is the keys' label: the benchmark's name.
	Label string
	// Limits, when set, is a YAML mapping written as the configuration's
	// limits.
	Limits string
	// Receipts makes the gateway issue signed receipts, as a deployment
	// with a signing key does: a secrets key file (secrets.key_file) and
	// a signing key in the ledger, both made with taskgate's own commands.
	Receipts bool
}

// Gateway is `taskgate serve` as a child process.
type Gateway struct {
	Proc *child.Process
	// Base is its HTTP address ("http://127.0.0.1:port").
	Base string
	// Keys are the agent keys by tenant.
	Keys map[string]string
	// Ledger is the path of its SQLite ledger.
	Ledger string
}

// MCPURL is the gateway's MCP endpoint.
func (g *Gateway) MCPURL() string { return g.Base + "/mcp" }

// Start creates the tenants' keys in a new ledger in o.Dir, starts o.Bin
// serve and waits, up to a minute, until it is ready (see WaitForTool for
// gateways of older versions).
func Start(ctx context.Context, o Options) (_ *Gateway, err error) {
	ledger := filepath.Join(o.Dir, "gateway.db")
	db := "sqlite:" + ledger
	keys := map[string]string{}
	for _, tenant := range o.Tenants {
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, o.Bin, "keys", "create", "--tenant", tenant, "--label", o.Label, "--db", db)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("create tenant %s's key with %s keys create: %w\n%s", tenant, o.Bin, err, stderr.String())
		}
		keys[tenant] = strings.TrimSpace(stdout.String())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("find a free loopback port for the gateway: %w", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var co fixtures.ConfigOptions
	if o.Receipts {
		co.SecretsKeyFile = filepath.Join(o.Dir, "taskgate.keys")
		if err := run(ctx, o.Bin, "secrets-key", "create", "--file", co.SecretsKeyFile); err != nil {
			return nil, err
		}
	}
	cfg := fixtures.ConfigYAML(o.ProviderURL, addr, db, co)
	if o.Limits != "" {
		cfg += "limits: " + o.Limits + "\n"
	}
	path := filepath.Join(o.Dir, "gateway.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, fmt.Errorf("write the gateway's configuration: %w", err)
	}
	if o.Receipts {
		if err := run(ctx, o.Bin, "signing-keys", "create", "--config", path); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(o.Bin, "serve", "--config", path, "--log-level", "error")
	cmd.Stdout = io.Discard
	proc, err := child.Start(cmd, "the gateway")
	if err != nil {
		return nil, err
	}
	g := &Gateway{Proc: proc, Base: "http://" + addr, Keys: keys, Ledger: ledger}
	defer func() {
		if err != nil {
			_ = proc.Stop(20 * time.Second)
		}
	}()
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if code, _, err := fixtures.Readiness(wait, g.Base); err == nil && code == http.StatusOK {
			return g, nil
		}
		select {
		case <-proc.Done():
			return nil, fmt.Errorf("the gateway exited before it was ready:\n%s", proc.Output())
		case <-wait.Done():
			return nil, fmt.Errorf("the gateway was not ready within a minute:\n%s", proc.Output())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// run runs bin with args to the end, and fails with its stderr.
func run(ctx context.Context, bin string, args ...string) error {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", bin, strings.Join(args, " "), err, stderr.String())
	}
	return nil
}

// Metric reads the value of one unlabelled metric from the gateway's
// /metrics.
func (g *Gateway) Metric(ctx context.Context, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.Base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("read the gateway's metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read the gateway's metrics: %w", err)
	}
	return 0, fmt.Errorf("the gateway's /metrics has no %s", name)
}

// WaitForTool waits, for up to a minute, until cs lists the tool name. A
// gateway of this version lists its upstream's tools before /readyz
// answers 200; one built before 2026-12-04, which a benchmark may run
// (-taskgate) to compare with, answered first, and until it had listed
// them a call named an unknown tool.
func WaitForTool(ctx context.Context, cs *mcp.ClientSession, name string) error {
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		res, err := cs.ListTools(wait, nil)
		if err == nil {
			for _, t := range res.Tools {
				if t.Name == name {
					return nil
				}
			}
		}
		select {
		case <-wait.Done():
			return fmt.Errorf("the gateway did not list %s within a minute (last error: %v)", name, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Provider is the simulated provider served on a loopback port.
type Provider struct {
	*providersim.Sim
	// URL is its MCP endpoint.
	URL string
	srv *http.Server
}

// StartProvider serves a simulated provider with jobs of jobDuration.
func StartProvider(jobDuration time.Duration) (*Provider, error) {
	sim := providersim.New(&providersim.Options{JobDuration: jobDuration})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		sim.Close()
		return nil, fmt.Errorf("listen for the provider: %w", err)
	}
	p := &Provider{Sim: sim, URL: "http://" + ln.Addr().String() + "/mcp", srv: &http.Server{Handler: sim.HTTPHandler(), ReadHeaderTimeout: 10 * time.Second}}
	go p.srv.Serve(ln)
	return p, nil
}

// Close stops serving and the simulated provider.
func (p *Provider) Close() {
	p.srv.Close()
	p.Sim.Close()
}
