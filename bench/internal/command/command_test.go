package command

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

type doc struct {
	N int `json:"n"`
}

// program is a Program whose measurement returns n, or fails with
// measureErr; it has every optional flag.
func program(measureErr error) (Program[doc], *int) {
	var (
		n                       int
		asJSON                  bool
		cpu, trace, mem, strict string
		measured                int
	)
	return Program[doc]{
		Name: "testbench",
		Flags: func(fs *flag.FlagSet) {
			fs.IntVar(&n, "n", 1, "the figure")
			fs.BoolVar(&asJSON, "json", false, "JSON")
			fs.StringVar(&cpu, "cpuprofile", "", "CPU profile")
			fs.StringVar(&trace, "trace", "", "trace")
			fs.StringVar(&mem, "memprofile", "", "allocation profile")
			fs.StringVar(&strict, "strict", "", "fail the check when set")
		},
		Check: func() error {
			if strict != "" {
				return errors.New("-strict refused")
			}
			return nil
		},
		JSON: &asJSON, CPUProfile: &cpu, Trace: &trace, MemProfile: &mem,
		Measure: func(ctx context.Context, progress io.Writer) (doc, error) {
			measured++
			io.WriteString(progress, "measuring\n")
			return doc{N: n}, measureErr
		},
		Table: func(w io.Writer, d doc) { io.WriteString(w, "table\n") },
	}, &measured
}

func TestRunExitCodes(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		measureErr error
		code       int
		stdout     string
		stderr     string
		measured   int
	}{
		{name: "table", args: nil, code: 0, stdout: "table\n", stderr: "measuring\n", measured: 1},
		{name: "json", args: []string{"-json", "-n", "7"}, code: 0, stdout: "{\n  \"n\": 7\n}\n", measured: 1},
		{name: "help", args: []string{"-h"}, code: 0, stderr: "Usage of testbench:"},
		{name: "unknown flag", args: []string{"-nope"}, code: 2, stderr: "flag provided but not defined"},
		{name: "stray argument", args: []string{"extra"}, code: 2, stderr: `testbench: unexpected arguments ["extra"]; all settings are flags (see -h)`},
		{name: "check", args: []string{"-strict", "x"}, code: 2, stderr: "testbench: -strict refused\n"},
		{name: "profile", args: []string{"-cpuprofile", "/nonexistent/cpu.pprof"}, code: 1, stderr: "testbench: create CPU profile"},
		{name: "measurement", measureErr: errors.New("boom"), code: 1, stderr: "testbench: boom\n", measured: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, measured := program(tt.measureErr)
			var stdout, stderr bytes.Buffer
			code := Run(context.Background(), tt.args, &stdout, &stderr, p)
			if code != tt.code || stdout.String() != tt.stdout || !strings.Contains(stderr.String(), tt.stderr) || *measured != tt.measured {
				t.Errorf("Run(%q) = %d, stdout %q, stderr %q, measured %d times; want %d, %q, stderr with %q, %d times",
					tt.args, code, stdout.String(), stderr.String(), *measured, tt.code, tt.stdout, tt.stderr, tt.measured)
			}
		})
	}
}

func TestRunWritesTheProfiles(t *testing.T) {
	dir := t.TempDir()
	p, _ := program(nil)
	paths := map[string]string{"-cpuprofile": "cpu.pprof", "-trace": "run.trace", "-memprofile": "allocs.pprof"}
	var args []string
	for f, name := range paths {
		args = append(args, f, filepath.Join(dir, name))
	}
	var stdout, stderr bytes.Buffer
	if code := Run(context.Background(), args, &stdout, &stderr, p); code != 0 {
		t.Fatalf("Run = %d, stderr %q", code, stderr.String())
	}
	for _, name := range paths {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v, %v; want a non-empty file", name, st, err)
		}
	}
}

func TestRunWithoutOptionalFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), nil, &stdout, &stderr, Program[doc]{
		Name:    "bare",
		Flags:   func(*flag.FlagSet) {},
		Check:   func() error { return nil },
		Measure: func(context.Context, io.Writer) (doc, error) { return doc{}, nil },
		Table:   func(w io.Writer, _ doc) { io.WriteString(w, "table\n") },
	})
	if code != 0 || stdout.String() != "table\n" {
		t.Errorf("Run = %d with stdout %q, stderr %q; want 0 and the table", code, stdout.String(), stderr.String())
	}
}

func TestCheckWindow(t *testing.T) {
	tests := []struct {
		duration, warmup time.Duration
		rounds           int
		want             string
	}{
		{time.Second, 0, 1, ""},
		{0, 0, 1, "-duration must be positive, got 0s"},
		{time.Second, -time.Second, 1, "-warmup may not be negative, got -1s"},
		{time.Second, 0, 0, "-rounds must be at least 1, got 0"},
	}
	for _, tt := range tests {
		err := CheckWindow(tt.duration, tt.warmup, tt.rounds)
		if got := errString(err); got != tt.want {
			t.Errorf("CheckWindow(%s, %s, %d) = %q, want %q", tt.duration, tt.warmup, tt.rounds, got, tt.want)
		}
	}
}

func TestCheckDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckDir(dir, ""); err != nil {
		t.Errorf("CheckDir(a directory) = %v", err)
	}
	if got, want := errString(CheckDir(file, "; hint")), "-dir "+file+" is not a directory; hint"; got != want {
		t.Errorf("CheckDir(a file) = %q, want %q", got, want)
	}
	if err := CheckDir(filepath.Join(dir, "missing"), ""); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("CheckDir(a missing directory) = %v, want not exist", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestList(t *testing.T) {
	short := func(item string) (string, error) {
		if len(item) > 3 {
			return "", errors.New("too long: " + item)
		}
		return item, nil
	}
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "", want: nil},
		{in: " , ,", want: nil},
		{in: "a,b", want: []string{"a", "b"}},
		{in: " b , a ,b", want: []string{"b", "a"}},
		{in: "a,long", wantErr: "too long: long"},
	}
	for _, tt := range tests {
		got, err := List(tt.in, short)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("List(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("List(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
