package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ErrInvalid is wrapped by every validation failure.
var ErrInvalid = errors.New("invalid configuration")

// FieldError is one invalid field: the file, the field's path, its line when
// known, and the reason. Field is empty for a mistake that belongs to no
// field, such as broken YAML syntax or an unset ${VAR}.
type FieldError struct {
	File   string
	Field  string
	Line   int
	Reason string
}

func (e *FieldError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc += ":" + strconv.Itoa(e.Line)
	}
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", loc, e.Reason)
	}
	return fmt.Sprintf("%s: %s: %s", loc, e.Field, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// validator collects the FieldErrors of one file, and the warnings;
// lines maps field paths to their line in it. renamed says a deprecated
// field name was replaced in the parsed tree.
type validator struct {
	file    string
	lines   map[string]int
	errs    []error
	warns   []*FieldError
	renamed bool
	// lookupEnv reads the environment variables tenant headers name.
	lookupEnv func(string) (string, bool)
}

// fail reports field as invalid, at its line in the file, or at the line
// of the nearest enclosing field when it is not written there.
func (v *validator) fail(field, format string, args ...any) {
	v.failAt(field, v.line(field), format, args...)
}

// warn records a warning about field, at its line as fail finds it.
func (v *validator) warn(field, format string, args ...any) {
	v.warns = append(v.warns, &FieldError{File: v.file, Field: field, Line: v.line(field), Reason: fmt.Sprintf(format, args...)})
}

// line is field's line in the file, or that of the nearest enclosing
// field written there; 0 if none is.
func (v *validator) line(field string) int {
	line := 0
	for p := field; p != "" && line == 0; p = parentPath(p) {
		line = v.lines[p]
	}
	return line
}

// parentPath is the path of the field that holds field: "a.b[2]" for
// "a.b[2].c", "a.b" for "a.b[2]", "" for "a".
func parentPath(field string) string {
	i := strings.LastIndexAny(field, ".[")
	if i < 0 {
		return ""
	}
	return field[:i]
}

func (v *validator) failAt(field string, line int, format string, args ...any) {
	v.errs = append(v.errs, &FieldError{File: v.file, Field: field, Line: line, Reason: fmt.Sprintf(format, args...)})
}

// given reports whether field was written in the file (before defaults).
func (v *validator) given(field string) bool {
	_, ok := v.lines[field]
	return ok
}

// lineIndex maps field paths as validate spells them (upstreams[0].tools.x)
// to their line in the file.
func lineIndex(root *yaml.Node) map[string]int {
	out := map[string]int{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				out[p] = k.Line
				walk(n.Content[i+1], p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				out[p] = c.Line
				walk(c, p)
			}
		}
	}
	walk(root, "")
	return out
}
