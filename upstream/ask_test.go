package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/taskwire"
)

// addAskingTools adds the tiny server's tools that log and ask: chatty
// interleaves progress and log messages, sample asks for a completion and
// the roots, caps returns the capabilities its session's client declared,
// ask_enum elicits with the enum schemas of SEP-1330, and ask_url elicits
// in URL mode and pings.
func addAskingTools(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "chatty", Description: "Sends n progress notifications, each followed by a log message."}, chatty)
	mcp.AddTool(s, &mcp.Tool{Name: "sample", Description: "Asks the client for a completion and its roots."}, sample)
	mcp.AddTool(s, &mcp.Tool{Name: "caps", Description: "Returns the client's declared capabilities."}, clientCaps)
	mcp.AddTool(s, &mcp.Tool{Name: "ask_enum", Description: "Elicits with enum schemas."}, askEnum)
	mcp.AddTool(s, &mcp.Tool{Name: "ask_url", Description: "Elicits in URL mode, ends the elicitation, then pings the client."}, askURL)
}

func askURL(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Mode: "url", Message: "sign in", URL: "https://example.test/sign-in", ElicitationID: "e-1"})
	if err != nil {
		return textResult("elicitation failed: " + err.Error()), nil, nil
	}
	if err := req.Session.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: "e-1"}); err != nil {
		return nil, nil, err
	}
	// A ping the client answers: it has read the notification by then.
	if err := req.Session.Ping(ctx, nil); err != nil {
		return textResult("ping failed: " + err.Error()), nil, nil
	}
	return textResult(res.Action + " pong"), nil, nil
}

// chattyLevel is the level of chatty's i-th log message.
func chattyLevel(i int) mcp.LoggingLevel {
	return []mcp.LoggingLevel{"debug", "info", "warning"}[i%3]
}

func chatty(ctx context.Context, req *mcp.CallToolRequest, args countArgs) (*mcp.CallToolResult, any, error) {
	token := req.Params.GetProgressToken()
	for i := 1; i <= args.N; i++ {
		if token != nil {
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Message: args.Label}); err != nil {
				return nil, nil, err
			}
		}
		if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: chattyLevel(i), Data: fmt.Sprintf("%s-%d", args.Label, i)}); err != nil {
			return nil, nil, err
		}
	}
	return textResult(args.Label), nil, nil
}

func sample(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	var out []string
	res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{
		Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "2+2?"}}},
		MaxTokens: 10,
	})
	if err != nil {
		out = append(out, "sampling failed: "+err.Error())
	} else if tc, ok := res.Content.(*mcp.TextContent); ok {
		out = append(out, "model "+res.Model+" said "+tc.Text)
	}
	roots, err := req.Session.ListRoots(ctx, nil)
	if err != nil {
		out = append(out, "roots failed: "+err.Error())
	} else {
		var uris []string
		for _, r := range roots.Roots {
			uris = append(uris, r.URI)
		}
		out = append(out, "roots ["+strings.Join(uris, " ")+"]")
	}
	return textResult(strings.Join(out, "; ")), nil, nil
}

func clientCaps(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	b, err := json.Marshal(req.Session.InitializeParams().Capabilities)
	if err != nil {
		return nil, nil, err
	}
	return textResult(string(b)), nil, nil
}

// enumSchema is the schema of the conformance suite's SEP-1330 scenario,
// titled multi-select with typed items included.
func enumSchema() map[string]any {
	titled := []any{
		map[string]any{"const": "value1", "title": "First Option"},
		map[string]any{"const": "value2", "title": "Second Option"},
	}
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"untitledSingle": map[string]any{"type": "string", "enum": []any{"option1", "option2"}},
			"titledSingle":   map[string]any{"type": "string", "oneOf": titled},
			"legacyEnum":     map[string]any{"type": "string", "enum": []any{"opt1", "opt2"}, "enumNames": []any{"Option One", "Option Two"}},
			"untitledMulti":  map[string]any{"type": "array", "minItems": 1.0, "items": map[string]any{"type": "string", "enum": []any{"option1", "option2"}}},
			"titledMulti":    map[string]any{"type": "array", "minItems": 1.0, "items": map[string]any{"type": "string", "anyOf": titled}},
			"withDefault":    map[string]any{"type": "string", "enum": []any{"a", "b"}, "default": "a"},
		},
	}
}

