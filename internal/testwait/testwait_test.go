package testwait_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/taskgate/taskgate/internal/testwait"
)

// recorder is a testing.TB that keeps what Fatalf says instead of
// stopping the goroutine, so that a test can read how Until fails.
type recorder struct {
	testing.TB
	fatal string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		calls := 0
		start := time.Now()
		testwait.Until(t, ctx, "the third call", func() (bool, error) {
			calls++
			return calls == 3, errors.New("a reason why not, beside true, is ignored")
		})
		if got, want := time.Since(start), 2*testwait.Interval; got != want {
			t.Errorf("Until returned after %v, want %v: one interval between checks", got, want)
		}
	})
}

func TestUntilNamesWhatItWaitedFor(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{"false", nil, "gave up after 1s waiting for the job to run"},
		{"error", errors.New("job is still queued"), "gave up after 1s waiting for the job to run: job is still queued"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				r := &recorder{TB: t}
				testwait.Until(r, ctx, "the job to run", func() (bool, error) { return false, tt.err })
				if r.fatal != tt.want {
					t.Errorf("Until failed with %q, want %q", r.fatal, tt.want)
				}
			})
		})
	}
}
