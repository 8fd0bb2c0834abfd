package authn

import (
	"net/http"
	"sync"
	"sync/atomic"
)

// A Switch serves the HTTP pieces of the [Authenticator] it holds now, so
// that a reload replaces authentication settings (API keys on or off, the
// JWT issuer) under handlers that are already serving. The resource URL,
// and with it the metadata path, stays the first Authenticator's. It is
// safe for concurrent use.
type Switch struct {
	mu       sync.Mutex
	cur      *Authenticator
	handlers []*switched
	metadata atomic.Pointer[http.Handler]
}

// switched is one handler built by the Switch: next behind the current
// Authenticator's middleware.
type switched struct {
	next http.Handler
	cur  atomic.Pointer[http.Handler]
}

func (h *switched) ServeHTTP(w http.ResponseWriter, r *http.Request) { (*h.cur.Load()).ServeHTTP(w, r) }

// NewSwitch returns a Switch holding a.
func NewSwitch(a *Authenticator) *Switch {
	s := &Switch{cur: a}
	md := a.MetadataHandler()
	s.metadata.Store(&md)
	return s
}

// Replace puts a in force for every request from now on; requests already
// past authentication are not affected.
func (s *Switch) Replace(a *Authenticator) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur = a
	for _, h := range s.handlers {
		mw := a.Middleware(h.next)
		h.cur.Store(&mw)
	}
	md := a.MetadataHandler()
	s.metadata.Store(&md)
}

// Middleware is [Authenticator.Middleware] of the Authenticator in force.
func (s *Switch) Middleware(next http.Handler) http.Handler {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := &switched{next: next}
	mw := s.cur.Middleware(next)
	h.cur.Store(&mw)
	s.handlers = append(s.handlers, h)
	return h
}

// MetadataPath is the first Authenticator's [Authenticator.MetadataPath].
func (s *Switch) MetadataPath() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur.MetadataPath()
}

// MetadataHandler serves the metadata of the Authenticator in force.
func (s *Switch) MetadataHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*s.metadata.Load()).ServeHTTP(w, r) })
}
