package archive

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
)

// Signer signs a checkpoint's statement as a DSSE envelope and names its
// key; nil, with no error, when there is no key to sign with
// (signingkeys.Signer.Envelope).
type Signer interface {
	Envelope(ctx context.Context, statement []byte) ([]byte, string, error)
}

// Options say what one run archives.
type Options struct {
	// Out is the archive directory; it is created when missing.
	Out string
	// EndedBefore: operations that ended before it are archived.
	EndedBefore time.Time
	// Retention is how long after its end an archived operation's ID
	// stays taken; a retry within it is refused.
	Retention time.Duration
	// Batch is how many operations one prune transaction deletes; zero
	// means ledger.DefaultArchiveBatch.
	Batch int
	// MaxOperations bounds the operations one run archives, which it holds
	// in memory until they are written; zero means no bound. The rest are
	// left for the next run.
	MaxOperations int
	// Now is the run's time; zero means time.Now().
	Now time.Time
	// Load says how to read each operation's receipt facts.
	Load *receipt.LoadOptions
}

// Result is what a run did.
type Result struct {
	Run        int
	Files      []ManifestFile
	Operations int
	// Pruned counts the operations deleted from the ledger; Kept those
	// archived that had moved on before they could be deleted (a later
	// run archives them again).
	Pruned  int
	Kept    int
	Skipped map[Skip]int
}

