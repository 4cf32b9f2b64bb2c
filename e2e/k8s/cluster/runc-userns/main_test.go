package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestCreateArgs reads the command lines containerd's runc shim gives
// (go-runc: global options, then the subcommand and its options).
func TestCreateArgs(t *testing.T) {
	for _, tt := range []struct {
		args            []string
		bundle, pidFile string
		creating        bool
	}{
		{[]string{"--root", "/r", "--log", "/l/log.json", "--log-format", "json", "create", "--bundle", "/b", "--pid-file", "/b/init.pid", "--console-socket", "/s", "id1"}, "/b", "/b/init.pid", true},
		{[]string{"--root=/r", "--systemd-cgroup", "create", "--bundle=/b", "--pid-file=/p", "id1"}, "/b", "/p", true},
		{[]string{"--root", "/r", "start", "id1"}, "", "", false},
		{[]string{"--root", "/r", "exec", "--process", "/p.json", "--pid-file", "/x", "id1"}, "", "", false},
	} {
		bundle, pidFile, creating := createArgs(tt.args)
		if bundle != tt.bundle || pidFile != tt.pidFile || creating != tt.creating {
			t.Errorf("%q: %q %q %v, want %q %q %v", tt.args, bundle, pidFile, creating, tt.bundle, tt.pidFile, tt.creating)
		}
	}
}

// TestWritableCgroups drops "ro" from the cgroup mount of a bundle with a
// user namespace and finds the host ids of its root; a bundle without
// one is left alone.
func TestWritableCgroups(t *testing.T) {
	spec := `{"mounts":[{"destination":"/sys/fs/cgroup","type":"cgroup","source":"cgroup","options":["nosuid","noexec","nodev","relatime","ro"]},
		{"destination":"/etc/hosts","type":"bind","source":"/h","options":["rbind","ro"]}],
		"linux":{"uidMappings":[{"containerID":0,"hostID":65536,"size":65536}],"gidMappings":[{"containerID":0,"hostID":131072,"size":65536}]}}`
	config := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(config, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	uid, gid, err := writableCgroups(config)
	if err != nil || uid != 65536 || gid != 131072 {
		t.Fatalf("ids %d %d (%v), want 65536 131072", uid, gid, err)
	}
	var got struct {
		Mounts []struct {
			Type    string
			Options []string
		}
	}
	b, _ := os.ReadFile(config)
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(got.Mounts[0].Options, "ro") || !slices.Contains(got.Mounts[1].Options, "ro") {
		t.Errorf("mounts after: %+v; want the cgroup mount writable and the others as they were", got.Mounts)
	}

	if err := os.WriteFile(config, []byte(`{"mounts":[],"linux":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if uid, _, err := writableCgroups(config); uid != -1 || err != nil {
		t.Errorf("a bundle without a user namespace: uid %d (%v), want -1", uid, err)
	}
}
