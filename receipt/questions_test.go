package receipt_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
)

func inputEvent(id int64, kind ledger.EventKind, when time.Duration, data string) *ledger.Event {
	return &ledger.Event{ID: id, OperationRef: 42, Kind: kind, Data: json.RawMessage(data), CreatedAt: at(when)}
}

func TestQuestions(t *testing.T) {
	asked := `{"channel":"tasks_update","requests":{"confirm":{"method":"elicitation/create"}},"send":1}`
	tests := []struct {
		name   string
		events []*ledger.Event
		want   []receipt.Question
	}{
		{"no question", nil, nil},
		{"answered", []*ledger.Event{
			inputEvent(1, ledger.EventInputRequested, time.Minute, asked),
			inputEvent(2, ledger.EventInputAnswered, 2*time.Minute, `{"actions":{"confirm":"accept"},"responses":{},"send":1}`),
		}, []receipt.Question{{Send: 1, Keys: []string{"confirm"}, AskedAt: at(time.Minute), Answer: receipt.QuestionAnswered, Action: "accept", AnsweredAt: at(2 * time.Minute)}}},
		{"declined", []*ledger.Event{
			inputEvent(1, ledger.EventInputRequested, time.Minute, asked),
			inputEvent(2, ledger.EventInputDeclined, 2*time.Minute, `{"actions":{"confirm":"decline"},"responses":{},"send":1}`),
		}, []receipt.Question{{Send: 1, Keys: []string{"confirm"}, AskedAt: at(time.Minute), Answer: receipt.QuestionDeclined, Action: "decline", AnsweredAt: at(2 * time.Minute)}}},
		{"unanswered, after an answered one", []*ledger.Event{
			inputEvent(1, ledger.EventInputRequested, time.Minute, asked),
			inputEvent(2, ledger.EventInputAnswered, 2*time.Minute, `{"actions":{"confirm":"accept"},"responses":{},"send":1}`),
			inputEvent(3, ledger.EventInputRequested, 3*time.Minute, `{"channel":"tasks_update","requests":{"name":{},"age":{}},"send":2}`),
		}, []receipt.Question{
			{Send: 1, Keys: []string{"confirm"}, AskedAt: at(time.Minute), Answer: receipt.QuestionAnswered, Action: "accept", AnsweredAt: at(2 * time.Minute)},
			{Send: 2, Keys: []string{"age", "name"}, AskedAt: at(3 * time.Minute), Answer: receipt.QuestionUnanswered},
		}},
		{"an unreadable question still counts as asked", []*ledger.Event{
			inputEvent(1, ledger.EventInputRequested, time.Minute, `{"send":`),
		}, []receipt.Question{{Send: 0, Keys: []string{}, AskedAt: at(time.Minute), Answer: receipt.QuestionUnanswered}}},
	}
	var schema jsonschema.Schema
	if err := json.Unmarshal(receipt.Schema(), &schema); err != nil {
		t.Fatal(err)
	}
	rs, err := schema.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base()
			in.Events = tt.events
			r := receipt.Build(in)
			if !reflect.DeepEqual(r.Questions, tt.want) {
				t.Fatalf("questions = %+v\nwant %+v", r.Questions, tt.want)
			}
			b, err := r.JSON()
			if err != nil {
				t.Fatal(err)
			}
			var doc any
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			if err := rs.Validate(doc); err != nil {
				t.Errorf("JSON rendering does not match the schema: %v", err)
			}
			md := string(r.Markdown())
			if (len(tt.want) > 0) != strings.Contains(md, "### Questions from the upstream") {
				t.Errorf("markdown shows questions: %v, want %v:\n%s", !(len(tt.want) > 0), len(tt.want) > 0, md)
			}
		})
	}
}
