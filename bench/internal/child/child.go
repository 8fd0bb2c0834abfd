// Package child runs the processes a benchmark starts beside its own: a
// gateway or an upstream that must be a process of its own so that its
// CPU, memory and scheduler are not the benchmark's. Each runs in its own
// process group, so that an interrupt at the terminal reaches only the
// benchmark, which then stops its children in order; its stdin is a pipe
// the benchmark holds open, so that a child that reads it can end itself
// when the benchmark ends, even when it is killed. The package keeps each
// child's stderr for its errors and reads its peak resident set size, and
// builds the taskgate binary a benchmark runs. It must never signal a
// process it did not start.
package child

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/taskgate/taskgate/internal/syncbuf"
)

// ErrNoProc says that the platform has no /proc to read a process's
// memory from.
var ErrNoProc = errors.New("no /proc on this platform")

// BuildTaskgate compiles cmd/taskgate as shipped (pure Go) into dir and
// returns the binary's path, so that compiling is never measured.
func BuildTaskgate(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "taskgate")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/taskgate/taskgate/cmd/taskgate")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build taskgate (or pass -taskgate): %w\n%s", err, out)
	}
	return bin, nil
}

// Process is a child started by [Start] or [StartServer].
type Process struct {
	name string
	cmd  *exec.Cmd
	out  *syncbuf.Buffer
	done chan struct{} // closed once the process is waited for
	err  error         // Wait's result, once done is closed
}

// Start starts cmd, which name names in errors ("the gateway"), in its
// own process group with a stdin pipe held open until it ends. Its stderr
// is kept for errors, and also goes to cmd.Stderr when that is set.
func Start(cmd *exec.Cmd, name string) (*Process, error) {
	p := &Process{name: name, cmd: cmd, out: &syncbuf.Buffer{}, done: make(chan struct{})}
	if cmd.Stderr != nil {
		cmd.Stderr = io.MultiWriter(p.out, cmd.Stderr)
	} else {
		cmd.Stderr = p.out
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The write end is never written to; Wait closes it once the child
	// has exited, and the kernel closes it if this process dies first.
	if _, err := cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("give %s a stdin pipe: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// StartServer starts cmd as [Start] does and waits, up to within or until
// ctx ends, for the first line of its stdout: the address a server child
// prints once it listens. The rest of its stdout is discarded. On an
// error the child is stopped.
func StartServer(ctx context.Context, cmd *exec.Cmd, name string, within time.Duration) (*Process, string, error) {
	first := &firstLine{line: make(chan string, 1)}
	cmd.Stdout = first
	p, err := Start(cmd, name)
	if err != nil {
		return nil, "", err
	}
	timer := time.NewTimer(within)
	defer timer.Stop()
	var why error
	select {
	case line := <-first.line:
		if line != "" {
			return p, line, nil
		}
		why = fmt.Errorf("%s printed an empty first line", name)
	case <-p.done:
		why = fmt.Errorf("%s exited (%v) before it printed its address:\n%s", name, p.err, p.Output())
	case <-ctx.Done():
		why = fmt.Errorf("%s printed no address before the run ended: %w", name, ctx.Err())
	case <-timer.C:
		why = fmt.Errorf("%s printed no address within %s:\n%s", name, within, p.Output())
	}
	_ = p.Stop(10 * time.Second)
	return nil, "", why
}

// firstLine is a child's stdout: it hands on the first line, trimmed, and
// discards the rest.
type firstLine struct {
	mu   sync.Mutex
	buf  []byte
	sent bool
	line chan string
}

func (w *firstLine) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent {
		return len(b), nil
	}
	w.buf = append(w.buf, b...)
	if i := bytes.IndexByte(w.buf, '\n'); i >= 0 {
		w.line <- strings.TrimSpace(string(w.buf[:i]))
		w.sent, w.buf = true, nil
	}
	return len(b), nil
}

// Pid is the child's process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the child has exited and been waited for.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is how the child ended (exec.Cmd.Wait's result), once Done is
// closed; nil before.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Output is what the child has written to stderr so far.
func (p *Process) Output() string { return p.out.String() }

// Stop ends the child with SIGTERM and kills it when it has not ended
// within grace. It reports a child that did not end cleanly, with its
// stderr; a child that had already ended cleanly is no error.
func (p *Process) Stop(grace time.Duration) error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop %s: %w", p.name, err)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("%s ended with %w:\n%s", p.name, p.err, p.Output())
		}
		return nil
	case <-timer.C:
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within %s of SIGTERM and was killed:\n%s", p.name, grace, p.Output())
	}
}

// PeakRSS is the child's peak resident set size in bytes (VmHWM), as
// Linux reports it in /proc/PID/status, or ErrNoProc where there is no
// /proc. It must be read before the child is stopped.
func (p *Process) PeakRSS() (int64, error) {
	status, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid()) + "/status")
	if errors.Is(err, os.ErrNotExist) {
		if _, statErr := os.Stat("/proc/self/status"); errors.Is(statErr, os.ErrNotExist) {
			return 0, ErrNoProc
		}
		return 0, fmt.Errorf("read the /proc status of %s: %w (has it exited?)", p.name, err)
	}
	if err != nil {
		return 0, fmt.Errorf("read the /proc status of %s: %w", p.name, err)
	}
	rss, err := ParseVmHWM(string(status))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p.name, err)
	}
	return rss, nil
}

// ParseVmHWM reads the VmHWM line ("VmHWM:   12345 kB") of a
// /proc/PID/status file, in bytes.
func ParseVmHWM(status string) (int64, error) {
	for line := range strings.Lines(status) {
		rest, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("VmHWM reads %q, want a number of kB", strings.TrimSpace(rest))
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || kb < 0 {
			return 0, fmt.Errorf("VmHWM reads %q, want a number of kB", strings.TrimSpace(rest))
		}
		return kb * 1024, nil
	}
	return 0, errors.New("the process status has no VmHWM line")
}
