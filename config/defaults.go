package config

import (
	"strings"
	"time"

	"github.com/taskgate/taskgate/money"
)

// applyDefaults fills in every field the file left unset; the field docs
// in config.go name each default.
func (c *Config) applyDefaults() {
	c.Listen = or(c.Listen, "127.0.0.1:8931")
	c.Database = or(c.Database, "sqlite:./taskgate.db")
	if c.PublicURL == "" {
		c.PublicURL = "http://" + c.Listen
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	c.MaxBodyBytes = or(c.MaxBodyBytes, 1<<20)
	c.Wait = or(c.Wait, 30*time.Second)
	c.TaskTTL = or(c.TaskTTL, 24*time.Hour)
	c.PollInterval = or(c.PollInterval, time.Second)
	c.Retention = or(c.Retention, 24*time.Hour)
	w := &c.Worker
	w.Lease = or(w.Lease, 30*time.Second)
	w.Sweep = or(w.Sweep, 5*time.Second)
	w.UpstreamPoll = or(w.UpstreamPoll, time.Second)
	w.Reconcile = or(w.Reconcile, time.Minute)
	w.FetchPoll = or(w.FetchPoll, 50*time.Millisecond)
	w.Workers = or(w.Workers, 16)
	if c.Auth.APIKeys == nil {
		t := true
		c.Auth.APIKeys = &t
	}
	c.Auth.StdioTenant = or(c.Auth.StdioTenant, "local")
	if j := c.Auth.JWT; j != nil {
		j.TenantClaim = or(j.TenantClaim, "sub")
		j.Leeway = or(j.Leeway, 30*time.Second)
		if len(j.Algorithms) == 0 {
			j.Algorithms = []string{"RS256", "ES256"}
		}
	}
	for _, u := range c.Upstreams {
		if u == nil {
			continue
		}
		u.Timeout = or(u.Timeout, 60*time.Second)
		u.Tasks = or(u.Tasks, "auto")
		for _, t := range u.Tools {
			if t == nil {
				continue
			}
			t.Approval = or(t.Approval, "none")
			if t.RetryPolicy == "" {
				t.RetryPolicy = RetryNoAutomaticResend
				if t.Contract.Lookup != nil {
					t.RetryPolicy = RetryLookupThenAttach
				}
			}
			t.Contract.Cost.Currency = strings.ToUpper(or(t.Contract.Cost.Currency, money.DefaultCurrency))
			if e := t.Contract.Cost.Estimate; e != nil {
				e.Currency = t.Contract.Cost.Currency
			}
		}
	}
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
