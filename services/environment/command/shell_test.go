package command

import (
	"errors"
	"os/exec"
	"slices"
	"testing"
)

func TestKindOfShell(t *testing.T) {
	for shell, want := range map[string]shellKind{
		"/bin/bash":                         posixShell,
		"/usr/bin/zsh":                      posixShell,
		`C:\Program Files\Git\bin\bash.exe`: posixShell,
		`C:\Windows\System32\cmd.exe`:       cmdShell,
		`C:\WINDOWS\system32\CMD.EXE`:       cmdShell,
		`C:\Windows\System32\WindowsPowerShell\v1.0\powershell.exe`: powerShell,
		`C:\Program Files\PowerShell\7\pwsh.exe`:                    powerShell,
		"/usr/local/bin/pwsh":                                       powerShell,
		"cmd":                                                       cmdShell,
	} {
		if got := kindOf(shell); got != want {
			t.Errorf("kindOf(%q) = %d, want %d", shell, got, want)
		}
	}
}

func TestShellArgs(t *testing.T) {
	line := `echo "a b" & dir`
	for _, c := range []struct {
		kind  shellKind
		login bool
		want  []string
	}{
		{posixShell, false, []string{"-c", line}},
		{posixShell, true, []string{"-lc", line}},
		{powerShell, false, []string{"-NoLogo", "-NoProfile", "-NonInteractive", "-Command", line}},
		{powerShell, true, []string{"-NoLogo", "-NonInteractive", "-Command", line}},
		{cmdShell, false, []string{"/d", "/s", "/c", line}},
	} {
		if got := shellArgs(c.kind, line, c.login); !slices.Equal(got, c.want) {
			t.Errorf("shellArgs(%d, login=%v) = %q, want %q", c.kind, c.login, got, c.want)
		}
	}
}

// TestCmdLine checks that the line reaches cmd.exe as written: /s strips
// exactly the outer pair of quotes, so the inner ones survive.
func TestCmdLine(t *testing.T) {
	got := cmdLine(`C:\Windows\System32\cmd.exe`, `"C:\Program Files\x.exe" "a b" > "out file.txt"`)
	want := `"C:\Windows\System32\cmd.exe" /d /s /c ""C:\Program Files\x.exe" "a b" > "out file.txt""`
	if got != want {
		t.Errorf("cmdLine = %s\nwant     %s", got, want)
	}
}

func TestFindShell(t *testing.T) {
	if got := shellCandidates("linux"); !slices.Equal(got, []string{"bash"}) {
		t.Errorf("linux candidates = %q", got)
	}
	win := shellCandidates("windows")
	if win[0] != "bash" || win[len(win)-1] != "cmd" {
		t.Errorf("windows candidates = %q: want bash first and cmd.exe, which every Windows has, last", win)
	}
	// A Windows without Git: PowerShell 7 absent, Windows PowerShell found.
	found := map[string]string{"powershell": `C:\Windows\System32\WindowsPowerShell\v1.0\powershell.exe`, "cmd": `C:\Windows\System32\cmd.exe`}
	look := func(name string) (string, error) {
		if p, ok := found[name]; ok {
			return p, nil
		}
		return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
	}
	got, err := findShell(win, look)
	if err != nil || got != found["powershell"] {
		t.Errorf("findShell = %q, %v; want Windows PowerShell", got, err)
	}
	_, err = findShell([]string{"bash", "sh"}, func(string) (string, error) { return "", exec.ErrNotFound })
	if !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("findShell with no shell: %v, want ErrNotFound", err)
	}
}
