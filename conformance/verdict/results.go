package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// resultDir is how the suite's -o option names a scenario's directory:
// server-<scenario>-<ISO time with : and . replaced by ->.
var resultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

// check is the part of one entry of a scenario's checks.json that decides
// its outcome.
type check struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// readResults reads the outcome of every scenario the suite wrote into dir.
// A scenario passes, as the suite itself counts it, when none of its checks
// has status FAILURE; one whose checks.json is missing or unreadable (the
// suite skipped it, or died) failed.
func readResults(dir string) (map[string]Outcome, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read the suite's results: %w", err)
	}
	out := map[string]Outcome{}
	for _, e := range entries {
		m := resultDir.FindStringSubmatch(e.Name())
		if !e.IsDir() || m == nil {
			continue
		}
		name := m[1]
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s holds two results for scenario %s: give each run of the suite a fresh directory", dir, name)
		}
		out[name] = outcome(filepath.Join(dir, e.Name(), "checks.json"))
	}
	return out, nil
}

func outcome(path string) Outcome {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Failed
	}
	var checks []check
	if err := json.Unmarshal(raw, &checks); err != nil {
		return Failed
	}
	for _, c := range checks {
		if c.Status == "FAILURE" {
			return Failed
		}
	}
	return Passed
}
