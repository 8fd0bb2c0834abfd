package receipt

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/taskgate/taskgate/ledger"
)

// questions reads the upstream's questions and their answers from the
// events. A record the receipt cannot read still shows that a question
// was asked (or answered); what its data says is then left out.
func (f *facts) questions() []Question {
	var qs []Question
	last := func(send int) *Question {
		for i := len(qs) - 1; i >= 0; i-- {
			if qs[i].Send == send {
				return &qs[i]
			}
		}
		return nil
	}
	for _, e := range f.events {
		switch e.Kind {
		case ledger.EventInputRequested:
			d, _ := ledger.DecodeEventData[ledger.InputRequestedData](e)
			var reqs map[string]json.RawMessage
			_ = json.Unmarshal(d.Requests, &reqs)
			keys := slices.Sorted(maps.Keys(reqs))
			if keys == nil {
				keys = []string{}
			}
			qs = append(qs, Question{Send: d.Send, Keys: keys, AskedAt: utc(e.CreatedAt), Answer: QuestionUnanswered})
		case ledger.EventInputAnswered, ledger.EventInputDeclined:
			d, _ := ledger.DecodeEventData[ledger.InputAnsweredData](e)
			q := last(d.Send)
			if q == nil {
				continue
			}
			q.AnsweredAt = utc(e.CreatedAt)
			q.Answer = QuestionAnswered
			if e.Kind == ledger.EventInputDeclined {
				q.Answer = QuestionDeclined
			}
			for _, k := range slices.Sorted(maps.Keys(d.Actions)) {
				// A decline names the action that ended it; otherwise the
				// last answer's action stands.
				if e.Kind != ledger.EventInputDeclined || d.Actions[k] == "decline" || d.Actions[k] == "cancel" {
					q.Action = d.Actions[k]
				}
			}
		}
	}
	return qs
}
