// Package tcpproxy is a TCP proxy for tests: it forwards every connection
// made to its loopback address to one target address, and the test can cut
// the link (as if the target went away: connections are reset), stall it
// (as if the network dropped everything: connections stay open and nothing
// arrives) and restore it, without touching the target itself. It exists
// so that a test can take a database away from a gateway and give it back;
// production code never imports it.
package tcpproxy

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// dialTimeout bounds the connection to the target.
const dialTimeout = 5 * time.Second

// Proxy forwards connections from its address to a target.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	cut     bool
	stalled chan struct{} // non-nil while stalled; closed by Restore
	closed  bool
	conns   map[net.Conn]struct{} // both ends of every live link
	wg      sync.WaitGroup
}

// Start listens on a free loopback port and forwards what arrives there to
// target (host:port).
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("tcpproxy: listen on loopback: %w", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the proxy's host:port; connect here instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every live connection and refuses new ones (they are accepted
// and reset at once) until Restore. Cutting a cut proxy does nothing.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		reset(c)
		delete(p.conns, c)
	}
}

// Stall stops forwarding without closing anything: bytes sent either way
// on a live connection are held, and new connections are accepted but not
// linked, until Restore. A client then waits as on a network that drops
// every packet.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled == nil {
		p.stalled = make(chan struct{})
	}
}

// Restore forwards again after Cut or Stall: held bytes are delivered and
// held connections linked, as when a network heals.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	if p.stalled != nil {
		close(p.stalled)
		p.stalled = nil
	}
}

// flowing waits while the proxy is stalled; it reports false when the proxy
// was cut or closed meanwhile.
func (p *Proxy) flowing() bool {
	p.mu.Lock()
	wait := p.stalled
	p.mu.Unlock()
	if wait != nil {
		<-wait
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.cut && !p.closed
}

// Close stops listening, closes every connection and waits until every
// goroutine of the proxy has ended.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	if p.stalled != nil {
		close(p.stalled)
		p.stalled = nil
	}
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient accept error (too many open files, say):
			// keep serving.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve links one accepted connection to the target until either side
// ends or the proxy is cut.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	if p.refusing() || !p.flowing() {
		reset(client)
		return
	}
	server, err := net.DialTimeout("tcp", p.target, dialTimeout)
	if err != nil {
		reset(client)
		return
	}
	if !p.track(client, server) {
		reset(client)
		reset(server)
		return
	}
	var once sync.Once
	end := func() {
		once.Do(func() {
			p.untrack(client, server)
			client.Close()
			server.Close()
		})
	}
	var copiers sync.WaitGroup
	copiers.Add(2)
	go func() {
		defer copiers.Done()
		p.copy(server, client)
		end()
	}()
	go func() {
		defer copiers.Done()
		p.copy(client, server)
		end()
	}()
	copiers.Wait()
}

// copy forwards from src to dst until either fails, holding what it read
// while the proxy is stalled.
func (p *Proxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.flowing() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) refusing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut || p.closed
}

// track registers a new link unless the proxy was cut or closed meanwhile.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut || p.closed {
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
	}
}

// reset closes c so that its peer sees a reset rather than an orderly end,
// as when a database host goes away.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}
