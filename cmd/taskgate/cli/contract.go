package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/internal/inert"
	"github.com/taskgate/taskgate/provider"
	"github.com/taskgate/taskgate/upstream"
)

func (e *env) contractCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "contract",
		Short: "Show the provider contract a consequential tool runs under",
	}
	c.AddCommand(e.contractShowCmd())
	group(c)
	return c
}

const contractShowHint = "taskgate contract show hosted_test.run_suite --config taskgate.yaml"

func (e *env) contractShowCmd() *cobra.Command {
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "show UPSTREAM.TOOL --config taskgate.yaml",
		Short: "Print the provider contract of a consequential tool, and where it comes from, as configuration YAML",
		Long: "show prints the provider contract the gateway uses for a consequential tool, as the contract: block\n" +
			"of its configuration, after a comment that says where it comes from. A contract written in the\n" +
			"configuration is printed as written. For a tool of an upstream with contracts: discover that writes\n" +
			"none, show connects to the upstream as the gateway does, lists its tools and prints the contract the\n" +
			"tool declares, checked as the gateway checks it before adopting it. Pasted under the tool in the\n" +
			"configuration, the printed block pins that contract: a written contract always wins.",
		Example: "  " + contractShowHint,
		Args:    oneArg("the tool, as UPSTREAM.TOOL", contractShowHint),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := e.loadConfig(cmd, cfgPath)
			if err != nil {
				return err
			}
			name, toolName, _ := strings.Cut(args[0], ".")
			i := slices.IndexFunc(cfg.Upstreams, func(u *config.Upstream) bool { return u.Name == name })
			if i < 0 || toolName == "" {
				return &usageError{msg: fmt.Sprintf("%q names no upstream of %s; name the tool as UPSTREAM.TOOL", args[0], cfg.File), hint: contractShowHint}
			}
			u := cfg.Upstreams[i]
			tool := u.Tools[toolName]
			if tool == nil || !tool.Consequential {
				return fmt.Errorf("%s is not a consequential tool in %s, so it runs under no provider contract; set consequential: true under upstreams[%d].tools.%s", args[0], cfg.File, i, toolName)
			}
			field := fmt.Sprintf("upstreams[%d].tools.%s", i, toolName)
			if !tool.Declared {
				block, err := writtenContract(cfg.File, i, toolName)
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "# %s: the provider contract written in %s at %s.contract\n%s", args[0], cfg.File, field, block)
				return nil
			}
			ctx := cmd.Context()
			ring, err := e.secretsRing(cfg)
			if err != nil {
				return err
			}
			if err := openTenantHeaders(cfg, ring); err != nil {
				return err
			}
			pool := upstream.NewPool([]*config.Upstream{u}, &upstream.Options{Logger: e.logger()})
			pool.Start(ctx)
			defer pool.Close()
			up, _ := pool.Get(name)
			tools, err := up.Tools(ctx)
			if err != nil {
				return fmt.Errorf("list the tools of upstream %s to read the contract %s declares: %w", name, args[0], err)
			}
			catalog := provider.NewCatalog(cfg)
			catalog.Discover(name, tools)
			c := catalog.Contract(name, toolName)
			if c.Unavailable != "" {
				return errors.New(c.Unavailable)
			}
			block, err := declaredBlock(c.Declaration)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "# %s: the provider contract upstream %s declares (%s), as the gateway adopts it.\n# To pin it, paste this block under %s in %s.\n%s",
				args[0], name, inert.Terminal(inert.URL(up.Endpoint())), field, cfg.File, block)
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "the gateway's configuration file (YAML)")
	return cmd
}

// writtenContract is the contract: block of upstream i's tool in the
// configuration file, as written there.
func writtenContract(file string, i int, tool string) (string, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", file, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil || len(doc.Content) == 0 {
		return "", fmt.Errorf("%s no longer parses: %v", file, err)
	}
	n := child(child(child(doc.Content[0], "upstreams"), i), "tools")
	n = child(child(n, tool), "contract")
	if n == nil {
		// Loaded, the file had the contract; read again, it has not.
		return "", fmt.Errorf("%s changed while it was read; run the command again", file)
	}
	return encodeBlock(n)
}

// declaredBlock is a declared contract (JSON) as a contract: block, without
// its version, in block style.
func declaredBlock(declared []byte) (string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(declared, &doc); err != nil || len(doc.Content) == 0 {
		return "", fmt.Errorf("the declared contract does not read as YAML: %v", err)
	}
	n := doc.Content[0]
	for j := 0; j+1 < len(n.Content); j += 2 {
		if n.Content[j].Value == "version" {
			n.Content = slices.Delete(n.Content, j, j+2)
			break
		}
	}
	var blockStyle func(*yaml.Node)
	blockStyle = func(n *yaml.Node) {
		if n.Kind != yaml.ScalarNode {
			n.Style = 0
		} else if n.Style == yaml.DoubleQuotedStyle {
			// JSON quotes every string; YAML needs quotes only where a
			// plain scalar would read as something else.
			n.Style = 0
		}
		for _, c := range n.Content {
			blockStyle(c)
		}
	}
	blockStyle(n)
	return encodeBlock(n)
}

// encodeBlock writes n as the value of a contract: key.
func encodeBlock(n *yaml.Node) (string, error) {
	wrapped := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: "contract"}, n}}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(wrapped); err != nil {
		return "", fmt.Errorf("write the contract as YAML: %w", err)
	}
	return b.String(), nil
}

// child is the value of key in mapping n, or the i-th item of sequence n
// (key an int); nil when there is none.
func child(n *yaml.Node, key any) *yaml.Node {
	switch {
	case n == nil:
		return nil
	case n.Kind == yaml.SequenceNode:
		if i, ok := key.(int); ok && i < len(n.Content) {
			return n.Content[i]
		}
	case n.Kind == yaml.MappingNode:
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == key {
				return n.Content[j+1]
			}
		}
	}
	return nil
}