func askEnum(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	// The go-sdk's own Elicit would refuse an accepted answer to this
	// schema, which it reads more narrowly than the protocol; the tests
	// decline.
	res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "pick", RequestedSchema: json.RawMessage(mustJSON(enumSchema()))})
	if err != nil {
		return textResult("elicitation failed: " + err.Error()), nil, nil
	}
	return textResult(res.Action + ":" + mustJSON(res.Content)), nil, nil
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestLogMessagesArriveInOrderWithProgress(t *testing.T) {
	const n = 12
	tests := []struct {
		upstream tinyUpstream
		// together: two calls at once, each getting only its own
		// messages. Over stdio nothing ties a message to a call, so
		// messages read while two calls are in flight go to no call.
		together bool
	}{
		{tinyHTTPLegacy, true},
		{tinyHTTPModern, true},
		{tinyStdioLegacy, false},
		{tinyStdioModern, false},
	}
	for _, tt := range tests {
		t.Run(tt.upstream.name, func(t *testing.T) {
			ctx, u := startTiny(t, tt.upstream, nil)
			labels := []string{"A"}
			if tt.together {
				labels = append(labels, "B")
			}
			for run := range 3 {
				var wg sync.WaitGroup
				for _, label := range labels {
					wg.Go(func() {
						var got []string
						params := &mcp.CallToolParams{Name: "chatty", Arguments: countArgs{N: n, Label: label}}
						params.SetProgressToken("tok-" + label)
						res, err := u.CallTool(ctx, params, &CallOptions{
							Progress: func(p *mcp.ProgressNotificationParams) {
								got = append(got, fmt.Sprintf("progress %s-%v", p.Message, p.Progress))
							},
							Log: func(p *mcp.LoggingMessageParams) { got = append(got, fmt.Sprintf("%s %v", p.Level, p.Data)) },
						})
						if err != nil {
							t.Errorf("run %d, call %s: %v", run, label, err)
							return
						}
						if text(res) != label {
							t.Errorf("run %d, call %s returned %q", run, label, text(res))
						}
						var want []string
						for i := 1; i <= n; i++ {
							want = append(want, fmt.Sprintf("progress %s-%d", label, i), fmt.Sprintf("%s %s-%d", chattyLevel(i), label, i))
						}
						if !slices.Equal(got, want) {
							t.Errorf("run %d, call %s got, before its result:\n%q\nwant\n%q", run, label, got, want)
						}
					})
				}
				wg.Wait()
			}
		})
	}
}

func TestModernUpstreamLogsAtTheCallsLevel(t *testing.T) {
	ctx, u := startTiny(t, tinyHTTPModern, nil)
	var got []mcp.LoggingLevel
	_, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "chatty", Arguments: countArgs{N: 6, Label: "A"}}, &CallOptions{
		Log:      func(p *mcp.LoggingMessageParams) { got = append(got, p.Level) },
		LogLevel: "warning",
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []mcp.LoggingLevel{"warning", "warning"}; !slices.Equal(got, want) {
		t.Errorf("log levels received = %q, want %q", got, want)
	}
}

