package provider

import "github.com/taskgate/taskgate/config"

// Catalog holds the contract of every consequential tool of a configuration.
type Catalog struct {
	contracts map[[2]string]*Contract
	upstreams map[string]*config.Upstream
}

// NewCatalog indexes cfg's consequential tools.
func NewCatalog(cfg *config.Config) *Catalog {
	c := &Catalog{contracts: map[[2]string]*Contract{}, upstreams: map[string]*config.Upstream{}}
	for _, u := range cfg.Upstreams {
		c.upstreams[u.Name] = u
		for name, t := range u.Tools {
			if t != nil && t.Consequential {
				c.contracts[[2]string{u.Name, name}] = New(u.Name, name, t)
			}
		}
	}
	return c
}

// Contract returns the contract of a consequential tool, or nil when the
// tool is unknown or passes straight through.
func (c *Catalog) Contract(upstream, tool string) *Contract {
	return c.contracts[[2]string{upstream, tool}]
}

// Upstream returns an upstream's configuration.
func (c *Catalog) Upstream(name string) *config.Upstream { return c.upstreams[name] }
