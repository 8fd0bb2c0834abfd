package providerkit

import "time"

// ContractMeta is the _meta key under which a tool declares its provider
// contract (version [ContractVersion]); taskgate's docs/provider-kit.md
// and the JSON Schema beside the gateway's provider package describe it.
const ContractMeta = "dev.taskgate/contract"

// ContractVersion is the version of the declared contract the kit writes.
const ContractVersion = 1

// KeyMeta is the _meta key in which a call carries its idempotency key.
// The kit's declared contract tells the gateway to send it there, so that
// the tool's input schema stays the author's. It is not the key a client
// uses for the tasks extension's idempotencyKey (dev.taskgate/idempotency-key
// in taskgate), which clients' SDKs move out of _meta.
const KeyMeta = "dev.taskgate/provider-key"

// The contract tools the kit adds to a server, once, whatever the number
// of tools it wraps; estimate tools are named EstimateToolPrefix+tool.
const (
	LookupTool         = "lookup_operation"
	GetJobTool         = "get_job"
	ListChargesTool    = "list_charges"
	CancelJobTool      = "cancel_job"
	EstimateToolPrefix = "estimate_"
)

// contract is the declared provider contract, in the field names of
// taskgate's configuration (docs/provider-contract.md).
type contract struct {
	Version          int          `json:"version"`
	Key              keyPassing   `json:"key"`
	RemoteJobIDField string       `json:"remote_job_id_field"`
	Lookup           lookupCall   `json:"lookup"`
	Fetch            fetchCall    `json:"fetch"`
	Charges          chargesCall  `json:"charges"`
	Cancel           call         `json:"cancel"`
	Cost             contractCost `json:"cost"`
}

type keyPassing struct {
	Meta string `json:"meta"`
}

type call struct {
	Tool      string            `json:"tool"`
	Arguments map[string]string `json:"arguments,omitempty"`
}

type lookupCall struct {
	call
	StatusField       string              `json:"status_field"`
	RemoteJobIDField  string              `json:"remote_job_id_field"`
	JobsField         string              `json:"jobs_field"`
	Statuses          map[string][]string `json:"statuses"`
	NotFoundSafeAfter string              `json:"not_found_safe_after,omitempty"`
}

type fetchCall struct {
	call
	StatusField string              `json:"status_field"`
	Statuses    map[string][]string `json:"statuses"`
}

type chargesCall struct {
	call
	ListField        string `json:"list_field"`
	IDField          string `json:"id_field"`
	RemoteJobIDField string `json:"remote_job_id_field"`
	AmountField      string `json:"amount_field"`
	CurrencyField    string `json:"currency_field"`
	KindField        string `json:"kind_field"`
	StatusField      string `json:"status_field"`
}

type contractCost struct {
	Estimate     string        `json:"estimate,omitempty"`
	EstimateTool *estimateCall `json:"estimate_tool,omitempty"`
	Currency     string        `json:"currency"`
}

type estimateCall struct {
	call
	Field string `json:"field"`
}

// declare is the contract of the tool name: every answer word is the kit's
// own status word, every field a field of the kit's contract tools.
func declare(name string, p *Paid, notFoundSafeAfter time.Duration) contract {
	same := func(words ...Status) map[string][]string {
		m := map[string][]string{}
		for _, w := range words {
			m[string(w)] = []string{string(w)}
		}
		return m
	}
	byJob := map[string]string{"job_id": "{remote_job_id}"}
	lookup := lookupCall{
		call:             call{Tool: LookupTool, Arguments: map[string]string{"idempotency_key": "{operation_id}"}},
		StatusField:      "status",
		RemoteJobIDField: "job_id",
		JobsField:        "jobs",
		Statuses:         same(statusNotFound, statusAccepted, StatusRunning, StatusCompleted, StatusFailed, StatusCancelled),
	}
	if notFoundSafeAfter > 0 {
		lookup.NotFoundSafeAfter = notFoundSafeAfter.String()
	}
	c := contract{
		Version:          ContractVersion,
		Key:              keyPassing{Meta: KeyMeta},
		RemoteJobIDField: "job_id",
		Lookup:           lookup,
		Fetch: fetchCall{
			call:        call{Tool: GetJobTool, Arguments: byJob},
			StatusField: "status",
			Statuses:    same(statusAccepted, StatusRunning, StatusCompleted, StatusFailed, StatusCancelled),
		},
		Charges: chargesCall{
			call:      call{Tool: ListChargesTool, Arguments: byJob},
			ListField: "charges", IDField: "charge_id", RemoteJobIDField: "job_id",
			AmountField: "amount", CurrencyField: "currency", KindField: "kind", StatusField: "status",
		},
		Cancel: call{Tool: CancelJobTool, Arguments: byJob},
		Cost:   contractCost{Currency: p.currency()},
	}
	switch {
	case p.Estimate != nil:
		c.Cost.Estimate = p.Estimate.String()
	case p.EstimateFunc != nil:
		c.Cost.EstimateTool = &estimateCall{call: call{Tool: EstimateToolPrefix + name}, Field: "estimate"}
	}
	return c
}

// statusNotFound and statusAccepted are answers of the contract that no
// job of the kit is ever in: a lookup of a key without a job answers
// not_found, and a job runs from the moment it is recorded.
const (
	statusNotFound Status = "not_found"
	statusAccepted Status = "accepted"
)
