package cmdpolicy

import penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"

// cmdStart anchors a rule at the position of a command word: the start of a
// normalized simple command, or right after a separator.
const cmdStart = `(?:^|[;&|(]\s*)`

const (
	rmRecursive = `(?:-[A-Za-z]*[rR][A-Za-z]*|--recursive)`
	rmForce     = `(?:-[A-Za-z]*f[A-Za-z]*|--force)`
	rmBoth      = `-[A-Za-z]*(?:[rR][A-Za-z]*f|f[A-Za-z]*[rR])[A-Za-z]*`
	anyArgs     = `(?:[^;&|\n]*\s)?`
	blockDevice = `/dev/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|disk\d|md\d|dm-\d|loop\d|mapper/)`
)

// FactoryRules returns the default deny rules: commands whose verbatim run
// is destructive with no undo, in their POSIX and Windows spellings.
func FactoryRules() []*penguinv1.CommandRule {
	return []*penguinv1.CommandRule{
		{
			Name:        "rm-recursive-force",
			Pattern:     cmdStart + `rm\s+` + anyArgs + `(?:` + rmBoth + `|` + rmRecursive + `\s+` + anyArgs + rmForce + `|` + rmForce + `\s+` + anyArgs + rmRecursive + `)(?:\s|$)`,
			Description: "rm with recursive and force flags in one command (rm -rf and friends)",
		},
		{
			Name:        "mkfs",
			Pattern:     cmdStart + `mkfs(?:\.[A-Za-z0-9]+)?(?:\s|$)`,
			Description: "making a file system, which erases the device",
		},
		{
			Name:        "dd-to-block-device",
			Pattern:     cmdStart + `dd\s+` + anyArgs + `of=` + blockDevice,
			Description: "dd writing straight to a block device",
		},
		{
			Name:        "fork-bomb",
			Pattern:     `[:\w]+\s*\(\s*\)\s*\{\s*[:\w]+\s*\|\s*[:\w]+\s*&\s*\}`,
			Description: "the classic shell fork bomb",
		},
		{
			Name:        "redirect-to-block-device",
			Pattern:     `>\|?\s*` + blockDevice,
			Description: "shell redirection onto a block device (/dev/null and friends stay allowed)",
		},
		{
			Name:        "windows-recursive-force-delete",
			Pattern:     `(?i)(?:\bRemove-Item\b[^;|&\n]*(?:-Recurse\b[^;|&\n]*-Force\b|-Force\b[^;|&\n]*-Recurse\b)|` + cmdStart + `(?:rd|rmdir)\s+` + anyArgs + `(?:/s\s+` + anyArgs + `/q|/q\s+` + anyArgs + `/s)\b)`,
			Description: "Remove-Item -Recurse -Force, rd /s /q",
		},
		{
			Name:        "windows-format-volume",
			Pattern:     `(?i)(?:` + cmdStart + `format(?:\.com)?\s+[a-z]:|\bFormat-Volume\b)`,
			Description: "formatting a volume on Windows",
		},
		{
			Name:        "windows-raw-disk-write",
			Pattern:     `(?i)(?:\\\\\.\\PhysicalDrive\d|\bClear-Disk\b)`,
			Description: "raw disk overwrite on Windows",
		},
		{
			Name:        "windows-cmd-fork-bomb",
			Pattern:     `%0\s*\|\s*%0`,
			Description: "the cmd fork bomb",
		},
	}
}
