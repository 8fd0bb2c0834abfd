package child

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv makes this test binary one of the children below instead of
// running tests.
const childEnv = "TASKGATE_CHILD_TEST"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "server":
		os.Exit(server())
	case "fail":
		fmt.Fprintln(os.Stderr, "no port for me")
		os.Exit(3)
	case "silent":
		// Prints nothing and waits for its stdin to end.
		_, _ = io.Copy(io.Discard, os.Stdin)
	case "stubborn":
		// Ignores SIGTERM, so that only a kill ends it.
		terms := make(chan os.Signal, 1)
		signal.Notify(terms, syscall.SIGTERM)
		fmt.Println("127.0.0.1:1")
		for range terms {
		}
	}
	os.Exit(2)
}

// server listens on loopback, prints its address and accepts connections
// until SIGTERM or its stdin ends.
func server() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	ended := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(ended)
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	fmt.Println(ln.Addr())
	fmt.Println("more output, discarded")
	select {
	case <-ctx.Done():
	case <-ended:
		fmt.Fprintln(os.Stderr, "stdin ended")
	}
	return 0
}

func self(t *testing.T, mode string) *exec.Cmd {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	return cmd
}

func TestStartServerReadsTheAddressAndStopEndsIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, addr, err := StartServer(ctx, self(t, "server"), "the test server", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		_ = p.Stop(time.Minute)
		t.Fatalf("dial the address %q the child printed: %v", addr, err)
	}
	conn.Close()
	if runtime.GOOS == "linux" {
		if rss, err := p.PeakRSS(); err != nil || rss <= 0 {
			t.Errorf("PeakRSS = %d, %v; want a size", rss, err)
		}
	}
	if err := p.Stop(time.Minute); err != nil {
		t.Errorf("Stop = %v, want a clean end", err)
	}
	select {
	case <-p.Done():
	default:
		t.Error("Done is open after Stop returned")
	}
	// SIGTERM ended it, not its stdin: the pipe stays open until then.
	if out := p.Output(); strings.Contains(out, "stdin ended") {
		t.Errorf("the child saw its stdin end before it was stopped:\n%s", out)
	}
	if err := p.Stop(time.Minute); err != nil {
		t.Errorf("a second Stop = %v, want nil", err)
	}
	if _, err := p.PeakRSS(); err == nil || !strings.Contains(err.Error(), "has it exited?") {
		t.Errorf("PeakRSS of an ended child = %v, want an error asking whether it exited", err)
	}
}

func TestStartServerReportsAChildThatExits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, addr, err := StartServer(ctx, self(t, "fail"), "the failing server", time.Minute)
	if err == nil {
		_ = p.Stop(time.Minute)
		t.Fatalf("StartServer = %q, nil; want an error", addr)
	}
	for _, want := range []string{"the failing server exited", "exit status 3", "no port for me"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestStartServerGivesUpWhenTheRunEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cmd := self(t, "silent")
	_, _, err := StartServer(ctx, cmd, "the silent server", time.Minute)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("StartServer with an ended context = %v, want context.Canceled", err)
	}
	if cmd.ProcessState == nil {
		t.Error("StartServer returned with its child still running")
	}
}

func TestStopKillsAChildThatIgnoresSIGTERM(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, _, err := StartServer(ctx, self(t, "stubborn"), "the stubborn server", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	err = p.Stop(200 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "the stubborn server did not stop within 200ms of SIGTERM and was killed") {
		t.Errorf("Stop = %v, want it to say the child was killed", err)
	}
	if p.Err() == nil {
		t.Error("Err is nil for a killed child")
	}
}

func TestStartKeepsStderrAndPassesItOn(t *testing.T) {
	var also strings.Builder
	cmd := self(t, "fail")
	cmd.Stderr = &also
	p, err := Start(cmd, "the failing child")
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if p.Output() != "no port for me\n" || also.String() != "no port for me\n" {
		t.Errorf("kept %q and passed on %q, want the child's stderr in both", p.Output(), also.String())
	}
	if err := p.Stop(time.Minute); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("Stop of a child that failed = %v, want its exit status", err)
	}
}

func TestParseVmHWM(t *testing.T) {
	tests := []struct {
		status  string
		want    int64
		wantErr bool
	}{
		{status: "Name:\ttaskgate\nVmPeak:\t 1300000 kB\nVmHWM:\t   65536 kB\nVmRSS:\t   60000 kB\n", want: 65536 * 1024},
		{status: "VmHWM: 1 kB", want: 1024},
		{status: "Name:\ttaskgate\nVmRSS:\t   60000 kB\n", wantErr: true},
		{status: "VmHWM:\t   65536 MB\n", wantErr: true},
		{status: "VmHWM:\t   lots kB\n", wantErr: true},
		{status: "VmHWM:\t   -1 kB\n", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseVmHWM(tt.status)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseVmHWM(%q) = %d, %v; want %d, error %v", tt.status, got, err, tt.want, tt.wantErr)
		}
	}
}
