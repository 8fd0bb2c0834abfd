package archive_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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

// serving is a gateway in front of the simulated provider whose ledger (db,
// or a new SQLite file when empty) has a receipt-signing key and filled
// ended operations with issued receipts, and a client of tenant acme.
func serving(t *testing.T, ctx context.Context, db string, filled int, editConfig func(string) string, wrap func(ledger.Store) ledger.Store) (*fixtures.Harness, *secrets.Ring, *mcp.ClientSession) {
	t.Helper()
	dir := t.TempDir()
	if db == "" {
		db = "sqlite:" + filepath.Join(dir, "taskgate.db")
	}
	// Filled before the gateway starts, so that its worker never takes an
	// operation being filled for one a worker left behind.
	s, ring, err := archivetest.OpenLedger(ctx, fillURL(t, db), dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := archivetest.Fill(ctx, s, ring, tenant, "filled-", filled); err != nil {
		t.Fatalf("fill the ledger with %d ended operations: %v", filled, err)
	}
	s.Close()
	h, err := fixtures.New(ctx, &fixtures.Options{DB: db, Dir: dir, Config: fixtures.ConfigOptions{SecretsKeyFile: filepath.Join(dir, "taskgate.keys")},
		Sim: providersim.Options{JobDuration: 20 * time.Millisecond}, EditConfig: editConfig, ShareStore: true, WrapStore: wrap})
	if err != nil {
		t.Fatalf("start the harness: %v", err)
	}
	t.Cleanup(h.Close)
	cs, err := h.Connect(ctx, tenant, fixtures.EraExtension)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return h, ring, cs
}

// runToReceipts calls run_suite under each ID, 8 at once, and returns the
// latest receipt issued for each once its operation has ended and its
// receipt covers its final chain head, and each operation's row ID.
func runToReceipts(t *testing.T, ctx context.Context, h *fixtures.Harness, cs *mcp.ClientSession, ids []string) (map[string][]byte, map[string]int64) {
	t.Helper()
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
	for _, id := range ids {
		calls <- id
	}
	close(calls)
	callers.Wait()
	if len(refused) > 0 {
		t.Fatalf("calls got no task: %v", refused)
	}
	receipts, refs := map[string][]byte{}, map[string]int64{}
	for _, id := range ids {
		testwait.Until(t, ctx, "the receipt of "+id+" to be issued over its final chain head", func() (bool, error) {
			op, err := h.Store.OperationGet(ctx, &ledger.OperationGetParams{Tenant: tenant, OperationID: id})
			if err != nil {
				return false, err
			}
			vs, err := h.Store.ReceiptVersions(ctx, op.ID)
			if err != nil || len(vs) == 0 {
				return false, fmt.Errorf("%s is %s with no receipt issued (%v)", id, op.State, err)
			}
			receipts[id], refs[id] = vs[len(vs)-1].Document, op.ID
			return op.State.Terminal(), fmt.Errorf("%s is %s", id, op.State)
		})
	}
	return receipts, refs
}

// pruneCounter is a ledger that counts the prune transactions begun and
// those committed.
type pruneCounter struct {
	ledger.Store
	begun, done atomic.Int64
}

func (p *pruneCounter) OperationsPrune(ctx context.Context, tombstones []*ledger.Tombstone) error {
	p.begun.Add(1)
	defer p.done.Add(1)
	return p.Store.OperationsPrune(ctx, tombstones)
}

// acceptWatch is the gateway's ledger, noting of each operation ID the
// most prune transactions that began and committed during one Accept.
type acceptWatch struct {
	ledger.Store
	prunes *pruneCounter
	mu     sync.Mutex
	whole  map[string]int64
}

func (a *acceptWatch) Accept(ctx context.Context, p *ledger.AcceptParams) (*ledger.AcceptResult, error) {
	begun := a.prunes.begun.Load()
	res, err := a.Store.Accept(ctx, p)
	whole := a.prunes.done.Load() - begun
	a.mu.Lock()
	a.whole[p.OperationID] = max(a.whole[p.OperationID], whole)
	a.mu.Unlock()
	return res, err
}

func (a *acceptWatch) wholePrunes(operationID string) (int64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n, ok := a.whole[operationID]
	return n, ok
}

// archiveWhileServing runs n operations to their issued receipts, fills the
// ledger with filled more ended operations whose receipts are issued, then
// archives them all while a client makes new calls, none of which may
// fail or wait for more than one prune transaction.
func archiveWhileServing(t *testing.T, ctx context.Context, db string, n, filled int) *archived {
	t.Helper()
	prunes := &pruneCounter{}
	accepts := &acceptWatch{prunes: prunes, whole: map[string]int64{}}
	h, ring, cs := serving(t, ctx, db, filled, nil, func(s ledger.Store) ledger.Store { accepts.Store = s; return accepts })
	prunes.Store = h.Store
	a := &archived{h: h, cs: cs, dir: filepath.Join(t.TempDir(), "archive")}
	for i := range n {
		a.ids = append(a.ids, fmt.Sprintf("archived-%04d", i))
	}
	a.receipts, _ = runToReceipts(t, ctx, h, cs, a.ids)
	cutoff := time.Now()

	// New calls while the archive runs: every one is accepted, and its
	// acceptance sees at most two prune transactions begin and commit while
	// the gateway's Accept runs. Acceptances commit in groups, one group at
	// a time on SQLite: one that arrives while a group commits (the last
	// call's client result, say) waits for that group, which may wait for
	// one prune, and then its own group may wait for the next. Prunes run
	// one after another, so a third cannot fit. (The call's reads before
	// Accept, which a busy machine can stretch over a whole prune, are not
	// counted.)
	stop := make(chan struct{})
	var (
		wg     sync.WaitGroup
		served int
		failed []error
	)
	wg.Go(func() {
		// Within the tenant's call_rate (25 a second), so that none is
		// refused for its pace.
		pace := time.NewTicker(50 * time.Millisecond)
		defer pace.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-pace.C:
			}
			id := fmt.Sprintf("live-%04d", i)
			if task, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall(id, nil), nil); err != nil || task == nil {
				failed = append(failed, fmt.Errorf("%s: %v", id, err))
			}
			switch whole, seen := accepts.wholePrunes(id); {
			case !seen:
				failed = append(failed, fmt.Errorf("%s: the gateway's ledger saw no acceptance of it", id))
			case whole > 2:
				failed = append(failed, fmt.Errorf("%s: %d prune transactions began and committed while it was being accepted", id, whole))
			}
			a.live = append(a.live, id)
			served++
		}
	})
	res, err := archive.Run(ctx, prunes, signingkeys.NewSigner(h.Store, ring), &archive.Options{Out: a.dir, EndedBefore: cutoff, Retention: time.Hour})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("archive: %v", err)
	}
	a.res = res
	if len(failed) > 0 || served == 0 {
		t.Fatalf("of %d calls served while archiving, %d failed: %v", served, len(failed), failed)
	}
	if all := n + filled; res.Operations != all || res.Pruned != all || res.Kept != 0 {
		t.Fatalf("archived %d operations, pruned %d, kept %d (skipped %v); want all %d archived and pruned", res.Operations, res.Pruned, res.Kept, res.Skipped, all)
	}
	if want := int64((n + filled + ledger.DefaultArchiveBatch - 1) / ledger.DefaultArchiveBatch); prunes.done.Load() != want {
		t.Fatalf("%d prune transactions, want %d of at most %d operations", prunes.done.Load(), want, ledger.DefaultArchiveBatch)
	}
	return a
}

