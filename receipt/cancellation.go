package receipt

import (
	"cmp"
	"slices"
	"time"

	"github.com/taskgate/taskgate/ledger"
)

// cancelRequest is one recorded request to cancel; job is empty when it
// covers the whole operation.
type cancelRequest struct {
	at  time.Time
	job string
}

func (f *facts) cancellation() *Cancellation {
	c := &Cancellation{}
	stopped := func(at time.Time) {
		if !c.ClientStoppedWatching || at.Before(c.ClientStoppedWatchingAt) {
			c.ClientStoppedWatchingAt = at
		}
		c.ClientStoppedWatching = true
	}
	for _, a := range f.attempts {
		if a.ClientResult == ledger.ClientDisconnected || a.ClientResult == ledger.ClientTimedOut {
			stopped(cmp.Or(a.UpdatedAt, a.CreatedAt))
		}
	}

	requested := func(at time.Time) {
		if !c.CancellationRequested || at.Before(c.CancellationRequestedAt) {
			c.CancellationRequestedAt = at
		}
		c.CancellationRequested = true
	}
	var requests []cancelRequest
	if !f.op.CancelRequestedAt.IsZero() {
		requests = append(requests, cancelRequest{at: f.op.CancelRequestedAt})
	}
	for _, j := range f.jobs {
		if !j.CancelRequestedAt.IsZero() {
			requests = append(requests, cancelRequest{at: j.CancelRequestedAt, job: j.RemoteJobID})
		}
	}
	// reversal is the latest recorded reversal fact per job ("" for the
	// whole operation).
	reversal := map[string]string{}
	// What a record the receipt cannot read says beyond its kind proves
	// nothing, so it is skipped.
	for _, e := range f.events {
		switch e.Kind {
		case ledger.EventClientStoppedWatching:
			stopped(e.CreatedAt)
		case ledger.EventCancellationRequested:
			d, err := ledger.DecodeEventData[ledger.CancellationRequestedData](e)
			switch {
			case err != nil:
			case d.KeptBy != "":
				// The client asked, and the policy kept the job: asked,
				// but no job was asked to stop or reverse anything.
				c.KeptByPolicy = string(d.KeptBy)
				requested(e.CreatedAt)
			default:
				requests = append(requests, cancelRequest{at: e.CreatedAt, job: d.RemoteJobID})
			}
		case ledger.EventEffectReversed:
			if d, err := ledger.DecodeEventData[ledger.EffectReversedData](e); err == nil {
				reversal[d.RemoteJobID] = string(ledger.Yes)
			}
		case ledger.EventEffectNotReversed:
			// The kind alone says the request came after the effect.
			c.RequestedAfterEffect = true
			if d, err := ledger.DecodeEventData[ledger.EffectNotReversedData](e); err == nil {
				reversal[d.RemoteJobID] = string(ledger.No)
			}
		}
	}
	for _, rq := range requests {
		requested(rq.at)
		for _, j := range f.jobs {
			done, ok := f.completedAt[j.ID]
			if ok && (rq.job == "" || rq.job == j.RemoteJobID) && !rq.at.Before(done) {
				c.RequestedAfterEffect = true
			}
		}
	}

	jobFacts := slices.ContainsFunc(f.jobs, func(j *ledger.RemoteJob) bool {
		return j.EffectReversed == ledger.Yes || j.EffectReversed == ledger.No
	})
	if len(requests) > 0 || len(reversal) > 0 || jobFacts {
		c.EffectReversed = f.effectReversed(requests, reversal)
	}
	if !c.ClientStoppedWatching && !c.CancellationRequested && c.EffectReversed == "" {
		return nil
	}
	c.ClientStoppedWatchingAt = utc(c.ClientStoppedWatchingAt)
	c.CancellationRequestedAt = utc(c.CancellationRequestedAt)
	return c
}

// effectReversed aggregates over the jobs a cancellation or reversal fact
// concerns: "no" if any effect stands, "yes" if every one was reversed,
// otherwise "unknown".
func (f *facts) effectReversed(requests []cancelRequest, reversal map[string]string) string {
	var values []string
	for _, j := range f.jobs {
		concerned := j.EffectReversed == ledger.Yes || j.EffectReversed == ledger.No
		_, recorded := reversal[j.RemoteJobID]
		concerned = concerned || recorded || slices.ContainsFunc(requests, func(rq cancelRequest) bool {
			return rq.job == "" || rq.job == j.RemoteJobID
		})
		if !concerned {
			continue
		}
		v := string(j.EffectReversed)
		if v != string(ledger.Yes) && v != string(ledger.No) {
			v = cmp.Or(reversal[j.RemoteJobID], reversal[""], string(ledger.Unknown))
		}
		values = append(values, v)
	}
	if len(values) == 0 {
		return cmp.Or(reversal[""], string(ledger.Unknown))
	}
	switch {
	case slices.Contains(values, string(ledger.No)):
		return string(ledger.No)
	case !slices.ContainsFunc(values, func(v string) bool { return v != string(ledger.Yes) }):
		return string(ledger.Yes)
	default:
		return string(ledger.Unknown)
	}
}
