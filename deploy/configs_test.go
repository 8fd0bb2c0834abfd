package deploy

import (
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/taskgate/taskgate/config"
)

// TestShippedConfigurations checks that the configurations the package
// and the chart install are valid as taskgate serve reads them: the
// package's with nothing in the environment, the chart's with the
// variables its values set from Secrets.
func TestShippedConfigurations(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	if _, err := config.Parse(mustOpen(t, "debian/taskgate.yaml"), "debian/taskgate.yaml", none); err != nil {
		t.Errorf("the Debian package's configuration: %v", err)
	}
	for _, f := range []string{"helm/taskgate/values.yaml", "helm/taskgate/ci/sqlite-values.yaml", "helm/taskgate/ci/postgres-values.yaml"} {
		var values struct {
			Config    *string `yaml:"config"`
			SecretEnv []struct {
				Name string `yaml:"name"`
			} `yaml:"secretEnv"`
		}
		if err := yaml.NewDecoder(mustOpen(t, f)).Decode(&values); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if values.Config == nil {
			continue
		}
		env := map[string]bool{}
		for _, e := range values.SecretEnv {
			env[e.Name] = true
		}
		lookup := func(name string) (string, bool) { return "set-from-a-secret", env[name] }
		if _, err := config.Parse(strings.NewReader(*values.Config), f, lookup); err != nil {
			t.Errorf("the chart's configuration in %s: %v", f, err)
		}
	}
}

func mustOpen(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
