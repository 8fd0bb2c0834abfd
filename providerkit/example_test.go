package providerkit_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/providerkit"
	"github.com/taskgate/taskgate/providerkit/sqlitestore"
)

// A paid tool wrapped by the kit runs its work once per idempotency key:
// a client that retries with the same key gets the same job back, and the
// lookup tool finds the job by its key.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "providerkit-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlitestore.Open(ctx, filepath.Join(dir, "jobs.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	kit := providerkit.New(store, nil)
	defer kit.Close()
	server := mcp.NewServer(&mcp.Implementation{Name: "hosted-test", Version: "1.0.0"}, nil)
	runs := 0
	kit.AddTool(server, &mcp.Tool{Name: "run_suite", InputSchema: map[string]any{"type": "object"}}, providerkit.Paid{
		Estimate: new(money.MustParse("18.00", "USD")),
		Work: func(ctx context.Context, run *providerkit.Run) (any, error) {
			runs++
			charge := providerkit.Charge{ID: run.Job.ID + "-run", Amount: money.MustParse("18.00", "USD"), Status: providerkit.ChargeFinal}
			return map[string]int{"passed": 412}, run.Charge(ctx, charge)
		},
	})
	if err := kit.Resume(ctx); err != nil {
		log.Fatal(err)
	}

	st, ct := mcp.NewInMemoryTransports()
	if _, err := server.Connect(ctx, st, nil); err != nil {
		log.Fatal(err)
	}
	client, err := mcp.NewClient(&mcp.Implementation{Name: "example"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	call := func(p *mcp.CallToolParams) map[string]any {
		res, err := client.CallTool(ctx, p)
		if err != nil {
			log.Fatal(err)
		}
		out, _ := res.StructuredContent.(map[string]any)
		return out
	}
	// The gateway sends its provider key in _meta, and looks it up by the
	// same key after a lost answer.
	paid := &mcp.CallToolParams{Name: "run_suite", Meta: mcp.Meta{providerkit.KeyMeta: "op-7f3a"}}
	first, again := call(paid), call(paid)
	found := call(&mcp.CallToolParams{Name: providerkit.LookupTool, Arguments: map[string]any{"idempotency_key": "op-7f3a"}})
	fmt.Println("same job:", first["job_id"] == again["job_id"])
	fmt.Println("status:", again["status"])
	fmt.Println("work ran:", runs, "time")
	fmt.Println("lookup:", found["status"])
	// Output:
	// same job: true
	// status: completed
	// work ran: 1 time
	// lookup: completed
}
