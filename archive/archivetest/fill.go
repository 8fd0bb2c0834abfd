package archivetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/dburl"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/receipt/issue"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/signingkeys"
)

// Fill writes n completed, reconciled hosted_test.run_suite operations of
// tenant, named prefix followed by their number, each with one remote job
// and a final charge, and issues their receipts, on several goroutines: a
// ledger as months of ended work leave it, without running the work.
func Fill(ctx context.Context, s ledger.Store, ring *secrets.Ring, tenant, prefix string, n int) error {
	issuer := issue.New(s, ring)
	ids := make(chan int)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range ids {
				if err := completed(ctx, s, issuer, tenant, fmt.Sprintf("%s%06d", prefix, i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
feed:
	for i := range n {
		select {
		case ids <- i:
		case err = <-errs:
			break feed
		}
	}
	close(ids)
	wg.Wait()
	close(errs)
	return errors.Join(err, <-errs)
}

// AcceptParams are the acceptance of a new run_suite operation of tenant
// under operation ID id, as a client's call would make it.
func AcceptParams(tenant, id string) *ledger.AcceptParams {
	args := json.RawMessage(`{"suite":"settlement"}`)
	fp, _ := canon.Compute("hosted_test", "run_suite", args)
	return &ledger.AcceptParams{Tenant: tenant, OperationID: id, Upstream: "hosted_test", Tool: "run_suite", Fingerprint: string(fp), Arguments: args,
		RequestID: ledger.NewRequestID(), TaskID: ledger.NewTaskID(), Source: "archivetest", RetryPolicy: ledger.RetryLookupThenAttach}
}

// completed accepts one operation, completes it with one remote job and a
// final charge, and issues its receipt.
func completed(ctx context.Context, s ledger.Store, issuer *issue.Issuer, tenant, id string) error {
	res, err := s.Accept(ctx, AcceptParams(tenant, id))
	if err != nil {
		return err
	}
	op, err := s.Transition(ctx, &ledger.TransitionParams{OperationRef: res.Operation.ID, From: []ledger.State{ledger.StateAccepted}, To: ledger.StateSending, IncrementSend: true,
		Events: []ledger.EventParams{{Kind: ledger.EventSendStarted, Data: ledger.SendStartedData{Send: 1, Worker: "archivetest"}}}})
	if err != nil {
		return err
	}
	job := "job-" + id
	op, err = s.Transition(ctx, &ledger.TransitionParams{
		OperationRef: op.ID, From: []ledger.State{ledger.StateSending}, To: ledger.StateCompleted,
		Result:     json.RawMessage(`{"content":[{"type":"text","text":"suite passed"}]}`),
		RemoteJobs: []*ledger.RemoteJobUpsert{{Upstream: "hosted_test", RemoteJobID: job, Kind: ledger.JobKindProviderJob, Status: ledger.JobCompleted, Intended: new(true)}},
		Charges:    []*ledger.ChargeUpsert{{RemoteJobID: job, ProviderChargeID: "ch-" + id, Amount: money.MustParse("17.84", "USD"), Status: ledger.ChargeFinal, Source: "archivetest"}},
		Creator:    &ledger.AttemptKnowledge{RemoteAccepted: ledger.Yes, RemoteEffect: ledger.Yes, ChargeStatus: ledger.Yes},
		Events: []ledger.EventParams{
			{Kind: ledger.EventRemoteJobBound, Data: ledger.RemoteJobData{RemoteJobID: job}},
			{Kind: ledger.EventResultStored, Data: ledger.ResultStoredData{RemoteJobID: job}},
		},
	})
	if err != nil {
		return err
	}
	r, err := issuer.Issue(ctx, op, nil)
	if err != nil {
		return err
	}
	if r.Outcome != issue.Issued {
		return fmt.Errorf("the receipt of %s was not issued: %s", id, r.Outcome)
	}
	return nil
}

// OpenLedger opens and migrates the ledger at url with a new secrets key
// file in dir, and creates its receipt-signing key: a ledger ready to be
// filled and archived. The caller closes the store.
func OpenLedger(ctx context.Context, url, dir string) (ledger.Store, *secrets.Ring, error) {
	keys := filepath.Join(dir, "taskgate.keys")
	if _, err := secrets.CreateFile(keys); err != nil {
		return nil, nil, err
	}
	ring, err := secrets.LoadFile(keys)
	if err != nil {
		return nil, nil, err
	}
	s, err := dburl.Open(ctx, url, &dburl.Options{Migrate: true, Secrets: ring})
	if err != nil {
		return nil, nil, err
	}
	if _, err := signingkeys.Create(ctx, s, ring, time.Time{}); err != nil {
		s.Close()
		return nil, nil, err
	}
	return s, ring, nil
}
