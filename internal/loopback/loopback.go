// Package loopback says whether a host names this machine: the one rule
// that the gateway's DNS-rebinding and Origin checks and the test proxies
// share. It holds no state and performs no lookups: a name other than
// "localhost" is never resolved.
package loopback

import (
	"net"
	"strings"
)

// Host reports whether a host, with or without a port, is a loopback name
// or address.
func Host(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
