package worker

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/telemetry"
)

// stepName names the span of the dispatch step an operation in state s
// takes (dispatch).
func stepName(s ledger.State) string {
	switch s {
	case ledger.StateAccepted:
		return "taskgate.send"
	case ledger.StateSending:
		return "taskgate.recover_send"
	case ledger.StateRunning:
		return "taskgate.poll"
	case ledger.StateInputRequired:
		return "taskgate.question"
	default:
		return "taskgate.dispatch"
	}
}

// step starts the span of one of the worker's steps on op, in the trace of
// the attempt that created op and linked to its other attempts (a retry
// that attached, an answer), so that one trace shows an operation's
// attempts and everything done for them, on whichever replica did it.
func (w *Worker) step(ctx context.Context, op *ledger.Operation, name string) (context.Context, trace.Span) {
	if !w.tracing.On() {
		return w.tracing.StartStep(ctx, name, nil)
	}
	var parent string
	var others []string
	atts, err := w.store.AttemptList(ctx, op.ID)
	if err != nil {
		// The span is worth less without its trace, never worth failing for.
		w.logger(op).Debug("read the attempts' traces", "err", err)
	}
	for _, a := range atts {
		switch {
		case a.TraceParent == "":
		case a.OperationRef == op.ID && a.Decision == ledger.DecisionCreated:
			parent = a.TraceParent
		default:
			others = append(others, a.TraceParent)
		}
	}
	ctx, links := telemetry.Within(ctx, parent, others)
	return w.tracing.StartStep(ctx, name, links, opAttributes(op)...)
}

// part starts the span of a part of a step, such as a lookup.
func (w *Worker) part(ctx context.Context, op *ledger.Operation, name string) (context.Context, trace.Span) {
	return w.tracing.StartStep(ctx, name, nil, opAttributes(op)...)
}

func opAttributes(op *ledger.Operation) []attribute.KeyValue {
	return []attribute.KeyValue{
		telemetry.AttrOperationID.String(op.OperationID), telemetry.AttrTenant.String(op.Tenant),
		telemetry.AttrUpstream.String(op.Upstream), telemetry.AttrTool.String(op.Upstream + "." + op.Tool),
	}
}
