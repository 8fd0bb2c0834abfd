package ledger

import (
	"encoding/json"
	"strings"

	"github.com/taskgate/taskgate/secrets"
)

// Redacted replaces a secret argument's value in what is shown.
const Redacted = secrets.Redacted

// RedactSecrets returns raw (any JSON) with every occurrence of the string
// values of the secret arguments (top-level members of args named in
// secret) replaced by [Redacted], in strings and object keys alike. An
// upstream's question or a client's answer may echo a secret the call
// carried; the events that record them must not. raw that is not JSON, or
// arguments that are not an object, come back as they are only when there
// is nothing secret to look for; otherwise raw is replaced wholly. So is
// raw when a secret value in args is still sealed: the real value, which is
// what raw could echo, is not known here.
func RedactSecrets(raw json.RawMessage, args json.RawMessage, secret []string) json.RawMessage {
	if len(secret) == 0 || len(raw) == 0 {
		return raw
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(args, &m); err != nil {
		return json.RawMessage(`"` + Redacted + `"`)
	}
	var values []string
	for _, k := range secret {
		if secrets.KeyOf(m[k]) != "" {
			return json.RawMessage(`"` + Redacted + `"`)
		}
		var v string
		if json.Unmarshal(m[k], &v) == nil && v != "" {
			values = append(values, v)
		}
	}
	if len(values) == 0 {
		return raw
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return json.RawMessage(`"` + Redacted + `"`)
	}
	out, err := json.Marshal(redactValue(doc, values))
	if err != nil {
		return json.RawMessage(`"` + Redacted + `"`)
	}
	return out
}

func redactValue(v any, values []string) any {
	switch x := v.(type) {
	case string:
		for _, s := range values {
			x = strings.ReplaceAll(x, s, Redacted)
		}
		return x
	case []any:
		for i := range x {
			x[i] = redactValue(x[i], values)
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[redactValue(k, values).(string)] = redactValue(e, values)
		}
		return out
	}
	return v
}

// RedactSecretText is [RedactSecrets] for a plain text, such as a status
// message that quotes an upstream's question.
func RedactSecretText(s string, args json.RawMessage, secret []string) string {
	raw, err := json.Marshal(s)
	if err != nil {
		return Redacted
	}
	var out string
	if err := json.Unmarshal(RedactSecrets(raw, args, secret), &out); err != nil {
		return Redacted
	}
	return out
}
