package upstream

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStdioPipeFrames: a stdio child's output is read as the go-sdk reads
// it, a JSON value and a line break at a time, and a message that breaks
// the framing or passes the bound ends it with an error that says so.
func TestStdioPipeFrames(t *testing.T) {
	tests := []struct {
		name    string
		output  string
		frames  []string
		errText string // "" for the end of the output
	}{
		{"messages a line each", `{"a":1}` + "\n" + `{"b":2}` + "\n", []string{`{"a":1}`, `{"b":2}`}, ""},
		{"CRLF line ends", `{"a":1}` + "\r\n" + `{"b":2}` + "\r\n", []string{`{"a":1}`, `{"b":2}`}, ""},
		{"a value over several lines", "{\n \"a\": 1\n}\n", []string{"{\n \"a\": 1\n}"}, ""},
		{"a batch", `[{"a":1},{"b":2}]` + "\n", []string{`[{"a":1},{"b":2}]`}, ""},
		{"two messages on one line", `{"a":1}{"b":2}` + "\n", nil, "more than one message on a line"},
		{"not JSON", "hello\n", nil, "invalid character"},
		{"a message past the bound", `{"a":"` + strings.Repeat("x", 100) + `"}` + "\n", nil, "longer than the largest one taken (64 bytes)"},
		{"a message at the bound", `{"a":"` + strings.Repeat("x", 56) + `"}` + "\n", []string{`{"a":"` + strings.Repeat("x", 56) + `"}`}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The child writes the output, then waits for its stdin to end.
			cmd := exec.Command("sh", "-c", `printf '%s' "$OUT"; cat >/dev/null`)
			cmd.Env = append(os.Environ(), "OUT="+tt.output)
			p, err := startStdio(cmd, 64)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			var got []string
			for {
				f, err := p.readFrame(ctx)
				if err != nil {
					if tt.errText == "" && !errors.Is(err, io.EOF) || tt.errText != "" && !strings.Contains(err.Error(), tt.errText) {
						t.Errorf("read ended with %v, want %q", err, tt.errText)
					}
					break
				}
				got = append(got, string(f))
				if tt.errText == "" && len(got) == len(tt.frames) {
					break
				}
			}
			if strings.Join(got, "|") != strings.Join(tt.frames, "|") {
				t.Errorf("frames %q, want %q", got, tt.frames)
			}
		})
	}
}

// TestStdioPipeWrites: every message reaches the child on a line of its
// own, and a message holding a line break is refused rather than split.
func TestStdioPipeWrites(t *testing.T) {
	cmd := exec.Command("cat")
	p, err := startStdio(cmd, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	ctx := t.Context()
	if err := p.writeFrame(ctx, []byte("{\"a\":\n1}")); err == nil {
		t.Error("a message with a line break was sent")
	}
	for _, m := range []string{`{"a":1}`, `{"b":2}`} {
		if err := p.writeFrame(ctx, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{`{"a":1}`, `{"b":2}`} {
		got, err := p.readFrame(ctx)
		if err != nil || string(got) != want {
			t.Fatalf("cat echoed %q, %v; want %q", got, err, want)
		}
	}
}

// TestStdioPipeCloseEndsAStubbornChild: closing the pipe closes the
// child's stdin; a child that stays is sent SIGTERM, and one that ignores
// that too is killed. Close returns only once the child is gone, and a
// Read waiting meanwhile ends.
func TestStdioPipeCloseEndsAStubbornChild(t *testing.T) {
	for _, tt := range []struct {
		name   string
		script string
	}{
		{"exits when its stdin ends", `cat >/dev/null`},
		{"exits on SIGTERM", `trap 'exit 0' TERM; while :; do sleep 0.05; done`},
		{"ignores SIGTERM", `trap '' TERM; while :; do sleep 0.05; done`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("sh", "-c", `echo '{"ready":true}'; `+tt.script)
			p, err := startStdio(cmd, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			p.terminate = 200 * time.Millisecond
			if f, err := p.readFrame(t.Context()); err != nil {
				t.Fatalf("first message: %q, %v", f, err)
			}
			read := make(chan error, 1)
			go func() {
				_, err := p.readFrame(t.Context())
				read <- err
			}()
			p.Close()
			if cmd.ProcessState == nil {
				t.Fatal("Close returned before the child was waited for")
			}
			// The process is gone: signalling it fails.
			if err := cmd.Process.Signal(syscall.Signal(0)); err == nil {
				t.Error("the child is still running after Close")
			}
			if err := <-read; err == nil {
				t.Error("a Read waiting during Close returned no error")
			}
			if again := p.Close(); again != p.closeErr {
				t.Errorf("a second Close returned %v, the first %v", again, p.closeErr)
			}
		})
	}
}
