package provider_test

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/internal/contracttest"
	"github.com/taskgate/taskgate/provider"
)

// declaration is the declared run_suite contract with edits (see
// contracttest.Declaration).
func declaration(t *testing.T, edits map[string]any) any { return contracttest.Declaration(t, edits) }

// remove, as an edit's value, removes the field.
var remove = contracttest.Remove

func resolvedSchema(t *testing.T) *jsonschema.Resolved {
	t.Helper()
	var s jsonschema.Schema
	if err := json.Unmarshal(provider.ContractSchema(), &s); err != nil {
		t.Fatalf("contract.schema.json does not parse: %v", err)
	}
	if s.Schema != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %q, want draft 2020-12", s.Schema)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("resolve schema: %v", err)
	}
	return rs
}

// TestSchemaAndDecoderAgree checks every declaration against the schema
// and DeclaredContract: a provider whose declaration passes the schema
// must not be refused by the gateway, and the other way round.
func TestSchemaAndDecoderAgree(t *testing.T) {
	rs := resolvedSchema(t)
	for _, tc := range []struct {
		name  string
		doc   any
		valid bool
		// goOnly marks a declaration the schema accepts and the gateway
		// refuses, for a rule JSON Schema cannot state: one provider status
		// word under two answers (uniqueItems sees one list at a time), an
		// amount beyond 64-bit micro-units.
		goOnly bool
	}{
		{name: "the example's run_suite", doc: declaration(t, nil), valid: true},
		{name: "only a version", doc: map[string]any{"version": 1}, valid: true},
		{name: "not_found_safe_after", doc: declaration(t, map[string]any{"lookup.not_found_safe_after": "1h30m"}), valid: true},
		{name: "lookup by jobs_field alone", doc: declaration(t, map[string]any{"lookup.remote_job_id_field": remove}), valid: true},
		{name: "key in _meta", doc: declaration(t, map[string]any{"key": map[string]any{"meta": "com.example/key"}}), valid: true},
		{name: "an empty optional field", doc: declaration(t, map[string]any{"key.header": "", "charges.kind_field": ""}), valid: true},
		{name: "a lookup by {argument:NAME} without a key", doc: declaration(t, map[string]any{"key": remove, "lookup.arguments": map[string]any{"suite": "{argument:suite}"}}), valid: true},
		{name: "arguments of any JSON value", doc: declaration(t, map[string]any{"cancel.arguments.why": []any{1, nil, map[string]any{"a": true}}}), valid: true},
		{name: "fan-out priced per job", doc: declaration(t, map[string]any{
			"remote_jobs_field": "runners", "cost": map[string]any{"estimate_per_job": "18.00", "jobs_argument": "runners"},
		}), valid: true},
		{name: "estimate tool counting the jobs", doc: declaration(t, map[string]any{
			"remote_jobs_field": "runners", "cost": map[string]any{"estimate_tool": map[string]any{"tool": "e", "field": "usd", "jobs_field": "n"}},
		}), valid: true},
		{name: "charges without statuses", doc: declaration(t, map[string]any{"charges.statuses": remove}), valid: true},

		{name: "not an object", doc: []any{1}},
		{name: "no version", doc: declaration(t, map[string]any{"version": remove})},
		{name: "version 2", doc: declaration(t, map[string]any{"version": 2})},
		{name: "version as a string", doc: declaration(t, map[string]any{"version": "1"})},
		{name: "unknown field", doc: declaration(t, map[string]any{"lookups": map[string]any{}})},
		{name: "unknown key field", doc: declaration(t, map[string]any{"key.query": "k"})},
		{name: "unknown lookup field", doc: declaration(t, map[string]any{"lookup.stauts_field": "s"})},
		{name: "unknown cost field", doc: declaration(t, map[string]any{"cost.estimate_usd": "1.00"})},
		{name: "unknown lookup answer", doc: declaration(t, map[string]any{"lookup.statuses.done": []any{"ok"}})},
		{name: "fetch answers not_found", doc: declaration(t, map[string]any{"fetch.statuses.not_found": []any{"missing"}})},
		{name: "unknown charge answer", doc: declaration(t, map[string]any{"charges.statuses.paid": []any{"paid"}})},
		{name: "a status word twice in one answer", doc: declaration(t, map[string]any{"lookup.statuses.running": []any{"running", "running"}})},
		{name: "deprecated job_id_field", doc: declaration(t, map[string]any{"job_id_field": "id"})},
		{name: "deprecated lookup job_id_field", doc: declaration(t, map[string]any{"lookup.job_id_field": "id"})},
		{name: "deprecated placeholder", doc: declaration(t, map[string]any{"fetch.arguments.job_id": "{job_id}"})},
		{name: "unknown placeholder", doc: declaration(t, map[string]any{"cancel.arguments.job_id": "{job}"})},
		{name: "null", doc: declaration(t, map[string]any{"lookup": nil})},
		{name: "null status word", doc: declaration(t, map[string]any{"fetch.statuses.failed": []any{nil}})},
		{name: "a number for a field name", doc: declaration(t, map[string]any{"remote_job_id_field": 3})},
		{name: "a status word not a string", doc: declaration(t, map[string]any{"charges.statuses.final": []any{true}})},
		{name: "statuses not an object", doc: declaration(t, map[string]any{"fetch.statuses": []any{"running"}})},
		{name: "an estimate as a number", doc: declaration(t, map[string]any{"cost.estimate": 18})},
		{name: "an estimate not decimal", doc: declaration(t, map[string]any{"cost.estimate": "1e3"})},
		{name: "an estimate with seven decimals", doc: declaration(t, map[string]any{"cost.estimate": "1.0000001"})},
		{name: "a negative estimate", doc: declaration(t, map[string]any{"cost.estimate": "-1.00"})},
		{name: "a duration without a unit", doc: declaration(t, map[string]any{"lookup.not_found_safe_after": "30"})},
		{name: "a duration as a number", doc: declaration(t, map[string]any{"lookup.not_found_safe_after": 30})},
		{name: "a negative duration", doc: declaration(t, map[string]any{"lookup.not_found_safe_after": "-1s"})},
		{name: "two key channels", doc: declaration(t, map[string]any{"key.header": "Idempotency-Key"})},
		{name: "lookup by a key never passed", doc: declaration(t, map[string]any{"key": remove})},
		{name: "lookup by a key passed as an empty name", doc: declaration(t, map[string]any{"key.argument": ""})},
		{name: "lookup without a tool", doc: declaration(t, map[string]any{"lookup.tool": ""})},
		{name: "lookup without status_field", doc: declaration(t, map[string]any{"lookup.status_field": remove})},
		{name: "lookup naming no job", doc: declaration(t, map[string]any{"lookup.remote_job_id_field": remove, "lookup.jobs_field": ""})},
		{name: "lookup without statuses", doc: declaration(t, map[string]any{"lookup.statuses": remove})},
		{name: "fetch with empty statuses", doc: declaration(t, map[string]any{"fetch.statuses": map[string]any{}})},
		{name: "fetch without status_field", doc: declaration(t, map[string]any{"fetch.status_field": remove})},
		{name: "charges without list_field", doc: declaration(t, map[string]any{"charges.list_field": remove})},
		{name: "charges without amount_field", doc: declaration(t, map[string]any{"charges.amount_field": ""})},
		{name: "cancel without a tool", doc: declaration(t, map[string]any{"cancel.tool": remove})},
		{name: "two estimates", doc: declaration(t, map[string]any{"cost.estimate_tool": map[string]any{"tool": "e", "field": "f"}})},
		{name: "estimate tool without field", doc: declaration(t, map[string]any{"cost.estimate": remove, "cost.estimate_tool": map[string]any{"tool": "e"}})},
		{name: "a price per job without a count", doc: declaration(t, map[string]any{"cost.estimate": remove, "cost.estimate_per_job": "1.00"})},
		{name: "two job counts", doc: declaration(t, map[string]any{
			"remote_jobs_field": "runners", "cost.estimate": remove, "cost.jobs_argument": "n",
			"cost.estimate_tool": map[string]any{"tool": "e", "field": "f", "jobs_field": "n"},
		})},
		{name: "a fan-out without the jobs' field", doc: declaration(t, map[string]any{"cost.jobs_argument": "n"})},
		{name: "a fan-out with an empty jobs' field", doc: declaration(t, map[string]any{"cost.jobs_argument": "n", "remote_jobs_field": ""})},

		{name: "a status word under two answers", doc: declaration(t, map[string]any{"lookup.statuses.running": []any{"queued"}}), goOnly: true},
		{name: "an estimate too large", doc: declaration(t, map[string]any{"cost.estimate": "99999999999999999999.00"}), goOnly: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			schemaErr := rs.Validate(tc.doc)
			c, ok, err := provider.DeclaredContract(map[string]any{provider.ContractMetaKey: tc.doc})
			if !ok {
				t.Fatalf("DeclaredContract says no contract is declared")
			}
			schemaValid, goValid := schemaErr == nil, err == nil
			if tc.goOnly {
				if !schemaValid || goValid {
					t.Errorf("marked for the Go checks alone, but the schema says valid=%v (%v) and DeclaredContract valid=%v (%v)", schemaValid, schemaErr, goValid, err)
				}
				return
			}
			if schemaValid != tc.valid {
				t.Errorf("schema: valid = %v, want %v (%v)", schemaValid, tc.valid, schemaErr)
			}
			if goValid != tc.valid {
				t.Errorf("DeclaredContract: valid = %v, want %v (%v)", goValid, tc.valid, err)
			}
			if goValid && c == nil {
				t.Errorf("DeclaredContract returned no contract and no error")
			}
		})
	}
}

