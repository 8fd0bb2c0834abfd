package tcpproxy_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/tcpproxy"
)

// echoServer answers every line it reads with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip dials addr, sends a line and reads it back, all within a
// second.
func roundTrip(addr string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	if err := echo(c); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func echo(c net.Conn) error {
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return errors.New("echo answered " + line)
	}
	return nil
}

// isTimeout reports whether err is a deadline expiring: the proxy hung
// instead of failing the connection.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestCutAndRestore(t *testing.T) {
	p, err := tcpproxy.Start(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	live, err := roundTrip(p.Addr())
	if err != nil {
		t.Fatalf("through the proxy before a cut: %v", err)
	}
	defer live.Close()

	p.Cut()
	if err := echo(live); err == nil || isTimeout(err) {
		t.Errorf("a connection open across Cut answered %v; want it closed at once", err)
	}
	if c, err := roundTrip(p.Addr()); err == nil || isTimeout(err) {
		if c != nil {
			c.Close()
		}
		t.Errorf("a new connection while cut answered %v; want it refused at once", err)
	}

	p.Restore()
	c, err := roundTrip(p.Addr())
	if err != nil {
		t.Fatalf("through the proxy after Restore: %v", err)
	}
	c.Close()
}

func TestCloseEndsLinks(t *testing.T) {
	p, err := tcpproxy.Start(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := roundTrip(p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := p.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := echo(c); err == nil || isTimeout(err) {
		t.Errorf("a connection open across Close answered %v; want it closed", err)
	}
}

// readLine reads one line from r within d.
func readLine(c net.Conn, r *bufio.Reader, d time.Duration) (string, error) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	return r.ReadString('\n')
}

func TestStallAndRestore(t *testing.T) {
	p, err := tcpproxy.Start(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	live, err := roundTrip(p.Addr())
	if err != nil {
		t.Fatalf("through the proxy before a stall: %v", err)
	}
	defer live.Close()

	p.Stall()
	// Nothing arrives on a live connection, nor on one made while stalled;
	// neither is closed.
	liveR := bufio.NewReader(live)
	if _, err := io.WriteString(live, "held\n"); err != nil {
		t.Fatalf("write while stalled: %v", err)
	}
	if line, err := readLine(live, liveR, 200*time.Millisecond); !isTimeout(err) {
		t.Errorf("a live connection while stalled read %q, %v; want nothing", line, err)
	}
	fresh, err := net.DialTimeout("tcp", p.Addr(), time.Second)
	if err != nil {
		t.Fatalf("dial while stalled: %v", err)
	}
	defer fresh.Close()
	freshR := bufio.NewReader(fresh)
	if _, err := io.WriteString(fresh, "fresh\n"); err != nil {
		t.Fatalf("write while stalled: %v", err)
	}
	if line, err := readLine(fresh, freshR, 200*time.Millisecond); !isTimeout(err) {
		t.Errorf("a new connection while stalled read %q, %v; want nothing", line, err)
	}

	// Restoring delivers what was held.
	p.Restore()
	if line, err := readLine(live, liveR, 2*time.Second); err != nil || line != "held\n" {
		t.Errorf("the live connection after Restore read %q, %v; want the held line", line, err)
	}
	if line, err := readLine(fresh, freshR, 2*time.Second); err != nil || line != "fresh\n" {
		t.Errorf("the connection made while stalled read %q, %v after Restore; want its line", line, err)
	}
}
