package archive_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/archive"
	"github.com/taskgate/taskgate/archive/archivetest"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/signingkeys"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
	"github.com/taskgate/taskgate/taskwire"
)

const tenant = "acme"

// archived is a gateway whose first operations ended, were reconciled,
// had their receipts issued and were archived while it served new calls.
type archived struct {
	h        *fixtures.Harness
	cs       *mcp.ClientSession
	dir      string
	ids      []string
	live     []string
	receipts map[string][]byte // latest issued receipt by operation ID
	res      *archive.Result
}

// archiveWhileServing runs n operations to their issued receipts, then
// archives them while a client makes new calls, none of which may fail.
func archiveWhileServing(t *testing.T, ctx context.Context, db string, n int) *archived {
	t.Helper()
	keys := filepath.Join(t.TempDir(), "taskgate.keys")
	if _, err := secrets.CreateFile(keys); err != nil {
		t.Fatal(err)
	}
	h, err := fixtures.New(ctx, &fixtures.Options{DB: db, Dir: t.TempDir(), Config: fixtures.ConfigOptions{SecretsKeyFile: keys},
		Sim: providersim.Options{JobDuration: 20 * time.Millisecond}})
	if err != nil {
		t.Fatalf("start the harness: %v", err)
	}
	t.Cleanup(h.Close)
	ring, err := secrets.LoadFile(keys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := signingkeys.Create(ctx, h.Store, ring, time.Time{}); err != nil {
		t.Fatal(err)
	}
	cs, err := h.Connect(ctx, tenant, fixtures.EraExtension)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	a := &archived{h: h, cs: cs, dir: filepath.Join(t.TempDir(), "archive"), receipts: map[string][]byte{}}
	for i := range n {
		a.ids = append(a.ids, fmt.Sprintf("archived-%04d", i))
	}
	calls := make(chan string)
	var (
		callers sync.WaitGroup
		mu      sync.Mutex
		refused []error
	)
	for range 8 {
		callers.Go(func() {
			for id := range calls {
				if task, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall(id, nil), nil); err != nil || task == nil {
					mu.Lock()
					refused = append(refused, fmt.Errorf("%s: %v", id, err))
					mu.Unlock()
				}
			}
		})
	}
	for _, id := range a.ids {
		calls <- id
	}
	close(calls)
	callers.Wait()
	if len(refused) > 0 {
		t.Fatalf("calls got no task: %v", refused)
	}
	for _, id := range a.ids {
		testwait.Until(t, ctx, "the receipt of "+id+" to be issued over its final chain head", func() (bool, error) {
			op, err := h.Store.OperationGet(ctx, &ledger.OperationGetParams{Tenant: tenant, OperationID: id})
			if err != nil {
				return false, err
			}
			vs, err := h.Store.ReceiptVersions(ctx, op.ID)
			if err != nil || len(vs) == 0 {
				return false, fmt.Errorf("%s is %s with no receipt issued (%v)", id, op.State, err)
			}
			a.receipts[id] = vs[len(vs)-1].Document
			return op.State.Terminal(), fmt.Errorf("%s is %s", id, op.State)
		})
	}
	cutoff := time.Now()

	// New calls while the archive runs: every one is accepted.
	stop := make(chan struct{})
	var (
		wg     sync.WaitGroup
		served int
		failed []error
	)
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id := fmt.Sprintf("live-%04d", i)
			if task, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall(id, nil), nil); err != nil || task == nil {
				failed = append(failed, fmt.Errorf("%s: %v", id, err))
			}
			a.live = append(a.live, id)
			served++
		}
	})
	a.res, err = archive.Run(ctx, h.Store, signingkeys.NewSigner(h.Store, ring), &archive.Options{Out: a.dir, EndedBefore: cutoff, Retention: time.Hour, Batch: 50})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("archive: %v", err)
	}
	if len(failed) > 0 || served == 0 {
		t.Fatalf("of %d calls served while archiving, %d failed: %v", served, len(failed), failed)
	}
	if a.res.Operations != n || a.res.Pruned != n || a.res.Kept != 0 {
		t.Fatalf("archived %d operations, pruned %d, kept %d (skipped %v); want all %d archived and pruned", a.res.Operations, a.res.Pruned, a.res.Kept, a.res.Skipped, n)
	}
	return a
}

