package mcpserver

import (
	"fmt"
	"slices"
	"testing"

	"github.com/taskgate/taskgate/upstream"
)

// allFacts is every fact choosePath may ask for.
const allFacts = factHost | factSession | factAccepts | factCall | factMessage | factSessionRelay | factParked | factLogLevel | factAskable

var upstreamKinds = []upstream.Kind{upstream.KindHTTPStateless, upstream.KindHTTPSessions, upstream.KindStdioSessions, upstream.KindStdioStateless, upstream.KindDown}

// relayable are the facts of a call that nothing but its era, upstream
// and client keep from being relayed.
func relayable(version string, session bool, kind upstream.Kind, askable bool) pathFacts {
	return pathFacts{
		Known: allFacts, Post: true, Version: version, ToolsCall: version != legacyRelayVersion, Session: session,
		SessionKnown: session, JSONAndStream: true, Shape: shapePassThrough, Upstream: kind,
		SessionRelayable: session, Askable: askable,
	}
}

func plan(paths ...passThroughPath) pathPlan {
	var p pathPlan
	copy(p[:], paths)
	return p
}

// TestChoosePathEraUpstreamCapability is the matrix of a pass-through
// call that may be relayed: every era, every kind of upstream session,
// and a client that can or cannot be asked.
func TestChoosePathEraUpstreamCapability(t *testing.T) {
	sdk := plan()
	type byCapability struct{ none, askable pathPlan }
	eras := []struct {
		name    string
		version string
		session bool
		want    map[upstream.Kind]byCapability
	}{
		{"2025-11-25 session", legacyRelayVersion, true, map[upstream.Kind]byCapability{
			upstream.KindHTTPStateless: {
				plan(pathLegacyRelaySession, pathLegacyForward),
				plan(pathLegacyRelaySession, pathLegacyForwardAsking),
			},
			upstream.KindHTTPSessions:   {plan(pathLegacyRelaySession), plan(pathLegacyRelaySession)},
			upstream.KindStdioSessions:  {plan(pathLegacyStdio), sdk},
			upstream.KindStdioStateless: {plan(pathLegacyStdio), plan(pathLegacyStdioAsking)},
			upstream.KindDown:           {sdk, sdk},
		}},
		{"2026-07-28 stateless", "2026-07-28", false, map[upstream.Kind]byCapability{
			upstream.KindHTTPStateless:  {plan(pathForward), plan(pathForward)},
			upstream.KindHTTPSessions:   {plan(pathRelaySession), plan(pathRelayParking)},
			upstream.KindStdioSessions:  {plan(pathStdioMultiplex), sdk},
			upstream.KindStdioStateless: {plan(pathStdioMultiplex), plan(pathStdioAsking)},
			upstream.KindDown:           {sdk, sdk},
		}},
		{"2025-11-25 without a session", legacyRelayVersion, false, nil},
		{"unknown version", "2099-01-01", false, nil},
		{"unknown version in a session", "2099-01-01", true, nil},
		{"no version header", "", false, nil},
		{"no version header in a session", "", true, nil},
	}
	for _, era := range eras {
		for _, kind := range upstreamKinds {
			for _, askable := range []bool{false, true} {
				want := sdk
				if w, ok := era.want[kind]; ok {
					want = w.none
					if askable {
						want = w.askable
					}
				}
				t.Run(fmt.Sprintf("%s/%v/askable=%v", era.name, kind, askable), func(t *testing.T) {
					got, need := choosePath(relayable(era.version, era.session, kind, askable))
					if need != 0 || got != want {
						t.Errorf("choosePath = %v, need %b; want %v", got, need, want)
					}
				})
			}
		}
	}
}

