package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads and validates the file at path, expanding ${VAR} from the
// process environment.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	return Parse(bytes.NewReader(b), path, os.LookupEnv)
}

// Parse reads YAML from r, applies defaults and validates. lookupEnv
// expands ${VAR} references: the substitution is textual and happens before
// the YAML is parsed, comments included, and a variable it does not know is
// an error. A nil lookupEnv leaves references as written. The environment
// variables that tenant headers name are read with lookupEnv, or from the
// process environment when it is nil.
func Parse(r io.Reader, file string, lookupEnv func(string) (string, bool)) (*Config, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	v := &validator{file: file, lookupEnv: lookupEnv}
	if lookupEnv == nil {
		v.lookupEnv = os.LookupEnv
	}
	if lookupEnv != nil {
		raw = v.expandEnv(raw, lookupEnv)
		if len(v.errs) > 0 {
			return nil, errors.Join(v.errs...)
		}
	}
	var root yaml.Node
	if err := yaml.Unmarshal(raw, &root); err != nil {
		return nil, syntaxError(file, err)
	}
	v.shape(&root, reflect.TypeFor[Config](), "", 0)
	if len(v.errs) > 0 {
		return nil, errors.Join(v.errs...)
	}
	if v.renamed {
		// shape gave deprecated fields their current names in root; decode
		// that, not the file as written.
		if raw, err = yaml.Marshal(&root); err != nil {
			return nil, fmt.Errorf("%s: re-encode after renaming deprecated fields: %w", file, err)
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	c := &Config{}
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		// shape has looked at every field the decoder reads; this is a
		// construct it does not follow, such as a merge key.
		return nil, &FieldError{File: file, Reason: yamlReason(err)}
	}
	c.File = file
	c.applyDefaults()
	v.lines = lineIndex(&root)
	c.validate(v)
	if len(v.errs) > 0 {
		return nil, errors.Join(v.errs...)
	}
	c.Warnings = v.warns
	return c, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError turns the YAML parser's complaint into a FieldError with the
// line it names.
func syntaxError(file string, err error) error {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &FieldError{File: file, Line: line, Reason: "YAML syntax: " + m[2]}
	}
	return &FieldError{File: file, Reason: "YAML syntax: " + strings.TrimPrefix(err.Error(), "yaml: ")}
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnv replaces ${VAR} references in b; each unset variable is an
// error naming it and its line.
func (v *validator) expandEnv(b []byte, lookupEnv func(string) (string, bool)) []byte {
	var out bytes.Buffer
	last := 0
	for _, m := range envRef.FindAllSubmatchIndex(b, -1) {
		name := string(b[m[2]:m[3]])
		out.Write(b[last:m[0]])
		last = m[1]
		val, ok := lookupEnv(name)
		if !ok {
			line := 1 + bytes.Count(b[:m[0]], []byte("\n"))
			v.errs = append(v.errs, &FieldError{File: v.file, Line: line,
				Reason: fmt.Sprintf("${%s} is not set in the environment; set it (it may be empty) or remove the reference", name)})
			continue
		}
		out.WriteString(val)
	}
	out.Write(b[last:])
	return out.Bytes()
}