func TestSamplingAndRootsGoToTheCallThatCanAnswer(t *testing.T) {
	for _, tu := range []tinyUpstream{tinyHTTPLegacy, tinyStdioLegacy} {
		t.Run(tu.name, func(t *testing.T) {
			ctx, u := startTiny(t, tu, nil)
			var sampled []string
			opts := &CallOptions{
				CreateMessage: func(_ context.Context, p *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageWithToolsResult, error) {
					for _, m := range p.Messages {
						for _, c := range m.Content {
							if tc, ok := c.(*mcp.TextContent); ok {
								sampled = append(sampled, tc.Text)
							}
						}
					}
					return &mcp.CreateMessageWithToolsResult{Model: "m1", Role: "assistant", Content: []mcp.Content{&mcp.TextContent{Text: "4"}}}, nil
				},
				ListRoots: func(context.Context, *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
					return &mcp.ListRootsResult{Roots: []*mcp.Root{{URI: "file:///work/a"}, {URI: "file:///work/b"}}}, nil
				},
			}
			res, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "sample"}, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := text(res), "model m1 said 4; roots [file:///work/a file:///work/b]"; got != want {
				t.Errorf("with a client that samples: %q, want %q", got, want)
			}
			if want := []string{"2+2?"}; !slices.Equal(sampled, want) {
				t.Errorf("the client was asked %q, want %q", sampled, want)
			}

			res, err = u.CallTool(ctx, &mcp.CallToolParams{Name: "sample"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := text(res); !strings.Contains(got, "sampling failed: ") || !strings.Contains(got, "method not found") || !strings.HasSuffix(got, "roots []") {
				t.Errorf("without a client that samples: %q, want sampling refused and no roots", got)
			}
		})
	}
}

func TestCallSessionDeclaresTheClientsCapabilities(t *testing.T) {
	ctx, u := startTiny(t, tinyHTTPLegacy, nil)
	capsOf := func(opts *CallOptions) map[string]any {
		t.Helper()
		res, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "caps"}, opts)
		if err != nil {
			t.Fatal(err)
		}
		var caps map[string]any
		if err := json.Unmarshal([]byte(text(res)), &caps); err != nil {
			t.Fatalf("caps answered %q: %v", text(res), err)
		}
		return caps
	}
	sampler := &CallOptions{
		Capabilities: &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}, RootsV2: &mcp.RootCapabilities{ListChanged: true}},
		CreateMessage: func(context.Context, *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageWithToolsResult, error) {
			return nil, fmt.Errorf("not asked")
		},
	}
	got := capsOf(sampler)
	if _, ok := got["sampling"]; !ok {
		t.Errorf("a sampling client's call declared %v, want sampling", got)
	}
	if _, ok := got["elicitation"]; ok {
		t.Errorf("a client without elicitation had its call declare %v", got)
	}
	if roots, _ := got["roots"].(map[string]any); roots["listChanged"] != true {
		t.Errorf("call declared roots %v, want the client's listChanged", got["roots"])
	}
	got = capsOf(nil)
	if _, ok := got["sampling"]; ok {
		t.Errorf("the shared session declared %v, want no sampling", got)
	}
	if _, ok := got["elicitation"]; !ok {
		t.Errorf("the shared session declared %v, want elicitation (declined when no call can answer)", got)
	}
}

func TestElicitationSchemaArrivesAsSent(t *testing.T) {
	ctx, u := startTiny(t, tinyHTTPLegacy, nil)
	var schema any
	res, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "ask_enum"}, &CallOptions{
		Elicit: func(_ context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			schema = p.RequestedSchema
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got, want any
	if err := json.Unmarshal([]byte(mustJSON(schema)), &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(mustJSON(enumSchema())), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the client was asked with schema\n%s\nwant\n%s", mustJSON(got), mustJSON(want))
	}
	if got, want := text(res), "decline:null"; got != want {
		t.Errorf("the upstream got %q, want %q", got, want)
	}
}

func TestLogLevelAdmits(t *testing.T) {
	tests := []struct {
		min, level mcp.LoggingLevel
		want       bool
	}{
		{"debug", "debug", true},
		{"info", "debug", false},
		{"info", "info", true},
		{"info", "emergency", true},
		{"warning", "notice", false},
		{"error", "critical", true},
		{"", "emergency", false},
		{"debug", "verbose", true},
		{"info", "verbose", false},
		{"loud", "error", false},
	}
	for _, tt := range tests {
		if got := logLevelAdmits(tt.min, tt.level); got != tt.want {
			t.Errorf("logLevelAdmits(%q, %q) = %v, want %v", tt.min, tt.level, got, tt.want)
		}
	}
}

func TestURLElicitationEndsAndPingsAreAnswered(t *testing.T) {
	for _, tu := range []tinyUpstream{tinyHTTPLegacy, tinyStdioLegacy} {
		t.Run(tu.name, func(t *testing.T) {
			ctx, u := startTiny(t, tu, nil)
			var mu sync.Mutex
			var events []string
			opts := &CallOptions{
				Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
				Elicit: func(_ context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
					mu.Lock()
					defer mu.Unlock()
					events = append(events, p.Mode+" "+p.URL)
					return &mcp.ElicitResult{Action: "accept"}, nil
				},
				ElicitationComplete: func(_ context.Context, p *mcp.ElicitationCompleteParams) {
					mu.Lock()
					defer mu.Unlock()
					events = append(events, "complete "+p.ElicitationID)
				},
			}
			res, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "ask_url"}, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := text(res), "accept pong"; got != want {
				t.Errorf("ask_url = %q, want %q", got, want)
			}
			mu.Lock()
			defer mu.Unlock()
			if want := []string{"url https://example.test/sign-in", "complete e-1"}; !slices.Equal(events, want) {
				t.Errorf("the call's client saw %q, want %q", events, want)
			}
		})
	}
}

