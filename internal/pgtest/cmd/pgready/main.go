// Command pgready exits non-zero, with one line saying why, when the
// PostgreSQL server at the URL given as its argument cannot be reached.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: pgready postgres://user@host:port/db")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, os.Args[1])
	if err == nil {
		err = conn.Ping(ctx)
		conn.Close(ctx)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "PostgreSQL is not reachable: %v\n", err)
		os.Exit(1)
	}
	fmt.Println("PostgreSQL is reachable")
}
