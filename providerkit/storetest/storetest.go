// Package storetest holds the tests every providerkit.Store passes; the
// sqlitestore and postgresstore packages run them. It must never be
// imported by anything but tests.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/providerkit"
)

// Opener returns a new, empty store for t, and a function that opens the
// same database again as a second store (another process would).
type Opener func(t *testing.T) (providerkit.Store, func() providerkit.Store)

// Run runs every test on stores from open.
func Run(t *testing.T, open Opener) {
	for _, tc := range []struct {
		name string
		test func(*testing.T, Opener)
	}{
		{"OneJobPerKey", oneJobPerKey},
		{"OneJobPerKeyUnderConcurrency", oneJobPerKeyUnderConcurrency},
		{"EndOnce", endOnce},
		{"Unended", unended},
		{"Charges", charges},
		{"Durable", durable},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.test(t, open) })
	}
}

var t0 = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

func start(t *testing.T, s providerkit.Store, id, key string) (*providerkit.Job, bool) {
	t.Helper()
	j, created, err := s.Start(context.Background(), id, key, "run_suite", json.RawMessage(`{"suite":"settlement"}`), t0)
	if err != nil {
		t.Fatalf("Start(%s, %s): %v", id, key, err)
	}
	return j, created
}

func oneJobPerKey(t *testing.T, open Opener) {
	ctx := context.Background()
	s, _ := open(t)
	if jobs, err := s.JobsByKey(ctx, "k1"); err != nil || len(jobs) != 0 {
		t.Fatalf("JobsByKey of a new key = %v, %v; want none", jobs, err)
	}
	first, created := start(t, s, "job-1", "k1")
	if !created || first.ID != "job-1" || first.Key != "k1" || first.Status != providerkit.StatusRunning || string(first.Arguments) != `{"suite":"settlement"}` {
		t.Fatalf("first Start = %+v, created %v; want job-1 of k1, running, created", first, created)
	}
	again, created := start(t, s, "job-2", "k1")
	if created || again.ID != "job-1" {
		t.Fatalf("second Start of k1 = %s, created %v; want job-1, not created", again.ID, created)
	}
	if _, err := s.Job(ctx, "job-2"); !errors.Is(err, providerkit.ErrNotFound) {
		t.Errorf("Job(job-2) = %v; want ErrNotFound: the second Start recorded nothing", err)
	}
	jobs, err := s.JobsByKey(ctx, "k1")
	if err != nil || len(jobs) != 1 || jobs[0].ID != "job-1" {
		t.Fatalf("JobsByKey(k1) = %v, %v; want job-1 alone", jobs, err)
	}
	if other, created := start(t, s, "job-3", "k2"); !created || other.ID != "job-3" {
		t.Errorf("Start of another key = %s, created %v; want job-3, created", other.ID, created)
	}
}

func oneJobPerKeyUnderConcurrency(t *testing.T, open Opener) {
	s, reopen := open(t)
	stores := []providerkit.Store{s, reopen()}
	const n = 16
	var mu sync.Mutex
	created, ids := 0, map[string]bool{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			j, c, err := stores[i%2].Start(context.Background(), fmt.Sprintf("job-%d", i), "same-key", "run_suite", json.RawMessage(`{}`), t0)
			if err != nil {
				t.Errorf("Start %d: %v", i, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			ids[j.ID] = true
			if c {
				created++
			}
		})
	}
	wg.Wait()
	if created != 1 || len(ids) != 1 {
		t.Errorf("%d concurrent Starts of one key on two stores: %d created, jobs %v; want 1 created, 1 job", n, created, ids)
	}
}

func endOnce(t *testing.T, open Opener) {
	ctx := context.Background()
	s, _ := open(t)
	start(t, s, "job-1", "k1")
	j, err := s.End(ctx, "job-1", providerkit.StatusCompleted, json.RawMessage(`{"passed":412}`), "", t0.Add(time.Minute))
	if err != nil || j.Status != providerkit.StatusCompleted || string(j.Result) != `{"passed":412}` || !j.UpdatedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("End = %+v, %v; want completed with the result at t0+1m", j, err)
	}
	j, err = s.End(ctx, "job-1", providerkit.StatusCancelled, nil, "too late", t0.Add(2*time.Minute))
	if err != nil || j.Status != providerkit.StatusCompleted || j.Error != "" {
		t.Errorf("End after the end = %+v, %v; want it still completed", j, err)
	}
	if _, err := s.End(ctx, "job-1", providerkit.StatusRunning, nil, "", t0); err == nil {
		t.Error("End in status running succeeded; want an error")
	}
	if _, err := s.End(ctx, "nope", providerkit.StatusFailed, nil, "x", t0); !errors.Is(err, providerkit.ErrNotFound) {
		t.Errorf("End of an unknown job = %v; want ErrNotFound", err)
	}
}