func testArchive(t *testing.T, db string) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const n = 100
	a := archiveWhileServing(t, ctx, db, n)

	for _, id := range a.ids {
		if _, err := a.h.Store.OperationGet(ctx, &ledger.OperationGetParams{Tenant: tenant, OperationID: id}); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("%s after archiving: %v, want it gone from the ledger", id, err)
		}
	}
	signing, err := a.h.Store.SigningKeyList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	trusted := signingkeys.PublicKeys(signing)
	rep, err := archive.Verify(ctx, a.dir, trusted)
	if err != nil || rep.Problem != nil {
		t.Fatalf("verify the archive: %v, %v", rep.Problem, err)
	}
	if rep.Operations != n {
		t.Fatalf("the archive verifies %d operations, want %d", rep.Operations, n)
	}
	for _, id := range []string{a.ids[0], a.ids[n/2], a.ids[n-1]} {
		r, file, err := archive.Find(a.dir, tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.LatestReceipt(); got == nil || !bytes.Equal([]byte(got.Document), a.receipts[id]) {
			t.Fatalf("the receipt of %s read from %s is not the one issued", id, file)
		}
	}

	// A retry of an archived operation ID starts no job. The calls made
	// while archiving end first, so that every job they start is counted.
	for _, id := range a.live {
		testwait.Until(t, ctx, id+" to end", func() (bool, error) {
			op, err := a.h.Store.OperationGet(ctx, &ledger.OperationGetParams{Tenant: tenant, OperationID: id})
			if err != nil {
				return false, err
			}
			return op.State.Terminal(), fmt.Errorf("%s is %s", id, op.State)
		})
	}
	jobs := len(a.h.Sim.Jobs())
	_, _, err = taskwire.CallToolAsTask(ctx, a.cs, fixtures.RunSuiteCall(a.ids[3], nil), nil)
	if _, reason, ok := fixtures.ErrorReason(err); !ok || reason != ledger.ReasonOperationArchived {
		t.Fatalf("a retry of archived %s: %v, want a refusal with reason %s", a.ids[3], err, ledger.ReasonOperationArchived)
	}
	if !strings.Contains(err.Error(), "archived") {
		t.Fatalf("the refusal %q does not say the operation was archived", err)
	}
	if got := len(a.h.Sim.Jobs()); got != jobs {
		t.Fatalf("a retry of an archived operation started %d provider jobs", got-jobs)
	}
	// Nothing was created that could start one later.
	if op, err := a.h.Store.OperationGet(ctx, &ledger.OperationGetParams{Tenant: tenant, OperationID: a.ids[3]}); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("a retry of an archived operation left operation %+v (%v), want none", op, err)
	}

	// Another run archives nothing more and writes no file.
	before, _ := os.ReadDir(a.dir)
	again, err := archive.Run(ctx, a.h.Store, signingkeys.NewSigner(a.h.Store, nil), &archive.Options{Out: a.dir, EndedBefore: time.Now().Add(-time.Hour), Retention: time.Hour})
	if err != nil || again.Operations != 0 {
		t.Fatalf("a second run: %+v, %v; want nothing archived", again, err)
	}
	if after, _ := os.ReadDir(a.dir); len(after) != len(before) {
		t.Fatalf("a run that archived nothing wrote %d files", len(after)-len(before))
	}

	// Editing one line fails verification, naming the file and the operation.
	file := a.res.Files[0].Name
	editLine(t, filepath.Join(a.dir, file), 2)
	rep, err = archive.Verify(ctx, a.dir, trusted)
	if err != nil {
		t.Fatal(err)
	}
	if p := rep.Problem; p == nil || p.File != file || p.Line != 2 || p.OperationID == "" {
		t.Fatalf("verify after an edit of line 2 of %s: %v, want the file, line 2 and its operation named", file, p)
	}
}

// editLine rewrites one line of a gzip-compressed JSON Lines file: its
// operation's state becomes "failed".
func editLine(t *testing.T, path string, line int) {
	t.Helper()
	archivetest.RewriteGzip(t, path, func(plain string) string {
		lines := strings.Split(plain, "\n")
		lines[line-1] = strings.Replace(lines[line-1], `"State":"completed"`, `"State":"failed"`, 1)
		return strings.Join(lines, "\n")
	})
}

func TestArchiveSQLite(t *testing.T) { testArchive(t, "") }

func TestArchivePostgres(t *testing.T) {
	base := os.Getenv("TASKGATE_TEST_POSTGRES_URL")
	if base == "" {
		t.Skip("TASKGATE_TEST_POSTGRES_URL is not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, drop, err := fixtures.PostgresLedgers(base)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	testArchive(t, db)
}
