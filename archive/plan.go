// Package archive moves ended, reconciled operations out of the live
// ledger into files that verify offline: one gzip-compressed JSON Lines
// file per UTC day of end time and run, a manifest of their digests, and
// a checkpoint signed with the receipt-signing key (a DSSE envelope over
// an in-toto statement) that holds each file's digest and each archived
// operation's chain head and line digest. Only once the files are written,
// synced and read back does [Run] delete the operations from the ledger,
// in batches, leaving a tombstone for each.
//
// The decisions (which operations may go, which file each goes to, what
// the next run is called) are pure functions here; [Run] and [Verify] do
// the I/O.
package archive

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
)

// Format is the version of the archive's file layout and record shape.
const Format = 1

// PredicateType names the checkpoint's in-toto predicate.
const PredicateType = "https://taskgate.dev/archive-checkpoint/v1"

// Skip says why an ended operation stays in the live ledger. Its values
// are stable strings, printed by taskgate archive.
type Skip string

const (
	// SkipNotEnded: the operation has not ended before the cut-off.
	SkipNotEnded Skip = "not_ended"
	// SkipNoReceipt: no receipt was issued for it yet.
	SkipNoReceipt Skip = "no_receipt"
	// SkipNotReconciled: its reconciliation is not complete.
	SkipNotReconciled Skip = "not_reconciled"
	// SkipReceiptOutdated: what the ledger says of it now is not what its
	// latest issued receipt says; the next version is not issued yet.
	SkipReceiptOutdated Skip = "receipt_outdated"
	// SkipBudgetOpen: a budget it reserved against is still open; its
	// reservation counts against the budget's ceiling.
	SkipBudgetOpen Skip = "budget_open"
	// SkipApprovalActive: the approval it ran under still covers new work;
	// its reservation counts against the approval's ceiling, and a new
	// operation under the same ID could use the approval again.
	SkipApprovalActive Skip = "approval_active"
)

// Eligible decides whether r may be archived at now with everything ending
// before endedBefore: it has ended; its receipt as the ledger builds it
// now (current) says its reconciliation is complete, and its latest
// issued receipt says the same (the same substance, [receipt.Substance]),
// so the archive's receipt is its final account; no budget it reserved
// against is open; and the approval it ran under covers no new work. It
// returns "" when it may.
func Eligible(r *Record, current *receipt.Receipt, budgets []*ledger.Budget, endedBefore, now time.Time) Skip {
	op := r.Operation
	if !op.State.Terminal() || op.EndedAt.IsZero() || !op.EndedAt.Before(endedBefore) {
		return SkipNotEnded
	}
	latest := r.LatestReceipt()
	if latest == nil {
		return SkipNoReceipt
	}
	if current.ReconciliationStatus != receipt.ReconciliationComplete {
		return SkipNotReconciled
	}
	if sub, err := receipt.Substance(current); err != nil || sub != latest.Substance {
		return SkipReceiptOutdated
	}
	for _, b := range budgets {
		if b.Open(now) {
			return SkipBudgetOpen
		}
	}
	if r.Approval != nil && r.Approval.Active(now) {
		return SkipApprovalActive
	}
	return ""
}

// File is one archive file of a run: the operations that ended on Day.
type File struct {
	Name    string
	Day     time.Time
	Records []*Record
}

// Plan groups records into the files of run: one per UTC day of end time,
// oldest day first, each holding its records in the order given.
func Plan(records []*Record, run int) []*File {
	byDay := map[time.Time]*File{}
	var files []*File
	for _, r := range records {
		e := r.Operation.EndedAt.UTC()
		day := time.Date(e.Year(), e.Month(), e.Day(), 0, 0, 0, 0, time.UTC)
		f, ok := byDay[day]
		if !ok {
			f = &File{Name: FileName(day, run), Day: day}
			byDay[day] = f
			files = append(files, f)
		}
		f.Records = append(f.Records, r)
	}
	slices.SortFunc(files, func(a, b *File) int { return a.Day.Compare(b.Day) })
	return files
}

// FileName names the archive file of run for the operations that ended on
// day. Each run writes new files, so a name is never written twice.
func FileName(day time.Time, run int) string {
	return fmt.Sprintf("operations-%s-r%06d.jsonl.gz", day.UTC().Format(time.DateOnly), run)
}

// ManifestName and CheckpointName name a run's manifest and signed
// checkpoint.
func ManifestName(run int) string   { return fmt.Sprintf("manifest-r%06d.json", run) }
func CheckpointName(run int) string { return fmt.Sprintf("checkpoint-r%06d.dsse.json", run) }

// RunOf returns the run a manifest's file name names, or false when name
// is not a manifest's.
func RunOf(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "manifest-r")
	if !ok {
		return 0, false
	}
	rest, ok = strings.CutSuffix(rest, ".json")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 1 {
		return 0, false
	}
	return n, true
}

// NextRun is the run after the latest whose manifest is among names: 1 in
// an empty directory.
func NextRun(names []string) int {
	last := 0
	for _, n := range names {
		if run, ok := RunOf(n); ok && run > last {
			last = run
		}
	}
	return last + 1
}
