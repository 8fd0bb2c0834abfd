package config

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/contracttest"
)

// metaFile is what the provider package names a declaration by.
const metaFile = `_meta["dev.taskgate/contract"]`

// declared is the declared run_suite contract with edits (see
// contracttest.Declaration), as JSON.
func declared(t *testing.T, edits map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(contracttest.Declaration(t, edits))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// remove, as an edit's value, removes the field.
var remove = contracttest.Remove

func TestDecodeContractReadsTheExample(t *testing.T) {
	cfg, err := Parse(strings.NewReader(exampleText(t)), "taskgate.example.yaml", env(map[string]string{"HOSTED_TEST_TOKEN": "x"}))
	if err != nil {
		t.Fatal(err)
	}
	want := cfg.Upstreams[0].Tools["run_suite"].Contract
	got, err := DecodeContract([]byte(contracttest.RunSuite), metaFile, "")
	if err != nil {
		t.Fatalf("DecodeContract: %v", err)
	}
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("declared run_suite differs from the example's contract\n got %+v\nwant %+v", *got, want)
	}
}

func TestDecodeContractValid(t *testing.T) {
	for _, tc := range []struct {
		name  string
		raw   []byte
		check func(t *testing.T, c *Contract)
	}{
		{"only a version", []byte(`{"version": 1}`), func(t *testing.T, c *Contract) {
			if !reflect.DeepEqual(*c, Contract{}) {
				t.Errorf("got %+v, want the empty contract", *c)
			}
		}},
		{"version written 1.0", declared(t, map[string]any{"version": 1.0}), nil},
		{"not_found_safe_after", declared(t, map[string]any{"lookup.not_found_safe_after": "30s"}), func(t *testing.T, c *Contract) {
			if d := c.Lookup.NotFoundSafeAfter; d == nil || *d != 30*time.Second {
				t.Errorf("not_found_safe_after = %v, want 30s", d)
			}
		}},
		{"fan-out priced per job", declared(t, map[string]any{
			"remote_jobs_field": "runners", "cost": map[string]any{"estimate_per_job": "18.00", "jobs_argument": "runners"},
		}), func(t *testing.T, c *Contract) {
			if !c.Cost.FansOut() || c.Cost.EstimatePerJob.String() != "18.00" {
				t.Errorf("cost = %+v, want 18.00 per job counted by runners", c.Cost)
			}
		}},
		{"estimate tool counting the jobs", declared(t, map[string]any{
			"remote_jobs_field": "runners",
			"cost":              map[string]any{"estimate_tool": map[string]any{"tool": "estimate", "field": "usd", "jobs_field": "n"}},
		}), nil},
		{"key in _meta", declared(t, map[string]any{"key": map[string]any{"meta": "com.example/key"}}), nil},
		{"an empty optional field is unset", declared(t, map[string]any{"charges.kind_field": "", "key.header": ""}), nil},
		{"escapes YAML lacks", []byte(`{"version": 1, "key": {"header": "X-Key\/1"}}`), func(t *testing.T, c *Contract) {
			if c.Key.Header != "X-Key/1" {
				t.Errorf("key.header = %q, want X-Key/1", c.Key.Header)
			}
		}},
		{"an argument sent as null", declared(t, map[string]any{"cancel.arguments.reason": nil}), func(t *testing.T, c *Contract) {
			if v, ok := c.Cancel.Arguments["reason"]; !ok || v != nil {
				t.Errorf("cancel.arguments.reason = %v, %v; want null, sent as written", v, ok)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := DecodeContract(tc.raw, metaFile, "")
			if err != nil {
				t.Fatalf("DecodeContract(%s): %v", tc.raw, err)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

func TestDecodeContractInvalid(t *testing.T) {
	for _, tc := range []struct {
		name   string
		raw    []byte
		field  string // the field the error names
		reason string // part of its reason
	}{
		{"not JSON", []byte(`{"version": 1,`), "", "is not valid JSON"},
		{"two values", []byte(`{"version": 1} {}`), "", "holds more than one value"},
		{"not an object", []byte(`[1]`), "", `must be a JSON object holding "version": 1 and the contract's fields, got a list`},
		{"no version", declared(t, map[string]any{"version": remove}), "version", `is required: this gateway reads version 1 of the declared contract; add "version": 1`},
		{"a later version", declared(t, map[string]any{"version": 2}), "version", "is 2, but this gateway reads version 1 of the declared contract only"},
		{"version as a string", declared(t, map[string]any{"version": "1"}), "version", `is "1", but this gateway reads version 1`},
		{"unknown field", declared(t, map[string]any{"lookups": map[string]any{}}), "lookups", "unknown field (known: version, key, remote_job_id_field, remote_jobs_field, lookup, fetch, charges, cancel, cost)"},
		{"unknown nested field", declared(t, map[string]any{"lookup.stauts_field": "s"}), "lookup.stauts_field", "unknown field (known: tool, arguments, status_field,"},
		{"unknown status answer", declared(t, map[string]any{"lookup.statuses.done": []string{"ok"}}), "lookup.statuses.done", "is not one of not_found, accepted, running, completed, failed, cancelled"},
		{"fetch answers not_found", declared(t, map[string]any{"fetch.statuses.not_found": []string{"missing"}}), "fetch.statuses.not_found", "is not one of accepted, running, completed, failed, cancelled"},
		{"unknown charge answer", declared(t, map[string]any{"charges.statuses.paid": []string{"paid"}}), "charges.statuses.paid", "is not one of pending, final, refunded"},
		{"a status mapped twice", declared(t, map[string]any{"lookup.statuses.running": []string{"queued"}}), "lookup.statuses.running", `provider status "queued" is also mapped to accepted`},
		{"deprecated job_id_field", declared(t, map[string]any{"job_id_field": "id"}), "job_id_field", "is a deprecated name that a declared contract does not take; write remote_job_id_field"},
		{"deprecated job_id_field in the lookup", declared(t, map[string]any{"lookup.job_id_field": "id", "lookup.remote_job_id_field": remove}), "lookup.job_id_field", "write remote_job_id_field"},
		{"deprecated placeholder", declared(t, map[string]any{"fetch.arguments.job_id": "{job_id}"}), "fetch.arguments.job_id", "the placeholder {job_id} is a deprecated spelling that a declared contract does not take; write {remote_job_id}"},
		{"unknown placeholder", declared(t, map[string]any{"cancel.arguments.job_id": "{job}"}), "cancel.arguments.job_id", `unknown placeholder "{job}"`},
		{"null contract part", declared(t, map[string]any{"lookup": nil}), "lookup", "is null; leave the field out, or give it a value"},
		{"null status word", declared(t, map[string]any{"fetch.statuses.failed": []any{nil}}), "fetch.statuses.failed[0]", "is null"},
		{"a status word not a string", declared(t, map[string]any{"charges.statuses.final": []any{"final", true}}), "charges.statuses.final[1]", "must be a string, got true"},
		{"a number for a field name", declared(t, map[string]any{"remote_job_id_field": 3}), "remote_job_id_field", "must be a string, got 3"},
		{"an estimate as a number", declared(t, map[string]any{"cost.estimate": 18}), "cost.estimate", `must be a decimal amount written as a string, such as "18.00", got 18`},
		{"an estimate not decimal", declared(t, map[string]any{"cost.estimate": "1e3"}), "cost.estimate", `invalid amount: "1e3" is not a decimal number`},
		{"a duration without a unit", declared(t, map[string]any{"lookup.not_found_safe_after": "30"}), "lookup.not_found_safe_after", "30 is not a duration; write 30s"},
		{"a duration as a number", declared(t, map[string]any{"lookup.not_found_safe_after": 30}), "lookup.not_found_safe_after", `must be a duration written as a string, such as "30s", got 30`},
		{"a negative duration", declared(t, map[string]any{"lookup.not_found_safe_after": "-1s"}), "lookup.not_found_safe_after", "cannot be negative"},
		{"two key channels", declared(t, map[string]any{"key.header": "Idempotency-Key"}), "key", "set one of argument, meta or header, not 2"},
		{"lookup by a key never passed", declared(t, map[string]any{"key": remove}), "lookup.arguments.idempotency_key", "looks the operation up by {operation_id}, but contract.key does not pass the operation ID"},
		{"lookup without a tool", declared(t, map[string]any{"lookup.tool": ""}), "lookup.tool", "is required"},
		{"lookup without status_field", declared(t, map[string]any{"lookup.status_field": remove}), "lookup.status_field", "is required"},
		{"lookup naming no job", declared(t, map[string]any{"lookup.remote_job_id_field": remove, "lookup.jobs_field": remove}), "lookup.remote_job_id_field", "is required (or jobs_field)"},
		{"lookup without statuses", declared(t, map[string]any{"lookup.statuses": remove}), "lookup.statuses", "is required: map each of not_found, accepted"},
		{"fetch without status_field", declared(t, map[string]any{"fetch.status_field": remove}), "fetch.status_field", "is required"},
		{"fetch without statuses", declared(t, map[string]any{"fetch.statuses": map[string]any{}}), "fetch.statuses", "is required"},
		{"charges without list_field", declared(t, map[string]any{"charges.list_field": remove}), "charges.list_field", "is required"},
		{"cancel without a tool", declared(t, map[string]any{"cancel.tool": remove}), "cancel.tool", "is required"},
		{"two estimates", declared(t, map[string]any{"cost.estimate_tool": map[string]any{"tool": "e", "field": "f"}}), "cost", "set one of estimate, estimate_per_job or estimate_tool, not 2"},
		{"a negative estimate", declared(t, map[string]any{"cost.estimate": "-1.00"}), "cost.estimate", "cannot be negative"},
		{"estimate tool without field", declared(t, map[string]any{"cost.estimate": remove, "cost.estimate_tool": map[string]any{"tool": "e"}}), "cost.estimate_tool.field", "is required"},
		{"a price per job without a count", declared(t, map[string]any{"cost.estimate": remove, "cost.estimate_per_job": "1.00"}), "cost.estimate_per_job", "jobs_argument must name the argument that counts them"},
		{"two job counts", declared(t, map[string]any{
			"remote_jobs_field": "runners", "cost.estimate": remove, "cost.jobs_argument": "n",
			"cost.estimate_tool": map[string]any{"tool": "e", "field": "f", "jobs_field": "n"},
		}), "cost.jobs_argument", "counts the remote jobs, and so does estimate_tool.jobs_field"},
		{"a fan-out without the jobs' field", declared(t, map[string]any{"cost.jobs_argument": "n"}), "remote_jobs_field", "is required: the cost counts the remote jobs a call starts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := DecodeContract(tc.raw, metaFile, "")
			if err == nil {
				t.Fatalf("DecodeContract(%s) = %+v, want an error naming %q", tc.raw, c, tc.field)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			var fields []string
			for _, e := range fieldErrors(err) {
				if e.File != metaFile || e.Line != 0 {
					t.Errorf("error %q: File %q, Line %d; want %q and no line", e, e.File, e.Line, metaFile)
				}
				if e.Field == tc.field && strings.Contains(e.Reason, tc.reason) {
					return
				}
				fields = append(fields, e.Error())
			}
			t.Errorf("no error names %q with %q; got:\n%s", tc.field, tc.reason, strings.Join(fields, "\n"))
		})
	}
}

// TestDecodeContractUnderAField checks how an error reads when the
// declaration is named inside something else.
func TestDecodeContractUnderAField(t *testing.T) {
	raw := declared(t, map[string]any{"lookup.status_field": remove, "lookup.stauts_field": "s"})
	_, err := DecodeContract(raw, "hosted_test", `tools.run_suite._meta["dev.taskgate/contract"]`)
	want := `hosted_test: tools.run_suite._meta["dev.taskgate/contract"].lookup.stauts_field: unknown field (known: tool, arguments, status_field, remote_job_id_field, jobs_field, statuses, not_found_safe_after)`
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	raw = declared(t, map[string]any{"lookup.status_field": remove})
	_, err = DecodeContract(raw, "hosted_test", `tools.run_suite._meta["dev.taskgate/contract"]`)
	want = `hosted_test: tools.run_suite._meta["dev.taskgate/contract"].lookup.status_field: is required`
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

// fieldErrors are the FieldErrors err joins.
func fieldErrors(err error) []*FieldError {
	var out []*FieldError
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var fe *FieldError
		if errors.As(e, &fe) {
			out = append(out, fe)
		}
	}
	return out
}
