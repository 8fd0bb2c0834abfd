package archive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/taskgate/taskgate/receipt"
)

// Problem is the first thing in an archive that does not hold: where it
// is (the file, and the operation and its line when one is to blame) and
// what was found.
type Problem struct {
	File        string
	Line        int
	Tenant      string
	OperationID string
	Detail      string
}

func (p *Problem) Error() string {
	switch {
	case p.OperationID != "":
		return fmt.Sprintf("%s line %d, operation %q of tenant %q: %s", p.File, p.Line, p.OperationID, p.Tenant, p.Detail)
	case p.File != "":
		return fmt.Sprintf("%s: %s", p.File, p.Detail)
	}
	return p.Detail
}

// Report is what [Verify] checked; Problem is nil when everything holds.
type Report struct {
	Runs       int
	Files      int
	Operations int
	Problem    *Problem
}

// Verify checks the archive in dir with keys, reading no ledger: each
// run's checkpoint signature, that its manifest lists exactly the files it
// signs, each line's digest against the checkpoint, each operation's hash
// chain and head, each issued receipt's digest, and each file's digest. It
// stops at the first thing that does not hold.
func Verify(ctx context.Context, dir string, keys receipt.PublicKeys) (*Report, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read the archive directory: %w", err)
	}
	var runs []int
	for _, e := range entries {
		if run, ok := RunOf(e.Name()); ok {
			runs = append(runs, run)
		}
	}
	slices.Sort(runs)
	rep := &Report{}
	if len(runs) == 0 {
		rep.Problem = &Problem{Detail: fmt.Sprintf("%s holds no archive manifest", dir)}
		return rep, nil
	}
	for _, run := range runs {
		rep.Runs++
		if p := verifyRun(ctx, dir, run, keys, rep); p != nil {
			rep.Problem = p
			return rep, nil
		}
	}
	return rep, nil
}

func verifyRun(ctx context.Context, dir string, run int, keys receipt.PublicKeys, rep *Report) *Problem {
	mname := ManifestName(run)
	mb, err := os.ReadFile(filepath.Join(dir, mname))
	if err != nil {
		return &Problem{File: mname, Detail: err.Error()}
	}
	var m Manifest
	if err := json.Unmarshal(mb, &m); err != nil || m.Run != run {
		return &Problem{File: mname, Detail: "the manifest is not readable, or names another run"}
	}
	cname := CheckpointName(run)
	env, err := os.ReadFile(filepath.Join(dir, cname))
	if err != nil {
		return &Problem{File: cname, Detail: err.Error()}
	}
	payload, _, err := receipt.VerifySigned(ctx, env, keys)
	if err != nil {
		return &Problem{File: cname, Detail: "the checkpoint's signature does not verify: " + err.Error()}
	}
	signed, cp, err := readStatement(payload)
	if err != nil {
		return &Problem{File: cname, Detail: err.Error()}
	}
	if len(signed) != len(m.Files) {
		return &Problem{File: mname, Detail: fmt.Sprintf("the manifest lists %d files, the signed checkpoint %d", len(m.Files), len(signed))}
	}
	heads := map[string][]Head{}
	for _, h := range cp.Operations {
		heads[h.File] = append(heads[h.File], h)
	}
	for _, mf := range m.Files {
		if signed[mf.Name] != mf.SHA256 {
			return &Problem{File: mname, Detail: fmt.Sprintf("its digest of %s is not the one the checkpoint signs", mf.Name)}
		}
		if p := verifyFile(dir, mf, heads[mf.Name]); p != nil {
			return p
		}
		rep.Files++
		rep.Operations += mf.Operations
	}
	return nil
}

