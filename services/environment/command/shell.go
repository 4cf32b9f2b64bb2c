package command

import "strings"

// shellKind says how a shell takes a command line.
type shellKind int

const (
	// posixShell takes "-c LINE" ("-lc LINE" for a login shell): bash, sh,
	// zsh, and Git's or MSYS2's bash on Windows.
	posixShell shellKind = iota
	// powerShell takes "-Command LINE": PowerShell (powershell.exe) and
	// PowerShell 7 (pwsh).
	powerShell
	// cmdShell is cmd.exe, which takes "/d /s /c LINE" and parses its
	// command line itself.
	cmdShell
)

// kindOf tells a shell's kind by its file name, in any case and with or
// without ".exe", whichever system's separators the path uses.
func kindOf(shell string) shellKind {
	base := shell[strings.LastIndexAny(shell, `/\`)+1:]
	base = strings.TrimSuffix(strings.ToLower(base), ".exe")
	switch base {
	case "cmd":
		return cmdShell
	case "powershell", "pwsh":
		return powerShell
	default:
		return posixShell
	}
}

// shellArgs are the arguments after the shell's path that make it run
// line: for a login shell, its profile first. PowerShell reads its profile
// unless told not to; cmd.exe has none and skips AutoRun commands (/d).
func shellArgs(kind shellKind, line string, login bool) []string {
	switch kind {
	case powerShell:
		if login {
			return []string{"-NoLogo", "-NonInteractive", "-Command", line}
		}
		return []string{"-NoLogo", "-NoProfile", "-NonInteractive", "-Command", line}
	case cmdShell:
		return []string{"/d", "/s", "/c", line}
	default:
		if login {
			return []string{"-lc", line}
		}
		return []string{"-c", line}
	}
}

// cmdLine is the whole command line of cmd.exe running line. cmd.exe does
// not split its arguments as other programs do, so the line must reach it
// as written: with /s, it strips the first and the last quote of what
// follows /c and runs the rest, whatever quotes it holds.
func cmdLine(shell, line string) string {
	return `"` + shell + `" /d /s /c "` + line + `"`
}

// shellCandidates are the shells tried, in order, when none is
// configured: bash on every system; on Windows then a POSIX sh (Git's,
// MSYS2's, Cygwin's), PowerShell 7, Windows PowerShell and cmd.exe, which
// every Windows has.
func shellCandidates(goos string) []string {
	if goos != "windows" {
		return []string{"bash"}
	}
	return []string{"bash", "sh", "pwsh", "powershell", "cmd"}
}

// findShell returns the first candidate that look finds, with the error
// of the first one when none is found.
func findShell(candidates []string, look func(string) (string, error)) (string, error) {
	var first error
	for _, c := range candidates {
		p, err := look(c)
		if err == nil {
			return p, nil
		}
		if first == nil {
			first = err
		}
	}
	return "", first
}
