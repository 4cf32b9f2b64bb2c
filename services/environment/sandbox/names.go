package sandbox

// SubcommandName is the hidden penguin subcommand that Apply re-executes
// the penguin binary as; its arguments go to SandboxExec.
const SubcommandName = "sandbox-exec"

// ExitCode is the exit status the sandbox-exec subcommand should use when
// SandboxExec fails: the status shells use for "found but could not be
// executed", so a confinement failure never looks like the command's own.
const ExitCode = 126

// TrampolineName is the lean binary that holds only the sandbox-exec
// subcommand (cmd/penguin-sandbox), looked for beside the penguin binary.
const TrampolineName = "penguin-sandbox"
