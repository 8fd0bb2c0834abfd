package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// cookieName is the console's session cookie.
const cookieName = "taskgate_console"

// sessionLabel binds a sealed session to its use, so that nothing else the
// key ring seals can pass for one.
const sessionLabel = "taskgate console session"

// DefaultSessionLife is how long a sign-in lasts when Options.SessionLife
// is zero; a JWT's own expiry ends it sooner.
const DefaultSessionLife = 8 * time.Hour

// Sealer encrypts and authenticates a session under the daemon's keys. A
// *secrets.Ring is one; replicas that share its keys share sessions.
type Sealer interface {
	SealBytes(plaintext []byte, label string) string
	OpenBytes(sealed, label string) ([]byte, error)
}

// session is what the cookie holds, sealed: its ID (which signing out
// records in the ledger, so that a copy of the cookie is refused by every
// replica), the credential the approver signed in with (checked again on
// every request, so that a revoked key signs out), the form token that
// proves a POST came from a console page, and when the sign-in ends. The
// cookie is HttpOnly and sealed, so neither a page script nor whoever
// reads it at rest learns the credential.
type session struct {
	ID         string `json:"i"`
	Credential string `json:"c"`
	CSRF       string `json:"x"`
	Expires    int64  `json:"e"`
}

// errNoSession means the request carries no usable session cookie.
var errNoSession = errors.New("you are not signed in, or your sign-in has ended; sign in with an approver credential")

// newSession starts a session for credential until expires.
func newSession(credential string, expires time.Time) *session {
	return &session{ID: rand.Text(), Credential: credential, CSRF: rand.Text(), Expires: expires.Unix()}
}

// readSession opens r's session cookie, refusing one that does not open,
// has ended at now, or was signed out.
func (c *Console) readSession(r *http.Request, now time.Time) (*session, error) {
	ck, err := r.Cookie(cookieName)
	if err != nil || ck.Value == "" {
		return nil, errNoSession
	}
	raw, err := c.sealer.OpenBytes(ck.Value, sessionLabel)
	if err != nil {
		return nil, errNoSession
	}
	var s session
	if err := json.Unmarshal(raw, &s); err != nil || s.ID == "" || s.Credential == "" || s.CSRF == "" {
		return nil, errNoSession
	}
	if !now.Before(time.Unix(s.Expires, 0)) {
		return nil, errNoSession
	}
	ended, err := c.store.ConsoleSessionEnded(r.Context(), s.ID)
	if err != nil {
		return nil, fmt.Errorf("your sign-in could not be checked against the ledger (%w); try again shortly", err)
	}
	if ended {
		return nil, errNoSession
	}
	return &s, nil
}

// setSession writes s as the session cookie.
func (c *Console) setSession(w http.ResponseWriter, s *session) error {
	raw, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode the console session: %w", err)
	}
	http.SetCookie(w, c.cookie(c.sealer.SealBytes(raw, sessionLabel), time.Unix(s.Expires, 0)))
	return nil
}

// signOut ends s in the ledger, for every replica and every copy of its
// cookie, until the time it would have ended by itself.
func (c *Console) signOut(r *http.Request, s *session) error {
	if err := c.store.ConsoleSessionEnd(r.Context(), s.ID, time.Unix(s.Expires, 0), c.clock()); err != nil {
		return fmt.Errorf("the sign-out could not be recorded in the ledger (%w); you are still signed in: send it again", err)
	}
	return nil
}

// clearSession removes the session cookie.
func (c *Console) clearSession(w http.ResponseWriter) {
	ck := c.cookie("", time.Unix(0, 0))
	ck.MaxAge = -1
	http.SetCookie(w, ck)
}

func (c *Console) cookie(value string, expires time.Time) *http.Cookie {
	return &http.Cookie{
		Name: cookieName, Value: value, Path: Prefix, Expires: expires,
		HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteStrictMode,
	}
}

// csrfOK reports whether r's form carries s's token.
func csrfOK(r *http.Request, s *session) bool {
	got := r.PostFormValue(csrfField)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.CSRF)) == 1
}
