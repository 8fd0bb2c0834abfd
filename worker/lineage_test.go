package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/cmd/taskgate/cli"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
)

// opsShow is the part of `taskgate ops show --json` the lineage test reads.
type opsShow struct {
	Operation struct {
		OperationID string       `json:"operation_id"`
		TaskID      string       `json:"task_id"`
		State       ledger.State `json:"state"`
		SendCount   int          `json:"send_count"`
	} `json:"operation"`
	Attempts []struct {
		RequestID    string              `json:"request_id"`
		OperationID  string              `json:"operation_id"`
		Decision     ledger.Decision     `json:"decision"`
		ClientResult ledger.ClientResult `json:"client_result"`
	} `json:"attempts"`
	RemoteJobs []struct {
		RemoteJobID string `json:"remote_job_id"`
		Intended    bool   `json:"intended"`
	} `json:"remote_jobs"`
	Events []struct {
		Kind string          `json:"kind"`
		Data json.RawMessage `json:"data"`
	} `json:"events"`
}

// eraLatestPlain is a client of protocol 2026-07-28 that does not use
// tasks: fixtures.Dial declares no tasks and pins no older version for it.
const eraLatestPlain fixtures.Era = "2026-07-28"

// A client without tasks gives up waiting (its response is lost), then
// retries with the same operation ID. The ledger's account, as
// `taskgate ops show --json` prints it, has one operation with both
// attempts, each with its request ID and what its client got.
func TestLineageAfterLostResponse(t *testing.T) {
	losses := []struct {
		name string
		// call makes the first call and gives up on it.
		call func(ctx context.Context, url, key string, era fixtures.Era, opID string) error
	}{
		{
			// The client's own deadline: the go-sdk cancels the request
			// (notifications/cancelled) and stops waiting.
			name: "client deadline",
			call: func(ctx context.Context, url, key string, era fixtures.Era, opID string) error {
				cs, err := fixtures.Dial(ctx, url, key, era, nil)
				if err != nil {
					return err
				}
				defer cs.Close()
				callCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				defer cancel()
				_, err = cs.CallTool(callCtx, fixtures.RunSuiteCall(opID, nil))
				return err
			},
		},
		{
			// An HTTP timeout: the connection is dropped, no cancellation
			// is sent.
			name: "HTTP timeout",
			call: func(ctx context.Context, url, key string, era fixtures.Era, opID string) error {
				cs, err := fixtures.Dial(ctx, url, key, era, &http.Client{Timeout: 300 * time.Millisecond})
				if err != nil {
					return err
				}
				defer cs.Close()
				_, err = cs.CallTool(ctx, fixtures.RunSuiteCall(opID, nil))
				return err
			},
		},
	}
	for _, era := range []fixtures.Era{eraLatestPlain, fixtures.EraPlain} {
		for _, loss := range losses {
			t.Run(string(era)+"/"+loss.name, func(t *testing.T) {
				ctx := testCtx(t, 60*time.Second)
				h := newHarness(t, &fixtures.Options{Sim: providersim.Options{JobDuration: 1500 * time.Millisecond}})
				const opID = "settlement-regression-842"
				logHistory(t, h.Store, opID)
				key, err := h.Key(ctx, tenant)
				if err != nil {
					t.Fatal(err)
				}
				if err := loss.call(ctx, h.MCPURL(), key, era, opID); err == nil {
					t.Fatal("the first call got its answer; want it lost to the client's timeout")
				}
				cs, err := fixtures.Dial(ctx, h.MCPURL(), key, era, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cs.Close() })
				res, err := cs.CallTool(ctx, fixtures.RunSuiteCall(opID, nil))
				if err != nil || res.IsError {
					t.Fatalf("retry = %+v, %v; want the result", res, err)
				}
				jobs := h.Sim.Jobs()
				if len(jobs) != 1 || fixtures.ResultJob(res) != jobs[0].ID {
					t.Fatalf("retry got job %q; provider jobs %+v; want the one job", fixtures.ResultJob(res), jobs)
				}

				// What each client got is recorded once its request is over.
				recordCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				show := awaitOpsShow(t, recordCtx, h, opID, func(s *opsShow) bool {
					for _, a := range s.Attempts {
						if a.ClientResult == ledger.ClientUnknown {
							return false
						}
					}
					return len(s.Attempts) == 2
				})
				if show.Operation.OperationID != opID || show.Operation.State != ledger.StateCompleted || show.Operation.SendCount != 1 {
					t.Errorf("operation = %+v, want %s completed after one send", show.Operation, opID)
				}
				want := []struct {
					decision ledger.Decision
					client   ledger.ClientResult
					event    ledger.EventKind
				}{
					{ledger.DecisionCreated, ledger.ClientDisconnected, ledger.EventClientStoppedWatching},
					// An attached attempt writes only its attempt row; the
					// event that names it records what its client got.
					{ledger.DecisionAttached, ledger.ClientDelivered, ledger.EventClientResult},
				}
				for i, w := range want {
					a := show.Attempts[i]
					if a.OperationID != opID || a.Decision != w.decision || a.ClientResult != w.client {
						t.Errorf("attempt %d = %+v, want %s with client result %s", i+1, a, w.decision, w.client)
					}
					if !strings.HasPrefix(a.RequestID, "req-") {
						t.Errorf("attempt %d has request ID %q", i+1, a.RequestID)
					}
					if got := eventRequestIDs(t, show, w.event); !slices.Contains(got, a.RequestID) {
						t.Errorf("%s events name requests %v, want %s among them", w.event, got, a.RequestID)
					}
				}
				if show.Attempts[0].RequestID == show.Attempts[1].RequestID {
					t.Errorf("both attempts have request ID %s", show.Attempts[0].RequestID)
				}
				if len(show.RemoteJobs) != 1 || show.RemoteJobs[0].RemoteJobID != jobs[0].ID || !show.RemoteJobs[0].Intended {
					t.Errorf("remote jobs = %+v, want the one intended job %s", show.RemoteJobs, jobs[0].ID)
				}
			})
		}
	}
}

