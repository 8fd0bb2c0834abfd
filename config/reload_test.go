package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCheckReload(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(*Config)
		fields []string
	}{
		{"nothing", func(*Config) {}, nil},
		{"upstreams and timings reload", func(c *Config) {
			c.Upstreams = append(c.Upstreams, &Upstream{Name: "more", URL: "http://127.0.0.1:1/mcp"})
			c.Wait, c.TaskTTL, c.PollInterval = time.Second, time.Hour, time.Second
			c.Auth.APIKeys = new(false)
		}, nil},
		{"listen", func(c *Config) { c.Listen = "127.0.0.1:9" }, []string{"listen"}},
		{"database and worker", func(c *Config) { c.Database = "sqlite:other.db"; c.Worker.Lease = time.Minute }, []string{"database", "worker"}},
		{"secrets", func(c *Config) { c.Secrets.KeyFile = "k" }, []string{"secrets"}},
		{"control socket", func(c *Config) { c.ControlSocket = "/tmp/x.sock" }, []string{"control_socket"}},
		{"limits", func(c *Config) { c.Limits.CallRate = 7 }, []string{"limits"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			running := exampleConfig(t)
			next := exampleConfig(t)
			tt.change(next)
			err := CheckReload(running, next)
			var got []string
			for _, e := range unwrapAll(err) {
				var fe *FieldError
				if errors.As(e, &fe) {
					got = append(got, fe.Field)
				}
			}
			if !slices.Equal(got, tt.fields) {
				t.Errorf("CheckReload fields = %v (%v), want %v", got, err, tt.fields)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Errorf("CheckReload error %v does not wrap ErrInvalid", err)
			}
		})
	}
}

func unwrapAll(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func TestChanges(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(*Config)
		want   []string
	}{
		{"nothing", func(*Config) {}, nil},
		{"added", func(c *Config) {
			c.Upstreams = append(c.Upstreams, &Upstream{Name: "more", URL: "http://127.0.0.1:1/mcp"})
		}, []string{"upstream more added"}},
		{"removed", func(c *Config) { c.Upstreams = nil }, []string{"upstream hosted_test removed", "upstream hosted_suite removed"}},
		{"headers named, values not", func(c *Config) {
			c.Upstreams[0].Headers = map[string]string{"Authorization": "Bearer s3cret"}
		}, []string{"upstream hosted_test reconnects with a new headers"}},
		{"policy", func(c *Config) { c.Upstreams[0].Tools["run_suite"].RequireTask = true },
			[]string{"tool hosted_test.run_suite policy changed (for new operations)"}},
		{"tool no longer configured", func(c *Config) { delete(c.Upstreams[0].Tools, "get_job") },
			[]string{"tool hosted_test.get_job no longer configured (it passes through)"}},
		{"wait", func(c *Config) { c.Wait = time.Second }, []string{"wait: 1s (was 30s)"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			running := exampleConfig(t)
			next := exampleConfig(t)
			tt.change(next)
			got := Changes(running, next)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Changes = %q, want %q", got, tt.want)
			}
			for _, c := range got {
				if strings.Contains(c, "s3cret") {
					t.Errorf("a change names a header value: %q", c)
				}
			}
		})
	}
}

func TestSameConnection(t *testing.T) {
	base := func() *Upstream {
		return &Upstream{Name: "u", URL: "http://127.0.0.1:1/mcp", Headers: map[string]string{"A": "1"}, Timeout: time.Second, Tasks: "auto",
			Tools: map[string]*Tool{"t": {}}}
	}
	for _, tt := range []struct {
		name   string
		change func(*Upstream)
		same   bool
	}{
		{"unchanged", func(*Upstream) {}, true},
		{"tools and prefix only", func(u *Upstream) { u.Tools = nil; u.Prefix = new("") }, true},
		{"url", func(u *Upstream) { u.URL = "http://127.0.0.1:2/mcp" }, false},
		{"header value", func(u *Upstream) { u.Headers["A"] = "2" }, false},
		{"timeout", func(u *Upstream) { u.Timeout = time.Minute }, false},
		{"command", func(u *Upstream) { u.URL = ""; u.Command = []string{"x"} }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u := base()
			tt.change(u)
			if got := SameConnection(base(), u); got != tt.same {
				t.Errorf("SameConnection = %t, want %t", got, tt.same)
			}
		})
	}
}

// exampleConfig parses the example file.
func exampleConfig(t *testing.T) *Config {
	t.Helper()
	c, err := Parse(strings.NewReader(exampleText(t)), "t.yaml", env(map[string]string{"HOSTED_TEST_TOKEN": "x"}))
	if err != nil {
		t.Fatalf("Parse(example): %v", err)
	}
	return c
}