// Run archives every eligible operation (see [Eligible]) that ended before
// opts.EndedBefore into opts.Out, then deletes them from store. Nothing is
// deleted unless every file, the manifest and the signed checkpoint were
// written, synced and read back.
func Run(ctx context.Context, store ledger.Store, signer Signer, opts *Options) (*Result, error) {
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	now = now.UTC()
	batch := opts.Batch
	if batch <= 0 {
		batch = ledger.DefaultArchiveBatch
	}
	if err := os.MkdirAll(opts.Out, 0o750); err != nil {
		return nil, fmt.Errorf("create the archive directory: %w", err)
	}
	entries, err := os.ReadDir(opts.Out)
	if err != nil {
		return nil, fmt.Errorf("read the archive directory: %w", err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	res := &Result{Run: NextRun(names), Skipped: map[Skip]int{}}
	records, err := gather(ctx, store, opts, now, res)
	if err != nil || len(records) == 0 {
		return res, err
	}
	res.Operations = len(records)

	files := Plan(records, res.Run)
	cp := Checkpoint{Format: Format, Run: res.Run, CreatedAt: now}
	for _, f := range files {
		mf, heads, err := writeFile(opts.Out, f)
		if err != nil {
			return nil, err
		}
		res.Files = append(res.Files, mf)
		cp.Operations = append(cp.Operations, heads...)
	}
	st, err := Statement(res.Files, cp)
	if err != nil {
		return nil, err
	}
	env, _, err := signer.Envelope(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("sign the archive's checkpoint: %w", err)
	}
	if env == nil {
		return nil, errors.New("sign the archive's checkpoint: the ledger has no active receipt-signing key; create one with taskgate signing-keys create")
	}
	m := Manifest{Format: Format, Run: res.Run, CreatedAt: now, EndedBefore: opts.EndedBefore.UTC(), Checkpoint: CheckpointName(res.Run), Files: res.Files}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode the manifest: %w", err)
	}
	// The checkpoint first: a manifest names only a checkpoint that exists.
	if err := writeSynced(opts.Out, CheckpointName(res.Run), env); err != nil {
		return nil, err
	}
	if err := writeSynced(opts.Out, ManifestName(res.Run), append(mb, '\n')); err != nil {
		return nil, err
	}
	if err := checkWritten(opts.Out, res.Files); err != nil {
		return nil, err
	}
	return res, prune(ctx, store, files, opts, batch, now, res)
}

// gather reads the operations that ended before the cut-off, page by page,
// and keeps those that may be archived.
func gather(ctx context.Context, store ledger.Store, opts *Options, now time.Time, res *Result) ([]*Record, error) {
	var out []*Record
	var after int64
	for {
		ops, err := store.OperationsToArchive(ctx, &ledger.ArchiveListParams{EndedBefore: opts.EndedBefore, AfterRef: after, Limit: ledger.DefaultArchiveBatch})
		if err != nil {
			return nil, err
		}
		if len(ops) == 0 {
			return out, nil
		}
		for _, op := range ops {
			after = op.ID
			in, err := receipt.Load(ctx, store, op, opts.Load)
			if err != nil {
				return nil, err
			}
			versions, err := store.ReceiptVersions(ctx, op.ID)
			if err != nil {
				return nil, fmt.Errorf("read the receipts of operation %q: %w", op.OperationID, err)
			}
			r := NewRecord(in, versions)
			if skip := Eligible(r, receipt.Build(in), in.Budgets, opts.EndedBefore, now); skip != "" {
				res.Skipped[skip]++
				continue
			}
			out = append(out, r)
			if opts.MaxOperations > 0 && len(out) >= opts.MaxOperations {
				return out, nil
			}
		}
	}
}

// writeFile writes f as gzip-compressed JSON Lines, synced, and returns
// its manifest entry and the heads of its operations.
func writeFile(dir string, f *File) (ManifestFile, []Head, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	var heads []Head
	for i, r := range f.Records {
		line, err := encodeLine(r)
		if err != nil {
			return ManifestFile{}, nil, err
		}
		heads = append(heads, Head{File: f.Name, Line: i + 1, Tenant: r.Operation.Tenant, OperationID: r.Operation.OperationID,
			OperationRef: r.Operation.ID, ChainHead: r.Operation.ChainHead, LineSHA256: digest(line)})
		if _, err := zw.Write(append(line, '\n')); err != nil {
			return ManifestFile{}, nil, fmt.Errorf("compress %s: %w", f.Name, err)
		}
	}
	if err := zw.Close(); err != nil {
		return ManifestFile{}, nil, fmt.Errorf("compress %s: %w", f.Name, err)
	}
	if err := writeSynced(dir, f.Name, buf.Bytes()); err != nil {
		return ManifestFile{}, nil, err
	}
	return ManifestFile{Name: f.Name, SHA256: digest(buf.Bytes()), Bytes: int64(buf.Len()), Operations: len(f.Records)}, heads, nil
}

// encodeLine is a record's line, without its newline. HTML characters stay
// as they are: the line is data, never markup.
func encodeLine(r *Record) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("encode operation %q: %w", r.Operation.OperationID, err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// writeSynced creates name in dir, refusing to replace a file, writes b,
// and syncs the file and the directory.
func writeSynced(dir, name string, b []byte) error {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return fmt.Errorf("create archive file %s (an archive never rewrites a file): %w", name, err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("write archive file %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync archive file %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close archive file %s: %w", name, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync the archive directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync the archive directory: %w", err)
	}
	return nil
}

// checkWritten reads every file back and checks its digest and its count
// of lines.
func checkWritten(dir string, files []ManifestFile) error {
	for _, mf := range files {
		b, err := os.ReadFile(filepath.Join(dir, mf.Name))
		if err != nil {
			return fmt.Errorf("read archive file %s back: %w", mf.Name, err)
		}
		if digest(b) != mf.SHA256 {
			return fmt.Errorf("archive file %s does not read back as written; nothing was deleted", mf.Name)
		}
		n := 0
		if err := eachLine(b, func([]byte) error { n++; return nil }); err != nil {
			return fmt.Errorf("read archive file %s back: %w", mf.Name, err)
		}
		if n != mf.Operations {
			return fmt.Errorf("archive file %s reads back %d operations, not %d; nothing was deleted", mf.Name, n, mf.Operations)
		}
	}
	return nil
}

// eachLine calls fn with each line of a gzip-compressed JSON Lines file.
func eachLine(b []byte, fn func(line []byte) error) error {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("not a gzip file: %w", err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, maxLine)
	for sc.Scan() {
		if err := fn(sc.Bytes()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, zr)
	return err
}

// maxLine bounds one operation's line: its events, results and receipts.
const maxLine = 64 << 20

// prune deletes the archived operations in batches, each with its
// tombstone. A batch that fails because an operation moved on is retried
// one operation at a time, so that only those stay.
func prune(ctx context.Context, store ledger.Store, files []*File, opts *Options, batch int, now time.Time, res *Result) error {
	var stones []*ledger.Tombstone
	for _, f := range files {
		for _, r := range f.Records {
			op := r.Operation
			stones = append(stones, &ledger.Tombstone{OperationRef: op.ID, Tenant: op.Tenant, OperationID: op.OperationID, TaskID: op.TaskID,
				EndedAt: op.EndedAt, ChainHead: op.ChainHead, ArchiveFile: f.Name, KeyUntil: op.EndedAt.Add(opts.Retention), ArchivedAt: now})
		}
	}
	for len(stones) > 0 {
		n := min(batch, len(stones))
		part := stones[:n]
		stones = stones[n:]
		err := store.OperationsPrune(ctx, part)
		if err == nil {
			res.Pruned += n
			continue
		}
		if !errors.Is(err, ledger.ErrStateChanged) {
			return err
		}
		for _, t := range part {
			switch err := store.OperationsPrune(ctx, []*ledger.Tombstone{t}); {
			case err == nil:
				res.Pruned++
			case errors.Is(err, ledger.ErrStateChanged):
				res.Kept++
			default:
				return err
			}
		}
	}
	return nil
}
