//go:build selfcontained

package main

// The builds that ship (the container image, the Debian package and the
// release archives) are built with -tags selfcontained: an empty base image
// has no time zone database and no CA roots, so the binary carries both.
// The roots are used only where the system has none; a plain go build
// keeps relying on the system's.
import (
	_ "time/tzdata"

	_ "golang.org/x/crypto/x509roots/fallback"
)
