package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/sim/fixtures"
)

// TestDemoKeepCommandsRunAsPrinted runs `taskgate demo --keep DIR` and then
// every command it prints for the kept directory, as printed, with the
// built binary first on PATH.
func TestDemoKeepCommandsRunAsPrinted(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole demo")
	}
	dir := filepath.Join(t.TempDir(), "kept")
	out, err := exec.Command(gatewayBinary, "demo", "--keep", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("taskgate demo --keep: %v\n%s", err, out)
	}
	// The commands follow a line that ends "inspect them with" or "from the
	// kept directory:", one to a line.
	var commands []string
	listing := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		isCommand := strings.HasPrefix(line, "taskgate ") || strings.HasPrefix(line, "TASKGATE_SECRETS_KEYS=")
		switch {
		case strings.HasSuffix(line, "inspect them with") || strings.HasSuffix(line, "from the kept directory:"):
			listing = true
		case listing && isCommand:
			commands = append(commands, line)
		default:
			listing = false
		}
	}
	// ops show, receipt, packet, receipt verify (twice), verify.
	if len(commands) < 6 {
		t.Fatalf("the demo printed %d commands for its kept directory, want at least 6:\n%s", len(commands), out)
	}
	path := filepath.Dir(gatewayBinary) + string(os.PathListSeparator) + os.Getenv("PATH")
	for _, c := range commands {
		cmd := exec.Command("bash", "-c", c)
		cmd.Env = append(os.Environ(), "PATH="+path)
		got, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("the demo printed a command that fails as printed: %s: %v\n%s", c, err, got)
		}
		// The receipt is read as the gateway issued it, with no secrets
		// key: reading never signs.
		if strings.Contains(c, " receipt settlement-regression-842") {
			if strings.Contains(c, "TASKGATE_SECRETS_KEYS") || !strings.Contains(string(got), "### Issued") {
				t.Errorf("the demo's receipt command %s printed\n%s\nwant the issued receipt, read with no secrets key", c, got)
			}
		}
	}
}

