// Package testwait holds what tests use to wait for a fact instead of
// sleeping for a while: [Until] checks a condition until it holds, and
// fails the test, naming what it waited for, when the condition does not
// hold before the context it is given (one with a deadline) ends. A sleep that stands in for such a
// wait passes without testing anything on a slow machine, and wastes time on
// a fast one.
//
// It is for tests only: production code never imports it.
package testwait

import (
	"context"
	"testing"
	"time"
)

// Interval is how long Until waits between two checks of its condition.
const Interval = 10 * time.Millisecond

// Until calls cond, at once and then every [Interval], until it returns
// true. What names the fact waited for, as in "the task to end". While cond
// returns false, its error, if any, says why the fact does not hold yet (a
// read that failed, or the state seen instead); it is not fatal. When ctx
// ends first, Until fails t with what, how long it waited and the last such
// error. A condition that can never hold fails t itself: cond runs on the
// caller's goroutine, so it may call t.Fatal.
//
// Until waits as long as ctx allows; pass one with a deadline (t.Context
// has none). Inside a testing/synctest bubble it waits on the bubble's
// clock.
func Until(t testing.TB, ctx context.Context, what string, cond func() (bool, error)) {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	for {
		ok, err := cond()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			if err != nil {
				t.Fatalf("gave up after %v waiting for %s: %v", time.Since(start).Round(time.Millisecond), what, err)
			} else {
				t.Fatalf("gave up after %v waiting for %s", time.Since(start).Round(time.Millisecond), what)
			}
			return
		case <-tick.C:
		}
	}
}
