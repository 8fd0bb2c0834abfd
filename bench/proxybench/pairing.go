package main

import (
	"fmt"

	"github.com/taskgate/taskgate/bench/internal/command"
)

// clientKind is how a pass-through client connects, named by the protocol
// version it offers.
type clientKind string

const (
	// clientDefault is the go-sdk's default client, no version pinned: it
	// offers 2026-07-28 (server/discover) and falls back to 2025-11-25
	// (initialize) where the server does not serve 2026-07-28.
	clientDefault clientKind = versionExtension
	// clientLegacy pins 2025-11-25 in ClientSessionOptions: a session
	// client, as most agents are today.
	clientLegacy clientKind = versionLegacy
)

// upstreamKind is how the echo upstream is served.
type upstreamKind string

const (
	// upstreamSessions is Streamable HTTP with sessions, the go-sdk's
	// default and how most servers run today; it never negotiates
	// 2026-07-28.
	upstreamSessions upstreamKind = "sessions"
	// upstreamStateless is Streamable HTTP without sessions.
	upstreamStateless upstreamKind = "stateless"
	// upstreamStdio is a child process on stdin and stdout: one per
	// session when called directly, one the gateway supervises through
	// taskgate.
	upstreamStdio upstreamKind = "stdio"
)

// The two ways a pass-through measurement reaches the upstream.
const (
	pathDirect   = "direct"
	pathTaskgate = "taskgate"
	// pathTraced is taskgate exporting a span of every call (-traces).
	pathTraced = "taskgate+traces"
	// pathPeer is the peer proxy (-peer).
	pathPeer = "peer"
)

// pairing is one combination of client, elicitation and upstream that the
// pass-through measurement covers.
type pairing struct {
	client clientKind
	// elicitation makes the client declare the elicitation capability (an
	// ElicitationHandler set); the echo tool never asks.
	elicitation bool
	upstream    upstreamKind
}

func (p pairing) String() string {
	return fmt.Sprintf("client %s, elicitation %s, upstream %s", p.client, yesNo(p.elicitation), p.upstream)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// pairings lists every combination of the selected clients, upstreams and
// elicitation settings, clients outermost.
func pairings(clients []clientKind, upstreams []upstreamKind, elicitation []bool) []pairing {
	var out []pairing
	for _, c := range clients {
		for _, u := range upstreams {
			for _, e := range elicitation {
				out = append(out, pairing{client: c, elicitation: e, upstream: u})
			}
		}
	}
	return out
}

// expectedVersion is the protocol version a session of p negotiates on
// path: a pinned 2025-11-25 client always gets it; the default client gets
// 2026-07-28 from taskgate and from the sessionless upstreams, and
// 2025-11-25 from the upstream with sessions, because a stateful go-sdk
// handler never negotiates 2026-07-28. The peer's is whatever it answers
// (""): another implementation may offer only earlier versions.
func expectedVersion(p pairing, path string) string {
	switch {
	case path == pathPeer:
		return ""
	case p.client == clientLegacy:
		return versionLegacy
	case path == pathTaskgate, path == pathTraced:
		return versionExtension
	case p.upstream == upstreamSessions:
		return versionLegacy
	}
	return versionExtension
}

// parseClients reads -clients: a comma-separated list of the protocol
// versions clients offer, in order, without repeats.
func parseClients(s string) ([]clientKind, error) {
	return command.List(s, func(name string) (clientKind, error) {
		switch c := clientKind(name); c {
		case clientDefault, clientLegacy:
			return c, nil
		}
		return "", fmt.Errorf("-clients: unknown client %q; use 2026-07-28 (the go-sdk default client), 2025-11-25 (a pinned session client) or both, comma-separated", name)
	})
}

// parseUpstreams reads -upstreams: a comma-separated list of upstream
// kinds, in order, without repeats.
func parseUpstreams(s string) ([]upstreamKind, error) {
	return command.List(s, func(name string) (upstreamKind, error) {
		switch u := upstreamKind(name); u {
		case upstreamSessions, upstreamStateless, upstreamStdio:
			return u, nil
		}
		return "", fmt.Errorf("-upstreams: unknown upstream %q; use sessions, stateless, stdio or several, comma-separated", name)
	})
}

// parseElicitation reads -elicitation: which clients declare elicitation.
func parseElicitation(s string) ([]bool, error) {
	switch s {
	case "both":
		return []bool{false, true}, nil
	case "yes":
		return []bool{true}, nil
	case "no":
		return []bool{false}, nil
	}
	return nil, fmt.Errorf("-elicitation: %q is not one of both, yes or no", s)
}