// testArchive archives 40 operations run through the gateway and filled
// more whose receipts were issued directly, while the gateway serves.
func testArchive(t *testing.T, db string, filled int) {
	// Generous: 10,000 operations on a shared, busy machine took 8
	// minutes where an idle one takes 2.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	const n = 40
	a := archiveWhileServing(t, ctx, db, n, filled)

	for _, id := range append([]string{"filled-000000", fmt.Sprintf("filled-%06d", filled-1)}, a.ids...) {
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
	if rep.Operations != n+filled {
		t.Fatalf("the archive verifies %d operations, want %d", rep.Operations, n+filled)
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

func TestArchiveSQLite(t *testing.T) { testArchive(t, "", 0) }

func TestArchivePostgres(t *testing.T) { testArchive(t, postgresLedger(t), 0) }

// postgresLedger is a new PostgreSQL ledger, dropped when the test ends.
// fillURL is the ledger URL db for filling it: on PostgreSQL, its commits
// do not wait for the disk (synchronous_commit=off, on the filling
// connections only). What is filled stands for months of ended work, whose
// durability the tests do not test; waiting for 10,000 operations' commits
// to reach a shared machine's disk took most of a scale test's time.
func fillURL(t *testing.T, db string) string {
	if !strings.HasPrefix(db, "postgres") {
		return db
	}
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("synchronous_commit", "off")
	u.RawQuery = q.Encode()
	return u.String()
}

func postgresLedger(t *testing.T) string {
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
	return db
}

// TestScheduledArchive: with retention.archive set, the gateway archives
// ended operations on its own, and once their IDs are released deletes
// their tombstones; the archive verifies and holds the receipts issued.
func TestScheduledArchive(t *testing.T) {
	for _, store := range []struct {
		name string
		db   func(t *testing.T) string
	}{{"sqlite", func(*testing.T) string { return "" }}, {"postgres", postgresLedger}} {
		t.Run(store.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			dir := filepath.Join(t.TempDir(), "archive")
			h, _, cs := serving(t, ctx, store.db(t), 0, func(yaml string) string {
				return yaml + fmt.Sprintf("retention:\n  operation_ids: 3s\n  archive:\n    after: 3s\n    every: 1s\n    out: %q\n", dir)
			}, nil)
			ids := []string{"scheduled-1", "scheduled-2", "scheduled-3"}
			receipts, refs := runToReceipts(t, ctx, h, cs, ids)
			for _, id := range ids {
				testwait.Until(t, ctx, id+" to be archived", func() (bool, error) {
					_, _, err := archive.Find(dir, tenant, id)
					return err == nil, err
				})
				testwait.Until(t, ctx, id+" to leave the ledger and its tombstone to go once its ID is released", func() (bool, error) {
					if _, err := h.Store.OperationGet(ctx, &ledger.OperationGetParams{ID: refs[id]}); !errors.Is(err, ledger.ErrNotFound) {
						return false, fmt.Errorf("%s is still in the ledger (%v)", id, err)
					}
					stones, err := h.Store.TombstoneList(ctx, tenant, id)
					return err == nil && len(stones) == 0, fmt.Errorf("%s has tombstones %v (%v)", id, stones, err)
				})
			}
			signing, err := h.Store.SigningKeyList(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := archive.Verify(ctx, dir, signingkeys.PublicKeys(signing))
			if err != nil || rep.Problem != nil || rep.Operations != len(ids) {
				t.Fatalf("verify the scheduled archive: %d operations, %v, %v; want %d verified", rep.Operations, rep.Problem, err, len(ids))
			}
			for _, id := range ids {
				r, file, err := archive.Find(dir, tenant, id)
				if err != nil {
					t.Fatal(err)
				}
				if got := r.LatestReceipt(); got == nil || !bytes.Equal([]byte(got.Document), receipts[id]) {
					t.Fatalf("the receipt of %s read from %s is not the one issued", id, file)
				}
			}
		})
	}
}
