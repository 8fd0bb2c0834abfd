package receipt_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/taskgate/taskgate/receipt"
)

// hostileID is text an agent or a provider controls, as it may stand in
// a ledger from before the ID alphabet: a path that climbs, a query, a
// terminal escape, a Markdown image, a right-to-left override and a
// zero-width space.
const hostileID = "op/../requests/1/approve?x=\x1b[2J![ready](http://x.test/ok.png)\u202eexe.txt\u200b"

// TestHostileStringsInAStatement: an issued receipt keeps hostile IDs
// byte for byte, verifies, and an edit of one of them is named; a
// statement whose predicate repeats a key, so that two readers could see
// two figures, never verifies.
func TestHostileStringsInAStatement(t *testing.T) {
	ctx := context.Background()
	in := clean()
	in.Operation.ChainHead = chainHead
	in.Operation.OperationID = hostileID
	for _, a := range in.Attempts {
		a.OperationID = hostileID
	}
	in.RemoteJobs[0].RemoteJobID = "job-" + hostileID
	in.Charges[0].ProviderChargeID = "ch-" + hostileID
	st, err := receipt.Statement(receipt.Build(in), receipt.Issue{Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	env, err := receipt.Envelope(ctx, st, testKey(1), kidOf(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	keys := keysOf(t, testKey(1))
	v, err := receipt.VerifyEnvelope(ctx, env, keys)
	if err != nil {
		t.Fatal(err)
	}
	if !v.OK() || v.OperationID != hostileID {
		t.Fatalf("verification %+v of operation %q, want it to hold for %q", v.Problems, v.OperationID, hostileID)
	}
	r, err := receipt.Issued(env, kidOf(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	if r.OperationID != hostileID {
		t.Errorf("read back operation ID %q, want %q byte for byte", r.OperationID, hostileID)
	}

	t.Run("an edited hostile ID is named", func(t *testing.T) {
		edited := editStatement(t, env, func(_, r map[string]any) { r["operation_id"] = strings.ReplaceAll(hostileID, "\u202e", "") })
		v, err := receipt.VerifyEnvelope(ctx, edited, keys)
		if err != nil {
			t.Fatal(err)
		}
		if v.OK() || v.Problems[0].Kind != receipt.ProblemSignature ||
			!slices.ContainsFunc(v.Problems[1:], func(p receipt.Problem) bool { return p.Field == "operation_id" }) {
			t.Fatalf("problems %+v, want a signature problem naming operation_id", v.Problems)
		}
	})

	t.Run("a repeated key never verifies", func(t *testing.T) {
		var e map[string]any
		if err := json.Unmarshal(env, &e); err != nil {
			t.Fatal(err)
		}
		payload, err := base64.StdEncoding.DecodeString(e["payload"].(string))
		if err != nil {
			t.Fatal(err)
		}
		cost := []byte(`"final_cost_usd":"17.84"`)
		if !bytes.Contains(payload, cost) {
			t.Fatalf("the statement has no %s: %s", cost, payload)
		}
		e["payload"] = base64.StdEncoding.EncodeToString(bytes.Replace(payload, cost, []byte(`"final_cost_usd":"1.84",`+string(cost)), 1))
		doubled, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		v, err := receipt.VerifyEnvelope(ctx, doubled, keys)
		if err == nil && v.OK() {
			t.Fatalf("a statement with final_cost_usd twice verified: %+v", v)
		}
		t.Logf("verification: %v; %+v", err, v)
	})
}