// TestChoosePathRequestShape covers the requests that are not such a
// call, or whose headers, session or call keep it from being relayed.
func TestChoosePathRequestShape(t *testing.T) {
	legacy := func(kind upstream.Kind, askable bool) pathFacts {
		return relayable(legacyRelayVersion, true, kind, askable)
	}
	stateless := func(kind upstream.Kind, askable bool) pathFacts {
		return relayable("2026-07-28", false, kind, askable)
	}
	with := func(f pathFacts, change func(*pathFacts)) pathFacts {
		change(&f)
		return f
	}
	tests := []struct {
		name  string
		facts pathFacts
		want  pathPlan
	}{
		{"a GET of a session's stream", with(legacy(upstream.KindHTTPSessions, false), func(f *pathFacts) { f.Post = false }), plan()},
		{"a 2026-07-28 GET", with(stateless(upstream.KindHTTPStateless, false), func(f *pathFacts) { f.Post = false }), plan()},
		{"a 2026-07-28 tools/list", with(stateless(upstream.KindHTTPStateless, false), func(f *pathFacts) { f.ToolsCall = false }), plan()},
		{"2026-07-28, rebound Host", with(stateless(upstream.KindHTTPStateless, false), func(f *pathFacts) { f.Rebound = true }), plan()},
		{"2025-11-25, rebound Host", with(legacy(upstream.KindHTTPSessions, false), func(f *pathFacts) { f.Rebound = true }), plan()},
		{"2025-11-25, a session the SDK did not open", with(legacy(upstream.KindHTTPSessions, false), func(f *pathFacts) { f.SessionKnown = false }), plan()},
		{"2025-11-25, no event stream accepted", with(legacy(upstream.KindHTTPSessions, false), func(f *pathFacts) { f.JSONAndStream = false }), plan()},
		{"2025-11-25, a session the idle timer may end", with(legacy(upstream.KindHTTPStateless, true), func(f *pathFacts) { f.SessionRelayable = false }), plan()},
		{"2025-11-25, a consequential tool's call", with(legacy(upstream.KindHTTPSessions, false), func(f *pathFacts) {
			f.Shape, f.Message = shapeConsequential, messageWaiting
		}), plan(pathLegacyCancellable)},
		{"2025-11-25, a header-argument tool's call", with(legacy(upstream.KindHTTPSessions, false), func(f *pathFacts) {
			f.Shape, f.Message = shapeHeaderArguments, messageWaiting
		}), plan(pathLegacyCancellable)},
		{"2025-11-25, a tasks/result", with(legacy(upstream.KindHTTPSessions, false), func(f *pathFacts) {
			f.Shape, f.Message = shapeOther, messageWaiting
		}), plan(pathLegacyCancellable)},
		{"2025-11-25, a client's answer", with(legacy(upstream.KindHTTPSessions, false), func(f *pathFacts) {
			f.Shape, f.Message = shapeOther, messageAnswer
		}), plan(pathLegacyAnswer)},
		{"2025-11-25, notifications/cancelled", with(legacy(upstream.KindHTTPSessions, false), func(f *pathFacts) {
			f.Shape, f.Message = shapeOther, messageCancelled
		}), plan(pathLegacyCancel)},
		{"2025-11-25, another message", with(legacy(upstream.KindHTTPSessions, false), func(f *pathFacts) {
			f.Shape, f.Message = shapeOther, messageOther
		}), plan()},
		{"2026-07-28, a consequential tool's call", with(stateless(upstream.KindHTTPStateless, false), func(f *pathFacts) { f.Shape = shapeConsequential }), plan()},
		{"2026-07-28, a header-argument tool's call", with(stateless(upstream.KindHTTPStateless, false), func(f *pathFacts) { f.Shape = shapeHeaderArguments }), plan()},
		{"2026-07-28, another request", with(stateless(upstream.KindHTTPSessions, false), func(f *pathFacts) { f.Shape = shapeOther }), plan()},
		{"2026-07-28 to a stateless upstream, no event stream accepted", with(stateless(upstream.KindHTTPStateless, false), func(f *pathFacts) { f.JSONAndStream = false }), plan(pathForward)},
		{"2026-07-28 to a session upstream, no event stream accepted", with(stateless(upstream.KindHTTPSessions, false), func(f *pathFacts) { f.JSONAndStream = false }), plan()},
		{"2026-07-28, a log level that is no string", with(stateless(upstream.KindHTTPSessions, false), func(f *pathFacts) { f.BadLogLevel = true }), plan()},
		{"2026-07-28 to a stateless upstream, a log level that is no string", with(stateless(upstream.KindHTTPStateless, false), func(f *pathFacts) { f.BadLogLevel = true }), plan(pathForward)},
		{"2026-07-28, an answer to a parked call", with(stateless(upstream.KindHTTPSessions, true), func(f *pathFacts) { f.Parked = true }), plan(pathResumeParked, pathRelayParking)},
		{"2026-07-28, an answer to a parked call of a client no longer asking", with(stateless(upstream.KindHTTPSessions, false), func(f *pathFacts) { f.Parked = true }), plan(pathResumeParked, pathRelaySession)},
		{"2026-07-28, an answer to a parked call, a log level that is no string", with(stateless(upstream.KindHTTPSessions, true), func(f *pathFacts) {
			f.Parked, f.BadLogLevel = true, true
		}), plan(pathResumeParked)},
		{"2026-07-28, an answer to a parked call of an upstream now down", with(stateless(upstream.KindDown, true), func(f *pathFacts) { f.Parked = true }), plan(pathResumeParked)},
		{"2026-07-28, an answer to a parked call of an upstream now stateless", with(stateless(upstream.KindHTTPStateless, true), func(f *pathFacts) { f.Parked = true }), plan(pathForward)},
		{"2026-07-28, an answer to a parked call, no event stream accepted", with(stateless(upstream.KindHTTPSessions, true), func(f *pathFacts) {
			f.Parked, f.JSONAndStream = true, false
		}), plan()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, need := choosePath(tt.facts)
			if need != 0 || got != tt.want {
				t.Errorf("choosePath = %v, need %b; want %v", got, need, tt.want)
			}
		})
	}
}

