package providersim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// stateVersion is the version of the state file layout.
const stateVersion = 1

// stateFile is the JSON layout of Options.StatePath. Fields added since
// version 1 are optional, so that older files still load: a missing matrix
// number starts at 1, a job's plan without browser_grid has no browser grid
// charge, and a charge without a kind gets one from its job (see
// fillChargeKinds).
type stateFile struct {
	Version       int `json:"version"`
	NextJobNumber int `json:"next_job_number"`
	// NextMatrixNumber is absent from files written before run_matrix.
	NextMatrixNumber int         `json:"next_matrix_number,omitempty"`
	Jobs             []storedJob `json:"jobs"`
	Charges          []Charge    `json:"charges"`
}

// storedJob is a job with what the engine needs to resume it.
type storedJob struct {
	Job
	Number int  `json:"number"`
	Plan   plan `json:"plan"`
}

// ReadRecord reads the record a simulator keeps in its state file
// (Options.StatePath), as [Sim.Record] returns it; the simulator may run in
// another process, such as `taskgate provider-sim --stdio --state FILE`. A
// missing file is an empty record.
func ReadRecord(path string) (Record, error) {
	st, err := (&stateStore{path: path}).load()
	if err != nil {
		return Record{}, err
	}
	r := Record{Jobs: make([]Job, 0, len(st.Jobs)), Charges: append([]Charge{}, st.Charges...)}
	for _, sj := range st.Jobs {
		r.Jobs = append(r.Jobs, sj.Job)
	}
	r.Totals = totals(r)
	return r, nil
}

// stateStore keeps the record in one JSON file, replaced atomically on every
// change so that a process killed at any moment leaves the last saved record.
// It does not fsync: the failure it stands for is a crashed process, whose
// writes the operating system keeps, not a lost machine.
type stateStore struct {
	path string
}

// load reads the state file; a missing file is an empty record.
func (s *stateStore) load() (*stateFile, error) {
	data, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return &stateFile{Version: stateVersion, NextJobNumber: firstJobNumber, NextMatrixNumber: firstMatrixNumber}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading simulator state file: %w", err)
	}
	var st stateFile
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("simulator state file %s is not valid JSON (move it aside to start with an empty record): %w", s.path, err)
	}
	if st.Version != stateVersion {
		return nil, fmt.Errorf("simulator state file %s has version %d, want %d (move it aside to start with an empty record)", s.path, st.Version, stateVersion)
	}
	st.fillChargeKinds()
	return &st, nil
}

// fillChargeKinds gives the charges of a file written before charge kinds
// existed the kind they had then: each job had one charge, its own, so a
// charge is a runner's when its job is in a matrix and a suite's otherwise.
func (st *stateFile) fillChargeKinds() {
	inMatrix := make(map[string]bool, len(st.Jobs))
	for _, sj := range st.Jobs {
		inMatrix[sj.ID] = sj.Matrix != ""
	}
	for i := range st.Charges {
		c := &st.Charges[i]
		switch {
		case c.Kind != "":
		case inMatrix[c.JobID]:
			c.Kind = ChargeKindRunner
		default:
			c.Kind = ChargeKindSuite
		}
	}
}

// save writes the record to a temporary file and renames it over the state
// file.
func (s *stateStore) save(st *stateFile) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding simulator state: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), filepath.Base(s.path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing simulator state file: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once the rename succeeded
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing simulator state file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing simulator state file: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("replacing simulator state file: %w", err)
	}
	return nil
}