func unended(t *testing.T, open Opener) {
	ctx := context.Background()
	s, _ := open(t)
	start(t, s, "job-1", "k1")
	start(t, s, "job-2", "k2")
	start(t, s, "job-3", "k3")
	if _, err := s.End(ctx, "job-2", providerkit.StatusFailed, nil, "boom", t0); err != nil {
		t.Fatal(err)
	}
	jobs, err := s.Unended(ctx)
	if err != nil || len(jobs) != 2 || jobs[0].ID != "job-1" || jobs[1].ID != "job-3" {
		t.Errorf("Unended = %v, %v; want job-1 and job-3", jobs, err)
	}
}

func charges(t *testing.T, open Opener) {
	ctx := context.Background()
	s, _ := open(t)
	start(t, s, "job-1", "k1")
	start(t, s, "job-2", "k2")
	usd := func(s string) money.Amount { return money.MustParse(s, "USD") }
	record := func(c providerkit.Charge, at time.Time) error { return s.RecordCharge(ctx, &c, at) }
	if err := record(providerkit.Charge{ID: "ch-1", JobID: "job-1", Amount: usd("17.84"), Kind: "compute", Status: providerkit.ChargePending}, t0); err != nil {
		t.Fatal(err)
	}
	if err := record(providerkit.Charge{ID: "ch-2", JobID: "job-1", Amount: usd("0.50"), Kind: "browser_grid", Status: providerkit.ChargeFinal}, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	// The work runs again and records ch-1 as final: one charge, updated.
	if err := record(providerkit.Charge{ID: "ch-1", JobID: "job-1", Amount: usd("17.84"), Kind: "compute", Status: providerkit.ChargeFinal}, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := record(providerkit.Charge{ID: "ch-1", JobID: "job-2", Amount: usd("1.00"), Status: providerkit.ChargeFinal}, t0); err == nil {
		t.Error("recording job-1's charge ID for job-2 succeeded; want an error")
	}
	list, err := s.Charges(ctx, "job-1")
	if err != nil || len(list) != 2 {
		t.Fatalf("Charges(job-1) = %v, %v; want 2", list, err)
	}
	if c := list[0]; c.ID != "ch-1" || c.Amount != usd("17.84") || c.Status != providerkit.ChargeFinal || c.Kind != "compute" || !c.UpdatedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("first charge = %+v; want ch-1, 17.84 USD, final, compute, updated at t0+1m", c)
	}
	if c := list[1]; c.ID != "ch-2" || c.Amount != usd("0.50") || c.Kind != "browser_grid" {
		t.Errorf("second charge = %+v; want ch-2, 0.50 USD, browser_grid", c)
	}
	if list, err := s.Charges(ctx, "job-2"); err != nil || len(list) != 0 {
		t.Errorf("Charges(job-2) = %v, %v; want none", list, err)
	}
}

func durable(t *testing.T, open Opener) {
	ctx := context.Background()
	s, reopen := open(t)
	start(t, s, "job-1", "k1")
	if err := s.RecordCharge(ctx, &providerkit.Charge{ID: "ch-1", JobID: "job-1", Amount: money.MustParse("18.00", "USD"), Status: providerkit.ChargePending}, t0); err != nil {
		t.Fatal(err)
	}
	other := reopen()
	jobs, err := other.JobsByKey(ctx, "k1")
	if err != nil || len(jobs) != 1 || jobs[0].ID != "job-1" || jobs[0].Status != providerkit.StatusRunning {
		t.Fatalf("JobsByKey(k1) in the database opened again = %v, %v; want job-1, running", jobs, err)
	}
	if list, err := other.Charges(ctx, "job-1"); err != nil || len(list) != 1 {
		t.Errorf("Charges(job-1) in the database opened again = %v, %v; want ch-1", list, err)
	}
}
