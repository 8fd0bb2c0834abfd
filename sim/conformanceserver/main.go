package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("http", "127.0.0.1:8960", "the loopback address to serve Streamable HTTP on, at /mcp")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, logger, *addr, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "conformanceserver:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends, after writing the URL it serves on to out.
func run(ctx context.Context, logger *slog.Logger, addr string, out io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s (pass a free loopback address with -http): %w", addr, err)
	}
	srv := &http.Server{Handler: newHandler(logger)}
	if _, err := fmt.Fprintf(out, "http://%s/mcp\n", ln.Addr()); err != nil {
		ln.Close()
		return fmt.Errorf("announce the URL: %w", err)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// A running slow_compute may hold its request for a minute; the jobs
	// are not kept anyway, so waiting briefly for it is enough.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return srv.Close()
}
