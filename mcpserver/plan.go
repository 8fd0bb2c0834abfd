package mcpserver

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/taskwire"
)

// A consequential call is handled by a plan: planCall decides, from what
// the call carries, what its client declared and its tool's policy, every
// choice about the call (its input channel, what a call without an
// approval leaves behind, what an approval answer it carries counts for,
// how its client may be asked, whether it gets its task now, a question
// first, or waits for the result), and CallTool carries the plan out.
// Whether an approval or a budget covers the call is not the plan's to
// decide: the ledger decides that within the acceptance, and the plan says
// only what is required and what a call that nothing covers leaves behind.
// Choices that need the acceptance's answer are methods of the plan, pure
// too. Nothing here reads the ledger, the clock or the network.

// A protocol is the protocol era a request came in, as far as asking its
// client goes.
type protocol int

const (
	// protocolSession: 2025-11-25 or earlier, where the gateway asks the
	// client over its session.
	protocolSession protocol = iota
	// protocolStateless: 2026-07-28, where each request stands alone: the
	// client is asked in a result and answers in its next call.
	protocolStateless
)

// An answerShape is what a call carries under the approval question's
// key.
type answerShape int

const (
	// answerAbsent: nothing.
	answerAbsent answerShape = iota
	// answerElicitation: an elicitation result, which may accept.
	answerElicitation
	// answerOther: anything else, which answers no approval question.
	answerOther
)

// callFacts is what a consequential call says of itself that its plan
// reads.
type callFacts struct {
	// Era is the task shape the call may be answered with.
	Era      taskwire.Era
	Protocol protocol
	// ApprovalAnswer is what the call carries as an answer to the approval
	// question.
	ApprovalAnswer answerShape
	// Answers reports that the call carries answers (2026-07-28 input
	// responses) at all.
	Answers bool
	// RequestState is the requestState the call carries, as sent.
	RequestState string
}

// clientCaps is what a call's client declared it can be asked, and where.
type clientCaps struct {
	// Elicitation: the client declared elicitation, in any mode (taskwire
	// reports a declaration of URL mode alone as this too).
	Elicitation bool
	// URL: the client declared URL-mode elicitation.
	URL bool
	// Session: the client may be asked now over its 2025-11-25 session.
	Session bool
	// Completion: the session can be told that a URL-mode elicitation
	// completed.
	Completion bool
}

// factsOf reads call's facts and its client's capabilities.
func factsOf(call *taskwire.ToolCall) (callFacts, clientCaps) {
	c := &call.Caller
	f := callFacts{Era: c.Era, Answers: len(call.InputResponses) > 0, RequestState: call.RequestState}
	if statelessVersion(c.ProtocolVersion) {
		f.Protocol = protocolStateless
	}
	if raw, ok := call.InputResponses[approvalInput]; ok {
		f.ApprovalAnswer = answerOther
		if _, isElicit := raw.(*mcp.ElicitResult); isElicit {
			f.ApprovalAnswer = answerElicitation
		}
	}
	return f, clientCaps{
		Elicitation: c.ElicitationDeclared, URL: c.ElicitationURL,
		Session: c.Elicit != nil, Completion: c.NotifyElicitationComplete != nil,
	}
}

// An askWay is how the gateway asks a client something in the protocol.
type askWay int

const (
	// askNone: it does not ask.
	askNone askWay = iota
	// askOnSession: over the client's 2025-11-25 session, within the call
	// (elicitation/create).
	askOnSession
	// askInResult: in the call's 2026-07-28 input_required result; the
	// client's next call carries the answer.
	askInResult
)

// An answerStep is what becomes of an approval answer a call carries.
type answerStep int

const (
	// answerNone: the call carries none, or its tool needs no approval.
	answerNone answerStep = iota
	// answerTake: the answer is taken as the reply to the approval question
	// the plan's Nonce names, if the ledger holds that question open for
	// this call; once taken it counts once, and an answer that accepts
	// becomes an approval.
	answerTake
	// answerIgnore: the answer approves nothing (Ignored says why), and the
	// call goes on as one without an answer.
	answerIgnore
	// answerURLOnly: the client was sent to the console by URL, so its
	// answer says only that the user went there (or that it retries): the
	// call waits for the approver's decision whatever it answers.
	answerURLOnly
)

