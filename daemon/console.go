package daemon

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/taskgate/taskgate/api"
	"github.com/taskgate/taskgate/console"
	"github.com/taskgate/taskgate/secrets"
)

// console builds the approvers' console over the REST API's handlers.
// Sessions are sealed with the secrets key ring, which every replica
// shares; without one, with a key of this process only, so that a sign-in
// holds on this replica until it restarts.
func (d *Daemon) console(restAPI *api.API) (*console.Console, error) {
	var sealer console.Sealer = d.secrets
	if d.secrets == nil {
		ring, err := secrets.ParseRing([]byte(secrets.NewKey()), "the console's session key of this process")
		if err != nil {
			return nil, fmt.Errorf("make the console's session key: %w", err)
		}
		sealer = ring
		d.log.Info("the console seals sessions with a key of this process: sign-ins end when it restarts and hold on this replica only; configure secrets.key_file to share them")
	}
	routes := http.NewServeMux()
	restAPI.Register(routes)
	return console.New(&console.Options{
		Auth: d.auth, API: routes, Store: d.Store, Sealer: sealer,
		Secure: strings.HasPrefix(d.Config.PublicURL, "https://"), Logger: d.log,
	})
}
