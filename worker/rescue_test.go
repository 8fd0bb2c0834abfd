package worker

import (
	"testing"
	"time"

	"github.com/taskgate/taskgate/config"
)

func TestReconcileTimeout(t *testing.T) {
	tests := []struct {
		name     string
		lease    time.Duration
		timeouts []time.Duration
		want     time.Duration
	}{
		{"the defaults: a 60s upstream outlasts a 30s lease", 30 * time.Second, []time.Duration{60 * time.Second}, 4 * time.Minute},
		{"a lease longer than every upstream call", 2 * time.Minute, []time.Duration{10 * time.Second, 30 * time.Second}, 8 * time.Minute},
		{"the slowest of several upstreams", 30 * time.Second, []time.Duration{5 * time.Second, 3 * time.Minute, time.Minute}, 12 * time.Minute},
		{"no upstream", 30 * time.Second, nil, 2 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &config.Config{Worker: config.Worker{Lease: tt.lease}}
			for _, d := range tt.timeouts {
				cfg.Upstreams = append(cfg.Upstreams, &config.Upstream{Timeout: d})
			}
			if got := reconcileTimeout(cfg); got != tt.want {
				t.Errorf("reconcileTimeout = %s, want %s", got, tt.want)
			}
			// A live run is cut before the job queue could take it for
			// stuck.
			if got := rescueAfter(cfg); got != 2*tt.want {
				t.Errorf("rescueAfter = %s, want %s", got, 2*tt.want)
			}
		})
	}
}
