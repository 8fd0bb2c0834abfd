package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/internal/testwait"
)

func TestKeys(t *testing.T) {
	l := newLedger(t)
	url := l.apiServer(t) + "/v1/approvals"

	r := l.run(t, "keys", "create", "--tenant", "acme", "--label", "ci runner")
	if r.code != 0 {
		t.Fatalf("keys create: exit %d, stderr %q", r.code, r.stderr)
	}
	key := strings.TrimSuffix(r.stdout, "\n")
	if !strings.HasPrefix(key, authn.APIKeyPrefix) || strings.ContainsAny(key, " \n") {
		t.Fatalf("keys create printed %q on stdout, want the key alone on one line", r.stdout)
	}
	if !strings.Contains(r.stderr, "will not be shown again") {
		t.Errorf("keys create said %q on stderr, want a notice that the key will not be shown again", r.stderr)
	}
	if status, body := get(t, url, key); status != http.StatusOK {
		t.Fatalf("GET /v1/approvals with the new key: %d %s, want 200", status, body)
	}

	other := l.ok(t, "keys", "create", "--tenant", "globex")
	for _, args := range [][]string{{"keys", "list"}, {"keys", "list", "--json"}, {"keys", "list", "--tenant", "acme"}} {
		out := l.ok(t, args...)
		for _, secret := range []string{key, strings.TrimSpace(other), authn.HashAPIKey(key)} {
			if strings.Contains(out, secret) {
				t.Errorf("taskgate %s printed a key or its hash:\n%s", strings.Join(args, " "), out)
			}
		}
	}
	var listed []struct {
		ID     int64  `json:"id"`
		Tenant string `json:"tenant"`
		Label  string `json:"label"`
	}
	if err := json.Unmarshal([]byte(l.ok(t, "keys", "list", "--tenant", "acme", "--json")), &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].Tenant != "acme" || listed[0].Label != "ci runner" {
		t.Fatalf("keys list --tenant acme = %+v, want the one ci runner key", listed)
	}
	if table := l.ok(t, "keys", "list"); !strings.Contains(table, "ci runner") || !strings.Contains(table, "globex") {
		t.Errorf("keys list =\n%s\nwant both tenants' keys", table)
	}

	if out := l.ok(t, "keys", "revoke", itoa(listed[0].ID)); !strings.Contains(out, "revoked") {
		t.Errorf("keys revoke printed %q", out)
	}
	// A revoked key stops working within a second: a gateway trusts a key
	// it found for that long before looking it up again.
	within, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	testwait.Until(t, within, "GET /v1/approvals with the revoked key to answer 401", func() (bool, error) {
		status, body := get(t, url, key)
		return status == http.StatusUnauthorized, fmt.Errorf("it answers %d %s", status, body)
	})
	if status, body := get(t, url, strings.TrimSpace(other)); status != http.StatusOK {
		t.Errorf("GET /v1/approvals with globex's key after revoking acme's: %d %s, want 200", status, body)
	}
	var revoked []struct {
		RevokedAt time.Time `json:"revoked_at"`
	}
	if err := json.Unmarshal([]byte(l.ok(t, "keys", "list", "--tenant", "acme", "--json")), &revoked); err != nil {
		t.Fatal(err)
	}
	if len(revoked) != 1 || revoked[0].RevokedAt.IsZero() {
		t.Errorf("keys list after revoke = %+v, want the key with its revocation time", revoked)
	}

	checkFailure(t, l.run(t, "keys", "create"), "--tenant is required", true)
	checkFailure(t, l.run(t, "keys", "revoke", "9999"), "there is no API key 9999", true)
	checkFailure(t, l.run(t, "keys", "revoke", "tgk_abc"), `API key ID "tgk_abc" is not a positive number`, true)
}

// Only an approver key may create approvals; keys list shows each key's
// role.
func TestKeyRoles(t *testing.T) {
	l := newLedger(t)
	url := l.apiServer(t) + "/v1/approvals"
	agent := strings.TrimSpace(l.ok(t, "keys", "create", "--tenant", "acme", "--label", "agent"))
	r := l.run(t, "keys", "create", "--tenant", "acme", "--label", "alice", "--role", "approver")
	if r.code != 0 || !strings.Contains(r.stderr, "Created approver API key") {
		t.Fatalf("keys create --role approver: exit %d, stderr %q", r.code, r.stderr)
	}
	approver := strings.TrimSpace(r.stdout)

	body := `{"operation_id":"op-1","tool":"hosted_test.run_suite","max_total_cost":"20.00","max_remote_jobs":1,"expires_in":"1h"}`
	if status, b := post(t, url, agent, body); status != http.StatusForbidden {
		t.Errorf("POST /v1/approvals with an agent key: %d %s, want 403", status, b)
	}
	if status, b := post(t, url, approver, body); status != http.StatusCreated {
		t.Errorf("POST /v1/approvals with an approver key: %d %s, want 201", status, b)
	}

	var listed []struct {
		Label string `json:"label"`
		Role  string `json:"role"`
	}
	if err := json.Unmarshal([]byte(l.ok(t, "keys", "list", "--json")), &listed); err != nil {
		t.Fatal(err)
	}
	roles := map[string]string{}
	for _, k := range listed {
		roles[k.Label] = k.Role
	}
	if roles["agent"] != "agent" || roles["alice"] != "approver" {
		t.Errorf("keys list roles = %v, want agent: agent and alice: approver", roles)
	}
	if table := l.ok(t, "keys", "list"); !strings.Contains(table, "ROLE") || !strings.Contains(table, "approver") {
		t.Errorf("keys list =\n%s\nwant a ROLE column", table)
	}
}

// post sends an authenticated JSON POST and returns the status and body.
func post(t *testing.T, url, key, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}