// learnFrom plays a request's handler: starting from the facts of its
// headers, it learns from truth only what choosePath asks for, and
// returns the plan and the facts it asked for, in order. Facts not asked
// for hold values unlike truth's, so that a choice made from one it did
// not ask for shows.
func learnFrom(t *testing.T, truth pathFacts) (pathPlan, []pathFact) {
	t.Helper()
	f := pathFacts{
		Post: truth.Post, Version: truth.Version, ToolsCall: truth.ToolsCall, Session: truth.Session,
		Rebound: !truth.Rebound, SessionKnown: !truth.SessionKnown, JSONAndStream: !truth.JSONAndStream,
		Shape: (truth.Shape + 1) % 4, Upstream: (truth.Upstream + 1) % 5, Message: (truth.Message + 1) % 4,
		SessionRelayable: !truth.SessionRelayable, Parked: !truth.Parked, BadLogLevel: !truth.BadLogLevel, Askable: !truth.Askable,
	}
	var asked []pathFact
	for {
		p, need := choosePath(f)
		if need == 0 {
			return p, asked
		}
		if need&f.Known != 0 || need&^allFacts != 0 {
			t.Fatalf("choosePath(%+v) asks for %b, known already or unknown", f, need)
		}
		asked = append(asked, need)
		f.Known |= need
		for _, learn := range []struct {
			fact pathFact
			set  func()
		}{
			{factHost, func() { f.Rebound = truth.Rebound }},
			{factSession, func() { f.SessionKnown = truth.SessionKnown }},
			{factAccepts, func() { f.JSONAndStream = truth.JSONAndStream }},
			{factCall, func() { f.Shape, f.Upstream = truth.Shape, truth.Upstream }},
			{factMessage, func() { f.Message = truth.Message }},
			{factSessionRelay, func() { f.SessionRelayable = truth.SessionRelayable }},
			{factParked, func() { f.Parked = truth.Parked }},
			{factLogLevel, func() { f.BadLogLevel = truth.BadLogLevel }},
			{factAskable, func() { f.Askable = truth.Askable }},
		} {
			if need&learn.fact != 0 {
				learn.set()
			}
		}
	}
}