// An ignoredAnswer says why an approval answer approves nothing.
type ignoredAnswer int

const (
	// ignoredNot: the answer was not ignored.
	ignoredNot ignoredAnswer = iota
	// ignoredNoFormApproval: the tool takes no approval from a form.
	ignoredNoFormApproval
	// ignoredOverFormCap: the call's estimate is above what a form may
	// approve.
	ignoredOverFormCap
	// ignoredProtocol: approval questions are answered in a call only on
	// 2026-07-28.
	ignoredProtocol
	// ignoredUndeclared: the request does not declare elicitation, so it
	// was never asked.
	ignoredUndeclared
	// ignoredNoQuestion: the requestState names no approval question.
	ignoredNoQuestion
	// ignoredNotElicitation: the answer is not an elicitation result.
	ignoredNotElicitation
)

// told reports whether the denial of a call tells its client why its
// answer was ignored: only where nothing was asked that a form answer
// could reply to, since the other reasons are the specification's
// responses to requests that are not outstanding, ignored in silence.
func (i ignoredAnswer) told() bool {
	return i == ignoredNoFormApproval || i == ignoredOverFormCap
}

// A reply is what a call is answered with once it is accepted.
type reply int

const (
	// replyTask: the operation's task, at once.
	replyTask reply = iota
	// replyQuestionFirst: the first send's question in the call's
	// result, when it comes within QuestionWait (a tool that gathers input
	// before it runs as a task); otherwise the task.
	replyQuestionFirst
	// replyAwait: no task; the call waits, up to Wait, for the
	// operation's end.
	replyAwait
	// replyAwaitOrAsk: no task; the call waits, up to Wait, for the
	// operation's end or for a question to put in its result.
	replyAwaitOrAsk
)

// callPlan is how one consequential call is handled.
type callPlan struct {
	// Channel is how the client can answer a question asked while the
	// operation runs.
	Channel ledger.InputChannel
	// ApprovalRequired and Request are what the acceptance requires: an
	// approval covering the call, and what a call that none covers leaves
	// behind.
	ApprovalRequired bool
	Request          ledger.RequestMode
	// Budgets: a standing budget may stand in for the approval the call
	// lacks; false when the tool's policy wants a person for every call.
	Budgets bool
	// Answer is what becomes of an approval answer the call carries: Nonce
	// names the question it is taken as the reply to; Ignored and
	// IgnoredWhy say why it approves nothing.
	Answer     answerStep
	Nonce      string
	Ignored    ignoredAnswer
	IgnoredWhy string
	// FormAsk is how the client is asked an approval form when the
	// acceptance denies the call for want of an approval.
	FormAsk askWay
	// URLAsk is how the user is sent by URL to the approval request's page
	// while the operation awaits approval; Announce: the session is told
	// once the request is decided.
	URLAsk   askWay
	Announce bool
	// AnswersTask is the task whose question the call's answers reply to,
	// as its requestState names it; "" when it carries none.
	AnswersTask string
	// Reply is what the accepted call is answered with; QuestionWait bounds
	// the wait for a question first, Wait the wait of a call without a
	// task.
	Reply        reply
	QuestionWait time.Duration
	Wait         time.Duration
}

// planCall plans a consequential call of a tool with policy t, priced
// priced, from a client with caps; wait is the gateway's wait for a client
// without tasks, which the tool's own wait overrides.
func planCall(f callFacts, caps clientCaps, t *config.Tool, priced policy.Route, wait time.Duration) callPlan {
	p := callPlan{
		Channel:          inputChannel(f, caps),
		ApprovalRequired: t.Approval == ledger.ApprovalRequired,
		Request:          requestMode(f, caps, t, priced),
		Budgets:          t.Approval == ledger.ApprovalRequired && t.BudgetsCover(),
		Reply:            replyOf(f, caps, t),
	}
	switch p.Reply {
	case replyQuestionFirst:
		p.QuestionWait = t.InputBeforeTask
	case replyAwait, replyAwaitOrAsk:
		p.Wait = wait
		if t.Wait > 0 {
			p.Wait = t.Wait
		}
	}
	urlAsk := urlAsks(f, caps, t)
	if formCovers(t, priced) {
		p.FormAsk = askOf(f, caps)
	}
	if urlAsk {
		p.URLAsk = askOf(f, caps)
		p.Announce = p.URLAsk == askOnSession && caps.Completion
	}
	switch {
	case f.ApprovalAnswer == answerAbsent || !p.ApprovalRequired:
		// There is no answer, or nothing an answer could approve.
	case urlAsk:
		p.Answer = answerURLOnly
		if p.URLAsk == askInResult {
			// The call that answers the URL question is not asked it again.
			p.URLAsk = askNone
		}
	default:
		p.Answer, p.Nonce, p.Ignored = takeOrIgnore(f, caps, t, priced)
		p.IgnoredWhy = p.Ignored.text(t, priced)
	}
	if task, ok := strings.CutPrefix(f.RequestState, questionStatePrefix); ok && f.Answers && f.Protocol == protocolStateless {
		p.AnswersTask = task
	}
	return p
}

