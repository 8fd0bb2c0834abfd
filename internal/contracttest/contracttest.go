// Package contracttest holds, for tests, a declared provider contract (the
// contract of run_suite in config/taskgate.example.yaml, as a provider
// would declare it) and a way to edit it. It is a leaf: it imports
// nothing of taskgate, and nothing but tests imports it.
package contracttest

import (
	"encoding/json"
	"strings"
	"testing"
)

// RunSuite is the contract of run_suite in config/taskgate.example.yaml,
// declared.
const RunSuite = `{
  "version": 1,
  "key": {"argument": "idempotency_key"},
  "remote_job_id_field": "job_id",
  "lookup": {
    "tool": "lookup_operation",
    "arguments": {"idempotency_key": "{operation_id}"},
    "status_field": "status",
    "remote_job_id_field": "job_id",
    "jobs_field": "jobs",
    "statuses": {"not_found": ["not_found"], "accepted": ["queued"], "running": ["running"], "completed": ["succeeded"], "failed": ["failed"], "cancelled": ["cancelled"]}
  },
  "fetch": {
    "tool": "get_job",
    "arguments": {"job_id": "{remote_job_id}"},
    "status_field": "status",
    "statuses": {"accepted": ["queued"], "running": ["running"], "completed": ["succeeded"], "failed": ["failed"], "cancelled": ["cancelled"]}
  },
  "charges": {
    "tool": "list_charges",
    "arguments": {"job_id": "{remote_job_id}"},
    "list_field": "charges",
    "id_field": "charge_id",
    "remote_job_id_field": "job_id",
    "amount_field": "amount_usd",
    "currency_field": "currency",
    "status_field": "status",
    "statuses": {"pending": ["pending"], "final": ["final"], "refunded": ["refunded"]}
  },
  "cancel": {
    "tool": "cancel_job",
    "arguments": {"job_id": "{remote_job_id}"},
    "effect_reversed_field": "effect_reversed"
  },
  "cost": {"estimate": "18.00", "currency": "USD"}
}`

// Remove, as an edit's value, removes the field.
var Remove = &struct{ remove bool }{}

// Declaration is RunSuite decoded, with edits: each path
// ("lookup.statuses.running") set to its value, or removed when the value
// is Remove.
func Declaration(t testing.TB, edits map[string]any) map[string]any {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal([]byte(RunSuite), &d); err != nil {
		t.Fatal(err)
	}
	for path, value := range edits {
		m := d
		names := strings.Split(path, ".")
		for _, name := range names[:len(names)-1] {
			next, ok := m[name].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[name] = next
			}
			m = next
		}
		if value == Remove {
			delete(m, names[len(names)-1])
		} else {
			m[names[len(names)-1]] = value
		}
	}
	return d
}
