package claudecode

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// A Script is the scripted model: given the conversation so far, it says
// what the assistant answers next.
type Script func(c *Conversation) Reply

// Conversation is what the client sent in one main-loop request.
type Conversation struct {
	// Turn counts the assistant messages already in the conversation: 0
	// for the first request.
	Turn int
	// Results are the tool results the client sent back, oldest first.
	Results []ToolResult
	// Texts are the texts of the user's messages, oldest first: the
	// prompts, and what the client adds itself, such as the notice that a
	// background task completed.
	Texts []string
}

// Last is the newest tool result, or the zero ToolResult when there is
// none.
func (c *Conversation) Last() ToolResult {
	if len(c.Results) == 0 {
		return ToolResult{}
	}
	return c.Results[len(c.Results)-1]
}

// ToolResult is one tool_result block the client sent back.
type ToolResult struct {
	ToolUseID string
	Name      string // the tool of the tool_use it answers
	IsError   bool
	Text      string
}

// Reply is one assistant message: a tool call when Tool is set, else a
// final text.
type Reply struct {
	Tool  string
	Input map[string]any
	Text  string
}

// Steps plays replies one per turn; after the last it answers with the
// last's text, or "done".
func Steps(replies ...Reply) Script {
	return func(c *Conversation) Reply {
		if c.Turn < len(replies) {
			return replies[c.Turn]
		}
		return Reply{Text: "done"}
	}
}

// Select is the ToolSearch call that loads a deferred MCP tool; Claude Code
// offers MCP tools to the model only after it.
func Select(tool string) Reply {
	return Reply{Tool: "ToolSearch", Input: map[string]any{"query": "select:" + tool, "max_results": 5}}
}

// model is a stand-in for the Messages API on loopback: main-loop requests
// (those that offer ToolSearch) are answered by the script, anything else
// the client asks on the side with a short text. Every request is logged.
type model struct {
	t      testing.TB
	script Script
	srv    *httptest.Server

	mu      sync.Mutex
	results []ToolResult // every tool result seen, de-duplicated by ID
	seen    map[string]bool
	texts   []string // the user texts of the latest main-loop request
	schemas map[string]json.RawMessage
	calls   int // responses written, which number their IDs
}

func newModel(t testing.TB, script Script) *model {
	m := &model{t: t, script: script, seen: map[string]bool{}, schemas: map[string]json.RawMessage{}}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

// URL is the ANTHROPIC_BASE_URL that reaches the model.
func (m *model) URL() string { return m.srv.URL }

// Results are the tool results the client has sent so far.
func (m *model) Results() []ToolResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]ToolResult(nil), m.results...)
}

// Schema is the input schema of the tool name as the client last offered
// it to the model; nil when it never has.
func (m *model) Schema(name string) json.RawMessage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.schemas[name]
}

// SawText reports whether the latest main-loop request holds a user text
// containing s.
func (m *model) SawText(s string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, text := range m.texts {
		if strings.Contains(text, s) {
			return true
		}
	}
	return false
}

// request is the part of a Messages API request the model reads.
type request struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
}

// block is a content block of a message.
type block struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   bool            `json:"is_error"`
	Content   json.RawMessage `json:"content"`
	Text      string          `json:"text"`
}

