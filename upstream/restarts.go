package upstream

import (
	"fmt"
	"time"
)

// restartWindow is the span in which a stdio upstream's
// max_restarts_per_minute counts restarts.
const restartWindow = time.Minute

// A restartPlan says when a stdio child that exited is started again.
type restartPlan struct {
	// At is when to start it.
	At time.Time
	// Spent means the restart budget is spent: At is later than the
	// backoff alone would make it, and the upstream is unavailable until
	// then.
	Spent bool
}

// planRestart decides when to start again a stdio child that exited at
// now. restarts are the times it was started again before, oldest first
// (times more than a minute old may be left out). It is started after
// backoff, unless that start would follow budget restarts within one
// minute; then it is started when the oldest of them that stands in the
// way leaves the minute. A budget below one counts as one.
func planRestart(restarts []time.Time, now time.Time, backoff time.Duration, budget int) restartPlan {
	budget = max(budget, 1)
	at := now.Add(backoff)
	if inMinute(restarts, at) < budget {
		return restartPlan{At: at}
	}
	// After this instant the minute before a start holds budget-1 of
	// them, since all of them are at or before now.
	return restartPlan{At: restarts[len(restarts)-budget].Add(restartWindow), Spent: true}
}

// inMinute counts the times, oldest first, in the minute up to t: after
// t-1m and at or before t.
func inMinute(times []time.Time, t time.Time) int {
	n := 0
	for _, x := range times {
		if x.After(t.Add(-restartWindow)) && !x.After(t) {
			n++
		}
	}
	return n
}

// recent returns the times, oldest first, that are less than a minute
// before now: those a later plan can still count.
func recent(times []time.Time, now time.Time) []time.Time {
	for i, x := range times {
		if x.After(now.Add(-restartWindow)) {
			return times[i:]
		}
	}
	return nil
}

// restartBudgetError is why a stdio upstream whose restart budget is
// spent is unavailable, and the error a call gets at once meanwhile.
type restartBudgetError struct {
	crashes int       // exits within the last minute
	budget  int       // max_restarts_per_minute
	next    time.Time // when the child is started again
	last    error     // why it last exited
}

func (e *restartBudgetError) Error() string {
	return fmt.Sprintf("its process exited %d times within a minute and max_restarts_per_minute is %d, so it is unavailable until it is started again at %s (last exit: %v)",
		e.crashes, e.budget, e.next.UTC().Format(time.RFC3339), e.last)
}

func (e *restartBudgetError) Unwrap() error { return e.last }