func verifyFile(dir string, mf ManifestFile, heads []Head) *Problem {
	b, err := os.ReadFile(filepath.Join(dir, mf.Name))
	if err != nil {
		return &Problem{File: mf.Name, Detail: err.Error()}
	}
	n := 0
	err = eachLine(b, func(line []byte) error {
		n++
		if n > len(heads) {
			return &Problem{File: mf.Name, Line: n, Detail: "the line is not in the signed checkpoint: it was added"}
		}
		h := heads[n-1]
		p := &Problem{File: mf.Name, Line: n, Tenant: h.Tenant, OperationID: h.OperationID}
		if digest(line) != h.LineSHA256 {
			p.Detail = "the line is not the one the checkpoint signs: it was edited"
			return p
		}
		var r Record
		if err := json.Unmarshal(line, &r); err != nil || r.Operation == nil {
			p.Detail = "the line is not an archived operation"
			return p
		}
		if r.Operation.ChainHead != h.ChainHead {
			p.Detail = "its chain head is not the one the checkpoint signs"
			return p
		}
		if c := r.Chain().Check(); c.Break != nil {
			p.Detail = fmt.Sprintf("its hash chain does not hold (%s", c.Break.Problem)
			if c.Break.Event != nil {
				p.Detail += fmt.Sprintf(" at event %d", c.Break.Event.ID)
			}
			p.Detail += "): " + c.Break.Detail
			return p
		}
		for _, v := range r.Receipts {
			if receipt.Digest([]byte(v.Document)) != v.Digest {
				p.Detail = fmt.Sprintf("version %d of its receipt does not match its digest", v.Version)
				return p
			}
		}
		return nil
	})
	if p, ok := errors.AsType[*Problem](err); ok {
		return p
	}
	if err != nil {
		return &Problem{File: mf.Name, Detail: "the file is not readable: " + err.Error()}
	}
	if n != len(heads) || n != mf.Operations {
		return &Problem{File: mf.Name, Detail: fmt.Sprintf("the file holds %d operations; the manifest says %d and the checkpoint %d: lines were removed", n, mf.Operations, len(heads))}
	}
	if digest(b) != mf.SHA256 {
		return &Problem{File: mf.Name, Detail: "the file's digest is not the manifest's"}
	}
	return nil
}

// ErrNotArchived means no archive file in the directory holds the
// operation.
var ErrNotArchived = errors.New("the operation is not in the archive")

// Find reads the latest archived record of the tenant's operation ID from
// the archive in dir, with the file that holds it; an empty tenant matches
// any, unless two tenants archived the ID. It checks nothing; run [Verify]
// for that.
func Find(dir, tenant, operationID string) (*Record, string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, "", fmt.Errorf("read the archive directory: %w", err)
	}
	var runs []int
	for _, e := range entries {
		if run, ok := RunOf(e.Name()); ok {
			runs = append(runs, run)
		}
	}
	slices.Sort(runs)
	var (
		found   *Record
		file    string
		tenants = map[string]bool{}
	)
	for _, run := range runs {
		mb, err := os.ReadFile(filepath.Join(dir, ManifestName(run)))
		if err != nil {
			return nil, "", fmt.Errorf("read the archive's manifest: %w", err)
		}
		var m Manifest
		if err := json.Unmarshal(mb, &m); err != nil {
			return nil, "", fmt.Errorf("read the archive's manifest %s: %w", ManifestName(run), err)
		}
		for _, mf := range m.Files {
			b, err := os.ReadFile(filepath.Join(dir, mf.Name))
			if err != nil {
				return nil, "", fmt.Errorf("read archive file: %w", err)
			}
			err = eachLine(b, func(line []byte) error {
				var r Record
				if err := json.Unmarshal(line, &r); err != nil || r.Operation == nil {
					return fmt.Errorf("a line of %s is not an archived operation", mf.Name)
				}
				if (tenant == "" || r.Operation.Tenant == tenant) && r.Operation.OperationID == operationID {
					found, file = &r, mf.Name
					tenants[r.Operation.Tenant] = true
				}
				return nil
			})
			if err != nil {
				return nil, "", fmt.Errorf("read archive file %s: %w", mf.Name, err)
			}
		}
	}
	if found == nil {
		return nil, "", fmt.Errorf("operation %q of tenant %q: %w", operationID, tenant, ErrNotArchived)
	}
	if len(tenants) > 1 {
		return nil, "", fmt.Errorf("operation ID %q was archived for %d tenants; name the tenant", operationID, len(tenants))
	}
	return found, file, nil
}
