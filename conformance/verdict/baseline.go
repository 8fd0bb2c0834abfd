package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// baselineFile is the shape of conformance/baseline.yml: under server, one
// section per run, each mapping a scenario to the one-line reason it fails
// through taskgate.
type baselineFile struct {
	Server map[Run]map[string]string `yaml:"server"`
}

// loadBaseline reads the baseline and refuses unknown runs and entries
// without a reason.
func loadBaseline(path string) (map[Run]map[string]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the baseline: %w", err)
	}
	return parseBaseline(path, raw)
}

func parseBaseline(path string, raw []byte) (map[Run]map[string]string, error) {
	var f baselineFile
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s is not a baseline (server: <run>: <scenario>: <reason>): %w", path, err)
	}
	var problems []string
	for r, entries := range f.Server {
		if !slices.Contains(allRuns(), r) {
			problems = append(problems, fmt.Sprintf("server.%s: unknown run (known: 2025-11-25, 2026-07-28, tasks)", r))
			continue
		}
		for s, reason := range entries {
			if strings.TrimSpace(reason) == "" {
				problems = append(problems, fmt.Sprintf("server.%s.%s: no reason: say in one line why it fails through taskgate", r, s))
			}
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return nil, fmt.Errorf("%s:\n  %s", path, strings.Join(problems, "\n  "))
	}
	if f.Server == nil {
		f.Server = map[Run]map[string]string{}
	}
	return f.Server, nil
}
