package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/dburl"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
	"github.com/taskgate/taskgate/taskwire"
)

// limitsGateway is a `taskgate serve` process in front of the simulated
// provider, with its open files limited to nofile as a small host would
// have them, and the ledger it uses.
type limitsGateway struct {
	*gateway
	url string
	db  string
}

// limitsStart runs the harness configuration plus extra (a limits block,
// or nothing for the defaults) in a gateway whose open-file limit is
// nofile, and waits until it answers /healthz.
func limitsStart(t *testing.T, ctx context.Context, extra string, nofile int) *limitsGateway {
	t.Helper()
	return limitsStartJobs(t, ctx, extra, nofile, 0)
}

// limitsStartJobs is limitsStart with the provider's jobs lasting job
// (zero: its default).
func limitsStartJobs(t *testing.T, ctx context.Context, extra string, nofile int, job time.Duration) *limitsGateway {
	t.Helper()
	dir := t.TempDir()
	listen := freeAddr(t)
	db := "sqlite:" + filepath.Join(dir, "ledger.db")
	sim := providersim.New(&providersim.Options{JobDuration: job})
	t.Cleanup(func() { sim.Close() })
	simURL := serveHandler(t, sim.HTTPHandler())
	path := filepath.Join(dir, "taskgate.yaml")
	if err := os.WriteFile(path, []byte(fixtures.ConfigYAML(simURL, listen, db, fixtures.ConfigOptions{})+extra), 0o600); err != nil {
		t.Fatal(err)
	}
	// The shell lowers the limit (soft and hard, so that Go's runtime
	// cannot raise it again) and becomes the gateway.
	g := startCommand(t, exec.Command("/bin/sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" serve --config "$1" --log-level info`, nofile), gatewayBinary, path))
	lg := &limitsGateway{gateway: g, url: "http://" + listen, db: db}
	testwait.Until(t, ctx, "the gateway to answer /healthz", func() (bool, error) {
		code, err := getStatus(lg.url + "/healthz")
		return code == http.StatusOK, err
	})
	return lg
}

// limitsEstimate calls the provider's estimate_suite, a pass-through tool,
// in a new 2025-11-25 session of key.
func limitsEstimate(ctx context.Context, url, key string) error {
	client := mcp.NewClient(&mcp.Implementation{Name: "limits-test", Version: "v1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: fixtures.Bearer{Key: key, Next: &http.Transport{}}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hosted_test.estimate_suite", Arguments: map[string]any{"suite": "smoke"}})
	if err != nil {
		return fmt.Errorf("call estimate_suite: %w", err)
	}
	if res.IsError {
		return fmt.Errorf("estimate_suite answered an error: %s", fixtures.ResultText(res))
	}
	return nil
}

// limitsRSS reads the resident set size of process pid, in bytes.
func limitsRSS(t *testing.T, pid int) int64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read the gateway's status: %v", err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("read VmRSS %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in the gateway's status")
	return 0
}

// TestHostileSlowBodiesDoNotExhaustTheGateway holds 300 connections open
// to the unauthenticated sign-in page, each sending its body a byte at a
// time and dialling again when cut off, on a gateway allowed 256 open
// files: /healthz still answers, another tenant still calls a tool, and
// the gateway never runs out of file descriptors.
func TestHostileSlowBodiesDoNotExhaustTheGateway(t *testing.T) {
	ctx := testCtx(t, 3*time.Minute)
	gw := limitsStart(t, ctx, "limits:\n  read_header_timeout: 1s\n  read_timeout: 2s\n  max_connections: 100\n", 256)
	key := apiKey(t, ctx, gw.db, "bystander")
	host := strings.TrimPrefix(gw.url, "http://")

	const attackers = 300
	attack, stop := context.WithTimeout(ctx, 2*time.Minute)
	defer stop()
	var dialled, cut atomic.Int64
	var wg sync.WaitGroup
	for range attackers {
		wg.Go(func() {
			// Each attacker dials at most 100 times and stops with the test.
			for range 100 {
				if attack.Err() != nil {
					return
				}
				conn, err := (&net.Dialer{}).DialContext(attack, "tcp", host)
				if err != nil {
					continue
				}
				dialled.Add(1)
				fmt.Fprintf(conn, "POST /console/sign-in HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100000\r\n\r\n", host)
				tick := time.NewTicker(200 * time.Millisecond)
				for attack.Err() == nil {
					if _, err := conn.Write([]byte("c")); err != nil {
						cut.Add(1)
						break
					}
					select {
					case <-attack.Done():
					case <-tick.C:
					}
				}
				tick.Stop()
				conn.Close()
			}
		})
	}
	defer wg.Wait()
	defer stop()
	testwait.Until(t, ctx, "every attacker to hold a connection", func() (bool, error) {
		return dialled.Load() >= attackers, fmt.Errorf("%d connected", dialled.Load())
	})

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	// The checks wait as long as the attack lasts: a gateway that answers
	// only once it ends has not withstood it.
	testwait.Until(t, attack, "/healthz to answer during the attack", func() (bool, error) {
		resp, err := client.Get(gw.url + "/healthz")
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Errorf("status %d", resp.StatusCode)
	})
	testwait.Until(t, attack, "another tenant's tool call to succeed during the attack", func() (bool, error) {
		cctx, cancel := context.WithTimeout(attack, 30*time.Second)
		defer cancel()
		err := limitsEstimate(cctx, gw.url, key)
		return err == nil, err
	})
	if out := gw.out.String(); strings.Contains(out, "too many open files") {
		t.Errorf("the gateway ran out of file descriptors during the attack:\n%s", out)
	}
	if cut.Load() == 0 {
		t.Errorf("no slow body was cut off (%d connections)", dialled.Load())
	}
}

// limitsOpenSession posts an initialize as a 2025-11-25 client with key
// and returns the response.
func limitsOpenSession(ctx context.Context, client *http.Client, url, key string) (*http.Response, error) {
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"flood","version":"v1"}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/mcp", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	return client.Do(req)
}

// limitsRefusal reads a limit's JSON-RPC refusal from an answer's body.
func limitsRefusal(body []byte) (reason string, retryAfter int, err error) {
	var msg struct {
		Error *struct {
			Code int64 `json:"code"`
			Data struct {
				Reason     string `json:"reason"`
				RetryAfter int    `json:"retry_after"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &msg); err != nil || msg.Error == nil {
		return "", 0, fmt.Errorf("no JSON-RPC error in %q", body)
	}
	return msg.Error.Data.Reason, msg.Error.Data.RetryAfter, nil
}

// TestHostileSessionFloodIsRefusedPastTheCap has one agent key open 10,000
// sessions under the default limits: past sessions_per_tenant (100) each
// is refused with 429, Retry-After and data.reason session_limit_reached,
// the gateway stays under 150 MB resident, and another tenant still opens
// a session and calls a tool.
func TestHostileSessionFloodIsRefusedPastTheCap(t *testing.T) {
	ctx := testCtx(t, 4*time.Minute)
	gw := limitsStart(t, ctx, "", 4096)
	flooder := apiKey(t, ctx, gw.db, "flooder")
	bystander := apiKey(t, ctx, gw.db, "bystander")

	const opens, workers = 10000, 16
	var opened, refused atomic.Int64
	var firstBad atomic.Value
	next := make(chan struct{})
	go func() {
		defer close(next)
		for range opens {
			select {
			case next <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			for range next {
				resp, err := limitsOpenSession(ctx, client, gw.url, flooder)
				if err != nil {
					firstBad.CompareAndSwap(nil, err.Error())
					continue
				}
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
				resp.Body.Close()
				switch {
				case resp.StatusCode == http.StatusOK && resp.Header.Get("Mcp-Session-Id") != "":
					opened.Add(1)
				case resp.StatusCode == http.StatusTooManyRequests:
					reason, after, err := limitsRefusal(body)
					if err != nil || reason != "session_limit_reached" || after < 1 || resp.Header.Get("Retry-After") == "" {
						firstBad.CompareAndSwap(nil, fmt.Sprintf("refusal %q (reason %q, retry_after %d, Retry-After %q, %v)", body, reason, after, resp.Header.Get("Retry-After"), err))
					}
					refused.Add(1)
				default:
					firstBad.CompareAndSwap(nil, fmt.Sprintf("status %d: %s", resp.StatusCode, bytes.TrimSpace(body)))
				}
			}
		})
	}
	wg.Wait()
	if bad := firstBad.Load(); bad != nil {
		t.Errorf("an open was neither a session nor a refusal naming the limit: %v", bad)
	}
	if opened.Load() != 100 || refused.Load() != opens-100 {
		t.Errorf("one key opened %d sessions and was refused %d times, want 100 and %d", opened.Load(), refused.Load(), opens-100)
	}
	if rss := limitsRSS(t, gw.cmd.Process.Pid); rss >= 150<<20 {
		t.Errorf("the gateway holds %d MB resident after the flood, want under 150 MB", rss>>20)
	}
	if err := limitsEstimate(ctx, gw.url, bystander); err != nil {
		t.Errorf("another tenant after the flood: %v", err)
	}
}

// TestHostileCallFloodIsRefusedPerTenant has one tenant send 40 tool calls
// at once past its limits of 2 calls in progress and 5 a second: calls
// past them are refused with -32029, data.reason rate_limited or
// concurrency_limit_reached and data.retry_after, while another tenant's
// call goes through.
func TestHostileCallFloodIsRefusedPerTenant(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	gw := limitsStart(t, ctx, "limits:\n  calls_per_tenant: 2\n  call_rate: 5\n  call_burst: 5\n", 4096)
	flooder := apiKey(t, ctx, gw.db, "flooder")
	bystander := apiKey(t, ctx, gw.db, "bystander")
	cs := dial(t, ctx, gw.url+"/mcp", flooder, func() {})

	reasons := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hosted_test.estimate_suite", Arguments: map[string]any{"suite": "smoke"}})
			reason := limitsReason(err)
			mu.Lock()
			reasons[reason]++
			mu.Unlock()
		})
	}
	wg.Wait()
	refused := reasons["-32029 rate_limited"] + reasons["-32029 concurrency_limit_reached"]
	if refused == 0 || reasons["ok"] == 0 || refused+reasons["ok"] != 40 {
		t.Errorf("40 calls at once past the tenant's limits: %v; want some answered and the rest refused naming the limit", reasons)
	}
	if err := limitsEstimate(ctx, gw.url, bystander); err != nil {
		t.Errorf("another tenant during the flood: %v", err)
	}
}

