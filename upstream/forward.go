package upstream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"
)

// ErrNotForwardable means Forward cannot carry a request to this upstream:
// it is a stdio server, is not connected, or speaks a protocol other than
// 2026-07-28. The caller takes the ordinary path instead.
var ErrNotForwardable = errors.New("upstream cannot take a forwarded request")

// Kind is what an upstream's session is now, as far as relaying a call
// to it goes: the facts a caller choosing between Forward, RelayCall and
// the SDK path needs. It is a snapshot: the session may change before the
// call goes out, and then Forward and RelayCall refuse with
// ErrNotForwardable.
type Kind uint8

const (
	// KindDown: no session now (not yet connected, reconnecting, or a
	// stdio child whose output has ended). Neither Forward nor RelayCall
	// takes a call.
	KindDown Kind = iota
	// KindHTTPStateless: an HTTP upstream speaking 2026-07-28. Forward
	// takes its calls as they are; RelayCall tries a 2025-11-25 relay
	// session, which such an upstream may also hold.
	KindHTTPStateless
	// KindHTTPSessions: an HTTP upstream speaking a protocol of sessions
	// (2025-11-25, or a version this package does not know). RelayCall
	// relays in a 2025-11-25 relay session of the gateway's.
	KindHTTPSessions
	// KindStdioSessions: a stdio child speaking 2025-11-25 or older. Its
	// questions name no call: RelayCall takes only calls whose client
	// cannot be asked.
	KindStdioSessions
	// KindStdioStateless: a stdio child speaking 2026-07-28 or later. It
	// asks in a call's own answer (input_required), so RelayCall takes a
	// call whose client can be asked when the caller bridges those
	// answers (RelayedCall.Asked unset).
	KindStdioStateless
)

// Kind reports what the upstream's session is now.
func (u *Upstream) Kind() Kind {
	u.mu.Lock()
	defer u.mu.Unlock()
	return kindOf(u.conn, u.httpClient != nil)
}

// kindOf is the Kind of a session c (nil: none) of an HTTP upstream or a
// stdio one. HTTP versions are compared as names, as Forward needs them
// (statelessProtocol); a stdio child's as ordered strings, as relayStdio
// reads them.
func kindOf(c *conn, overHTTP bool) Kind {
	switch {
	case c == nil:
		return KindDown
	case overHTTP && statelessProtocol(c.protocol):
		return KindHTTPStateless
	case overHTTP:
		return KindHTTPSessions
	case c.tap == nil || c.over():
		return KindDown
	case c.protocol < protocolExtension:
		return KindStdioSessions
	}
	return KindStdioStateless
}

// String names k as this package's documentation does.
func (k Kind) String() string {
	switch k {
	case KindDown:
		return "down"
	case KindHTTPStateless:
		return "HTTP stateless"
	case KindHTTPSessions:
		return "HTTP sessions"
	case KindStdioSessions:
		return "stdio sessions"
	case KindStdioStateless:
		return "stdio stateless"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
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
	if u.Kind() != KindHTTPStateless {
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