// eventRequestIDs lists the request IDs named by the events of one kind.
func eventRequestIDs(t *testing.T, show *opsShow, kind ledger.EventKind) []string {
	t.Helper()
	var ids []string
	for _, ev := range show.Events {
		if ledger.EventKind(ev.Kind) != kind {
			continue
		}
		var d struct {
			RequestID string `json:"request_id"`
		}
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatalf("%s event data %s: %v", kind, ev.Data, err)
		}
		ids = append(ids, d.RequestID)
	}
	return ids
}

// awaitOpsShow runs ops show until done accepts what it prints.
func awaitOpsShow(t *testing.T, ctx context.Context, h *fixtures.Harness, opID string, done func(*opsShow) bool) *opsShow {
	t.Helper()
	var show *opsShow
	testwait.Until(t, ctx, "ops show "+opID+" to print what the test expects", func() (bool, error) {
		show = opsShowJSON(t, ctx, h, opID)
		return done(show), fmt.Errorf("it prints attempts %+v", show.Attempts)
	})
	return show
}

// opsShowJSON runs `taskgate ops show OPERATION_ID --json` on the
// harness's ledger.
func opsShowJSON(t *testing.T, ctx context.Context, h *fixtures.Harness, opID string) *opsShow {
	t.Helper()
	var stdout, stderr bytes.Buffer
	args := []string{"ops", "show", opID, "--json", "--db", h.Config.Database}
	if code := cli.Main(ctx, args, &stdout, &stderr, func(string) string { return "" }); code != 0 {
		t.Fatalf("taskgate %v exited %d: %s", args, code, stderr.String())
	}
	var show opsShow
	if err := json.Unmarshal(stdout.Bytes(), &show); err != nil {
		t.Fatalf("ops show --json printed %s: %v", stdout.String(), err)
	}
	return &show
}
