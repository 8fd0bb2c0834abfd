package mcpserver

import "github.com/taskgate/taskgate/upstream"

// A request to the MCP endpoint takes one path: a pass-through tools/call
// is relayed as bytes where that answers as the SDK's handler would, and
// everything else goes to that handler. choosePath decides which, from
// facts about the request, its call and the call's upstream;
// forwardPassThrough learns the facts the choice asks for and follows the
// plan it gets.

// passThroughPath is one way of serving a request to the MCP endpoint.
type passThroughPath uint8

const (
	// pathSDK: the go-sdk's handler decodes the request and answers it;
	// a pass-through tool's call reaches passThrough. It serves anything,
	// above all what is unusual, and ends every plan.
	pathSDK passThroughPath = iota
	// pathForward: a 2026-07-28 call forwarded as bytes to a stateless
	// HTTP upstream (upstream.Forward).
	pathForward
	// pathResumeParked: a 2026-07-28 call naming, by its requestState, a
	// call parked on its client's answer in a relay session; the answer
	// goes there and the rest of that call is relayed (resumeParked).
	pathResumeParked
	// pathRelaySession: a 2026-07-28 call, of a client that cannot be
	// asked, in the upstream's shared 2025-11-25 relay session
	// (relayStateless, upstream.RelayCall).
	pathRelaySession
	// pathRelayParking: a 2026-07-28 call of a client that declared what
	// it can be asked, in a relay session declaring that; the upstream's
	// questions end the response as input_required and the call is
	// parked for the client's next call (relayStateless, bridge.go).
	pathRelayParking
	// pathStdioMultiplex: a 2026-07-28 call, of a client that cannot be
	// asked, on the stdio child's one connection (upstream.RelayCall).
	pathStdioMultiplex
	// pathStdioAsking: a 2026-07-28 call of a client that can be asked,
	// on the connection of a 2026-07-28 stdio child, whose questions come
	// as input_required in the call's own answer and reach the client as
	// they are.
	pathStdioAsking
	// pathLegacyRelaySession: a call of a 2025-11-25 session in one of
	// the upstream's relay sessions; the upstream's questions on its
	// stream reach a client that can be asked (relayLegacy).
	pathLegacyRelaySession
	// pathLegacyStdio: a call of a 2025-11-25 session, of a client that
	// cannot be asked, on the stdio child's connection.
	pathLegacyStdio
	// pathLegacyForward: a call of a 2025-11-25 session forwarded to a
	// stateless HTTP upstream as the 2026-07-28 request it is there, with
	// the session's client information.
	pathLegacyForward
	// pathLegacyForwardAsking: pathLegacyForward for a client that can be
	// asked: the upstream's input_required answers become questions on
	// the call's stream, and the call is sent again with the answers
	// (forwardAsking).
	pathLegacyForwardAsking
	// pathLegacyStdioAsking: as pathLegacyForwardAsking, to a 2026-07-28
	// stdio child, on its connection.
	pathLegacyStdioAsking
	// pathLegacyAnswer: a 2025-11-25 client's answer to a question that
	// a relayed call asked it; it goes where the question came from.
	pathLegacyAnswer
	// pathLegacyCancel: a 2025-11-25 notifications/cancelled, which ends
	// the relayed call it names before the SDK's handler hears it too.
	pathLegacyCancel
	// pathLegacyCancellable: a call of a 2025-11-25 session that the SDK's
	// handler may take long to answer, served there so that the client's
	// notifications/cancelled leaves it unanswered (serveCancellable).
	pathLegacyCancellable
)

// relays: p relays a pass-through call as bytes (rather than serving a
// message that is no call, or handing the request to the SDK's handler).
func (p passThroughPath) relays() bool {
	switch p {
	case pathForward, pathResumeParked, pathRelaySession, pathRelayParking, pathStdioMultiplex, pathStdioAsking,
		pathLegacyRelaySession, pathLegacyStdio, pathLegacyForward, pathLegacyForwardAsking, pathLegacyStdioAsking:
		return true
	}
	return false
}

// String names p for test failures and logs.
func (p passThroughPath) String() string {
	if int(p) < len(pathNames) {
		return pathNames[p]
	}
	return "path?"
}

var pathNames = [...]string{
	pathSDK: "sdk", pathForward: "forward", pathResumeParked: "resume-parked",
	pathRelaySession: "relay-session", pathRelayParking: "relay-parking",
	pathStdioMultiplex: "stdio-multiplex", pathStdioAsking: "stdio-asking",
	pathLegacyRelaySession: "legacy-relay-session", pathLegacyStdio: "legacy-stdio",
	pathLegacyForward: "legacy-forward", pathLegacyForwardAsking: "legacy-forward-asking",
	pathLegacyStdioAsking: "legacy-stdio-asking", pathLegacyAnswer: "legacy-answer",
	pathLegacyCancel: "legacy-cancel", pathLegacyCancellable: "legacy-cancellable",
}

