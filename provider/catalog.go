package provider

import (
	"encoding/json"
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
	// seen holds what each declared-contract tool declared when its
	// upstream's tools were last listed; a reload adopts it.
	seen map[[2]string]listing
	// recorded holds contracts rebuilt from operations' recorded
	// declarations, by upstream, tool and declaration.
	recorded map[[3]string]*Contract
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
	c := &Catalog{seen: map[[2]string]listing{}, recorded: map[[3]string]*Contract{}}
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
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, u := range cfg.Upstreams {
		upstreams[u.Name] = u
		for _, name := range GatewayTools(u) {
			gateway[[2]string{u.Name, name}] = true
		}
		for name, t := range u.Tools {
			k := [2]string{u.Name, name}
			switch seen := c.seen[k]; {
			case t == nil || !t.Consequential:
			case !t.Declared:
				contracts[k] = New(u.Name, name, t)
			case seen.contract != nil:
				// Applying a configuration adopts what the tool declared
				// when last listed.
				contracts[k] = adopt(u, name, seen)
				hide(gateway, u, &contracts[k].Policy.Contract)
			case seen.problem != "":
				contracts[k] = unavailable(u.Name, name, t, DeclarationInvalid, seen.problem)
			default:
				contracts[k] = unavailable(u.Name, name, t, DeclarationAwaited, "")
			}
		}
	}
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
	// Rebuilt from the new policies when next asked for.
	c.recorded = map[[3]string]*Contract{}
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

// ForOperation returns the contract an operation of tool on upstream runs
// under: the declared contract it recorded when it was accepted (whatever
// the tool declares now), else the tool's contract in the configuration.
// Nil when the configuration no longer has the tool, or the recorded
// declaration cannot be used with the tool's policy now.
func (c *Catalog) ForOperation(upstream, tool string, recorded json.RawMessage) *Contract {
	if len(recorded) == 0 {
		// A declared contract that is not in force (awaited, missing,
		// invalid) was never the operation's.
		if c := c.Contract(upstream, tool); c != nil && (c.Unavailable == "" || c.Declaration != nil) {
			return c
		}
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := [3]string{upstream, tool, string(recorded)}
	if r := c.recorded[k]; r != nil {
		return r
	}
	u := c.upstreams[upstream]
	if u == nil || u.Tools[tool] == nil {
		return nil
	}
	declared, ok, err := DeclaredContract(map[string]any{ContractMetaKey: recorded})
	if err != nil || !ok {
		return nil
	}
	t, err := u.Adopt(tool, declared)
	if err != nil {
		return nil
	}
	r := New(upstream, tool, t)
	r.Declaration, r.state = recorded, DeclarationAdopted
	c.recorded[k] = r
	return r
}

// Upstream returns an upstream's configuration.
func (c *Catalog) Upstream(name string) *config.Upstream {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.upstreams[name]
}
