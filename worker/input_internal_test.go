package worker

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/ledger"
)

func TestAnswerable(t *testing.T) {
	elicit := mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: "ok?"}}
	mixed := mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: "ok?"}, "summary": &mcp.CreateMessageParams{MaxTokens: 10}}
	tests := []struct {
		channel ledger.InputChannel
		q       mcp.InputRequestMap
		want    bool
	}{
		{ledger.InputChannelTaskUpdate, elicit, true},
		{ledger.InputChannelTaskUpdate, mixed, true},
		{ledger.InputChannelTaskResult, elicit, true},
		{ledger.InputChannelTaskResult, mixed, false}, // tasks/result asks elicitations only
		{ledger.InputChannelCallResult, elicit, true},
		{ledger.InputChannelCallResult, mixed, false}, // the client declared elicitation only
		{ledger.InputChannelNone, elicit, false},
	}
	for _, tt := range tests {
		if got := answerable(tt.channel, tt.q); got != tt.want {
			t.Errorf("answerable(%q, %d requests) = %v, want %v", tt.channel, len(tt.q), got, tt.want)
		}
	}
}

func TestUniqueKeys(t *testing.T) {
	q := func(keys ...string) mcp.InputRequestMap {
		m := mcp.InputRequestMap{}
		for _, k := range keys {
			m[k] = &mcp.ElicitParams{Message: k}
		}
		return m
	}
	tests := []struct {
		name    string
		q       mcp.InputRequestMap
		used    []string
		shown   []string
		renamed map[string]string
	}{
		{"first round", q("confirm", "name"), nil, []string{"confirm", "name"}, nil},
		{"a key asked before", q("confirm", "name"), []string{"confirm"}, []string{"confirm~3", "name"}, map[string]string{"confirm~3": "confirm"}},
		{"the renamed key is taken too", q("confirm"), []string{"confirm", "confirm~3"}, []string{"confirm~3~2"}, map[string]string{"confirm~3~2": "confirm"}},
		{"the renamed key is another of this round's", q("confirm", "confirm~3"), []string{"confirm"}, []string{"confirm~3", "confirm~3~2"},
			map[string]string{"confirm~3~2": "confirm"}},
	}
	for _, tt := range tests {
		used := map[string]bool{}
		for _, k := range tt.used {
			used[k] = true
		}
		shown, renamed := uniqueKeys(tt.q, used, 3)
		if got := keysOf(shown); !slices.Equal(got, tt.shown) || !maps.Equal(renamed, tt.renamed) {
			t.Errorf("%s: keys %v, renamed %v; want %v, %v", tt.name, got, renamed, tt.shown, tt.renamed)
		}
		for k, orig := range renamed {
			if shown[k] != tt.q[orig] {
				t.Errorf("%s: %s does not carry the request of %s", tt.name, k, orig)
			}
		}
	}
}

