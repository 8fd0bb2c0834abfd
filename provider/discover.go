package provider

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/gowebpki/jcs"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/internal/inert"
)

// Declaration is where a tool that takes its upstream's declared contract
// stands (config.Tool.Declared).
type Declaration string

const (
	// DeclarationAwaited: the upstream's tools have not been listed yet.
	DeclarationAwaited Declaration = "awaited"
	// DeclarationAdopted: the contract in use is the one the tool declared.
	DeclarationAdopted Declaration = "adopted"
	// DeclarationMissing: the tool declares no contract.
	DeclarationMissing Declaration = "missing"
	// DeclarationInvalid: the tool's declaration is not a contract the
	// gateway can use.
	DeclarationInvalid Declaration = "invalid"
	// DeclarationChanged: the tool now declares a contract other than the
	// one adopted; the gateway keeps the adopted one for the operations it
	// accepted, and takes no new call until it is reloaded.
	DeclarationChanged Declaration = "changed"
)

// judgeDeclaration decides where a tool stands after a listing: adopted is
// the canonical declaration in use (nil: none yet); listed the one just
// listed (nil: none valid), and invalid whether the tool declared one that
// is not valid. adopt says listed becomes the contract in use.
func judgeDeclaration(adopted, listed []byte, invalid bool) (state Declaration, adopt bool) {
	switch {
	case adopted == nil && listed != nil:
		return DeclarationAdopted, true
	case adopted == nil && invalid:
		return DeclarationInvalid, false
	case adopted == nil:
		return DeclarationMissing, false
	case slices.Equal(adopted, listed):
		return DeclarationAdopted, false
	}
	return DeclarationChanged, false
}

// listing is what the last listing of a tool declared.
type listing struct {
	canonical []byte // the valid declaration, as RFC 8785 JSON
	contract  *config.Contract
	problem   string // why there is none
}

// readDeclaration reads the contract t declares.
func readDeclaration(t *mcp.Tool) listing {
	c, ok, err := DeclaredContract(t.Meta)
	switch {
	case err != nil:
		return listing{problem: err.Error()}
	case !ok:
		return listing{problem: fmt.Sprintf("the tool declares no contract in _meta[%q]", ContractMetaKey)}
	}
	raw, err := json.Marshal(t.Meta[ContractMetaKey])
	if err == nil {
		raw, err = jcs.Transform(raw)
	}
	if err != nil {
		return listing{problem: fmt.Sprintf("the declared contract cannot be put in canonical form: %v", err)}
	}
	return listing{canonical: raw, contract: c}
}

// Finding is what a listing changed about one tool's declared contract,
// for the gateway to log.
type Finding struct {
	Upstream, Tool string
	State          Declaration
	// Reason says, for a tool that takes no new calls, why.
	Reason string
}

// Discover reads the contracts the listed tools of upstream declare, for
// the consequential tools that take their upstream's declaration, and
// returns what changed. A tool's first valid declaration is adopted (with
// the policy's defaults that follow from it); a later one that differs
// leaves the adopted contract in force for operations already accepted
// and makes the tool refuse new calls until the configuration is applied
// again ([Catalog.Replace]), which adopts the newest declaration.
func (c *Catalog) Discover(upstream string, tools []*mcp.Tool) []Finding {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.upstreams[upstream]
	if u == nil {
		return nil
	}
	var out []Finding
	for _, t := range tools {
		policy := u.Tools[t.Name]
		if policy == nil || !policy.Declared {
			continue
		}
		k := [2]string{upstream, t.Name}
		l := readDeclaration(t)
		c.seen[k] = l
		before := c.contracts[k]
		var adopted []byte
		if before != nil && before.Unavailable == "" || before != nil && before.state == DeclarationChanged {
			adopted = before.Declaration
		}
		state, take := judgeDeclaration(adopted, l.canonical, l.problem != "" && t.Meta[ContractMetaKey] != nil)
		var next *Contract
		switch {
		case take:
			next = adopt(u, t.Name, l)
		case state == DeclarationAdopted:
			// The same as adopted; after a change, the provider went back
			// to it.
			held := *before
			held.state, held.Unavailable = DeclarationAdopted, ""
			next = &held
		case state == DeclarationChanged:
			held := *before
			held.state = DeclarationChanged
			now := "another contract"
			if l.problem != "" {
				now = "none it can use (" + inert.Terminal(l.problem) + ")"
			}
			held.Unavailable = fmt.Sprintf("%s.%s now declares %s, not the contract the gateway adopted; an operator must check it (taskgate contract show %s.%s) and reload the gateway before new calls", upstream, t.Name, now, upstream, t.Name)
			next = &held
		default:
			next = unavailable(upstream, t.Name, policy, state, l.problem)
		}
		if before != nil && before.state == next.state && before.Unavailable == next.Unavailable {
			continue
		}
		c.contracts[k] = next
		hide(c.gateway, u, &next.Policy.Contract)
		if l.contract != nil {
			// A changed declaration's new tools are the gateway's too.
			hide(c.gateway, u, l.contract)
		}
		out = append(out, Finding{Upstream: upstream, Tool: t.Name, State: next.state, Reason: next.Unavailable})
	}
	return out
}

// adopt is the contract of a tool whose declaration l is taken into use.
func adopt(u *config.Upstream, tool string, l listing) *Contract {
	t, err := u.Adopt(tool, l.contract)
	if err != nil {
		return unavailable(u.Name, tool, u.Tools[tool], DeclarationInvalid, err.Error())
	}
	out := New(u.Name, tool, t)
	out.Declaration, out.state = l.canonical, DeclarationAdopted
	return out
}

// unavailable is the contract of a declared-contract tool that takes no
// new call, for the reason problem.
func unavailable(upstream, tool string, policy *config.Tool, state Declaration, problem string) *Contract {
	why := map[Declaration]string{
		DeclarationAwaited: "the gateway has not listed the upstream's tools yet",
		DeclarationMissing: "the tool declares no contract",
	}[state]
	if problem != "" {
		// The provider wrote the declaration the problem quotes.
		why = inert.Terminal(problem)
	}
	out := New(upstream, tool, policy)
	out.state = state
	out.Unavailable = fmt.Sprintf("%s.%s takes its provider contract from the upstream, and has none to use: %s", upstream, tool, why)
	return out
}

// hide makes the tools contract calls the gateway's (in gateway, for the
// upstream u), as GatewayTools does for written contracts, unless their
// policy exposes them.
func hide(gateway map[[2]string]bool, u *config.Upstream, contract *config.Contract) {
	for _, name := range contract.Tools() {
		// A declaration that calls a consequential tool is refused
		// (Upstream.Adopt); it hides nothing.
		if p := u.Tools[name]; p == nil || !p.Expose && !p.Consequential {
			gateway[[2]string{u.Name, name}] = true
		}
	}
}
