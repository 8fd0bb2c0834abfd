package cli

import (
	"strings"
	"testing"
)

func TestSDKPathOnly(t *testing.T) {
	for _, tc := range []struct {
		value   string
		want    bool
		wantErr bool
	}{
		{"", false, false},
		{"1", true, false},
		{"true", true, false},
		{"0", false, true},
		{"false", false, true},
		{"TRUE", false, true},
		{"yes", false, true},
		{" 1", false, true},
	} {
		t.Run(tc.value, func(t *testing.T) {
			got, err := sdkPathOnly(func(name string) string {
				if name == sdkPathEnv {
					return tc.value
				}
				return ""
			})
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "TASKGATE_TEST_SDK_PATH") {
					t.Fatalf("sdkPathOnly(%q) = %v, %v; want an error naming TASKGATE_TEST_SDK_PATH", tc.value, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("sdkPathOnly(%q) = %v, %v; want %v", tc.value, got, err, tc.want)
			}
		})
	}
}
