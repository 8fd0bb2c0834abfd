// Package helm holds the test of the Helm chart in taskgate/: it renders
// the chart with helm over each example values file in taskgate/ci and
// checks the manifests. It holds no code of the gateway.
package helm

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// manifest is the part of a rendered Kubernetes object the test reads.
type manifest struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name        string            `yaml:"name"`
		Annotations map[string]string `yaml:"annotations"`
	} `yaml:"metadata"`
	Spec struct {
		Replicas *int `yaml:"replicas"`
		Template struct {
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type podSpec struct {
	SecurityContext securityContext `yaml:"securityContext"`
	Containers      []container     `yaml:"containers"`
	InitContainers  []container     `yaml:"initContainers"`
}

type securityContext struct {
	RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
	RunAsUser                *int  `yaml:"runAsUser"`
	ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
	AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
	} `yaml:"httpGet"`
}

type container struct {
	Name            string          `yaml:"name"`
	Args            []string        `yaml:"args"`
	SecurityContext securityContext `yaml:"securityContext"`
	LivenessProbe   *probe          `yaml:"livenessProbe"`
	ReadinessProbe  *probe          `yaml:"readinessProbe"`
}

// render runs helm template over the chart with the values file values.
func render(t *testing.T, helm string, args ...string) ([]manifest, error) {
	t.Helper()
	cmd := exec.Command(helm, append([]string{"template", "taskgate", "./taskgate"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, errors.New(stderr.String())
	}
	var ms []manifest
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var m manifest
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return ms, nil
		}
		if err != nil {
			t.Fatalf("helm template %s printed what is not YAML: %v", strings.Join(args, " "), err)
		}
		if m.Kind != "" {
			ms = append(ms, m)
		}
	}
}

func helmBinary(t *testing.T) string {
	helm := os.Getenv("TASKGATE_HELM")
	if helm == "" {
		t.Skip("TASKGATE_HELM is unset: set it to a helm binary (deploy/tool helm) to render the chart")
	}
	return helm
}

// TestChart renders each example values file and checks that every
// container runs as non-root on a read-only root, that the gateway has its
// probes, and that PostgreSQL brings the migration Job.
func TestChart(t *testing.T) {
	helm := helmBinary(t)
	files, err := filepath.Glob("taskgate/ci/*-values.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example values in taskgate/ci: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			ms, err := render(t, helm, "-f", f)
			if err != nil {
				t.Fatalf("helm template -f %s: %v", f, err)
			}
			kinds := map[string]int{}
			for _, m := range ms {
				kinds[m.Kind]++
				pod := m.Spec.Template.Spec
				if m.Kind != "Deployment" && m.Kind != "Job" {
					continue
				}
				for _, c := range append(pod.Containers, pod.InitContainers...) {
					checkContainer(t, m, pod, c)
				}
				if m.Kind == "Deployment" {
					c := pod.Containers[0]
					if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" ||
						c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
						t.Errorf("%s %s: container %s lacks a liveness probe on /healthz and a readiness probe on /readyz", m.Kind, m.Metadata.Name, c.Name)
					}
				}
				if m.Kind == "Job" {
					if hook := m.Metadata.Annotations["helm.sh/hook"]; !strings.Contains(hook, "pre-upgrade") || strings.Join(pod.Containers[0].Args, " ") != "migrate" {
						t.Errorf("Job %s: hook %q args %q, want a pre-upgrade hook running taskgate migrate", m.Metadata.Name, hook, pod.Containers[0].Args)
					}
				}
			}
			for _, k := range []string{"Deployment", "Service", "ConfigMap", "PodDisruptionBudget"} {
				if kinds[k] != 1 {
					t.Errorf("rendered %d %s, want 1", kinds[k], k)
				}
			}
			if postgres := strings.Contains(f, "postgres"); postgres != (kinds["Job"] == 1) {
				t.Errorf("rendered %d migration Jobs with %s; want one exactly with PostgreSQL", kinds["Job"], f)
			}
		})
	}
}

func checkContainer(t *testing.T, m manifest, pod podSpec, c container) {
	t.Helper()
	nonRoot := c.SecurityContext.RunAsNonRoot
	if nonRoot == nil {
		nonRoot = pod.SecurityContext.RunAsNonRoot
	}
	user := c.SecurityContext.RunAsUser
	if user == nil {
		user = pod.SecurityContext.RunAsUser
	}
	if nonRoot == nil || !*nonRoot || user == nil || *user == 0 {
		t.Errorf("%s %s: container %s may run as root (runAsNonRoot %v, runAsUser %v)", m.Kind, m.Metadata.Name, c.Name, nonRoot, user)
	}
	if ro := c.SecurityContext.ReadOnlyRootFilesystem; ro == nil || !*ro {
		t.Errorf("%s %s: container %s has a writable root filesystem", m.Kind, m.Metadata.Name, c.Name)
	}
	if esc := c.SecurityContext.AllowPrivilegeEscalation; esc == nil || *esc {
		t.Errorf("%s %s: container %s may escalate privileges", m.Kind, m.Metadata.Name, c.Name)
	}
}

// TestChartSchema checks that values.schema.json refuses more than one
// replica on SQLite, and PostgreSQL without the Secret naming its URL.
func TestChartSchema(t *testing.T) {
	helm := helmBinary(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"replicas on SQLite", []string{"--set", "replicaCount=2"}, "postgres"},
		{"PostgreSQL without its URL", []string{"--set", "database.kind=postgres"}, "urlSecret"},
		{"zero replicas", []string{"--set", "replicaCount=0"}, "replicaCount"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(t, helm, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helm template %s: %v; want it refused, naming %s", strings.Join(tc.args, " "), err, tc.want)
			}
		})
	}
	if _, err := render(t, helm, "--set", "replicaCount=3", "--set", "database.kind=postgres", "--set", "database.postgres.urlSecret.name=db"); err != nil {
		t.Errorf("three replicas on PostgreSQL refused: %v", err)
	}
}
