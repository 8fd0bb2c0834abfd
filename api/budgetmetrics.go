package api

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/taskgate/taskgate/ledger"
)

// BudgetCollector shows each open budget's current period at /metrics:
// what is left of its ceiling (in its currency) and of its remote jobs. It
// reads the ledger at each scrape, so every replica shows the same.
type BudgetCollector struct {
	store     ledger.Store
	log       *slog.Logger
	clock     func() time.Time
	remaining *prometheus.Desc
	jobs      *prometheus.Desc
	up        *prometheus.Desc
}

// NewBudgetCollector returns the collector over store; clock nil means
// time.Now.
func NewBudgetCollector(store ledger.Store, log *slog.Logger, clock func() time.Time) *BudgetCollector {
	if clock == nil {
		clock = time.Now
	}
	labels := []string{"tenant", "budget", "currency"}
	return &BudgetCollector{
		store: store, log: log, clock: clock,
		remaining: prometheus.NewDesc("taskgate_budget_remaining", "What is left of an open budget's total-cost ceiling in its current period, in its currency; negative after a breach.", labels, nil),
		jobs:      prometheus.NewDesc("taskgate_budget_remote_jobs_remaining", "How many remote jobs an open budget has left in its current period.", labels, nil),
		up:        prometheus.NewDesc("taskgate_budget_metrics_up", "1 when the budgets could be read from the ledger at this scrape, else 0.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *BudgetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.remaining
	ch <- c.jobs
	ch <- c.up
}

// Collect implements prometheus.Collector.
func (c *BudgetCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	views, err := c.views(ctx)
	if err != nil {
		c.log.Warn("budget metrics could not read the ledger", "err", err)
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	for _, v := range views {
		id := strconv.FormatInt(v.ID, 10)
		if left, err := strconv.ParseFloat(v.Remaining, 64); err == nil {
			ch <- prometheus.MustNewConstMetric(c.remaining, prometheus.GaugeValue, left, v.Tenant, id, v.Currency)
		}
		ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(v.RemoteJobsRemaining), v.Tenant, id, v.Currency)
	}
}

func (c *BudgetCollector) views(ctx context.Context) ([]BudgetView, error) {
	now := c.clock()
	list, err := c.store.BudgetList(ctx, &ledger.BudgetListParams{Now: now})
	if err != nil {
		return nil, err
	}
	out := make([]BudgetView, 0, len(list))
	for _, b := range list {
		rs, err := c.store.BudgetReservationList(ctx, &ledger.BudgetReservationListParams{BudgetRef: b.ID})
		if err != nil {
			return nil, err
		}
		out = append(out, ViewBudget(b, rs, now))
	}
	return out, nil
}