// limitsReason names how a call ended: "ok", "CODE REASON" for a JSON-RPC
// error (with " without retry_after" for a limit's refusal that lacks
// one), or the error.
func limitsReason(err error) string {
	var e *jsonrpc.Error
	if err == nil {
		return "ok"
	}
	if !errors.As(err, &e) {
		return err.Error()
	}
	var data struct {
		Reason     string `json:"reason"`
		RetryAfter int    `json:"retry_after"`
	}
	_ = json.Unmarshal(e.Data, &data)
	out := fmt.Sprintf("%d %s", e.Code, data.Reason)
	if e.Code == -32029 && data.RetryAfter < 1 {
		out += " without retry_after"
	}
	return out
}

// limitsApproverKey creates an approver key of tenant in the ledger db.
func limitsApproverKey(t *testing.T, ctx context.Context, db, tenant string) string {
	t.Helper()
	s, err := dburl.Open(ctx, db, &dburl.Options{Migrate: true})
	if err != nil {
		t.Fatalf("open the ledger: %v", err)
	}
	defer s.Close()
	key, _, err := authn.NewAPIKeyWithRole(ctx, s, tenant, "limits test approver", ledger.RoleApprover)
	if err != nil {
		t.Fatalf("create an approver key: %v", err)
	}
	return key
}

