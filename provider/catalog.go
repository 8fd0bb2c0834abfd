package provider

import (
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
	for _, u := range cfg.Upstreams {
		upstreams[u.Name] = u
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
	}
	c.contracts, c.upstreams = contracts, upstreams
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
