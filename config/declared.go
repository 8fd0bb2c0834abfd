package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/taskgate/taskgate/money"
)

// DeclaredContractVersion is the version of the declared contract this
// gateway reads. A declared contract is the JSON object in which a
// provider's tool declares its provider contract: "version" and the
// fields of [Contract], named as the configuration names them.
const DeclaredContractVersion = 1

// declaration is the shape of a declared contract.
type declaration struct {
	Version  int `yaml:"version"`
	Contract `yaml:",inline"`
}

// DecodeContract reads a declared contract from raw, a JSON object, and
// checks it as a contract written in the configuration is checked (the
// rules that hold whatever the tool's policy; those of the policy are the
// caller's). Unlike the configuration, a declaration takes no deprecated
// names, since the format is new; no nulls, since a field left out says
// the same; and a string field only a JSON string, which YAML would not
// insist on. The contract is returned without the configuration's
// defaults.
//
// Every problem is a *FieldError, several joined: File is file (where the
// declaration came from, such as _meta["dev.taskgate/contract"]), Field
// the problem's path inside the declaration, after field when field is
// set. A version other than DeclaredContractVersion is the only problem
// reported, since the other fields of another version mean something
// else.
func DecodeContract(raw []byte, file, field string) (*Contract, error) {
	v := &validator{file: file}
	done := func() error {
		for _, err := range v.errs {
			e := err.(*FieldError)
			// A declaration arrives as a JSON value, often on one line:
			// the path, not a line, says where.
			e.Line = 0
			// validateContract spells paths as field+".name".
			if field == "" {
				e.Field = strings.TrimPrefix(e.Field, ".")
			}
		}
		return errors.Join(v.errs...)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var value any
	if err := dec.Decode(&value); err != nil {
		v.fail(field, "is not valid JSON: %v", err)
		return nil, done()
	}
	if dec.More() {
		v.fail(field, "is not valid JSON: it holds more than one value")
		return nil, done()
	}
	if _, ok := value.(map[string]any); !ok {
		v.fail(field, "must be a JSON object holding \"version\": %d and the contract's fields, got %s", DeclaredContractVersion, describeJSON(value))
		return nil, done()
	}
	// JSON is YAML: parsed as the configuration is, the declaration gets
	// the configuration's checks and messages for unknown and mistyped
	// fields. Encoded again first, since YAML lacks some of JSON's string
	// escapes (\/); numbers keep their text.
	var norm bytes.Buffer
	enc := json.NewEncoder(&norm)
	enc.SetEscapeHTML(false)
	var root yaml.Node
	if err := enc.Encode(value); err != nil {
		v.fail(field, "cannot be read: %v", err)
		return nil, done()
	}
	if err := yaml.Unmarshal(norm.Bytes(), &root); err != nil {
		v.fail(field, "cannot be read: %s", yamlReason(err))
		return nil, done()
	}
	obj := root.Content[0]
	if !v.checkVersion(obj, field) {
		return nil, done()
	}
	v.refuseInDeclaration(obj, reflect.TypeFor[declaration](), field)
	v.shape(obj, reflect.TypeFor[declaration](), field, 0)
	if len(v.errs) > 0 {
		return nil, done()
	}
	// shape has looked at every field, so the decoder meets none it
	// does not know.
	d := &declaration{}
	if err := obj.Decode(d); err != nil {
		v.fail(field, "cannot be read: %s", yamlReason(err))
		return nil, done()
	}
	for _, c := range d.calls(field) {
		for _, name := range slices.Sorted(maps.Keys(c.Arguments)) {
			if c.Arguments[name] == "{job_id}" {
				v.fail(subPath(c.path, "arguments."+name), "the placeholder {job_id} is a deprecated spelling that a declared contract does not take; write {remote_job_id}")
			}
		}
	}
	validateContract(v, field, &d.Contract)
	if len(v.errs) > 0 {
		return nil, done()
	}
	return &d.Contract, nil
}

// checkVersion reports whether obj, a declaration's mapping, declares the
// version this gateway reads, and says what is wrong when it does not.
func (v *validator) checkVersion(obj *yaml.Node, field string) bool {
	f := subPath(field, "version")
	for i := 0; i+1 < len(obj.Content); i += 2 {
		if obj.Content[i].Value != "version" {
			continue
		}
		n := obj.Content[i+1]
		// A JSON number, compared as a number: 1.0 is 1.
		if x, err := strconv.ParseFloat(n.Value, 64); err == nil && n.ShortTag() != "!!str" && x == DeclaredContractVersion {
			return true
		}
		v.fail(f, "is %s, but this gateway reads version %d of the declared contract only; declare \"version\": %d with that version's fields", describeNode(n), DeclaredContractVersion, DeclaredContractVersion)
		return false
	}
	v.fail(f, "is required: this gateway reads version %d of the declared contract; add \"version\": %d", DeclaredContractVersion, DeclaredContractVersion)
	return false
}

// refuseInDeclaration reports, in node n of type t at path, what the
// configuration takes but a declaration does not: deprecated field names,
// nulls (except as a call's argument, which is sent as written), and a
// JSON number or boolean where a string is wanted, which YAML would read
// as one. It removes or nulls what it reports, so that shape, which runs
// next, neither renames it nor reports it again.
func (v *validator) refuseInDeclaration(n *yaml.Node, t reflect.Type, path string) {
	t = derefType(t)
	scalar := n.Kind == yaml.ScalarNode
	switch {
	case t.Kind() == reflect.Interface:
	case scalar && n.ShortTag() == "!!null":
		v.fail(path, "is null; leave the field out, or give it a value")
	case scalar && n.ShortTag() != "!!str" && wantsString(t):
		switch t {
		case reflect.TypeFor[time.Duration]():
			v.fail(path, "must be a duration written as a string, such as \"30s\", got %s", n.Value)
		case reflect.TypeFor[money.Amount]():
			v.fail(path, "must be a decimal amount written as a string, such as \"18.00\", got %s: a JSON number may already have lost precision", n.Value)
		default:
			v.fail(path, "must be a string, got %s", n.Value)
		}
		*n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for i, c := range n.Content {
			v.refuseInDeclaration(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			v.refuseInDeclaration(n.Content[i+1], t.Elem(), subPath(path, n.Content[i].Value))
		}
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		fields := yamlFields(t)
		kept := n.Content[:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			p := subPath(path, key.Value)
			if current, deprecated := fields.renamed[key.Value]; deprecated {
				v.fail(p, "is a deprecated name that a declared contract does not take; write %s", current)
				continue
			}
			if ft, known := fields.types[key.Value]; known {
				v.refuseInDeclaration(val, ft, p)
			}
			kept = append(kept, key, val)
		}
		n.Content = kept
	}
}

// wantsString reports whether a value of type t is written as a string.
func wantsString(t reflect.Type) bool {
	return t.Kind() == reflect.String || t == reflect.TypeFor[time.Duration]() || t == reflect.TypeFor[money.Amount]()
}

// pathCall is a provider call and its path.
type pathCall struct {
	path string
	*Call
}

// calls are the declaration's provider calls, in the order validateContract
// checks them, with their paths after field.
func (d *declaration) calls(field string) []pathCall {
	var out []pathCall
	add := func(name string, c *Call) { out = append(out, pathCall{subPath(field, name), c}) }
	if et := d.Cost.EstimateTool; et != nil {
		add("cost.estimate_tool", &et.Call)
	}
	if d.Lookup != nil {
		add("lookup", &d.Lookup.Call)
	}
	if d.Fetch != nil {
		add("fetch", &d.Fetch.Call)
	}
	if d.Charges != nil {
		add("charges", &d.Charges.Call)
	}
	if d.Cancel != nil {
		add("cancel", &d.Cancel.Call)
	}
	return out
}

// subPath is the path of name inside the field at path, as shape spells it.
func subPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// describeJSON names what a decoded JSON value is, for messages.
func describeJSON(x any) string {
	switch x.(type) {
	case []any:
		return "a list"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "true or false"
	}
	return "null"
}

// Adopt returns the policy of u's tool name, which takes its upstream's
// declared contract (Tool.Declared), with the contract c in use and the
// defaults that follow from it, after checking what the policy asks of a
// contract (an estimate for an approval-gated tool, a lookup for
// lookup_then_attach) and that the contract calls no consequential tool.
// c is not changed.
func (u *Upstream) Adopt(name string, c *Contract) (*Tool, error) {
	t := u.Tools[name]
	if t == nil {
		return nil, fmt.Errorf("upstream %s has no tool %s in the configuration", u.Name, name)
	}
	out := *t
	out.Contract = *c
	cost := &out.Contract.Cost
	for _, e := range []**money.Amount{&cost.Estimate, &cost.EstimatePerJob} {
		if *e != nil {
			cp := **e
			*e = &cp
		}
	}
	out.contractDefaults()
	v := &validator{file: u.Name + "." + name + " with the contract it declares"}
	validatePolicyContract(v, "", "contract", &out)
	checkContractCalls(v, "contract", u, &out.Contract)
	if err := errors.Join(v.errs...); err != nil {
		return nil, err
	}
	return &out, nil
}
