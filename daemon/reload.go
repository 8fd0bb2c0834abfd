package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/ledger"
)

// Reload puts cfg in force in the running gateway without dropping a
// session or a call in flight. A file that changes a field only a restart
// can change (config.CheckReload), that names a secret argument without a
// secrets key, or whose auth section does not build is refused and the
// running configuration stays. Otherwise upstreams are added, removed and
// reconnected (upstream.Pool.Apply), tool policies and timings apply to
// new calls, and authentication to new requests. It returns what changed.
func (d *Daemon) Reload(ctx context.Context, cfg *config.Config) ([]string, error) {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	changes, err := d.reload(cfg)
	if err != nil {
		d.reloads.WithLabelValues("refused").Inc()
		d.log.Error("configuration reload refused; the running configuration stays", "file", cfg.File, "err", err)
		return nil, err
	}
	d.reloads.WithLabelValues("applied").Inc()
	if len(changes) == 0 {
		d.log.Info("configuration reloaded: nothing changed", "file", cfg.File)
	}
	for _, c := range changes {
		d.log.Info("configuration reloaded", "file", cfg.File, "change", c)
	}
	return changes, nil
}

// ReloadRefused counts a reload whose file could not be read or parsed,
// which the caller logged.
func (d *Daemon) ReloadRefused() { d.reloads.WithLabelValues("refused").Inc() }

func (d *Daemon) reload(cfg *config.Config) ([]string, error) {
	running := d.Config
	if err := config.CheckReload(running, cfg); err != nil {
		return nil, err
	}
	if err := cfg.CheckSecretsKey(d.secrets != nil); err != nil {
		return nil, err
	}
	if err := openTenantHeaders(cfg, d.secrets); err != nil {
		return nil, err
	}
	var auth *authn.Authenticator
	if d.auth != nil {
		a, err := authenticator(cfg, d.Store, d.log)
		if err != nil {
			return nil, err
		}
		auth = a
	}
	changes := config.Changes(running, cfg)
	if _, err := d.Pool.Apply(cfg.Upstreams); err != nil {
		return nil, err
	}
	d.Gateway.Reconfigure(cfg, d.Pool.Retiring())
	if auth != nil {
		d.auth.Replace(auth)
	}
	d.Config = cfg
	return changes, nil
}

// drainRetired closes the removed upstreams that no operation in flight
// uses any more, and forgets their contracts.
func (d *Daemon) drainRetired(ctx context.Context) {
	retiring := d.Pool.Retiring()
	if len(retiring) == 0 {
		return
	}
	inUse, err := d.upstreamsInUse(ctx)
	if err != nil {
		d.log.Warn("cannot tell whether removed upstreams still serve operations; keeping them", "err", err)
		return
	}
	closed := false
	for _, name := range retiring {
		if inUse[name] {
			continue
		}
		if err := d.Pool.CloseRetired(name); err != nil {
			d.log.Warn("closing a removed upstream", "upstream", name, "err", err)
		}
		d.log.Info("removed upstream closed: no operation in flight uses it", "upstream", name)
		closed = true
	}
	if closed {
		d.reloadMu.Lock()
		d.Gateway.Reconfigure(d.Config, d.Pool.Retiring())
		d.reloadMu.Unlock()
	}
}

// upstreamsInUse names the upstreams of the operations in flight: those a
// worker may still move on their upstream.
func (d *Daemon) upstreamsInUse(ctx context.Context) (map[string]bool, error) {
	inFlight := []ledger.State{ledger.StateAwaitingApproval, ledger.StateAccepted, ledger.StateSending, ledger.StateRunning, ledger.StateInputRequired}
	out := map[string]bool{}
	var before int64
	for {
		ops, err := d.Store.OperationList(ctx, &ledger.OperationListParams{States: inFlight, Limit: 500, BeforeID: before})
		if err != nil {
			return nil, err
		}
		for _, op := range ops {
			out[op.Upstream] = true
			before = op.ID
		}
		if len(ops) < 500 {
			return out, nil
		}
	}
}

// reloadResult is what the control socket answers to a reload.
type reloadResult struct {
	Applied bool     `json:"applied"`
	Changes []string `json:"changes,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// serveControl takes reloads on the Unix socket at path: POST /reload
// with a configuration file's path in the body's "file" field. The socket
// is the gateway user's alone (0600).
func (d *Daemon) serveControl(path string, load func(string) (*config.Config, error)) error {
	if err := removeStaleSocket(path); err != nil {
		return err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("open the control socket %s (control_socket in %s): %w", path, d.Config.File, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("restrict the control socket %s to this user: %w", path, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /reload", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			File string `json:"file"`
		}
		res := reloadResult{}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.File == "" {
			res.Error = "the request names no configuration file"
		} else if cfg, err := load(req.File); err != nil {
			d.log.Error("configuration reload refused; the running configuration stays", "file", req.File, "err", err)
			d.ReloadRefused()
			res.Error = err.Error()
		} else if changes, err := d.Reload(r.Context(), cfg); err != nil {
			res.Error = err.Error()
		} else {
			res.Applied, res.Changes = true, changes
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(res)
	})
	d.control = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	d.controlPath = path
	go d.control.Serve(ln)
	return nil
}

// removeStaleSocket removes a socket file left by a gateway that is gone,
// and refuses to take one a running gateway answers on.
func removeStaleSocket(path string) error {
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("another taskgate answers on the control socket %s; stop it, or give this one another control_socket", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove the stale control socket %s: %w", path, err)
	}
	return nil
}

func newReloadCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "taskgate_config_reloads_total", Help: "Configuration reloads, by result (applied or refused).",
	}, []string{"result"})
	reg.MustRegister(c)
	for _, r := range []string{"applied", "refused"} {
		c.WithLabelValues(r)
	}
	return c
}
