package workspace

import (
	"errors"
	"testing"
)

// TestPathSyntaxWindows checks Locate's lexical rules as Windows spells
// paths, on every system: the separators, drive letters, case and the
// paths that are neither absolute nor relative to the workspace.
func TestPathSyntaxWindows(t *testing.T) {
	win := pathSyntax{windows: true}
	for _, c := range []struct {
		p, dir, want string
		ok           bool
	}{
		{`C:\ws\src\a.go`, `C:\ws`, "src/a.go", true},
		{`C:\ws`, `C:\ws`, ".", true},
		{`c:\WS\Src\a.go`, `C:\ws`, "Src/a.go", true}, // another case of the same names
		{`C:\wsx\a.go`, `C:\ws`, "", false},           // a sibling that shares the prefix
		{`D:\ws\a.go`, `C:\ws`, "", false},
		{`C:\a.go`, `C:\ws`, "", false},
		{`C:\a.go`, `C:\`, "a.go", true},
		{`\\srv\share\ws\a.go`, `\\srv\share\ws`, "a.go", true},
		{`\\srv\share\wsx`, `\\srv\share\ws`, "", false},
	} {
		got, ok := win.inside(c.p, c.dir)
		if got != c.want || ok != c.ok {
			t.Errorf("inside(%q, %q) = %q, %v; want %q, %v", c.p, c.dir, got, ok, c.want, c.ok)
		}
	}
	for _, c := range []struct {
		clean, want string
		ok          bool
		notRelative bool
	}{
		{`src\a.go`, "src/a.go", true, false},
		{`src/a.go`, "src/a.go", true, false},
		{`.`, ".", true, false},
		{`..`, "", false, false},
		{`..\secret`, "", false, false},
		{`../secret`, "", false, false},
		{`\Windows\win.ini`, "", false, true}, // the current drive's root
		{`/etc/passwd`, "", false, true},
		{`C:secret`, "", false, true}, // drive C's current directory
		{`..a\b`, "..a/b", true, false},
	} {
		got, ok, err := win.relativeName(c.clean)
		if got != c.want || ok != c.ok || errors.Is(err, errNotRelative) != c.notRelative {
			t.Errorf("relativeName(%q) = %q, %v, %v; want %q, %v, not relative %v", c.clean, got, ok, err, c.want, c.ok, c.notRelative)
		}
	}
	if got := win.join(`C:\ws\`, "src/a.go"); got != `C:\ws\src\a.go` {
		t.Errorf("join = %q", got)
	}
	if got := win.join(`C:\ws`, "."); got != `C:\ws` {
		t.Errorf("join(.) = %q", got)
	}
}

// TestPathSyntaxUnix checks the same rules as Linux and macOS spell
// paths: a backslash is part of a name, and case matters.
func TestPathSyntaxUnix(t *testing.T) {
	unix := pathSyntax{}
	if got, ok := unix.inside("/ws/a/b", "/ws"); got != "a/b" || !ok {
		t.Errorf("inside = %q, %v", got, ok)
	}
	if _, ok := unix.inside("/WS/a", "/ws"); ok {
		t.Error("/WS/a is inside /ws")
	}
	if _, ok := unix.inside("/wsx/a", "/ws"); ok {
		t.Error("/wsx/a is inside /ws")
	}
	if got, ok := unix.inside("/a", "/"); got != "a" || !ok {
		t.Errorf("inside(/a, /) = %q, %v", got, ok)
	}
	if got, ok, err := unix.relativeName(`..\x`); got != `..\x` || !ok || err != nil {
		t.Errorf(`relativeName(..\x) = %q, %v, %v; a backslash is part of a name here`, got, ok, err)
	}
	if _, ok, _ := unix.relativeName("../x"); ok {
		t.Error("../x is inside")
	}
	if got := unix.join("/ws", "a/b"); got != "/ws/a/b" {
		t.Errorf("join = %q", got)
	}
}