// takeOrIgnore decides what an approval answer a call carries counts for
// where a form is the way it may be asked: it is taken only when it
// replies to a question this gateway asks in the protocol, the 2026-07-28
// way, and names that question.
func takeOrIgnore(f callFacts, caps clientCaps, t *config.Tool, priced policy.Route) (answerStep, string, ignoredAnswer) {
	nonce, hasState := strings.CutPrefix(f.RequestState, approvalStatePrefix)
	ignore := ignoredNot
	switch {
	case !formCovers(t, priced) && approvesBy(t, ledger.ApproveByElicitation) && t.ElicitationMaxTotalCost.Micros > 0:
		ignore = ignoredOverFormCap
	case !formCovers(t, priced):
		ignore = ignoredNoFormApproval
	case f.Protocol != protocolStateless:
		ignore = ignoredProtocol
	case !caps.Elicitation:
		ignore = ignoredUndeclared
	case !hasState || nonce == "":
		ignore = ignoredNoQuestion
	case f.ApprovalAnswer != answerElicitation:
		ignore = ignoredNotElicitation
	default:
		return answerTake, nonce, ignoredNot
	}
	return answerIgnore, "", ignore
}

// text says why an answer approves nothing: to the client, where told,
// what approves the call instead.
func (i ignoredAnswer) text(t *config.Tool, priced policy.Route) string {
	switch i {
	case ignoredNoFormApproval:
		if !approvesBy(t, ledger.ApproveByElicitation) {
			return "this tool takes no approval from a form answer (its approve_by does not include elicitation), so the answer approves nothing: an approver must approve it"
		}
		return "this tool takes no approval from a form answer (its elicitation_max_total_cost is 0), so the answer approves nothing: an approver must approve it"
	case ignoredOverFormCap:
		return fmt.Sprintf("a form answer approves at most %s for this tool and this call is estimated at %s, so the answer approves nothing: an approver must approve it",
			t.ElicitationMaxTotalCost.Display(), priced.Estimate.Display())
	case ignoredProtocol:
		return "approval questions are answered this way only on protocol 2026-07-28"
	case ignoredUndeclared:
		return "the request does not declare elicitation, so it was never asked"
	case ignoredNoQuestion:
		return "the request names no approval question in requestState"
	case ignoredNotElicitation:
		return "the answer is not an elicitation result"
	}
	return ""
}

// formAsk is how the client is asked an approval form after an acceptance
// decided d for reason: only when it was denied for want of an approval.
func (p *callPlan) formAsk(d ledger.Decision, reason string) askWay {
	if d != ledger.DecisionDenied || reason != ledger.ReasonApprovalRequired {
		return askNone
	}
	return p.FormAsk
}

// urlAsk is how the user is sent to the approver once the acceptance
// decided d and left the operation in state s: only while it awaits
// approval, and on a session only by the call that filed the request (the
// session was asked then; its retries wait without asking again).
func (p *callPlan) urlAsk(d ledger.Decision, s ledger.State) askWay {
	if s != ledger.StateAwaitingApproval || p.URLAsk == askOnSession && d != ledger.DecisionCreated {
		return askNone
	}
	return p.URLAsk
}

// answers reports whether the call's answers reply to the question of the
// operation whose task is taskID, which the call continues.
func (p *callPlan) answers(taskID string) bool {
	return p.AnswersTask != "" && p.AnswersTask == taskID
}

