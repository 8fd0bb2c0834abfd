package ledger

// RetryPolicy says what the gateway may do when it is unsure whether the
// provider accepted work. Its values are stable strings: configuration,
// approvals and receipts spell them the same way.
type RetryPolicy string

const (
	// RetryLookupThenAttach asks the provider before any re-send and
	// attaches to the job it finds.
	RetryLookupThenAttach RetryPolicy = "lookup_then_attach"
	// RetryNoAutomaticResend never re-sends on its own: an unsure outcome
	// waits for a human.
	RetryNoAutomaticResend RetryPolicy = "no_automatic_resend"
)

// Valid reports whether p is a retry policy this version knows.
func (p RetryPolicy) Valid() bool {
	return p == RetryLookupThenAttach || p == RetryNoAutomaticResend
}

// ApprovalMode says whether a consequential tool runs only under an
// approval.
type ApprovalMode string

const (
	// ApprovalRequired: the tool runs only under an unexpired approval for
	// the tenant, operation ID and tool.
	ApprovalRequired ApprovalMode = "required"
	// ApprovalNone: the tool runs without an approval.
	ApprovalNone ApprovalMode = "none"
)

// Valid reports whether m is an approval mode this version knows.
func (m ApprovalMode) Valid() bool {
	return m == ApprovalRequired || m == ApprovalNone
}

// ClientCancel says what a client's tasks/cancel does to a consequential
// call. Its values are stable strings: configuration and receipts spell
// them the same way.
type ClientCancel string

const (
	// ClientCancelHonour cancels the operation whenever the client asks:
	// a job already sent is asked to stop, and its effect may be reversed.
	ClientCancelHonour ClientCancel = "honour"
	// ClientCancelBeforeSend cancels only an operation not yet sent to
	// the provider. A cancel after the send is recorded, and the job runs
	// to its end and is reconciled: a client's own timeout (which some
	// clients turn into a cancel) cannot throw away paid work.
	ClientCancelBeforeSend ClientCancel = "before_send"
)

// Valid reports whether c is a client_cancel policy this version knows.
func (c ClientCancel) Valid() bool {
	return c == ClientCancelHonour || c == ClientCancelBeforeSend
}

// Keeps reports whether, under policy c, a client's cancel of op leaves
// its work as it is: only before_send does, once op's call went to the
// provider (a job that ended is not asked to reverse its effect either).
// An operation back in accepted after a send that never left has sent
// nothing.
func (c ClientCancel) Keeps(op *Operation) bool {
	sent := op.SendCount > 0 && op.State != StateAccepted && op.State != StateAwaitingApproval
	return c == ClientCancelBeforeSend && sent
}

// ApprovalWay is a way a consequential call may get the approval it
// lacks. Its values are stable strings: configuration spells them the
// same way.
type ApprovalWay string

const (
	// ApproveByRequest: the call waits as an approval request until an
	// approver decides it (REST, the command line, the console).
	ApproveByRequest ApprovalWay = "request"
	// ApproveByElicitation: the gateway asks the client's user in the
	// protocol, when the client declares elicitation: by URL, sending
	// the user to the console's page of the call's approval request,
	// where an approver decides; or, where the tool's policy allows it,
	// with a form whose answer approves a capped amount.
	ApproveByElicitation ApprovalWay = "elicitation"
)

// ApprovedByClientUser is the CreatedBy of an approval given by answering
// an in-protocol form: the client's user, whom nothing verifies (an agent
// that drives its own client answers for it).
const ApprovedByClientUser = "client_user (unverified)"

// Valid reports whether w is an approval way this version knows.
func (w ApprovalWay) Valid() bool {
	return w == ApproveByRequest || w == ApproveByElicitation
}

// RequestMode says what an acceptance leaves behind for a call that needs
// an approval it does not have.
type RequestMode string

const (
	// RequestNone: the call is denied (approval_required) and nothing is
	// recorded for an approver.
	RequestNone RequestMode = ""
	// RequestWait: the operation is created awaiting_approval, with its
	// approval request; the client holds its task meanwhile.
	RequestWait RequestMode = "wait"
	// RequestRecord: the call is denied (approval_required), and an
	// approval request is recorded (or a pending one named) so that the
	// client, once a human approves it, can retry with the same operation
	// ID.
	RequestRecord RequestMode = "record"
)

// RemoteJobKind says what a remote job is at its upstream.
type RemoteJobKind string

const (
	// JobKindUpstreamTask is the upstream's own MCP task.
	JobKindUpstreamTask RemoteJobKind = "upstream_task"
	// JobKindProviderJob is a job the provider contract names by its ID.
	JobKindProviderJob RemoteJobKind = "provider_job"
)

// SecretsAtRest says how the values of an operation's secret arguments are
// kept in its stored arguments.
type SecretsAtRest string

const (
	// SecretsNone: the operation has no secret arguments.
	SecretsNone SecretsAtRest = ""
	// SecretsPlaintext: the values are kept as they came, because the
	// configuration says secrets.store: plaintext, or because the operation
	// was accepted before secrets were encrypted.
	SecretsPlaintext SecretsAtRest = "plaintext"
	// SecretsSealed: the values are encrypted under a key of the gateway's
	// secrets key ring, bound to the operation.
	SecretsSealed SecretsAtRest = "sealed"
	// SecretsErased: the values were overwritten with "[redacted]" once no
	// re-send could need them.
	SecretsErased SecretsAtRest = "erased"
)

// Held reports whether the values are still in the ledger, sealed or not.
func (s SecretsAtRest) Held() bool { return s == SecretsPlaintext || s == SecretsSealed }

// InputChannel says how the client that started an operation can answer a
// question the upstream asks while the operation runs. Its values are
// stable strings stored with the operation.
type InputChannel string

const (
	// InputChannelNone: the client cannot be asked (it declared no
	// elicitation, or took no task on 2025-11-25); a question sends the
	// operation to review.
	InputChannelNone InputChannel = ""
	// InputChannelTaskUpdate: a 2026-07-28 client with the Tasks
	// extension reads the question in tasks/get and answers it with
	// tasks/update.
	InputChannelTaskUpdate InputChannel = "tasks_update"
	// InputChannelTaskResult: a 2025-11-25 client with tasks and
	// elicitation sees input_required and is asked with elicitation/create
	// on its tasks/result.
	InputChannelTaskResult InputChannel = "tasks_result"
	// InputChannelCallResult: a 2026-07-28 client without tasks that
	// declared elicitation, waiting for its call's result, is answered
	// with an input_required result carrying the question, and its call
	// again carries the answer.
	InputChannelCallResult InputChannel = "call_result"
)

// Valid reports whether c is an input channel this version knows.
func (c InputChannel) Valid() bool {
	return c == InputChannelNone || c == InputChannelTaskUpdate || c == InputChannelTaskResult || c == InputChannelCallResult
}
