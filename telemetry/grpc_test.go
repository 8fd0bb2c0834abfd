package telemetry

import (
	"context"
	"net"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/taskgate/taskgate/config"
)

// traceService is an OTLP/gRPC trace receiver that keeps the names of the
// spans it is sent.
type traceService struct {
	coltrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
}

func (s *traceService) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s.names = append(s.names, sp.GetName())
			}
		}
	}
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// TestExportOverGRPC: protocol grpc sends the spans to an OTLP/gRPC
// receiver, with the configured headers.
func TestExportOverGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	svc := &traceService{}
	var seenKey []string
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		if md, ok := metadata.FromIncomingContext(ctx); ok {
			seenKey = md["x-collector-key"]
		}
		return next(ctx, req)
	}))
	coltrace.RegisterTraceServiceServer(srv, svc)
	go srv.Serve(ln)
	defer srv.Stop()

	ctx := context.Background()
	tr, err := New(ctx, config.Telemetry{Traces: &config.Traces{
		Endpoint: "http://" + ln.Addr().String(), Protocol: config.TraceProtocolGRPC, Headers: map[string]string{"x-collector-key": "k-1"},
	}}, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tr.StartServer(ctx, Request{Method: "tools/call", Target: "hosted_test.run_suite"})
	span.End()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if len(svc.names) != 1 || svc.names[0] != "tools/call hosted_test.run_suite" {
		t.Errorf("the receiver got spans %v, want the one server span", svc.names)
	}
	if len(seenKey) != 1 || seenKey[0] != "k-1" {
		t.Errorf("the export carried x-collector-key %v, want the configured header", seenKey)
	}
}
