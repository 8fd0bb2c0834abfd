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
