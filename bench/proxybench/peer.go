package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/bench/internal/child"
	"github.com/taskgate/taskgate/bench/internal/cpu"
)

// peerProxy is another MCP proxy (-peer) running as a child process in
// front of the same echo upstreams as the gateway, so that its ratio to
// direct calls is measured in the same run as taskgate's. The binary is
// TBXark/mcp-proxy's command (docs/benchmarks.md names the commit): it
// reads a JSON configuration (-config) and serves each upstream's tools
// over stateless Streamable HTTP at /NAME/, without authentication.
type peerProxy struct {
	proc *child.Process
	base string // http://HOST:PORT
}

// url is where the peer serves upstream's tools.
func (p *peerProxy) url(upstream upstreamKind) string { return p.base + "/" + string(upstream) + "/" }

// counters are the peer's CPU time, read from /proc: it has no metrics
// endpoint, and its allocation is not known.
func (p *peerProxy) counters(context.Context) (gatewayCounters, error) {
	return gatewayCounters{cpuSeconds: cpu.Of(p.proc.Pid()).Seconds(), allocUnknown: true}, nil
}

func (p *peerProxy) stop() error { return p.proc.Stop(10 * time.Second) }

// peerConfig is mcp-proxy's configuration listening on addr in front of
// ups: HTTP upstreams as Streamable HTTP clients, stdio ones as commands.
func peerConfig(addr string, ups []gatewayUpstream) ([]byte, error) {
	type server struct {
		URL           string            `json:"url,omitempty"`
		TransportType string            `json:"transportType,omitempty"`
		Command       string            `json:"command,omitempty"`
		Args          []string          `json:"args,omitempty"`
		Env           map[string]string `json:"env,omitempty"`
	}
	servers := map[string]server{}
	for _, u := range ups {
		if u.url != "" {
			servers[u.name] = server{URL: u.url, TransportType: "streamable-http"}
			continue
		}
		servers[u.name] = server{Command: u.command[0], Args: u.command[1:], Env: u.env}
	}
	return json.MarshalIndent(map[string]any{
		"mcpProxy": map[string]any{
			"baseURL": "http://" + addr, "addr": addr, "name": "peer", "version": "1",
			"type":    "streamable-http",
			"options": map[string]any{"panicIfInvalid": true, "logEnabled": false},
		},
		"mcpServers": servers,
	}, "", "  ")
}

// startPeer starts bin in front of ups on a free loopback port, with its
// configuration in dir, and waits until every upstream's echo tool is
// listed through it.
func startPeer(ctx context.Context, bin, dir string, ups []gatewayUpstream, verbose bool, progress io.Writer) (_ *peerProxy, err error) {
	addr, err := freeLoopbackAddr("the peer proxy")
	if err != nil {
		return nil, err
	}
	conf, err := peerConfig(addr, ups)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "peer.json")
	if err := os.WriteFile(path, conf, 0o600); err != nil {
		return nil, fmt.Errorf("write the peer proxy's configuration: %w", err)
	}
	cmd := exec.Command(bin, "-config", path, "-expand-env=false")
	cmd.Stdout = io.Discard
	if verbose {
		cmd.Stderr = progress
	}
	proc, err := child.Start(cmd, "the peer proxy")
	if err != nil {
		return nil, err
	}
	p := &peerProxy{proc: proc, base: "http://" + addr}
	defer func() {
		if err != nil {
			_ = p.stop()
		}
	}()
	for _, u := range ups {
		if err := p.waitListed(ctx, upstreamKind(u.name), 60*time.Second); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// waitListed connects to the peer's route for upstream until its tools
// include the echo tool, the process exits, ctx ends or within has passed:
// the peer connects to its upstreams after it starts listening.
func (p *peerProxy) waitListed(ctx context.Context, upstream upstreamKind, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := errors.New("no answer yet")
	for {
		if last = p.listsEcho(ctx, upstream); last == nil {
			return nil
		}
		select {
		case <-p.proc.Done():
			return fmt.Errorf("the peer proxy exited (%v) before it served %s:\n%s", p.proc.Err(), p.url(upstream), p.proc.Output())
		case <-ctx.Done():
			return fmt.Errorf("the peer proxy did not list the echo tool at %s (%v): %w\n%s", p.url(upstream), last, ctx.Err(), p.proc.Output())
		case <-tick.C:
		}
	}
}

func (p *peerProxy) listsEcho(ctx context.Context, upstream upstreamKind) error {
	ss, err := dialEcho(ctx, endpoint{url: p.url(upstream), tool: echoTool}, pairing{client: clientDefault, upstream: upstream})
	if err != nil {
		return err
	}
	defer ss.close()
	res, err := ss.cs.ListTools(ctx, nil)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(res.Tools, func(t *mcp.Tool) bool { return t.Name == echoTool }) {
		return fmt.Errorf("tools/list has no %s tool", echoTool)
	}
	return nil
}