// limitsConsole sends a console request with cookie (if any) and form (a
// POST when not nil), without following redirects.
func limitsConsole(ctx context.Context, base, path string, cookie *http.Cookie, form url.Values) (*http.Response, string, error) {
	method, body := http.MethodGet, io.Reader(nil)
	if form != nil {
		method, body = http.MethodPost, strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
	if err != nil {
		return nil, "", err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	client := &http.Client{Transport: &http.Transport{}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	return resp, string(page), err
}

// TestHostileSignOutEndsTheSession signs an approver in to the console,
// keeps a copy of the session cookie and signs out: the copy no longer
// opens a page nor sends a form. Sign-in attempts from one address past
// sign_ins_per_minute are refused with 429 and Retry-After.
func TestHostileSignOutEndsTheSession(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	gw := limitsStart(t, ctx, "", 4096)
	approver := limitsApproverKey(t, ctx, gw.db, "acme")

	resp, _, err := limitsConsole(ctx, gw.url, "/console/sign-in", nil, url.Values{"credential": {approver}})
	if err != nil {
		t.Fatal(err)
	}
	var saved *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "taskgate_console" && c.Value != "" {
			saved = c
		}
	}
	if resp.StatusCode != http.StatusSeeOther || saved == nil {
		t.Fatalf("sign-in answered %d with cookies %v, want 303 and a session cookie", resp.StatusCode, resp.Cookies())
	}
	resp, page, err := limitsConsole(ctx, gw.url, "/console/inbox", saved, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the inbox while signed in: %v %v", resp.StatusCode, err)
	}
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on the inbox page:\n%s", page)
	}
	csrf := html.UnescapeString(m[1])
	resp, _, err = limitsConsole(ctx, gw.url, "/console/sign-out", saved, url.Values{"csrf": {csrf}})
	if err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-out: %v %v, want 303", resp.StatusCode, err)
	}

	resp, _, err = limitsConsole(ctx, gw.url, "/console/inbox", saved, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/sign-in" {
		t.Errorf("the cookie saved before sign-out opened the inbox afterwards: %d (Location %q), want 303 to /console/sign-in", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, _, err = limitsConsole(ctx, gw.url, "/console/requests/1/decline", saved, url.Values{"csrf": {csrf}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the cookie saved before sign-out sent a decline afterwards: %d, want 401 (the sign-in page)", resp.StatusCode)
	}

	// One sign-in was spent above; the default allows 10 a minute.
	var codes []int
	for range 10 {
		resp, _, err := limitsConsole(ctx, gw.url, "/console/sign-in", nil, url.Values{"credential": {"tg_wrong"}})
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, resp.StatusCode)
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			t.Errorf("a refused sign-in has no Retry-After")
		}
	}
	want := []int{401, 401, 401, 401, 401, 401, 401, 401, 401, 429}
	if !slices.Equal(codes, want) {
		t.Errorf("ten more sign-ins from one address answered %v, want %v", codes, want)
	}
}

// TestHostileLimitsKeepLongAnswers checks that the read and write
// timeouts, short here, cut no answer that is slow to come: a 2025-11-25
// client without tasks waits for a consequential call whose job lasts
// several times both, on a session whose standalone stream stays open
// meanwhile, and gets its result.
func TestHostileLimitsKeepLongAnswers(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	gw := limitsStartJobs(t, ctx, "limits:\n  read_header_timeout: 500ms\n  read_timeout: 500ms\n  write_timeout: 500ms\n", 4096, 3*time.Second)
	key := apiKey(t, ctx, gw.db, "patient")
	cs := dial(t, ctx, gw.url+"/mcp", key, func() {})
	res, err := cs.CallTool(ctx, fixtures.RunSuiteCall("long-answer-1", nil))
	if err != nil {
		t.Fatalf("a call answered after 3 s with 500ms timeouts: %v", err)
	}
	if res.IsError || fixtures.ResultJob(res) == "" {
		t.Fatalf("a call answered after 3 s with 500ms timeouts: %s", fixtures.ResultText(res))
	}
	if _, err := toolNames(ctx, cs); err != nil {
		t.Errorf("the session after the long call: %v", err)
	}
}

// TestHostileRefusalsArePaced has one tenant call from 8 goroutines back
// to back for three seconds, ignoring every refusal's retry_after, past
// its limits of 2 calls in progress and 1 a second: once it has been
// refused more than 2 times in a second, each refusal is held for
// refusal_delay (2s) before it is answered, so it manages a few dozen
// calls instead of thousands, and /metrics counts the paced refusals.
func TestHostileRefusalsArePaced(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	gw := limitsStart(t, ctx, "limits:\n  calls_per_tenant: 2\n  call_rate: 1\n  call_burst: 1\n  refusal_delay: 2s\n", 4096)
	flooder := apiKey(t, ctx, gw.db, "flooder")
	bystander := apiKey(t, ctx, gw.db, "bystander")
	cs := dial(t, ctx, gw.url+"/mcp", flooder, func() {})

	window, stop := context.WithTimeout(ctx, 3*time.Second)
	defer stop()
	var calls atomic.Int64
	var mu sync.Mutex
	reasons := map[string]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for window.Err() == nil {
				_, err := cs.CallTool(window, &mcp.CallToolParams{Name: "hosted_test.estimate_suite", Arguments: map[string]any{"suite": "smoke"}})
				if window.Err() != nil {
					return
				}
				calls.Add(1)
				mu.Lock()
				reasons[limitsReason(err)]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// Unpaced, a refusal is answered within a millisecond or so: 8
	// goroutines manage thousands in three seconds. Paced, about 2 a
	// second are answered at once and the rest 2s later: a few dozen.
	if n := calls.Load(); n == 0 || n > 100 {
		t.Errorf("a tenant that ignores retry_after made %d calls in 3s (%v); want its refusals paced to a few dozen", n, reasons)
	}
	if reasons["-32029 rate_limited"]+reasons["-32029 concurrency_limit_reached"] == 0 {
		t.Errorf("no call was refused naming the limit: %v", reasons)
	}
	resp, err := http.Get(gw.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`(?m)^taskgate_limit_paced_refusals_total [1-9]`).Match(metrics) || !strings.Contains(string(metrics), `taskgate_limit{limit="refusal_delay_seconds"} 2`) {
		t.Errorf("/metrics does not show the paced refusals and refusal_delay:\n%s", grepLines(string(metrics), "taskgate_limit"))
	}
	if err := limitsEstimate(ctx, gw.url, bystander); err != nil {
		t.Errorf("another tenant during the flood: %v", err)
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, strings.TrimRight(line, "\n"))
		}
	}
	return strings.Join(out, "\n")
}

