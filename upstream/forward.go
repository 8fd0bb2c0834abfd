package upstream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"
)

// ErrNotForwardable means Forward cannot carry a request to this upstream:
// it is a stdio server, is not connected, or speaks a protocol other than
// 2026-07-28. The caller takes the ordinary path instead.
var ErrNotForwardable = errors.New("upstream cannot take a forwarded request")

// CanForward reports whether Forward would try this upstream now.
func (u *Upstream) CanForward() bool {
	if u.httpClient == nil {
		return false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.conn != nil && statelessProtocol(u.conn.protocol)
}

// statelessProtocol reports whether v is a stateless protocol version this
// package knows. Versions are compared as names: a version it does not know
// is not assumed to work like the ones it does.
func statelessProtocol(v string) bool {
	switch v {
	case protocolExtension:
		return true
	}
	return false
}

// Forward sends one 2026-07-28 JSON-RPC request, as bytes, to an HTTP
// upstream whose session speaks 2026-07-28: stateless requests need
// no session, so a pass-through call can be relayed without decoding it
// into SDK structures and encoding it again. The request carries the
// configured headers (the gateway's own credential) and header; the
// response is the upstream's, for the caller to relay and close. The
// upstream's timeout bounds the whole exchange, body included.
func (u *Upstream) Forward(ctx context.Context, body []byte, header http.Header) (*http.Response, error) {
	if !u.CanForward() {
		return nil, ErrNotForwardable
	}
	ctx, cancel := u.bound(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.cfg.URL, bytes.NewReader(body))
	if err != nil {
		cancel()
		return nil, err
	}
	for k, vs := range header {
		req.Header[http.CanonicalHeaderKey(k)] = vs
	}
	for k, v := range u.cfg.Headers {
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := u.httpTransport.RoundTrip(req)
	if u.observe != nil {
		u.observe(u.cfg.Name, "tools/call", time.Since(start), err)
	}
	if err != nil {
		cancel()
		if ctx.Err() == nil {
			u.markSuspect()
		}
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}
