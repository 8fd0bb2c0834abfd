package sqlstore

import (
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

type plainArgs struct{}

func (plainArgs) Kind() string { return "plain" }

type uniqueArgs struct{}

func (uniqueArgs) Kind() string { return "unique" }
func (uniqueArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

type queuedArgs struct{}

func (queuedArgs) Kind() string                 { return "queued" }
func (queuedArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: "poll"} }

// Only a job that asks for uniqueness, through its own options or its
// kind's, leaves River's fast path, which would fail on a conflict where
// the unique-aware insert skips.
func TestUniqueJob(t *testing.T) {
	for _, c := range []struct {
		name string
		job  river.InsertManyParams
		want bool
	}{
		{"plain", river.InsertManyParams{Args: plainArgs{}}, false},
		{"kind with a queue", river.InsertManyParams{Args: queuedArgs{}}, false},
		{"scheduled", river.InsertManyParams{Args: queuedArgs{}, InsertOpts: &river.InsertOpts{ScheduledAt: time.Now()}}, false},
		{"kind unique by args", river.InsertManyParams{Args: uniqueArgs{}}, true},
		{"options unique by state", river.InsertManyParams{Args: plainArgs{}, InsertOpts: &river.InsertOpts{
			UniqueOpts: river.UniqueOpts{ByState: []rivertype.JobState{rivertype.JobStateAvailable}}}}, true},
		{"options unique by period", river.InsertManyParams{Args: plainArgs{}, InsertOpts: &river.InsertOpts{
			UniqueOpts: river.UniqueOpts{ByPeriod: time.Hour}}}, true},
	} {
		if got := uniqueJob(c.job); got != c.want {
			t.Errorf("%s: uniqueJob = %v, want %v", c.name, got, c.want)
		}
	}
}
