// Command taskgate is the durable MCP gateway for paid and consequential
// tool calls. See README.md and docs/, or run taskgate --help.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/taskgate/taskgate/cmd/taskgate/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