// replyFor is what the call is answered with once accepted as the
// operation whose task is taskID: a call that answers its question gets
// its task, since its question came first already.
func (p *callPlan) replyFor(taskID string) reply {
	if p.Reply == replyQuestionFirst && p.answers(taskID) {
		return replyTask
	}
	return p.Reply
}

// inputChannel is how the client can answer a question asked during the
// operation its call starts.
func inputChannel(f callFacts, caps clientCaps) ledger.InputChannel {
	switch {
	case f.Era == taskwire.EraExtension:
		return ledger.InputChannelTaskUpdate
	case f.Era == taskwire.EraLegacy && caps.Elicitation:
		return ledger.InputChannelTaskResult
	case askableInResult(f, caps):
		return ledger.InputChannelCallResult
	}
	return ledger.InputChannelNone
}

// askableInResult reports whether the client, waiting for its call's
// result, can be asked a question in that result: a 2026-07-28 request
// without a task that declares elicitation takes an input_required result
// and calls again with the answer (the go-sdk's client does so by itself).
func askableInResult(f callFacts, caps clientCaps) bool {
	return f.Era == taskwire.EraNone && f.Protocol == protocolStateless && caps.Elicitation
}

// replyOf is what a call is answered with once accepted.
func replyOf(f callFacts, caps clientCaps, t *config.Tool) reply {
	switch {
	case askableInResult(f, caps):
		return replyAwaitOrAsk
	case f.Era == taskwire.EraNone:
		return replyAwait
	case t.InputBeforeTask > 0 && f.Protocol == protocolStateless && caps.Elicitation:
		return replyQuestionFirst
	}
	return replyTask
}

// askOf is how the client can be asked in the protocol: over its
// 2025-11-25 session, or in a 2026-07-28 input_required result.
func askOf(f callFacts, caps clientCaps) askWay {
	switch {
	case caps.Session:
		return askOnSession
	case f.Protocol == protocolStateless && caps.Elicitation:
		return askInResult
	}
	return askNone
}

// urlAsks reports whether a call without an approval is asked for one by
// URL: the tool allows elicitation and the client declared URL mode where
// it can be asked (its 2025-11-25 session, or the 2026-07-28 request).
func urlAsks(f callFacts, caps clientCaps, t *config.Tool) bool {
	return t.Approval == ledger.ApprovalRequired && approvesBy(t, ledger.ApproveByElicitation) &&
		caps.URL && askOf(f, caps) != askNone
}

// requestMode is what a call priced p without any approval leaves
// behind: a client that can be asked a form in the protocol, where the
// policy lets a form cover the route, is asked first; otherwise, where
// requests are allowed, a client that takes a task holds one while its
// approval request waits, and one that cannot is told which request a
// human must approve before it retries.
func requestMode(f callFacts, caps clientCaps, t *config.Tool, p policy.Route) ledger.RequestMode {
	switch {
	case urlAsks(f, caps, t):
		// The user is sent to the request's page; the call waits for it.
		return ledger.RequestWait
	case t.Approval != ledger.ApprovalRequired || !approvesBy(t, ledger.ApproveByRequest):
		return ledger.RequestNone
	case formCovers(t, p) && askOf(f, caps) != askNone:
		return ledger.RequestNone
	case f.Era == taskwire.EraNone:
		return ledger.RequestRecord
	}
	return ledger.RequestWait
}

// formCovers reports whether a form answer may approve a call of a tool
// with policy t priced p: the tool allows elicitation, its policy sets a
// cap on what a form may approve, and the whole route's estimate fits
// under it. A route it does not cover goes the request way, and its client
// is asked no form.
func formCovers(t *config.Tool, p policy.Route) bool {
	cap := t.ElicitationMaxTotalCost
	return approvesBy(t, ledger.ApproveByElicitation) && cap.Micros > 0 &&
		p.Estimate.Currency == cap.Currency && p.Estimate.Micros <= cap.Micros
}

// approvesBy reports whether the tool's configuration allows way.
func approvesBy(t *config.Tool, way ledger.ApprovalWay) bool {
	return slices.Contains(t.ApproveBy, way)
}