// TestTaskElicitationsGoToTheirTaskResult: an elicitation tagged with an
// upstream task reaches the TaskResult reading that task's result, and
// only while it reads; any other gets an error, not an answer nobody gave.
// Ending the read ends the answer under way and waits for it.
func TestTaskElicitationsGoToTheirTaskResult(t *testing.T) {
	u := &Upstream{logger: slog.New(slog.DiscardHandler), taskAskers: map[string]elicitFunc{}}
	ctx := t.Context()
	tagged := func(taskID string) *mcp.ElicitRequest {
		return &mcp.ElicitRequest{Params: &mcp.ElicitParams{Message: "ok?", Meta: mcp.Meta{taskwire.RelatedTaskMetaKey: map[string]any{"taskId": taskID}}}}
	}
	waiting := make(chan struct{})
	ended := make(chan error, 1)
	release := u.answerTask(ctx, "task-1", func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		if p.Message == "wait" {
			close(waiting)
			<-ctx.Done()
			ended <- ctx.Err()
			return nil, ctx.Err()
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"for": "task-1"}}, nil
	})

	tests := []struct {
		name    string
		req     *mcp.ElicitRequest
		wantFor string // the answer's content, "" for an error
	}{
		{"its task", tagged("task-1"), "task-1"},
		{"another task", tagged("task-2"), ""},
	}
	for _, tt := range tests {
		res, err := u.elicit(ctx, tt.req, nil)
		switch {
		case tt.wantFor == "" && (err == nil || !strings.Contains(err.Error(), "task-2")):
			t.Errorf("%s: elicit = %+v, %v; want an error naming the task", tt.name, res, err)
		case tt.wantFor != "" && (err != nil || res.Content["for"] != tt.wantFor):
			t.Errorf("%s: elicit = %+v, %v; want the answer for %s", tt.name, res, err, tt.wantFor)
		}
	}
	if res, err := u.elicit(ctx, &mcp.ElicitRequest{Params: &mcp.ElicitParams{Message: "untagged"}}, nil); err != nil || res.Action != "decline" {
		t.Errorf("an untagged elicitation no call asked = %+v, %v; want declined, as before", res, err)
	}

	answered := make(chan error, 1)
	go func() {
		w := tagged("task-1")
		w.Params.Message = "wait"
		_, err := u.elicit(ctx, w, nil)
		answered <- err
	}()
	<-waiting
	release()
	select {
	case err := <-ended:
		if err == nil {
			t.Fatal("the answer under way went on after its read ended")
		}
	default:
		t.Fatal("release returned before the answer under way did")
	}
	if err := <-answered; err == nil {
		t.Fatal("the answer under way returned no error once its read ended")
	}
	if res, err := u.elicit(ctx, tagged("task-1"), nil); err == nil {
		t.Fatalf("after the read ended: %+v; want an error", res)
	}
}