// pathPlan is the paths a request tries, in order. Each path but pathSDK
// may find, having written nothing, that it cannot serve the request
// after all: its upstream went away or refuses a relay session (learned
// only by asking it), the parked call expired meanwhile, the request ID
// is in flight already, a question was answered already. The next path
// then serves it; pathLegacyCancel always leaves the request to it, once
// it has ended the call the notification names. A plan ends at its first
// pathSDK, the zero value.
type pathPlan [3]passThroughPath

// pathFact is a fact about a request that costs something to learn:
// choosePath asks for one only where its choice depends on it, so that a
// request learns only what its path needs (above all, a request that
// takes the SDK's path is not read twice).
type pathFact uint16

const (
	// factHost: Rebound.
	factHost pathFact = 1 << iota
	// factSession: SessionKnown.
	factSession
	// factAccepts: JSONAndStream.
	factAccepts
	// factCall: Shape and Upstream; the body is read.
	factCall
	// factMessage: Message.
	factMessage
	// factSessionRelay: SessionRelayable.
	factSessionRelay
	// factParked: Parked.
	factParked
	// factLogLevel: BadLogLevel.
	factLogLevel
	// factAskable: Askable.
	factAskable
)

// callShape is what a request's body is, as relaying tells calls apart.
type callShape uint8

const (
	// shapeOther: not a tools/call relaying can take as it is: another
	// method, a malformed request, a name unlike Mcp-Name, params.task,
	// numbers the SDK cannot decode, an unknown tool or upstream, a
	// tenant the upstream has no credential for. The SDK's path answers.
	shapeOther callShape = iota
	// shapeConsequential: a call of a consequential tool, which the task
	// layer and the host take.
	shapeConsequential
	// shapeHeaderArguments: a pass-through tool whose arguments travel in
	// HTTP headers, which only the SDK's path's client sets.
	shapeHeaderArguments
	// shapePassThrough: a pass-through tool's call that can be relayed
	// as bytes.
	shapePassThrough
)

// messageKind is what a 2025-11-25 session's request that is no
// relayable call is, for relayLegacy.
type messageKind uint8

const (
	messageOther messageKind = iota
	// messageAnswer: a JSON-RPC response, the client's answer to a
	// request sent to it.
	messageAnswer
	// messageCancelled: notifications/cancelled naming a request.
	messageCancelled
	// messageWaiting: a tools/call or tasks/result the SDK's handler may
	// take long to answer.
	messageWaiting
)

// requestEra is the protocol era a request's headers put it in, as the
// relays tell them apart.
type requestEra uint8

const (
	// eraOther: no version, one the gateway does not know, or a
	// 2025-11-25 request outside a session (an initialize).
	eraOther requestEra = iota
	// eraSession: a request of a 2025-11-25 session.
	eraSession
	// eraStateless: a 2026-07-28 request.
	eraStateless
)

// pathFacts are the facts the choice of a request's path is made from.
// The first four come from the request line and headers and are always
// known; the others are known where Known has their fact.
type pathFacts struct {
	// Known holds the facts learned.
	Known pathFact
	// Post: the request is a POST.
	Post bool
	// Version is the Mcp-Protocol-Version header.
	Version string
	// ToolsCall: the Mcp-Method header names tools/call.
	ToolsCall bool
	// Session: an Mcp-Session-Id header is given.
	Session bool

	// Rebound: the request reached a loopback listener under a Host that
	// is not loopback (reboundHost), which the SDK's handler refuses.
	Rebound bool
	// SessionKnown: the SDK's handler opened the session the request
	// names (legacySessions.known).
	SessionKnown bool
	// JSONAndStream: a JSON body, and both response kinds acceptable
	// (acceptsJSONAndStream); the SDK's handler refuses anything else.
	JSONAndStream bool
	// Shape is what the body is.
	Shape callShape
	// Upstream is what the call's upstream session is now, for a
	// shapePassThrough call.
	Upstream upstream.Kind
	// Message is what a 2025-11-25 request that is no relayable call is.
	Message messageKind
	// SessionRelayable: the 2025-11-25 session may have the call
	// relayed: the caller owns it, and the SDK's idle timer, which a
	// relayed call does not restart, cannot run out before the call ends
	// (legacySessions.relayable).
	SessionRelayable bool
	// Parked: the 2026-07-28 call's requestState names a call parked for
	// its caller, tool and upstream.
	Parked bool
	// BadLogLevel: the 2026-07-28 call's _meta names a log level that is
	// no string; the SDK's path refuses it.
	BadLogLevel bool
	// Askable: the client declared what it can be asked (elicitation or
	// sampling): in the call's _meta (2026-07-28) or when it opened its
	// session (2025-11-25).
	Askable bool
}

// era is the era f's headers put the request in.
func (f pathFacts) era() requestEra {
	switch {
	case f.Version == legacyRelayVersion && f.Session:
		return eraSession
	case statelessVersion(f.Version):
		return eraStateless
	}
	return eraOther
}

// lacks returns those of want that f does not know yet.
func (f pathFacts) lacks(want pathFact) pathFact { return want &^ f.Known }