// TestJobsWaitTheirTurn runs a gateway whose tenants may each have one
// worker job running, with provider jobs that run for a while: four
// operations of one tenant and one of another all complete, since a job
// gives its tenant's place back while its remote job runs.
func TestJobsWaitTheirTurn(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	gw := limitsStartJobs(t, ctx, "limits:\n  jobs_per_tenant: 1\n", 4096, 500*time.Millisecond)
	type started struct {
		cs   *mcp.ClientSession
		task *taskwire.Task
	}
	var tasks []started
	for i, tenant := range []string{"busy", "busy", "busy", "busy", "other"} {
		cs, err := fixtures.Dial(ctx, gw.url+"/mcp", apiKey(t, ctx, gw.db, tenant), fixtures.EraExtension, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		task, res, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall(fmt.Sprintf("turn-%d", i), nil), nil)
		if err != nil || task == nil {
			t.Fatalf("call %d of %s: task %v, %v %v", i, tenant, task, fixtures.ResultText(res), err)
		}
		tasks = append(tasks, started{cs, task})
	}
	for i, s := range tasks {
		got, err := taskwire.AwaitTask(ctx, s.cs, s.task.ID, 50*time.Millisecond)
		if err != nil {
			t.Fatalf("task %d: %v", i, err)
		}
		if got.Status != taskwire.StatusCompleted {
			t.Errorf("task %d ended %s (%s), want completed", i, got.Status, got.StatusMessage)
		}
	}
}
