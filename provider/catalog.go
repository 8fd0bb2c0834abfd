package provider

import (
	"slices"
	"sync"

	"github.com/taskgate/taskgate/config"
)

// Catalog holds the contract of every consequential tool of a configuration.
// A reload replaces what it holds ([Catalog.Replace]); its methods are safe
// for concurrent use.
type Catalog struct {
	mu        sync.RWMutex
	contracts map[[2]string]*Contract
	upstreams map[string]*config.Upstream
	// gateway holds the tools that belong to the gateway (GatewayTools).
	gateway map[[2]string]bool
}

// GatewayTools returns the tools of upstream u that belong to the gateway:
// every tool a contract of u calls (lookup, fetch, charges, cancel,
// estimate_tool), unless its own policy sets expose. They run under the
// gateway's one upstream credential, on any tenant's jobs, so clients
// neither see nor call them. The result is sorted.
func GatewayTools(u *config.Upstream) []string {
	var out []string
	for _, t := range u.Tools {
		if t == nil || !t.Consequential {
			continue
		}
		for _, name := range t.Contract.Tools() {
			if p := u.Tools[name]; (p == nil || !p.Expose) && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// NewCatalog indexes cfg's consequential tools.
func NewCatalog(cfg *config.Config) *Catalog {
	c := &Catalog{}
	c.Replace(cfg, nil)
	return c
}

// Replace indexes cfg's consequential tools instead, keeping the contracts
// of the upstreams named in keep that cfg no longer has (removed upstreams
// whose operations are still running).
func (c *Catalog) Replace(cfg *config.Config, keep []string) {
	contracts := map[[2]string]*Contract{}
	upstreams := map[string]*config.Upstream{}
	gateway := map[[2]string]bool{}
	for _, u := range cfg.Upstreams {
		upstreams[u.Name] = u
		for _, name := range GatewayTools(u) {
			gateway[[2]string{u.Name, name}] = true
		}
		for name, t := range u.Tools {
			if t != nil && t.Consequential {
				contracts[[2]string{u.Name, name}] = New(u.Name, name, t)
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range keep {
		if _, ok := upstreams[name]; ok || c.upstreams[name] == nil {
			continue
		}
		upstreams[name] = c.upstreams[name]
		for k, v := range c.contracts {
			if k[0] == name {
				contracts[k] = v
			}
		}
		for k := range c.gateway {
			if k[0] == name {
				gateway[k] = true
			}
		}
	}
	c.contracts, c.upstreams, c.gateway = contracts, upstreams, gateway
}

// GatewayTool reports whether tool of upstream belongs to the gateway (see
// [GatewayTools]) in the configuration in force, or in the last one that
// had the upstream, while it retires.
func (c *Catalog) GatewayTool(upstream, tool string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.gateway[[2]string{upstream, tool}]
}

// Contract returns the contract of a consequential tool, or nil when the
// tool is unknown or passes straight through.
func (c *Catalog) Contract(upstream, tool string) *Contract {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.contracts[[2]string{upstream, tool}]
}

// Upstream returns an upstream's configuration.
func (c *Catalog) Upstream(name string) *config.Upstream {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.upstreams[name]
}
