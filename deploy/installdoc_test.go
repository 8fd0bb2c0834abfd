// Package deploy holds the check that docs/install.md's commands are the
// ones CI runs; the programs and files that build and package taskgate are
// in its subdirectories. It holds no code of the gateway.
package deploy

import (
	"os"
	"strings"
	"testing"
)

// TestInstallDocCommandsRunInCI checks that every command in a sh block of
// docs/install.md is a line of deploy/ci, as written (sudo aside: CI runs
// as root where there may be no sudo, and writes $sudo instead).
func TestInstallDocCommandsRunInCI(t *testing.T) {
	doc, err := os.ReadFile("../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("ci")
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]bool{}
	for _, line := range strings.Split(string(script), "\n") {
		ran[strings.TrimPrefix(strings.TrimSpace(line), "$sudo ")] = true
	}
	commands := shCommands(string(doc))
	if len(commands) < 5 {
		t.Fatalf("docs/install.md has %d commands in sh blocks; has the block syntax changed?", len(commands))
	}
	for _, c := range commands {
		if !ran[strings.TrimPrefix(c, "sudo ")] {
			t.Errorf("docs/install.md shows %q in a sh block, but deploy/ci does not run it as written", c)
		}
	}
}

// shCommands is every non-empty, non-comment line of md's sh blocks, its
// trailing comment cut.
func shCommands(md string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(md, "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```sh":
			in = true
		case in && strings.TrimSpace(line) == "```":
			in = false
		case in:
			c := strings.TrimSpace(line)
			if i := strings.Index(c, "  #"); i >= 0 {
				c = strings.TrimSpace(c[:i])
			}
			if c != "" && !strings.HasPrefix(c, "#") {
				out = append(out, c)
			}
		}
	}
	return out
}