func TestDeclaredContractAbsent(t *testing.T) {
	for _, meta := range []map[string]any{nil, {}, {"other": 1}, {provider.ContractMetaKey: nil}} {
		c, ok, err := provider.DeclaredContract(meta)
		if c != nil || ok || err != nil {
			t.Errorf("DeclaredContract(%v) = %v, %v, %v; want none declared", meta, c, ok, err)
		}
	}
}

func TestDeclaredContractError(t *testing.T) {
	_, _, err := provider.DeclaredContract(map[string]any{provider.ContractMetaKey: declaration(t, map[string]any{"lookup.status_field": remove})})
	if want := `_meta["dev.taskgate/contract"]: lookup.status_field: is required`; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

// TestSchemaMatchesContract checks that the schema names exactly the
// fields of config.Contract (and version), down to every nested part, so
// that neither can change without the other; and that each of them is
// described and admits no other field.
func TestSchemaMatchesContract(t *testing.T) {
	var root map[string]any
	if err := json.Unmarshal(provider.ContractSchema(), &root); err != nil {
		t.Fatal(err)
	}
	defs, _ := root["$defs"].(map[string]any)
	resolve := func(s map[string]any) map[string]any {
		if ref, ok := s["$ref"].(string); ok {
			def, _ := defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
			return def
		}
		return s
	}
	if v, _ := root["properties"].(map[string]any)["version"].(map[string]any); v["const"] != float64(provider.ContractVersion) {
		t.Errorf("version const = %v, want %d", v["const"], provider.ContractVersion)
	}
	var check func(path string, s map[string]any, typ reflect.Type, extra ...string)
	check = func(path string, s map[string]any, typ reflect.Type, extra ...string) {
		props, _ := s["properties"].(map[string]any)
		if s["additionalProperties"] != false {
			t.Errorf("%s: additionalProperties is not false", path)
		}
		fields := yamlFields(typ)
		want := slices.Sorted(slices.Values(append(slices.Collect(maps.Keys(fields)), extra...)))
		if got := slices.Sorted(maps.Keys(props)); !slices.Equal(got, want) {
			t.Errorf("%s: schema properties %v, want the fields of %s: %v", path, got, typ, want)
		}
		for name, p := range props {
			ps, _ := p.(map[string]any)
			if d, _ := ps["description"].(string); d == "" {
				t.Errorf("%s.%s has no description", path, name)
			}
			ft, ok := fields[name]
			for ft != nil && ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ok && ft.Kind() == reflect.Struct && resolve(ps)["properties"] != nil {
				check(path+"."+name, resolve(ps), ft)
			}
		}
	}
	check("contract", root, reflect.TypeFor[config.Contract](), "version")
}

// yamlFields are the YAML field names of struct type t and their types,
// with inlined structs' fields in place.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case !f.IsExported() || name == "-":
		case opts == "inline":
			maps.Copy(out, yamlFields(f.Type))
		default:
			out[name] = f.Type
		}
	}
	return out
}