func (m *model) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	switch {
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/messages/count_tokens"):
		m.t.Logf("model: %s %s", r.Method, r.URL.Path)
		writeJSON(w, map[string]any{"input_tokens": 1000})
		return
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
	default:
		m.t.Logf("model: %s %s: answered 404", r.Method, r.URL.Path)
		http.Error(w, `{"type":"error","error":{"type":"not_found_error","message":"not here"}}`, http.StatusNotFound)
		return
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		m.t.Logf("model: unreadable request: %v", err)
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"unreadable"}}`, http.StatusBadRequest)
		return
	}
	main := false
	m.mu.Lock()
	for _, tool := range req.Tools {
		main = main || tool.Name == "ToolSearch"
		m.schemas[tool.Name] = tool.InputSchema
	}
	m.mu.Unlock()
	if !main {
		m.t.Logf("model: side request (%d messages, %d tools): answered with text", len(req.Messages), len(req.Tools))
		m.answer(w, req, Reply{Text: "ok"})
		return
	}
	conv := m.conversation(req)
	reply := m.script(conv)
	last := conv.Last()
	m.t.Logf("model: turn %d, last tool result %s (error %v): %.600s", conv.Turn, last.Name, last.IsError, last.Text)
	if n := len(conv.Texts); n > 0 {
		m.t.Logf("model: turn %d, last user text: %.600s", conv.Turn, conv.Texts[n-1])
	}
	if reply.Tool != "" {
		in, _ := json.Marshal(reply.Input)
		m.t.Logf("model: turn %d answers with %s %s", conv.Turn, reply.Tool, in)
	} else {
		m.t.Logf("model: turn %d answers with text %q", conv.Turn, reply.Text)
	}
	m.answer(w, req, reply)
}

// conversation reads the turn and the tool results out of a request, and
// records results not seen before.
func (m *model) conversation(req request) *Conversation {
	c := &Conversation{}
	names := map[string]string{}
	for _, msg := range req.Messages {
		var blocks []block
		if err := json.Unmarshal(msg.Content, &blocks); err != nil {
			var text string
			_ = json.Unmarshal(msg.Content, &text)
			blocks = []block{{Type: "text", Text: text}}
		}
		if msg.Role == "assistant" {
			c.Turn++
		}
		for _, b := range blocks {
			switch b.Type {
			case "tool_use":
				names[b.ID] = b.Name
			case "tool_result":
				c.Results = append(c.Results, ToolResult{ToolUseID: b.ToolUseID, Name: names[b.ToolUseID], IsError: b.IsError, Text: resultText(b.Content)})
			case "text":
				if msg.Role == "user" {
					c.Texts = append(c.Texts, b.Text)
				}
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.texts = c.Texts
	for _, res := range c.Results {
		if !m.seen[res.ToolUseID] {
			m.seen[res.ToolUseID] = true
			m.results = append(m.results, res)
		}
	}
	return c
}

// resultText is a tool_result's content as text: a string, or its text
// blocks joined.
func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []block
	if json.Unmarshal(raw, &blocks) == nil {
		var parts []string
		for _, b := range blocks {
			if b.Type == "text" {
				parts = append(parts, b.Text)
			} else {
				parts = append(parts, "["+b.Type+"]")
			}
		}
		return strings.Join(parts, "\n")
	}
	return string(raw)
}

// answer writes reply as a Messages API response, streamed as server-sent
// events when the client asked for a stream.
func (m *model) answer(w http.ResponseWriter, req request, reply Reply) {
	m.mu.Lock()
	m.calls++
	id := m.calls
	m.mu.Unlock()
	var content map[string]any
	stop := "end_turn"
	if reply.Tool != "" {
		stop = "tool_use"
		content = map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%04d", id), "name": reply.Tool, "input": reply.Input}
	} else {
		content = map[string]any{"type": "text", "text": reply.Text}
	}
	usage := map[string]any{"input_tokens": 100, "output_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	msg := map[string]any{"id": fmt.Sprintf("msg_%04d", id), "type": "message", "role": "assistant", "model": req.Model,
		"stop_reason": nil, "stop_sequence": nil, "usage": usage, "content": []any{}}
	if !req.Stream {
		msg["content"] = []any{content}
		msg["stop_reason"] = stop
		writeJSON(w, msg)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	event := func(name string, data map[string]any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	}
	event("message_start", map[string]any{"type": "message_start", "message": msg})
	if reply.Tool != "" {
		in, _ := json.Marshal(reply.Input)
		event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": content["id"], "name": reply.Tool, "input": map[string]any{}}})
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
	} else {
		event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}})
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": reply.Text}})
	}
	event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 10}})
	event("message_stop", map[string]any{"type": "message_stop"})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
