package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/crashpoint"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
)

// TestCredentialChangedBeforeResend: the gateway dies after committing
// "send started" for a tenant with a credential of its own, and comes back
// with another credential for that tenant. The provider, asked under the
// new credential, knows no such job — as it would not know one started
// under the old credential — so the operation goes to review naming the
// change and nothing is sent again, although not_found is safe to resend
// after 0s.
func TestCredentialChangedBeforeResend(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	const variable = "TASKGATE_TEST_TENANT_TOKEN"
	t.Setenv(variable, "Bearer before")
	cfg := fixtures.ConfigOptions{NotFoundSafeAfter: new(time.Duration(0)), Lease: time.Second}
	h := newHarness(t, &fixtures.Options{
		Process: []string{gatewayBinary},
		Env:     []string{"TASKGATE_CRASHPOINT=" + crashpoint.AfterSendStarted, variable + "=Bearer before"},
		Config:  cfg,
		Sim:     providersim.Options{Faults: providersim.Faults{IgnoreIdempotencyKey: true}},
		EditConfig: func(y string) string {
			return strings.Replace(y, "  - name: hosted_test\n", "  - name: hosted_test\n    tenant_headers:\n      "+tenant+": {Authorization: {env: "+variable+"}}\n", 1)
		},
	})
	cs := connect(t, ctx, h, fixtures.EraExtension)
	startTask(t, ctx, cs, "op-credential-changed")
	if err := h.WaitOutput(ctx, "CRASHPOINT "+crashpoint.AfterSendStarted); err != nil {
		t.Fatal(err)
	}
	if err := h.Kill(); err != nil {
		t.Fatalf("kill the gateway: %v", err)
	}
	h.SetEnv(variable + "=Bearer after")
	if err := h.Start(ctx); err != nil {
		t.Fatalf("restart the gateway: %v", err)
	}
	op := awaitOperation(t, ctx, h.Store, "op-credential-changed", endedOrReview)
	if op.State != ledger.StateReview || op.ReviewReason != ledger.ReasonCredentialChanged {
		t.Errorf("operation is %s (review reason %q, %s), want review with %q", op.State, op.ReviewReason, op.StatusMessage, ledger.ReasonCredentialChanged)
	}
	closeIdleClients()
	if err := h.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if jobs := h.Sim.Jobs(); len(jobs) != 0 {
		t.Errorf("provider jobs = %+v, want none: nothing is sent again under another credential", jobs)
	}
}
