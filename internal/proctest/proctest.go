// Package proctest lets tests check, from /proc and independently of the
// code under test, which processes are still alive.
package proctest

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// GroupMembers lists the live processes whose process group or session is
// id, each as "pid (comm)". Zombies and dead processes do not count: they
// have exited and only wait to be reaped. Processes that exit while /proc
// is read are skipped.
func GroupMembers(t testing.TB, id int) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	want := strconv.Itoa(id)
	var out []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name may hold spaces and parentheses; the fields
		// after it start at the last ')'.
		i := strings.LastIndexByte(string(data), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 4 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if f[2] == want || f[3] == want {
			out = append(out, string(data[:i+1]))
		}
	}
	return out
}
