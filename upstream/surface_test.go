package upstream

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/internal/testwait"
)

// subscribable is a go-sdk server that counts subscriptions by URI.
type subscribable struct {
	server *mcp.Server

	mu           sync.Mutex
	subs, unsubs int
	updates      int // ResourceUpdated changes a listener was told of
	listChanges  int
}

func newSubscribable(versions ...string) *subscribable {
	s := &subscribable{}
	s.server = mcp.NewServer(&mcp.Implementation{Name: "subscribable"}, &mcp.ServerOptions{
		SupportedProtocolVersions: versions,
		SubscribeHandler: func(context.Context, *mcp.SubscribeRequest) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.subs++
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.unsubs++
			return nil
		},
	})
	s.server.AddResource(&mcp.Resource{URI: "test://watched", Name: "watched"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://watched", Text: "w"}}}, nil
	})
	return s
}

func (s *subscribable) listen(ch SurfaceChange) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ch.Kind {
	case ResourceUpdated:
		if ch.Upstream == "sub" && ch.Updated.URI == "test://watched" {
			s.updates++
		}
	case ResourcesChanged:
		s.listChanges++
	}
}

func (s *subscribable) counts() (subs, unsubs, updates, listChanges int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.subs, s.unsubs, s.updates, s.listChanges
}

// awaitUpdate announces an update until the listener has been told of one
// more than before: a 2026-07-28 subscription takes effect in the
// background.
func (s *subscribable) awaitUpdate(t *testing.T, ctx context.Context) {
	t.Helper()
	_, _, before, _ := s.counts()
	testwait.Until(t, ctx, "the update reported", func() (bool, error) {
		if err := s.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "test://watched"}); err != nil {
			return false, err
		}
		_, _, n, _ := s.counts()
		return n > before, nil
	})
}

// TestSubscriptionsOutliveSessions: a subscription made with Subscribe
// reports the upstream's updates, is made again on the next session, and
// ends with Unsubscribe; list changes are reported too.
func TestSubscriptionsOutliveSessions(t *testing.T) {
	for _, tt := range []struct {
		name      string
		stateless bool
		versions  []string
	}{{"2025-11-25 sessions", false, []string{protocolLegacy}}, {"2026-07-28", true, nil}} {
		t.Run(tt.name, func(t *testing.T) {
			s := newSubscribable(tt.versions...)
			srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.server }, &mcp.StreamableHTTPOptions{Stateless: tt.stateless}))
			t.Cleanup(srv.Close)
			_, u := startPool(t, &config.Upstream{Name: "sub", URL: srv.URL}, nil)
			u.OnSurfaceChange(s.listen)
			ctx := testCtx(t)
			waitReady(ctx, t, u)
			if caps, connected := u.Capabilities(); !connected || caps.Resources == nil || !caps.Resources.Subscribe {
				t.Fatalf("Capabilities() = %+v, %v; want resources with subscribe", caps, connected)
			}
			if err := u.Subscribe(ctx, "test://watched"); err != nil {
				t.Fatal(err)
			}
			s.awaitUpdate(t, ctx)

			if !tt.stateless {
				// The upstream forgets the session; the next one is
				// subscribed again.
				for ss := range s.server.Sessions() {
					ss.Close()
				}
				testwait.Until(t, ctx, "subscribed on the next session", func() (bool, error) {
					subs, _, _, _ := s.counts()
					return subs == 2, fmt.Errorf("%d subscriptions", subs)
				})
				s.awaitUpdate(t, ctx)
			}

			s.server.AddResource(&mcp.Resource{URI: "test://new", Name: "new"}, nil)
			testwait.Until(t, ctx, "the list change reported", func() (bool, error) {
				_, _, _, n := s.counts()
				return n > 0, nil
			})

			if err := u.Unsubscribe(ctx, "test://watched"); err != nil {
				t.Fatal(err)
			}
			testwait.Until(t, ctx, "unsubscribed at the upstream", func() (bool, error) {
				_, unsubs, _, _ := s.counts()
				return unsubs == 1, fmt.Errorf("%d unsubscriptions", unsubs)
			})
		})
	}
}
