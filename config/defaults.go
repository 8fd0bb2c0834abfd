package config

import (
	"cmp"
	"reflect"
	"strings"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

// DefaultMaxRestartsPerMinute is Upstream.MaxRestartsPerMinute when the
// file leaves it unset.
const DefaultMaxRestartsPerMinute = 5

// applyDefaults fills in every field the file left unset; the field docs
// in config.go name each default.
func (c *Config) applyDefaults() {
	c.Listen = cmp.Or(c.Listen, "127.0.0.1:8931")
	c.Database = cmp.Or(c.Database, "sqlite:./taskgate.db")
	if c.PublicURL == "" {
		c.PublicURL = "http://" + c.Listen
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, 1<<20)
	c.Wait = cmp.Or(c.Wait, 30*time.Second)
	c.TaskTTL = cmp.Or(c.TaskTTL, 24*time.Hour)
	c.ApprovalRequestTTL = cmp.Or(c.ApprovalRequestTTL, time.Hour)
	c.PollInterval = cmp.Or(c.PollInterval, time.Second)
	c.Retention.OperationIDs = cmp.Or(c.Retention.OperationIDs, 24*time.Hour)
	if a := c.Retention.Archive; a != nil {
		a.Every = cmp.Or(a.Every, time.Hour)
		a.Batch = cmp.Or(a.Batch, 500)
		a.MaxOperations = cmp.Or(a.MaxOperations, 10000)
	}
	c.Limits.applyDefaults()
	w := &c.Worker
	w.Lease = cmp.Or(w.Lease, 30*time.Second)
	w.Sweep = cmp.Or(w.Sweep, 5*time.Second)
	w.UpstreamPoll = cmp.Or(w.UpstreamPoll, time.Second)
	w.Reconcile = cmp.Or(w.Reconcile, time.Minute)
	w.FetchPoll = cmp.Or(w.FetchPoll, time.Second)
	w.Workers = cmp.Or(w.Workers, 16)
	w.JobRetention = cmp.Or(w.JobRetention, time.Hour)
	if c.Auth.APIKeys == nil {
		t := true
		c.Auth.APIKeys = &t
	}
	c.Auth.StdioTenant = cmp.Or(c.Auth.StdioTenant, "local")
	c.Secrets.Store = cmp.Or(c.Secrets.Store, SecretsEncrypted)
	if j := c.Auth.JWT; j != nil {
		j.TenantClaim = cmp.Or(j.TenantClaim, "sub")
		j.Leeway = cmp.Or(j.Leeway, 30*time.Second)
		if len(j.Algorithms) == 0 {
			j.Algorithms = []string{"RS256", "ES256"}
		}
	}
	for _, u := range c.Upstreams {
		if u == nil {
			continue
		}
		u.Timeout = cmp.Or(u.Timeout, 60*time.Second)
		u.Tasks = cmp.Or(u.Tasks, "auto")
		u.MaxRestartsPerMinute = cmp.Or(u.MaxRestartsPerMinute, DefaultMaxRestartsPerMinute)
		if len(u.TenantHeaders) > 0 {
			u.UnlistedTenants = cmp.Or(u.UnlistedTenants, UnlistedRefuse)
		}
		u.Contracts = cmp.Or(u.Contracts, ContractsConfigured)
		for _, t := range u.Tools {
			if t == nil {
				continue
			}
			// Before the currency default below, which would make every
			// contract look written.
			t.Declared = u.Contracts == ContractsDiscover && t.Consequential && reflect.ValueOf(t.Contract).IsZero()
			t.Approval = cmp.Or(t.Approval, ledger.ApprovalNone)
			t.ClientCancel = cmp.Or(t.ClientCancel, ledger.ClientCancelHonour)
			if t.ApproveBy == nil {
				t.ApproveBy = []ledger.ApprovalWay{ledger.ApproveByRequest, ledger.ApproveByElicitation}
			}
			if !t.Declared {
				t.contractDefaults()
			}
		}
	}
}

// contractDefaults fills in the defaults of t that follow from its
// contract: when the file is loaded, or, for a tool that takes a declared
// contract, when the contract is adopted (Tool.Adopt).
func (t *Tool) contractDefaults() {
	if t.RetryPolicy == "" {
		t.RetryPolicy = ledger.RetryNoAutomaticResend
		if t.Contract.Lookup != nil {
			t.RetryPolicy = ledger.RetryLookupThenAttach
		}
	}
	t.Contract.Cost.Currency = strings.ToUpper(cmp.Or(t.Contract.Cost.Currency, money.DefaultCurrency))
	t.ElicitationMaxTotalCost.Currency = t.Contract.Cost.Currency
	for _, e := range []*money.Amount{t.Contract.Cost.Estimate, t.Contract.Cost.EstimatePerJob} {
		if e != nil {
			e.Currency = t.Contract.Cost.Currency
		}
	}
}

func (l *Limits) applyDefaults() {
	l.ReadHeaderTimeout = cmp.Or(l.ReadHeaderTimeout, 10*time.Second)
	l.ReadTimeout = cmp.Or(l.ReadTimeout, 30*time.Second)
	l.WriteTimeout = cmp.Or(l.WriteTimeout, 30*time.Second)
	l.IdleTimeout = cmp.Or(l.IdleTimeout, 2*time.Minute)
	l.MaxConnections = cmp.Or(l.MaxConnections, 1024)
	l.Sessions = cmp.Or(l.Sessions, 1000)
	l.SessionsPerTenant = cmp.Or(l.SessionsPerTenant, 100)
	l.SessionIdle = cmp.Or(l.SessionIdle, 30*time.Minute)
	l.Streams = cmp.Or(l.Streams, 1000)
	l.StreamsPerTenant = cmp.Or(l.StreamsPerTenant, 100)
	l.CallsPerTenant = cmp.Or(l.CallsPerTenant, 64)
	l.CallRate = cmp.Or(l.CallRate, 25)
	l.CallBurst = cmp.Or(l.CallBurst, 50)
	l.RefusalDelay = cmp.Or(l.RefusalDelay, time.Second)
	l.JobsPerTenant = cmp.Or(l.JobsPerTenant, 4)
	l.AcceptsPerTenant = cmp.Or(l.AcceptsPerTenant, 4)
	l.SignInsPerMinute = cmp.Or(l.SignInsPerMinute, 10)
}
