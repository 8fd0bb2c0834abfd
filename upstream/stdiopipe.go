package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// stdioTerminate is how long closing a stdio child's pipe waits for it to
// exit after closing its stdin, and again after SIGTERM, before it is
// killed: the go-sdk's CommandTransport's default.
const stdioTerminate = 5 * time.Second

// errFrameTooLarge ends the output of a stdio child that sends a message
// longer than the bound (mcp.DefaultMaxLineLength, as the go-sdk's).
var errFrameTooLarge = errors.New("the stdio child sent a message longer than the largest one taken")

// stdioPipe speaks newline-delimited JSON-RPC with a stdio child over its
// stdin and stdout, as the go-sdk's CommandTransport does, and shuts it
// down the same way. It hands each message over as bytes: the go-sdk's
// own connection decodes every message it reads with two fresh 32 KB
// buffers, while a relayed call's answer needs no decoding at all.
type stdioPipe struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	terminate time.Duration

	frames chan frameOrErr
	closed chan struct{}

	writeMu sync.Mutex

	closeOnce sync.Once
	closeErr  error
}

type frameOrErr struct {
	frame json.RawMessage
	err   error
}

// startStdio starts cmd with pipes to its stdin and stdout; a message
// from it longer than maxFrame bytes ends its output.
func startStdio(cmd *exec.Cmd, maxFrame int) (*stdioPipe, error) {
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &stdioPipe{
		cmd: cmd, stdin: stdin, terminate: stdioTerminate,
		frames: make(chan frameOrErr), closed: make(chan struct{}),
	}
	// The reader is a goroutine of its own so that Close unblocks a Read
	// at once; it ends when the child's stdout does (Wait closes it).
	go p.readLoop(stdout, maxFrame)
	return p, nil
}

// readLoop reads the child's messages: JSON values, each followed by a
// line break, as the go-sdk reads them.
func (p *stdioPipe) readLoop(stdout io.Reader, maxFrame int) {
	limiter := &frameLimit{r: stdout, limit: maxFrame}
	dec := json.NewDecoder(limiter)
	for {
		var frame json.RawMessage
		err := dec.Decode(&frame)
		if err == nil {
			var next [1]byte
			if n, rerr := dec.Buffered().Read(next[:]); n > 0 {
				if next[0] != '\n' && next[0] != '\r' {
					err = errors.New("the stdio child sent more than one message on a line")
				}
			} else if rerr != nil && rerr != io.EOF {
				err = rerr
			}
		}
		if errors.Is(err, errFrameTooLarge) {
			err = fmt.Errorf("%w (%d bytes)", errFrameTooLarge, maxFrame)
		}
		select {
		case p.frames <- frameOrErr{frame, err}:
		case <-p.closed:
			return
		}
		if err != nil {
			return
		}
		limiter.count = 0
	}
}

// readFrame returns the child's next message as it sent it.
func (p *stdioPipe) readFrame(ctx context.Context) (json.RawMessage, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	default:
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case f := <-p.frames:
		return f.frame, f.err
	case <-p.closed:
		return nil, io.EOF
	}
}

// writeFrame sends one message, which must hold no line break.
func (p *stdioPipe) writeFrame(ctx context.Context, frame []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if bytes.ContainsAny(frame, "\r\n") {
		return errors.New("a message to a stdio child must be on one line")
	}
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	// One write per message, so that messages never interleave.
	buf := make([]byte, 0, len(frame)+1)
	buf = append(append(buf, frame...), '\n')
	_, err := p.stdin.Write(buf)
	return err
}

// Close closes the child's stdin and waits for it to exit; one that does
// not is sent SIGTERM, then killed. Every call returns the first's result.
func (p *stdioPipe) Close() error {
	p.closeOnce.Do(func() {
		p.closeErr = p.shutdown()
		close(p.closed)
	})
	return p.closeErr
}

func (p *stdioPipe) shutdown() error {
	if err := p.stdin.Close(); err != nil {
		return fmt.Errorf("closing the stdio child's stdin: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	wait := func() (error, bool) {
		t := time.NewTimer(p.terminate)
		defer t.Stop()
		select {
		case err := <-exited:
			return err, true
		case <-t.C:
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	if p.cmd.Process.Signal(syscall.SIGTERM) == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	if err := p.cmd.Process.Kill(); err != nil {
		return err
	}
	if err, ok := wait(); ok {
		return err
	}
	return errors.New("the stdio child did not exit after it was killed")
}

// frameLimit fails a read once count bytes have been read since the
// count was last reset: the bound on one message.
type frameLimit struct {
	r     io.Reader
	limit int
	count int
}

func (f *frameLimit) Read(b []byte) (int, error) {
	if f.count >= f.limit {
		return 0, errFrameTooLarge
	}
	if len(b) > f.limit-f.count {
		b = b[:f.limit-f.count]
	}
	n, err := f.r.Read(b)
	f.count += n
	return n, err
}