func TestOutcomeOf(t *testing.T) {
	errResult := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "kept"}}}
	okResult := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "kept"}}}
	question := &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: "ok?"}}}
	tests := []struct {
		name     string
		res      *mcp.CallToolResult
		jobID    string
		declined bool
		want     directOutcome
	}{
		{"a result naming its job", okResult, "del-1", false, outcomeJob},
		{"a result naming no job", okResult, "", false, outcomeJob},
		// Also a task cancelled while its question waited: the gateway
		// told the upstream "cancel", which is not the client's answer, and
		// the result may be all that shows work was done.
		{"an error naming no job, nothing declined", errResult, "", false, outcomeJob},
		{"an error naming no job after a decline", errResult, "", true, outcomeNothingStarted},
		{"an error naming its job after a decline", errResult, "del-1", true, outcomeJob},
		// The upstream reports an effect despite the decline: it is
		// recorded, under the operation ID as the job's only handle.
		{"a success after a decline", okResult, "", true, outcomeJob},
		{"a question", question, "", false, outcomeQuestion},
		{"a question after a decline", question, "", true, outcomeQuestion},
	}
	for _, tt := range tests {
		if got := outcomeOf(tt.res, tt.jobID, tt.declined); got != tt.want {
			t.Errorf("%s: outcomeOf = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestAskedAlready(t *testing.T) {
	asked := func(requests string, renamed map[string]string) ledger.InputRequestedData {
		return ledger.InputRequestedData{Requests: []byte(requests), Renamed: renamed}
	}
	elicit := &mcp.ElicitParams{Message: "ok?"}
	tests := []struct {
		name  string
		asked ledger.InputRequestedData
		q     mcp.InputRequestMap
		want  bool
	}{
		{"the question asked", asked(`{"confirm":{}}`, nil), mcp.InputRequestMap{"confirm": elicit}, true},
		{"part of the question asked, the rest answered", asked(`{"a":{},"b":{}}`, nil), mcp.InputRequestMap{"b": elicit}, true},
		{"a new key", asked(`{"confirm":{}}`, nil), mcp.InputRequestMap{"confirm": elicit, "more": elicit}, false},
		{"a new question", asked(`{"confirm":{}}`, nil), mcp.InputRequestMap{"again": elicit}, false},
		// The client saw confirm~2; the task keys it confirm.
		{"a renamed key, by the task's name", asked(`{"confirm~2":{}}`, map[string]string{"confirm~2": "confirm"}), mcp.InputRequestMap{"confirm": elicit}, true},
		{"a renamed key, by the client's name", asked(`{"confirm~2":{}}`, map[string]string{"confirm~2": "confirm"}), mcp.InputRequestMap{"confirm~2": elicit}, false},
		{"an unreadable record", asked(`[`, nil), mcp.InputRequestMap{"confirm": elicit}, false},
	}
	for _, tt := range tests {
		if got := askedAlready(tt.asked, tt.q); got != tt.want {
			t.Errorf("%s: askedAlready = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestSameQuestion(t *testing.T) {
	asked := func(requests string) ledger.InputRequestedData {
		return ledger.InputRequestedData{Requests: []byte(requests), UpstreamTask: "task-1"}
	}
	confirm := `{"method":"elicitation/create","params":{"message":"Delete report.txt?","requestedSchema":{"type":"object","properties":{"confirm":{"type":"boolean"}}}}}`
	tests := []struct {
		name     string
		asked    ledger.InputRequestedData
		recorded string
		want     bool
	}{
		{"the same question under the same key", asked(`{"task_elicitation":` + confirm + `}`), `{"task_elicitation":` + confirm + `}`, true},
		{"the same question under a renamed key", asked(`{"task_elicitation~1":` + confirm + `}`), `{"task_elicitation":` + confirm + `}`, true},
		// PostgreSQL's jsonb gives keys back in its own order and spacing.
		{"the same question, keys reordered", asked(`{"task_elicitation": {"params": {"requestedSchema": {"properties": {"confirm": {"type": "boolean"}}, "type": "object"}, "message": "Delete report.txt?"}, "method": "elicitation/create"}}`),
			`{"task_elicitation":` + confirm + `}`, true},
		{"another message", asked(`{"task_elicitation":` + strings.Replace(confirm, "report.txt", "notes.txt", 1) + `}`), `{"task_elicitation":` + confirm + `}`, false},
		{"another schema", asked(`{"task_elicitation":` + strings.Replace(confirm, "boolean", "string", 1) + `}`), `{"task_elicitation":` + confirm + `}`, false},
		{"a question of two requests", asked(`{"a":` + confirm + `,"b":` + confirm + `}`), `{"task_elicitation":` + confirm + `}`, false},
		{"nothing asked", asked(``), `{"task_elicitation":` + confirm + `}`, false},
		{"an unreadable record", asked(`[`), `{"task_elicitation":` + confirm + `}`, false},
	}
	for _, tt := range tests {
		if got := sameQuestion(tt.asked, json.RawMessage(tt.recorded)); got != tt.want {
			t.Errorf("%s: sameQuestion = %v, want %v", tt.name, got, tt.want)
		}
	}
}
