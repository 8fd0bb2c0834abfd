package config

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/taskgate/taskgate/money"
)

// shape checks that node n can be decoded into type t before the decoder
// runs, so that an unknown field or a value of the wrong kind is reported
// under its path and line rather than as the decoder's message about Go
// types. line is the line of the key that holds n, if any.
func (v *validator) shape(n *yaml.Node, t reflect.Type, path string, line int) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.DocumentNode {
		for _, c := range n.Content {
			v.shape(c, t, path, line)
		}
		return
	}
	if line == 0 {
		line = n.Line
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return
	}
	t = derefType(t)
	if t == reflect.TypeFor[Retention]() && n.Kind == yaml.ScalarNode {
		t = reflect.TypeFor[time.Duration]() // retention: 24h, the operation IDs' retention
	}
	switch {
	case t == reflect.TypeFor[time.Duration]():
		var d time.Duration
		if n.Kind != yaml.ScalarNode {
			v.failAt(path, line, "must be a duration such as 30s, 5m or 1h, got %s", describeNode(n))
		} else if err := n.Decode(&d); err != nil {
			if _, ferr := strconv.ParseFloat(n.Value, 64); ferr == nil {
				v.failAt(path, line, "%s is not a duration; write %ss", n.Value, n.Value)
			} else {
				v.failAt(path, line, "%q is not a duration; write it like 30s, 5m or 1h", n.Value)
			}
		}
		return
	case t == reflect.TypeFor[money.Amount]():
		var a money.Amount
		if n.Kind != yaml.ScalarNode {
			v.failAt(path, line, "must be a decimal amount such as \"18.00\", got %s", describeNode(n))
		} else if err := n.Decode(&a); err != nil {
			v.failAt(path, line, "%s", yamlReason(err))
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		fields := yamlFields(t)
		if n.Kind != yaml.MappingNode {
			if path == "" {
				v.failAt(path, line, "the file must be a mapping of fields (%s), got %s", strings.Join(fields.names, ", "), describeNode(n))
				return
			}
			v.failAt(path, line, "must be a mapping of fields (%s), got %s", strings.Join(fields.names, ", "), describeNode(n))
			return
		}
		v.renameDeprecated(n, path, fields)
		v.eachEntry(n, path, func(key *yaml.Node, val *yaml.Node, p string) {
			ft, ok := fields.types[key.Value]
			if _, deprecated := fields.renamed[key.Value]; !ok && deprecated {
				return // given beside its current name; renameDeprecated said so
			}
			if !ok {
				v.failAt(p, key.Line, "unknown field (known: %s)", strings.Join(fields.names, ", "))
				return
			}
			v.shape(val, ft, p, key.Line)
		})
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			v.failAt(path, line, "must be a mapping, got %s", describeNode(n))
			return
		}
		v.eachEntry(n, path, func(key *yaml.Node, val *yaml.Node, p string) {
			v.shape(val, t.Elem(), p, key.Line)
		})
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			v.failAt(path, line, "must be a list, got %s", describeNode(n))
			return
		}
		for i, c := range n.Content {
			v.shape(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), c.Line)
		}
	case reflect.Interface:
		// Contract call arguments: any YAML value is sent as written.
	default:
		if n.Kind != yaml.ScalarNode {
			v.failAt(path, line, "must be %s, got %s", describeKind(t), describeNode(n))
			return
		}
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			v.failAt(path, line, "%s is not %s", describeNode(n), describeKind(t))
		}
	}
}

// eachEntry calls f for every key of mapping n with the key's path, and
// reports keys given twice. Merge keys (<<) are left to the decoder.
func (v *validator) eachEntry(n *yaml.Node, path string, f func(key, val *yaml.Node, p string)) {
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		if key.Value == "<<" {
			continue
		}
		p := key.Value
		if path != "" {
			p = path + "." + key.Value
		}
		if first, dup := seen[key.Value]; dup {
			v.failAt(p, key.Line, "is given twice (first at line %d)", first)
			continue
		}
		seen[key.Value] = key.Line
		f(key, val, p)
	}
}

// renameDeprecated gives every key of mapping n that is a field's
// deprecated name the field's current name, with a warning, so that the
// rest of Parse sees only current names. Both names at once is an error.
func (v *validator) renameDeprecated(n *yaml.Node, path string, fields structFields) {
	given := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		given[n.Content[i].Value] = true
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key := n.Content[i]
		current, ok := fields.renamed[key.Value]
		if !ok {
			continue
		}
		old, p := key.Value, key.Value
		if path != "" {
			p = path + "." + key.Value
		}
		if given[current] {
			v.failAt(p, key.Line, "is the deprecated name of %s, which is also given; keep only %s", current, current)
			continue
		}
		v.warns = append(v.warns, &FieldError{File: v.file, Field: p, Line: key.Line,
			Reason: fmt.Sprintf("is deprecated and will be removed in the next release; rename it to %s", current)})
		key.Value = current
		given[old], given[current] = false, true
		v.renamed = true
	}
}

// derefType is t without its pointers.
func derefType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// structFields are the YAML fields of a struct type, in declaration order,
// with the fields of inlined structs in place. renamed maps a field's
// deprecated name, from its `deprecated:"old_name"` tag, to its name.
type structFields struct {
	names   []string
	types   map[string]reflect.Type
	renamed map[string]string
}

func yamlFields(t reflect.Type) structFields {
	fs := structFields{types: map[string]reflect.Type{}, renamed: map[string]string{}}
	var add func(t reflect.Type)
	add = func(t reflect.Type) {
		for i := range t.NumField() {
			sf := t.Field(i)
			if !sf.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
			switch {
			case name == "-":
				continue
			case opts == "inline":
				add(derefType(sf.Type))
				continue
			case name == "":
				name = strings.ToLower(sf.Name)
			}
			fs.names = append(fs.names, name)
			fs.types[name] = sf.Type
			if old := sf.Tag.Get("deprecated"); old != "" {
				fs.renamed[old] = name
			}
		}
	}
	add(t)
	return fs
}

// describeKind names what a scalar of type t must look like, for messages.
func describeKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a string"
}

// describeNode names what a YAML node holds, for messages.
func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	if n.ShortTag() == "!!str" {
		return strconv.Quote(n.Value)
	}
	return n.Value
}

// yamlReason is a decoder error without its "yaml:" and line prefixes.
func yamlReason(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		reasons := make([]string, len(te.Errors))
		for i, e := range te.Errors {
			if _, rest, ok := strings.Cut(e, ": "); ok && strings.HasPrefix(e, "line ") {
				e = rest
			}
			reasons[i] = e
		}
		return strings.Join(reasons, "; ")
	}
	return strings.TrimPrefix(err.Error(), "yaml: ")
}
