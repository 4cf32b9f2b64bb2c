package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/penguin-agent/penguin/services/environment"
	"github.com/penguin-agent/penguin/services/environment/sandbox"
)

// addEnvironmentFlags defines the environment service's flags that
// `penguin serve` and `penguin serve environment` share: how commands are
// tracked, confined and limited. Their defaults are the sandbox package's
// (shown in the usage); a flag left alone keeps the field zero.
func addEnvironmentFlags(fs *pflag.FlagSet, env *environment.Config) {
	d := sandbox.DefaultLimits()
	fs.BoolVar(&env.NoCgroups, "no-cgroups", false, "track commands by process group and session only, not by per-command cgroups: faster starts, but double-forked daemons escape kills")
	fs.StringVar(&env.DefaultSandbox, "sandbox-default", "", "sandbox mode of environments that ask for none: workspace-write, read-only or none (default: workspace-write where the host can enforce it, else none)")
	fs.StringVar(&env.DefaultNetwork, "network-default", "", "network access of confined environments that ask for none: none, or proxy (public addresses through the service's egress proxy) (default none)")
	fs.BoolVar(&env.SandboxRequired, "sandbox-required", false, "refuse sandbox mode none, asked for or as the default: every environment is confined, or the service does not start")
	fs.StringVar(&env.SandboxUser, "sandbox-user", "", "UID[:GID] that confined commands run as (default "+sandbox.DefaultIdentity.String()+")")
	fs.Var(&count{&env.Limits.Pids}, "limit-pids", fmt.Sprintf("processes and threads of one environment's commands at once; -1 for no limit (default %d)", d.Pids))
	fs.Var(&byteSize{&env.Limits.Memory}, "limit-memory", fmt.Sprintf("memory of one environment's commands, /tmp included, such as 4G or 512M; -1 for no limit (default %d)", d.Memory))
	fs.Var(&count{&env.Limits.CPUWeight}, "limit-cpu-weight", fmt.Sprintf("CPU weight of one environment under contention, 1 to 10000 (default %d, what any other process gets)", d.CPUWeight))
	fs.Var(&byteSize{&env.Limits.FileSize}, "limit-file-size", fmt.Sprintf("largest file a confined command may write; -1 for no limit (default %d)", d.FileSize))
	fs.Var(&byteSize{&env.Limits.Tmp}, "limit-tmp", fmt.Sprintf("size of each environment's private /tmp (default %d)", d.Tmp))
	r := environment.DefaultCheckpointRetention()
	fs.IntVar(&env.CheckpointRetention.MaxCheckpoints, "checkpoint-keep", 0, fmt.Sprintf("checkpoints kept per workspace for undo, two per turn at most; older ones are collected first (default %d)", r.MaxCheckpoints))
	fs.Var(&byteSize{&env.CheckpointRetention.MaxBytes}, "checkpoint-max-size", fmt.Sprintf("disk the checkpoints of one workspace may take, such as 512M (default %dM)", r.MaxBytes>>20))
	fs.DurationVar(&env.CheckpointRetention.MaxAge, "checkpoint-max-age", 0, fmt.Sprintf("how long a checkpoint is kept, such as 72h (default %v)", r.MaxAge))
	fs.StringArrayVar(&env.WritablePaths, "sandbox-writable", nil, "a further directory confined commands may write (repeatable; it must be writable by the sandbox user)")
}

// count is a flag holding an integer; "unlimited" means -1.
type count struct{ v *int64 }

func (c *count) Type() string { return "int" }

func (c *count) String() string {
	if c.v == nil {
		return ""
	}
	return strconv.FormatInt(*c.v, 10)
}

func (c *count) Set(s string) error {
	if s == "unlimited" {
		*c.v = -1
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%q is not a whole number", s)
	}
	*c.v = n
	return nil
}

// byteSize is a flag holding a size in bytes: a number with an optional
// binary unit (K, M, G, T; "KiB" and "k" spellings too); "unlimited"
// means -1.
type byteSize struct{ v *int64 }

func (b *byteSize) Type() string { return "size" }

func (b *byteSize) String() string {
	if b.v == nil {
		return ""
	}
	return strconv.FormatInt(*b.v, 10)
}

func (b *byteSize) Set(s string) error {
	if s == "unlimited" || s == "-1" {
		*b.v = -1
		return nil
	}
	num := strings.TrimRight(s, "KMGTkmgtiB")
	unit := strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(s[len(num):], "B"), "i"))
	shift, known := map[string]uint{"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[unit]
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || !known || n < 0 || n > (1<<62)>>shift {
		return fmt.Errorf("%q is not a size (such as 512M or 4G)", s)
	}
	*b.v = n << shift
	return nil
}
