// Package upstream holds taskgate's MCP client side: a [Pool] with one
// managed client per configured upstream server, reached over Streamable HTTP
// or through a stdio command that taskgate starts, supervises and restarts.
// An [Upstream] lists tools, makes plain calls and task calls in either
// protocol era (through package taskwire), passes on requests for resources,
// prompts and completion, keeps resource subscriptions across sessions
// (reporting list changes and updates to [Upstream.OnSurfaceChange]), and
// carries the per-call plumbing a gateway needs: extra HTTP headers such as
// the provider's idempotency key, progress and log messages forwarded in
// wire order, and the upstream's questions (elicitation, sampling, roots)
// routed to the call that caused them.
//
// # What this package must never do
//
// upstream never touches the ledger, never decides policy and never re-sends
// a call on its own: it reports what the upstream said. (The one exception is
// below: a relayed pass-through call refused unread with 404, because its
// session was gone, is sent again in a new one.) An error wrapping
// [ErrNotConnected] means the request was never handed to a connection; any
// other error after a call was sent leaves its outcome unknown here, and
// deciding what that means (look up, attach, review) is the caller's job.
//
// # Connections and supervision
//
// [Pool.Start] runs one supervisor per upstream. It connects (over HTTP the
// go-sdk tries server/discover for protocol 2026-07-28 and falls back to
// initialize for 2025-11-25), publishes the session, and waits for it to end:
// a stdio child that exits, or an HTTP session the go-sdk gives up on (an
// expired session ID, a broken standalone stream). A failed HTTP round trip
// makes the supervisor ping the session and replace it if the ping fails too,
// which also covers sessionless 2026-07-28 servers. Reconnects wait an
// exponential backoff between Options.RestartBackoff and
// Options.MaxRestartBackoff; the backoff starts over once a session has stayed
// up for MaxRestartBackoff. Calls made while an upstream is down wait for the
// next session until their deadline, then fail with [ErrNotConnected] and the
// upstream's name. Every call is bounded by the upstream's configured timeout
// unless its context ends earlier.
//
// A stdio child is started again at most max_restarts_per_minute times
// within any minute. When one more exit would need a start beyond that, the
// supervisor logs it at error level and the upstream is unavailable until
// the minute allows the next start: calls fail at once with
// [ErrNotConnected], saying so and when the next start is. Options.Restarted
// and Options.StateChanged report restarts and sessions, for metrics.
//
// A stdio child whose output ends (it exited or was killed) is done with at
// that moment: the calls in flight on it fail, and a call made after that,
// such as the lookup that follows an uncertain send, waits for the next
// child instead of failing on the dead one.
//
// A stdio child gets taskgate's environment plus the configured env, and its
// stderr is logged line by line. Closing a session closes the child's stdin,
// then sends SIGTERM and SIGKILL if it does not exit, 5 s apart, as the
// go-sdk's CommandTransport does; children are always waited for, so none is
// left behind. taskgate reads the child's output itself (stdioPipe): a
// relayed call's messages go to the call as bytes, and only the rest is
// decoded, by the go-sdk's JSON-RPC decoder.
//
// Task state lives on the upstream: after a reconnect a 2025-11-25 upstream
// that binds tasks to its session may no longer know a task created on the
// previous session; [Upstream.GetTask] then reports its error.
//
// # Tasks
//
// The tasks/* methods are registered with taskwire.InstallClient and every
// transport goes through taskwire's client shim, so task replies, a 2025-11-25
// server's capabilities.tasks and its tools' execution.taskSupport survive
// the go-sdk's typed decoding. The 2026-07-28 tasks extension is declared per
// request (by CallToolAsTask and on tasks/*), not for the whole session
// (taskwire.ClientCapabilitiesWithTasks): a session-wide declaration would
// let the upstream answer any plain CallTool with a task, and CallTool
// promises a direct result. An upstream that answers a plain call with a task
// all the same is reported as an [UnrequestedTaskError].
//
// # Resources, prompts and subscriptions
//
// Lists (one page at a time, as the upstream pages them), resources/read,
// prompts/get and completion/complete are sent on the upstream's session
// like tool calls that do not elicit, and their answers, input_required
// results included, are returned as they are. A resource subscription is
// the one request the package makes again by itself: [Upstream.Subscribe]
// holds until [Upstream.Unsubscribe], so every new session is subscribed
// to the URIs subscribed before (a subscription changes no state an
// operation depends on). On a 2026-07-28 session a subscription is a
// subscriptions/listen stream that stays open. The upstream's list changes
// and resource updates, and each new session, are reported to
// [Upstream.OnSurfaceChange]; [Upstream.SurfaceGeneration] says whether a
// listing may be stale.
//
// # Progress
//
// The go-sdk client dispatches progress notifications asynchronously, so a
// notification can reach its handler after the call's response, and be lost.
// Instead each call that wants progress gets a progress token unique within
// its upstream, and notifications are read off the wire before the go-sdk
// sees them: over HTTP in the RoundTripper, event by event as the SSE body is
// read; over stdio in a wrapped connection's Read. Both run on the reader,
// before the bytes of any later message are released, so a call's
// CallOptions.Progress has received every notification sent before the
// response when the call returns, in wire order. Progress must therefore not
// block for long: it holds up the connection's reader.
//
// # Relaying as bytes
//
// A gateway's pass-through calls need not be decoded into SDK structures and
// encoded again. [Upstream.Forward] sends a 2026-07-28 request to an HTTP
// upstream of that protocol as it is. [Upstream.RelayCall] sends a
// call of either era in a 2025-11-25 session the gateway holds with the
// upstream for that purpose, opened on first use: one with no client
// capabilities, and one per user and set of capabilities of clients that
// can be asked (RelayedCall.Capabilities). Calls of many clients share
// them, so
// each goes out under a request ID and progress token of the gateway's,
// and only its own answer and progress come back, under the client's,
// with the log messages on its stream that its client's level
// (RelayedCall.LogLevel) admits. A question the upstream sends on a call's
// stream goes to that call's client (RelayedCall.Asked), or, for a
// 2026-07-28 client, ends the response as an input_required result while
// the call waits upstream for [ParkedCall.Resume] (RelayedCall.Park). The
// session keeps a standalone stream open to answer pings, resumes a call's
// stream the upstream closes early (Last-Event-ID), cancels a call whose
// answer is given up on, and is opened again when the upstream has
// forgotten it.
//
// A stdio upstream's calls are relayed on its one supervised connection
// instead. Each goes out under a request ID and progress token of the
// gateway's (strings, which the go-sdk's own request IDs never are),
// shares the session as the SDK path's calls do, and on a 2026-07-28
// session carries the per-request _meta the go-sdk adds to its own. The
// connection's Read takes the call's answer and progress off the wire
// before the go-sdk sees them, and its log messages follow the stdio rule
// below. A call whose child exits before answering ends with
// RelayedCall.Unanswered and is not sent again. A call whose client can be
// asked (RelayedCall.Capabilities) is relayed only on a 2026-07-28
// session, where the child asks in the call's answer and the caller
// bridges; a 2025-11-25 child's questions name no call, so there such a
// call takes the SDK path, which holds the session alone.
//
// # Log messages
//
// A 2025-11-25 session whose upstream advertises logging is set to debug,
// the lowest level, so that any client's level can be honoured by whoever
// relays the messages; a 2026-07-28 call carries its level per request
// (CallOptions.LogLevel). notifications/message are read off the wire as
// progress is: over HTTP those on a call's response stream are the call's
// (CallOptions.Log); over stdio, where nothing ties a message to a call, a
// message is the call's only while it is the one call in flight. Messages
// of no call go to the gateway's log at debug level, never to a client: the
// gateway cannot tell whose they are.
//
// # Questions: elicitation, sampling, roots
//
// Protocol 2026-07-28 has no server-to-client requests: an upstream that
// needs input answers with an input_required result, and the client is
// configured (MultiRoundTrip disabled) to return it to the caller as it is.
//
// A 2025-11-25 upstream sends elicitation/create, sampling/createMessage and
// roots/list, and the go-sdk gives no way to tell which call caused them.
// Routing is made unambiguous instead, for a call that can be asked (one
// that passes CallOptions.Elicit or CreateMessage):
//
//   - over HTTP, such a call runs on a session of its own, opened for the
//     call (declaring CallOptions.Capabilities, the client's) and closed
//     after it, so whatever that session is asked belongs to the call;
//   - over stdio there is one session, declaring everything a call may
//     answer, so such a call holds it alone: other tool calls wait until it
//     returns, and it waits for theirs;
//   - a task call that can be asked over HTTP holds the shared session alone
//     in the same way, because the task it creates must stay reachable there.
//
// The requests are taken before the go-sdk's own client handling, which
// checks elicitation schemas more narrowly than the protocol allows. An
// elicitation marked with a related task belongs to that task, not to a
// call: it goes to the TaskResult reading the task's result, which a
// 2025-11-25 task asks its question on, and without one the upstream gets
// an error, so that it may ask again rather than take an answer nobody
// gave. What else belongs to no call that can answer it gets what a client
// without the capability would give: an elicitation is declined, sampling
// is refused with -32601 (a task's too), and roots/list is answered with
// no roots. Pings are answered by the go-sdk in every session.
package upstream
