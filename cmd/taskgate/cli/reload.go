package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
)

func (e *env) reloadCmd() *cobra.Command {
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "reload --config taskgate.yaml",
		Short: "Make the running gateway read its configuration again, without dropping sessions or calls",
		Long: "reload checks the file as serve would, then asks the gateway that serves it (over its control socket,\n" +
			"control_socket in the file) to apply it: upstreams are added, removed (operations in flight on a\n" +
			"removed one finish there) or reconnected with new settings, tool policies apply to new operations,\n" +
			"auth to new requests. A file that fails validation, or that changes a field only a restart changes\n" +
			"(listen, database, public_url, max_body_bytes, allowed_origins, retention, worker, secrets,\n" +
			"auth.stdio_tenant, control_socket), is refused and the running configuration stays.\n" +
			"SIGHUP to the serve process does the same with the file it was started with.",
		Example: "  taskgate reload --config taskgate.yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := e.loadConfig(cmd, cfgPath)
			if err != nil {
				return err
			}
			path := cfg.ControlSocketPath(os.TempDir())
			if path == "" {
				return fmt.Errorf("%s listens on port 0, so no control socket has a name to find; set control_socket in it, restart the gateway, then reload", cfgPath)
			}
			abs, err := filepath.Abs(cfgPath)
			if err != nil {
				return err
			}
			res, err := askReload(cmd.Context(), path, abs)
			if err != nil {
				return err
			}
			if !res.Applied {
				return fmt.Errorf("the gateway refused the file and keeps its running configuration:\n%s", res.Error)
			}
			if len(res.Changes) == 0 {
				fmt.Fprintln(e.stdout, "reloaded: nothing changed")
			}
			for _, c := range res.Changes {
				fmt.Fprintln(e.stdout, "reloaded: "+c)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "the configuration file (YAML) of the running gateway")
	return cmd
}

// reloadAnswer is the control socket's answer.
type reloadAnswer struct {
	Applied bool     `json:"applied"`
	Changes []string `json:"changes"`
	Error   string   `json:"error"`
}

// askReload asks the gateway on the control socket at socket to reload
// file.
func askReload(ctx context.Context, socket, file string) (*reloadAnswer, error) {
	client := &http.Client{
		Timeout: time.Minute,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}},
	}
	body, _ := json.Marshal(map[string]string{"file": file})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://taskgate/reload", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return nil, fmt.Errorf("no taskgate is running with control socket %s (start it with taskgate serve --config %s): %w", socket, file, err)
		}
		return nil, fmt.Errorf("ask the gateway on %s to reload: %w", socket, err)
	}
	defer resp.Body.Close()
	var res reloadAnswer
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return nil, fmt.Errorf("read the gateway's answer on %s: %w", socket, err)
	}
	return &res, nil
}