// TestREADMEQuickstartRunsAsWritten runs the README's five-minute
// quickstart as written, in a copy of this checkout: its shell block as a
// script (which leaves the simulator and the gateway running), then
// the call the text describes with a go-sdk client, and every ./taskgate
// and curl command the text names, in order.
func TestREADMEQuickstartRunsAsWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("builds taskgate from a copy of the checkout")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	script, spans, err := quickstart(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"127.0.0.1:8931", "127.0.0.1:8940"} {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			t.Fatalf("the quickstart listens on %s, and something already does; stop it and run the test again", addr)
		}
	}
	work := t.TempDir()
	if err := copyCheckout(root, work); err != nil {
		t.Fatal(err)
	}

	// A file, not a pipe: the processes the script leaves running keep
	// writing to it after the script has ended.
	logFile, err := os.Create(filepath.Join(t.TempDir(), "quickstart.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	logged := func() string {
		b, _ := os.ReadFile(logFile.Name())
		return string(b)
	}
	sh := exec.Command("bash", "-e", "-c", script)
	sh.Dir = work
	sh.Stdout, sh.Stderr = logFile, logFile
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sh.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-sh.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-sh.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("the quickstart's output:\n%s", logged())
		}
	})
	testwait.Until(t, ctx, "the quickstart's gateway to be ready", func() (bool, error) {
		select {
		case err := <-done:
			done <- err
			if err != nil {
				t.Fatalf("the quickstart script failed: %v", err)
			}
		default:
		}
		// Its own gateway, not another process that took the port since.
		if !strings.Contains(logged(), "taskgate serving MCP at http://127.0.0.1:8931/mcp") {
			return false, errors.New("serve has not said it is serving")
		}
		resp, err := http.Get("http://127.0.0.1:8931/readyz")
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Errorf("/readyz: %s", resp.Status)
	})

	key, err := os.ReadFile(filepath.Join(work, "agent.key"))
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "readme", Version: "v1"}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   "http://127.0.0.1:8931/mcp",
		HTTPClient: &http.Client{Transport: fixtures.Bearer{Key: strings.TrimSpace(string(key))}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	res, err := session.CallTool(ctx, &mcp.CallToolParams{
		Name:      "hosted_test.run_suite",
		Arguments: map[string]any{"suite": "settlement", "operation_id": "first-run-1"},
	})
	if err != nil {
		t.Fatalf("the call the quickstart describes: %v", err)
	}
	if res.IsError {
		b, _ := json.Marshal(res)
		t.Fatalf("the call the quickstart describes failed: %s", b)
	}

	// The text's commands run in the same terminal as the script: with
	// what it exported.
	env := append(os.Environ(), "PATH="+work+string(os.PathListSeparator)+os.Getenv("PATH"))
	for _, m := range regexp.MustCompile(`(?m)^export ([A-Z_]+=\S*)`).FindAllStringSubmatch(script, -1) {
		env = append(env, m[1])
	}
	run := func(c string) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		cmd := exec.CommandContext(cctx, "bash", "-c", c)
		cmd.WaitDelay = 5 * time.Second
		cmd.Dir = work
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for i, c := range spans {
		if i == 0 && !strings.HasPrefix(c, "curl ") {
			t.Fatalf("the quickstart's first command after the script is %q, want the health check", c)
		}
		if strings.Contains(c, "receipt first-run-1") && strings.Contains(c, "--format md") {
			// The text promises the final charge, issued: wait for the reconciler.
			testwait.Until(t, ctx, "the receipt to show the final charge", func() (bool, error) {
				out, err := run(c)
				if err != nil {
					return false, fmt.Errorf("%s: %v\n%s", c, err, out)
				}
				return strings.Contains(out, "17.84") && strings.Contains(out, "complete") && strings.Contains(out, "### Issued"), errors.New(out)
			})
			continue
		}
		if out, err := run(c); err != nil {
			t.Errorf("the README's command fails as written: %s: %v\n%s", c, err, out)
		}
	}
	if len(spans) < 5 {
		t.Errorf("the quickstart names %d commands, want at least 5 (healthz, readyz, receipt, receipt json, verify): %q", len(spans), spans)
	}
}

// quickstart returns the README's quickstart section's first shell block
// and the ./taskgate and curl commands its text names in backquotes.
func quickstart(readme string) (script string, spans []string, err error) {
	_, section, ok := strings.Cut(readme, "\n## Five-minute quickstart\n")
	if !ok {
		return "", nil, errors.New("README.md has no section \"Five-minute quickstart\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, rest, ok := strings.Cut(section, "```sh\n")
	if !ok {
		return "", nil, errors.New("the quickstart has no sh block")
	}
	script, after, ok := strings.Cut(rest, "```")
	if !ok {
		return "", nil, errors.New("the quickstart's sh block does not end")
	}
	// The text up to the next block: the commands of "another terminal".
	text, _, _ := strings.Cut(after, "```")
	for _, m := range regexp.MustCompile("`((?:\\./taskgate|curl) [^`]+)`").FindAllStringSubmatch(text, -1) {
		spans = append(spans, m[1])
	}
	return script, spans, nil
}

// copyCheckout copies the module at root into dst: the files git knows,
// tracked or not ignored, or without git every file but .git and .cache.
func copyCheckout(root, dst string) error {
	var files []string
	if out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output(); err == nil {
		for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
			if f != "" {
				files = append(files, f)
			}
		}
	} else {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			if d.IsDir() && (rel == ".git" || rel == ".cache") {
				return filepath.SkipDir
			}
			if d.Type().IsRegular() {
				files = append(files, rel)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, f := range files {
		src := filepath.Join(root, f)
		info, err := os.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			continue
		}
		if err := copyFile(src, filepath.Join(dst, f), info.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string, perm fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