// TestChoosePathLearnsWhatItNeeds checks, for every combination of
// facts, that learning only the facts choosePath asks for gives the path
// that knowing them all gives, and that every plan ends on the SDK's
// path.
func TestChoosePathLearnsWhatItNeeds(t *testing.T) {
	n := 0
	for _, post := range []bool{false, true} {
		for _, version := range []string{"", legacyRelayVersion, "2026-07-28", "2099-01-01"} {
			for _, toolsCall := range []bool{false, true} {
				for _, session := range []bool{false, true} {
					for _, rebound := range []bool{false, true} {
						for _, known := range []bool{false, true} {
							for _, accepts := range []bool{false, true} {
								for _, shape := range []callShape{shapeOther, shapeConsequential, shapeHeaderArguments, shapePassThrough} {
									for _, kind := range upstreamKinds {
										for _, message := range []messageKind{messageOther, messageAnswer, messageCancelled, messageWaiting} {
											for bits := range 16 {
												truth := pathFacts{
													Known: allFacts, Post: post, Version: version, ToolsCall: toolsCall, Session: session,
													Rebound: rebound, SessionKnown: known, JSONAndStream: accepts, Shape: shape, Upstream: kind,
													Message: message, SessionRelayable: bits&1 != 0, Parked: bits&2 != 0,
													BadLogLevel: bits&4 != 0, Askable: bits&8 != 0,
												}
												want, need := choosePath(truth)
												if need != 0 {
													t.Fatalf("choosePath(%+v) knowing everything asks for %b", truth, need)
												}
												if !slices.Contains(want[:], pathSDK) {
													t.Fatalf("choosePath(%+v) = %v, which does not end on the SDK's path", truth, want)
												}
												if got, _ := learnFrom(t, truth); got != want {
													t.Fatalf("learning what choosePath asks for %+v gives %v, knowing everything %v", truth, got, want)
												}
												n++
											}
										}
									}
								}
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d combinations", n)
}

// TestChoosePathReadsOnlyWhatItUses pins what a request learns before its
// path is chosen: a request the headers send to the SDK's path is not
// read, and a call forwarded to a stateless upstream learns nothing a
// relay needs.
func TestChoosePathReadsOnlyWhatItUses(t *testing.T) {
	tests := []struct {
		name  string
		truth pathFacts
		want  []pathFact
	}{
		{"a GET", pathFacts{Known: allFacts, Version: "2026-07-28"}, nil},
		{"a 2026-07-28 tools/list", pathFacts{Known: allFacts, Post: true, Version: "2026-07-28"}, nil},
		{"a request of no known version", pathFacts{Known: allFacts, Post: true, Version: "2024-11-05", ToolsCall: true, Session: true}, nil},
		{"a 2026-07-28 call from a rebound Host", pathFacts{Known: allFacts, Post: true, Version: "2026-07-28", ToolsCall: true, Rebound: true}, []pathFact{factHost}},
		{"a 2026-07-28 call forwarded", relayable("2026-07-28", false, upstream.KindHTTPStateless, true), []pathFact{factHost, factCall}},
		{"a 2026-07-28 call relayed", relayable("2026-07-28", false, upstream.KindHTTPSessions, true), []pathFact{factHost, factCall, factAccepts, factParked, factLogLevel, factAskable}},
		{"a 2025-11-25 call of an unknown session", pathFacts{Known: allFacts, Post: true, Version: legacyRelayVersion, Session: true}, []pathFact{factHost, factSession}},
		{"a 2025-11-25 call relayed", relayable(legacyRelayVersion, true, upstream.KindHTTPSessions, false), []pathFact{factHost, factSession, factAccepts, factCall, factSessionRelay, factAskable}},
		{"a 2025-11-25 call to an upstream that is down", relayable(legacyRelayVersion, true, upstream.KindDown, false), []pathFact{factHost, factSession, factAccepts, factCall}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, got := learnFrom(t, tt.truth); !slices.Equal(got, tt.want) {
				t.Errorf("learned %b, want %b", got, tt.want)
			}
		})
	}
}

// BenchmarkChoosePathForward is the choice a 2026-07-28 call forwarded to
// a stateless upstream makes, the pass-through benchmark's hot path: three
// choices, two of them asking for facts.
func BenchmarkChoosePathForward(b *testing.B) {
	truth := relayable("2026-07-28", false, upstream.KindHTTPStateless, false)
	b.ReportAllocs()
	for b.Loop() {
		f := pathFacts{Post: truth.Post, Version: truth.Version, ToolsCall: truth.ToolsCall, Session: truth.Session}
		for {
			p, need := choosePath(f)
			if need == 0 {
				if p[0] != pathForward {
					b.Fatalf("choosePath = %v", p)
				}
				break
			}
			f.Known |= need
			f.Rebound, f.Shape, f.Upstream = truth.Rebound, truth.Shape, truth.Upstream
		}
	}
}
