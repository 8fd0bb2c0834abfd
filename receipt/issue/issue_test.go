package issue_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/sqlite/sqlitetest"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/packet"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/receipt/issue"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/signingkeys"
)

// accepted records an accepted operation of hosted_test.run_suite.
func accepted(t *testing.T, s ledger.Store, key string) *ledger.Operation {
	t.Helper()
	args := json.RawMessage(`{"suite":"settlement"}`)
	fp, err := canon.Compute("hosted_test", "run_suite", args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Accept(context.Background(), &ledger.AcceptParams{
		Tenant: "acme", OperationID: key, Upstream: "hosted_test", Tool: "run_suite", Fingerprint: string(fp), Arguments: args,
		RequestID: ledger.NewRequestID(), TaskID: ledger.NewTaskID(), Source: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	return res.Operation
}

// completed records an operation that ran one job to completion and was
// charged 17.84 USD, final.
func completed(t *testing.T, s ledger.Store, key string) *ledger.Operation {
	t.Helper()
	ctx := context.Background()
	op := accepted(t, s, key)
	yes := true
	steps := []*ledger.TransitionParams{
		{OperationRef: op.ID, To: ledger.StateSending, IncrementSend: true, Events: []ledger.EventParams{{Kind: ledger.EventSendStarted}}},
		{OperationRef: op.ID, To: ledger.StateRunning,
			RemoteJobs: []*ledger.RemoteJobUpsert{{Upstream: "hosted_test", Endpoint: "http://127.0.0.1:1/mcp", RemoteJobID: "hosted-suite-9912",
				Kind: ledger.JobKindProviderJob, Status: ledger.JobRunning, Intended: &yes}},
			Events: []ledger.EventParams{{Kind: ledger.EventRemoteJobBound, Data: ledger.RemoteJobData{RemoteJobID: "hosted-suite-9912"}}}},
		{OperationRef: op.ID, To: ledger.StateCompleted, Result: []byte(`{"content":[]}`),
			RemoteJobs: []*ledger.RemoteJobUpsert{{Upstream: "hosted_test", RemoteJobID: "hosted-suite-9912", Status: ledger.JobCompleted}},
			Charges: []*ledger.ChargeUpsert{{RemoteJobID: "hosted-suite-9912", ProviderChargeID: "ch-1", Amount: money.MustParse("17.84", "USD"),
				Status: ledger.ChargeFinal}}},
	}
	for _, p := range steps {
		var err error
		if op, err = s.Transition(ctx, p); err != nil {
			t.Fatalf("to %s: %v", p.To, err)
		}
	}
	return op
}

// reconciled records a reconciler pass that found nothing new: the chain
// head moves, the receipt's substance does not.
func reconciled(t *testing.T, s ledger.Store, op *ledger.Operation) *ledger.Operation {
	t.Helper()
	op, err := s.Transition(context.Background(), &ledger.TransitionParams{OperationRef: op.ID, Events: []ledger.EventParams{{
		Kind: ledger.EventReconciled, Data: ledger.ReconciledData{Complete: true, Lookup: receipt.LookupAnswered, FinalCost: "17.84"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return op
}

func withKey(t *testing.T, s ledger.Store) *secrets.Ring {
	t.Helper()
	ring, err := secrets.ParseRing([]byte(secrets.NewKey()), "test keys")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := signingkeys.Create(context.Background(), s, ring, time.Time{}); err != nil {
		t.Fatal(err)
	}
	return ring
}

func TestIssuedOnceReadAlikeWithoutAKey(t *testing.T) {
	ctx := context.Background()
	s := sqlitetest.Open(t)
	op := completed(t, s, "settlement-regression-842")

	// No key yet: nothing is issued, and a reader gets a provisional receipt.
	res, err := issue.New(s, nil).Issue(ctx, op, nil)
	if err != nil || res.Outcome != issue.NoKey {
		t.Fatalf("issue without a key: %+v, %v; want no_key", res, err)
	}
	rd, err := issue.Read(ctx, s, op, nil)
	if err != nil || !rd.Receipt.Provisional || rd.Latest() != nil {
		t.Fatalf("read before issue: %+v, %v; want a provisional receipt", rd, err)
	}

	ring := withKey(t, s)
	is := issue.New(s, ring)
	first, err := is.Issue(ctx, op, nil)
	if err != nil || first.Outcome != issue.Issued || first.Version.Version != 1 || first.Version.Previous != "" {
		t.Fatalf("first issue: %+v, %v; want version 1 issued", first, err)
	}
	// Another pass that finds nothing new issues nothing, though the
	// chain head moved.
	op = reconciled(t, s, op)
	again, err := is.Issue(ctx, op, nil)
	if err != nil || again.Outcome != issue.Unchanged || again.Version.Digest != first.Version.Digest {
		t.Fatalf("second issue: %+v, %v; want version 1 unchanged", again, err)
	}
	vs, err := s.ReceiptVersions(ctx, op.ID)
	if err != nil || len(vs) != 1 {
		t.Fatalf("versions %d, %v; want exactly one issued", len(vs), err)
	}

	// Reading needs no key: Read takes no ring, and the store's keys are
	// public parts only. Two reads give the same bytes, in every format.
	for _, format := range issue.Formats {
		var docs [2][]byte
		for i := range docs {
			rd, err := issue.Read(ctx, s, op, nil)
			if err != nil {
				t.Fatal(err)
			}
			if rd.Receipt.Provisional || rd.Receipt.Issue == nil || rd.Receipt.Issue.Version != 1 {
				t.Fatalf("read %+v, want version 1 as issued", rd.Receipt.Issue)
			}
			if docs[i], err = rd.Render(format); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(docs[0], docs[1]) {
			t.Errorf("two reads as %s differ:\n%s\n%s", format, docs[0], docs[1])
		}
		if format == issue.FormatDSSE && !bytes.Equal(docs[0], first.Version.Document) {
			t.Errorf("the DSSE form read is not the document issued")
		}
	}
	keys, err := s.SigningKeyList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v, err := receipt.VerifyEnvelope(ctx, first.Version.Document, signingkeys.PublicKeys(keys))
	if err != nil || !v.OK() || v.ChainHead == op.ChainHead {
		t.Fatalf("verify version 1: %+v, %v; want it to hold over the chain head before the later pass", v, err)
	}
}

func TestALateChargeIssuesTheNextVersion(t *testing.T) {
	ctx := context.Background()
	s := sqlitetest.Open(t)
	op := completed(t, s, "late-invoice")
	is := issue.New(s, withKey(t, s))
	first, err := is.Issue(ctx, op, nil)
	if err != nil || first.Outcome != issue.Issued {
		t.Fatalf("first issue: %+v, %v", first, err)
	}
	op, err = s.Transition(ctx, &ledger.TransitionParams{OperationRef: op.ID,
		Charges: []*ledger.ChargeUpsert{{RemoteJobID: "hosted-suite-9912", ProviderChargeID: "ch-late", Amount: money.MustParse("0.50", "USD"), Status: ledger.ChargeFinal}},
		Events:  []ledger.EventParams{{Kind: ledger.EventReconciled, Data: ledger.ReconciledData{Complete: true, Lookup: receipt.LookupAnswered, FinalCost: "18.34"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	second, err := is.Issue(ctx, op, nil)
	if err != nil || second.Outcome != issue.Issued || second.Version.Version != 2 || second.Version.Previous != first.Version.Digest {
		t.Fatalf("issue after a late charge: %+v, %v; want version 2 naming version 1's digest %s", second, err, first.Version.Digest)
	}
	rd, err := issue.Read(ctx, s, op, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rd.Receipt.FinalCostUSD.String() != "18.34" || rd.Receipt.Issue.Version != 2 || rd.Receipt.Issue.Previous != first.Version.Digest {
		t.Errorf("read %s final, issue %+v; want 18.34 as version 2 naming version 1", rd.Receipt.FinalCostUSD, rd.Receipt.Issue)
	}
	keys, err := s.SigningKeyList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v, err := receipt.VerifyEnvelope(ctx, second.Version.Document, signingkeys.PublicKeys(keys))
	if err != nil || !v.OK() || v.Version != 2 || v.Previous != first.Version.Digest {
		t.Fatalf("verify version 2: %+v, %v; want it to hold, naming version 1's digest in what was signed", v, err)
	}
	md, err := rd.Render("md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "Version 2") || !strings.Contains(string(md), first.Version.Digest) {
		t.Errorf("the Markdown of version 2 does not say it replaces version 1:\n%s", md)
	}
}

func TestAnOpenOperationIsProvisional(t *testing.T) {
	ctx := context.Background()
	s := sqlitetest.Open(t)
	op := accepted(t, s, "still-open")
	res, err := issue.New(s, withKey(t, s)).Issue(ctx, op, nil)
	if err != nil || res.Outcome != issue.Open {
		t.Fatalf("issue of an open operation: %+v, %v; want open", res, err)
	}
	rd, err := issue.Read(ctx, s, op, nil)
	if err != nil || !rd.Receipt.Provisional {
		t.Fatalf("read %+v, %v; want provisional", rd, err)
	}
	if _, err := rd.Render(issue.FormatDSSE); err == nil || !strings.Contains(err.Error(), "not issued yet") {
		t.Errorf("the DSSE form of a provisional receipt: %v, want it refused as not issued yet", err)
	}
	md, err := rd.Render("md")
	if err != nil || !strings.Contains(string(md), "Provisional") {
		t.Errorf("the Markdown of a provisional receipt does not say so: %v\n%s", err, md)
	}
}

// TestSignPacket: a packet of an issued receipt is signed with the key
// that issues receipts, as a statement naming the receipt by its stored
// envelope's digest; without an active key nothing signs it.
func TestSignPacket(t *testing.T) {
	ctx := context.Background()
	s := sqlitetest.Open(t)
	op := completed(t, s, "settlement-regression-842")
	build := func() *packet.Packet {
		t.Helper()
		rd, err := issue.Read(ctx, s, op, nil)
		if err != nil {
			t.Fatal(err)
		}
		inc := packet.Included{Receipt: rd.Receipt}
		if v := rd.Latest(); v != nil {
			inc.Document = v.Document
		}
		p, err := packet.Build(&packet.Input{Operations: []packet.Included{inc}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ring, err := secrets.ParseRing([]byte(secrets.NewKey()), "test keys")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := issue.New(s, ring).SignPacket(ctx, build()); err == nil || !strings.Contains(err.Error(), "includes no issued receipt") {
		t.Errorf("signing a packet of a provisional receipt: %v; want it refused", err)
	}

	k, err := signingkeys.Create(ctx, s, ring, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := issue.New(s, ring).Issue(ctx, op, nil)
	if err != nil || res.Outcome != issue.Issued {
		t.Fatalf("issue: %+v, %v", res, err)
	}
	env, kid, err := issue.New(s, ring).SignPacket(ctx, build())
	if err != nil || kid != k.KeyID {
		t.Fatalf("SignPacket: key %s, %v; want signed by %s", kid, err, k.KeyID)
	}
	keys, err := s.SigningKeyList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v, att, err := receipt.VerifyAttestation(ctx, env, packet.PredicateType, packet.DocumentKey, "the review packet", signingkeys.PublicKeys(keys))
	if err != nil || !v.OK() || len(att.Subjects) != 1 || att.Subjects[0] != (receipt.Subject{Name: "receipt/acme/settlement-regression-842/v1", SHA256: res.Version.Digest}) {
		t.Fatalf("the signed packet: %+v, %+v, %v; want it verified, naming version 1 by %s", v, att, err, res.Version.Digest)
	}

	if _, err := signingkeys.Retire(ctx, s, k.KeyID, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := issue.New(s, ring).SignPacket(ctx, build()); !errors.Is(err, issue.ErrNoKey) {
		t.Errorf("SignPacket with no active key: %v; want ErrNoKey", err)
	}
}
