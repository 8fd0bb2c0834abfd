// Command hostedsuite is a paid MCP tool built with providerkit: run_suite
// runs a (simulated) hosted test suite, billed 18.00 USD a run, over
// Streamable HTTP. Put it behind taskgate with a three-line consequential
// tool; docs/provider-kit.md builds it step by step.
//
//	go run ./providerkit/example/hostedsuite -listen 127.0.0.1:9100 -store sqlite:hostedsuite.db
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/providerkit"
	"github.com/taskgate/taskgate/providerkit/postgresstore"
	"github.com/taskgate/taskgate/providerkit/sqlitestore"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9100", "the address to serve MCP on, at /mcp")
	store := flag.String("store", "sqlite:hostedsuite.db", "the job store: sqlite:PATH or postgres://URL")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(ctx, log, *listen, *store); err != nil {
		fmt.Fprintln(os.Stderr, "hostedsuite:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, listen, storeURL string) error {
	jobs, err := openStore(ctx, storeURL)
	if err != nil {
		return err
	}
	defer jobs.Close()

	kit := providerkit.New(jobs, &providerkit.Options{Logger: log})
	defer kit.Close()
	server := mcp.NewServer(&mcp.Implementation{Name: "hostedsuite", Version: "1.0.0"}, nil)
	kit.AddTool(server, &mcp.Tool{
		Name:        "run_suite",
		Description: "Runs a hosted test suite and answers with its outcome. Billed 18.00 USD a run.",
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"suite":   map[string]any{"type": "string", "description": "the suite to run"},
				"seconds": map[string]any{"type": "number", "description": "how long the run takes; default 1"},
			},
			"required": []string{"suite"},
		},
	}, providerkit.Paid{Work: runSuite, Estimate: new(money.MustParse("18.00", "USD"))})
	// Jobs a stopped server had not finished run again now.
	if err := kit.Resume(ctx); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", handler)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("hostedsuite: serving MCP at http://%s/mcp\n", ln.Addr())
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// runSuite is the paid work: a pending charge when the run starts, the
// run, the charge made final. The charge's ID names the job, so a run that
// starts again after a restart records it once.
func runSuite(ctx context.Context, run *providerkit.Run) (any, error) {
	var args struct {
		Suite   string  `json:"suite"`
		Seconds float64 `json:"seconds"`
	}
	if err := json.Unmarshal(run.Job.Arguments, &args); err != nil {
		return nil, fmt.Errorf("the arguments of job %s: %w", run.Job.ID, err)
	}
	if args.Seconds <= 0 {
		args.Seconds = 1
	}
	charge := providerkit.Charge{ID: run.Job.ID + "-run", Amount: money.MustParse("18.00", "USD"), Kind: "suite_run", Status: providerkit.ChargePending}
	if err := run.Charge(ctx, charge); err != nil {
		return nil, err
	}
	select {
	case <-time.After(time.Duration(args.Seconds * float64(time.Second))):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	charge.Status = providerkit.ChargeFinal
	if err := run.Charge(ctx, charge); err != nil {
		return nil, err
	}
	return map[string]any{"suite": args.Suite, "passed": 412, "failed": 0}, nil
}

func openStore(ctx context.Context, url string) (interface {
	providerkit.Store
	Close() error
}, error) {
	switch {
	case strings.HasPrefix(url, "sqlite:"):
		return sqlitestore.Open(ctx, strings.TrimPrefix(url, "sqlite:"))
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return postgresstore.Open(ctx, url)
	}
	return nil, fmt.Errorf("-store %q: use sqlite:PATH or postgres://URL", url)
}
