//go:build tools

// Package runtimebuild pins the containerd the test cluster's node runs:
// containerd 2, which starts user-namespaced pods (hostUsers: false) that
// Debian's containerd 1.6 cannot. runtime-bin.sh builds it from here, and
// runc from its own module (runc 1.3 needs an older runtime-spec than
// containerd 2.2 does).
package runtimebuild

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
