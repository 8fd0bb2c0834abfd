package claudecode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testwait"
)

// tui is an interactive Claude Code running in a tmux server of its own.
type tui struct {
	c      *client
	socket string
	n      int // sessions started
}

// interactive starts `claude` with args in a new tmux server; it is
// ended, with its server, when the test ends.
func (c *client) interactive(t *testing.T, ctx context.Context, args ...string) *tui {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("SKIPPED: no tmux on PATH; `make interop` installs it")
	}
	u := &tui{c: c, socket: filepath.Join(t.TempDir(), "tmux")}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the screen at the end:\n%s", u.screen())
		}
		procs := u.processes("-a")
		_ = u.tmux("kill-server")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		gone(t, ctx, procs)
	})
	// A session of its own keeps the server up while claude is killed and
	// started again.
	if err := u.tmux("new-session", "-d", "-s", "keep", "cat"); err != nil {
		t.Fatalf("start tmux: %v", err)
	}
	u.start(t, ctx, args...)
	return u
}

// start runs claude with args in a new tmux session, and waits until it
// takes a prompt. A plain timeout would leave it stopped on a terminal
// read; --foreground lets it end.
func (u *tui) start(t *testing.T, ctx context.Context, args ...string) {
	t.Helper()
	u.n++
	script := filepath.Join(filepath.Dir(u.socket), fmt.Sprintf("claude-%d", u.n))
	argv := []string{"exec", "timeout", "--foreground", "240", binaries.claude,
		"--mcp-config", u.c.mcpConfig, "--strict-mcp-config", "--allowedTools", "mcp__taskgate,TaskStop", "--permission-mode", "default"}
	argv = append(argv, args...)
	for i, a := range argv {
		argv[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	body := "#!/bin/sh\ncd '" + u.c.project + "' || exit 1\n" + strings.Join(argv, " ") + "\n"
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := u.tmux("new-session", "-d", "-x", "200", "-y", "50", "-s", fmt.Sprintf("claude-%d", u.n), script); err != nil {
		t.Fatalf("start claude in tmux: %v", err)
	}
	u.waitScreen(t, ctx, "the prompt", "❯")
}

// tmux runs a tmux command on the test's own server, in the client's
// environment.
func (u *tui) tmux(args ...string) error {
	cmd := exec.Command("tmux", append([]string{"-S", u.socket}, args...)...)
	cmd.Env = u.c.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// screen is what the terminal shows now.
func (u *tui) screen() string {
	cmd := exec.Command("tmux", "-S", u.socket, "capture-pane", "-p", "-t", fmt.Sprintf("claude-%d", u.n))
	cmd.Env = u.c.env
	out, err := cmd.Output()
	if err != nil {
		return fmt.Sprintf("(capture-pane: %v)", err)
	}
	return string(out)
}

// waitScreen waits until the screen shows s.
func (u *tui) waitScreen(t *testing.T, ctx context.Context, what, s string) {
	t.Helper()
	testwait.Until(t, ctx, what+" on the screen ("+s+")", func() (bool, error) {
		return strings.Contains(u.screen(), s), nil
	})
}

// prompt types text and sends it.
func (u *tui) prompt(t *testing.T, text string) {
	t.Helper()
	target := fmt.Sprintf("claude-%d", u.n)
	if err := u.tmux("send-keys", "-t", target, "-l", text); err != nil {
		t.Fatal(err)
	}
	if err := u.tmux("send-keys", "-t", target, "Enter"); err != nil {
		t.Fatal(err)
	}
}

// keys sends tmux key names (Escape, C-c, …).
func (u *tui) keys(t *testing.T, keys ...string) {
	t.Helper()
	if err := u.tmux(append([]string{"send-keys", "-t", fmt.Sprintf("claude-%d", u.n)}, keys...)...); err != nil {
		t.Fatal(err)
	}
}

// kill ends the running claude as closing its terminal would (SIGHUP),
// and waits until it has exited.
func (u *tui) kill(t *testing.T, ctx context.Context) {
	t.Helper()
	procs := u.processes("-t", fmt.Sprintf("claude-%d", u.n))
	if err := u.tmux("kill-session", "-t", fmt.Sprintf("claude-%d", u.n)); err != nil {
		t.Fatal(err)
	}
	gone(t, ctx, procs)
}

// processes are the processes running in the panes that list-panes with
// which selects (-a: all, -t SESSION: the session's), and their
// descendants.
func (u *tui) processes(which ...string) []int {
	cmd := exec.Command("tmux", append(append([]string{"-S", u.socket, "list-panes"}, which...), "-F", "#{pane_pid}")...)
	cmd.Env = u.c.env
	out, err := cmd.Output()
	if err != nil {
		return nil
	}
	parents := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(pid); ok {
			parents[pid] = ppid
		}
	}
	var procs []int
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			procs = append(procs, pid)
		}
	}
	// Descendants: every process whose chain of parents reaches one
	// already in the list.
	for grew := true; grew; {
		grew = false
		for pid, ppid := range parents {
			if slices.Contains(procs, ppid) && !slices.Contains(procs, pid) {
				procs = append(procs, pid)
				grew = true
			}
		}
	}
	return procs
}

// parentOf reads a process's parent from /proc.
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The fields after "pid (comm) " are: state, ppid, …
	rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
	f := strings.Fields(rest)
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// gone waits until none of procs runs any more (a zombie has exited).
func gone(t *testing.T, ctx context.Context, procs []int) {
	t.Helper()
	testwait.Until(t, ctx, "claude to exit", func() (bool, error) {
		for _, pid := range procs {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err == nil && !strings.Contains(string(b[strings.LastIndexByte(string(b), ')')+1:]), " Z ") {
				return false, fmt.Errorf("process %d still runs", pid)
			}
		}
		return true, nil
	})
}