// choosePath returns the paths a request with facts f takes, or, when the
// choice depends on facts f does not know yet, those facts, to be learned
// before choosing again.
func choosePath(f pathFacts) (pathPlan, pathFact) {
	if !f.Post {
		return pathPlan{}, 0
	}
	switch f.era() {
	case eraSession:
		return chooseSessionPath(f)
	case eraStateless:
		return chooseStatelessPath(f)
	}
	return pathPlan{}, 0
}

// chooseSessionPath is choosePath for a request of a 2025-11-25 session.
func chooseSessionPath(f pathFacts) (pathPlan, pathFact) {
	if n := f.lacks(factHost); n != 0 {
		return pathPlan{}, n
	}
	if f.Rebound {
		return pathPlan{}, 0
	}
	if n := f.lacks(factSession); n != 0 {
		return pathPlan{}, n
	}
	if !f.SessionKnown {
		return pathPlan{}, 0
	}
	if n := f.lacks(factAccepts); n != 0 {
		return pathPlan{}, n
	}
	if !f.JSONAndStream {
		return pathPlan{}, 0
	}
	if n := f.lacks(factCall); n != 0 {
		return pathPlan{}, n
	}
	if f.Shape != shapePassThrough {
		if n := f.lacks(factMessage); n != 0 {
			return pathPlan{}, n
		}
		switch f.Message {
		case messageAnswer:
			return pathPlan{pathLegacyAnswer}, 0
		case messageCancelled:
			return pathPlan{pathLegacyCancel}, 0
		case messageWaiting:
			return pathPlan{pathLegacyCancellable}, 0
		}
		return pathPlan{}, 0
	}
	if f.Upstream == upstream.KindDown {
		return pathPlan{}, 0
	}
	if n := f.lacks(factSessionRelay); n != 0 {
		return pathPlan{}, n
	}
	if !f.SessionRelayable {
		return pathPlan{}, 0
	}
	if n := f.lacks(factAskable); n != 0 {
		return pathPlan{}, n
	}
	switch {
	case f.Upstream == upstream.KindHTTPStateless && f.Askable:
		// The upstream may hold 2025-11-25 sessions too, where the
		// client is asked as on the SDK's path; if not, its
		// input_required answers are bridged.
		return pathPlan{pathLegacyRelaySession, pathLegacyForwardAsking}, 0
	case f.Upstream == upstream.KindHTTPStateless:
		return pathPlan{pathLegacyRelaySession, pathLegacyForward}, 0
	case f.Upstream == upstream.KindHTTPSessions:
		return pathPlan{pathLegacyRelaySession}, 0
	case f.Upstream == upstream.KindStdioStateless && f.Askable:
		return pathPlan{pathLegacyStdioAsking}, 0
	case f.Askable:
		// A 2025-11-25 child's questions name no call: the SDK's path
		// holds the session alone for a call that can be asked.
		return pathPlan{}, 0
	}
	return pathPlan{pathLegacyStdio}, 0
}

// chooseStatelessPath is choosePath for a 2026-07-28 request.
func chooseStatelessPath(f pathFacts) (pathPlan, pathFact) {
	if !f.ToolsCall {
		return pathPlan{}, 0
	}
	if n := f.lacks(factHost); n != 0 {
		return pathPlan{}, n
	}
	if f.Rebound {
		return pathPlan{}, 0
	}
	// The body is read only for a request its headers let be relayed.
	if n := f.lacks(factCall); n != 0 {
		return pathPlan{}, n
	}
	if f.Shape != shapePassThrough {
		return pathPlan{}, 0
	}
	if f.Upstream == upstream.KindHTTPStateless {
		return pathPlan{pathForward}, 0
	}
	if n := f.lacks(factAccepts); n != 0 {
		return pathPlan{}, n
	}
	if !f.JSONAndStream {
		return pathPlan{}, 0
	}
	if n := f.lacks(factParked); n != 0 {
		return pathPlan{}, n
	}
	if f.Parked {
		// Should the parked call have gone meanwhile, the request is an
		// ordinary call.
		rest := f
		rest.Parked = false
		then, n := chooseStatelessPath(rest)
		return pathPlan{pathResumeParked, then[0], then[1]}, n
	}
	if n := f.lacks(factLogLevel); n != 0 {
		return pathPlan{}, n
	}
	if f.BadLogLevel || f.Upstream == upstream.KindDown {
		return pathPlan{}, 0
	}
	if n := f.lacks(factAskable); n != 0 {
		return pathPlan{}, n
	}
	switch {
	case f.Upstream == upstream.KindHTTPSessions && f.Askable:
		return pathPlan{pathRelayParking}, 0
	case f.Upstream == upstream.KindHTTPSessions:
		return pathPlan{pathRelaySession}, 0
	case f.Upstream == upstream.KindStdioStateless && f.Askable:
		return pathPlan{pathStdioAsking}, 0
	case f.Askable:
		// A 2025-11-25 child's questions name no call.
		return pathPlan{}, 0
	}
	return pathPlan{pathStdioMultiplex}, 0
}
