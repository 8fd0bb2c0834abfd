package worker

import (
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
		{ledger.InputChannelNone, elicit, false},
	}
	for _, tt := range tests {
		if got := answerable(tt.channel, tt.q); got != tt.want {
			t.Errorf("answerable(%q, %d requests) = %v, want %v", tt.channel, len(tt.q), got, tt.want)
		}
	}
}
