// Package schedule is an agent's schedules: timed tasks that send a preset
// prompt to the agent on a cadence. A schedule is one TOML file,
// schedule/<name>.toml in the agent's state (the file name is its
// identity), as the reference keeps them, so the model manages them with
// its agent-file tools and people through the API.
//
// This file is the definition: its fields, the strict reading of a file,
// and the cadence. A cadence is a cron expression in a time zone (parsed
// by robfig/cron, a well-kept parser, rather than by hand) or an interval
// from a start time (the reference's start_at and period); one that would
// never fire is refused, with the reason.
package schedule

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/robfig/cron/v3"
)

// Dir is the directory of an agent's schedules, relative to its state.
const Dir = "schedule"

// Bounds of a definition.
const (
	// MaxPromptBytes is the largest prompt a schedule may send.
	MaxPromptBytes = 32 << 10
	// MaxFileBytes is the largest definition file.
	MaxFileBytes = 40 << 10
)

// The policies of a schedule. Missed: what a run that fell due while no
// engine replica was up does when one is back. Overlap: what a run that
// falls due while the schedule's previous run still goes on does.
const (
	MissedSkip    = "skip"
	MissedRunOnce = "run_once"
	OverlapSkip   = "skip"
	OverlapQueue  = "queue"
)

// ErrInvalid marks a definition that cannot be used; its message says why.
var ErrInvalid = errors.New("schedule")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// namePattern is what a schedule may be called: a plain file name.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// Definition is one schedule.
type Definition struct {
	// Name is the file's name without .toml.
	Name string `toml:"-" json:"name"`
	// Prompt is what each run sends.
	Prompt string `toml:"prompt" json:"prompt"`
	// Enabled switches the schedule on; a new one is off unless it says so.
	Enabled bool `toml:"enabled" json:"enabled"`
	// Cron is a five-field cron expression (or @hourly, @daily, …),
	// evaluated in TimeZone (an IANA name; UTC when empty).
	Cron     string `toml:"cron,omitempty" json:"cron,omitempty"`
	TimeZone string `toml:"timezone,omitempty" json:"timezone,omitempty"`
	// StartAt and Period are the reference's cadence: the first run, and
	// the interval after it ("30m", "12h", "7d"); no period is one run.
	StartAt *time.Time `toml:"start_at,omitempty" json:"start_at,omitempty"`
	Period  string     `toml:"period,omitempty" json:"period,omitempty"`
	// EndAt, when set, is when the schedule stops firing.
	EndAt *time.Time `toml:"end_at,omitempty" json:"end_at,omitempty"`
	// SessionID sends every run to this existing session; empty starts a
	// new session for each run, in Workspace with the model pair (both or
	// neither; neither is the agent's default model).
	SessionID string `toml:"session_id,omitempty" json:"session_id,omitempty"`
	Workspace string `toml:"workspace,omitempty" json:"workspace,omitempty"`
	Provider  string `toml:"provider,omitempty" json:"provider,omitempty"`
	ModelID   string `toml:"model_id,omitempty" json:"model_id,omitempty"`
	// Missed and Overlap are the policies (skip by default).
	Missed  string `toml:"missed,omitempty" json:"missed,omitempty"`
	Overlap string `toml:"overlap,omitempty" json:"overlap,omitempty"`
}

// cronParser reads standard five-field expressions and descriptors.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse reads a definition file strictly: unknown keys are refused (a
// misspelt key must not be ignored), and the result is checked.
func Parse(name string, data []byte, minPeriod time.Duration, now time.Time) (*Definition, error) {
	if len(data) > MaxFileBytes {
		return nil, invalid("%s.toml is %d bytes, more than a schedule file may be (%d)", name, len(data), MaxFileBytes)
	}
	var d Definition
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&d)
	if err != nil {
		return nil, invalid("%s.toml is not valid TOML: %v", name, err)
	}
	if un := md.Undecoded(); len(un) > 0 {
		keys := make([]string, len(un))
		for i, k := range un {
			keys[i] = k.String()
		}
		return nil, invalid("%s.toml has unknown keys: %s", name, strings.Join(keys, ", "))
	}
	d.Name = name
	if err := d.Check(minPeriod, now); err != nil {
		return nil, err
	}
	return &d, nil
}

// Encode writes the definition as its file.
func (d *Definition) Encode() []byte {
	var b bytes.Buffer
	if err := toml.NewEncoder(&b).Encode(d); err != nil {
		// Strings, booleans and times always encode.
		panic(err)
	}
	return b.Bytes()
}

// Check refuses a definition that cannot run: a bad name, an empty or
// oversized prompt, no cadence or two, a cadence that does not parse or
// never fires after now, a period under minPeriod, a lone half of the
// model pair, a session together with new-session fields, an unknown
// policy.
func (d *Definition) Check(minPeriod time.Duration, now time.Time) error {
	switch {
	case !namePattern.MatchString(d.Name):
		return invalid("%q is not a schedule name: letters, digits, '.', '_' and '-', at most 64", d.Name)
	case strings.TrimSpace(d.Prompt) == "":
		return invalid("%s: the prompt is empty", d.Name)
	case len(d.Prompt) > MaxPromptBytes:
		return invalid("%s: the prompt is %d bytes, more than the %d a schedule may send", d.Name, len(d.Prompt), MaxPromptBytes)
	case (d.Cron == "") == (d.StartAt == nil):
		return invalid("%s: give the cadence as cron (with timezone) or as start_at (with period), one of them", d.Name)
	case d.Cron != "" && d.Period != "":
		return invalid("%s: period goes with start_at, not with cron", d.Name)
	case d.TimeZone != "" && d.Cron == "":
		return invalid("%s: timezone goes with cron", d.Name)
	case (d.Provider == "") != (d.ModelID == ""):
		return invalid("%s: give provider and model_id together, or neither for the agent's default model", d.Name)
	case d.SessionID != "" && (d.Workspace != "" || d.Provider != ""):
		return invalid("%s: session_id sends to an existing session, which keeps its workspace and model; drop workspace, provider and model_id", d.Name)
	case d.Missed != "" && d.Missed != MissedSkip && d.Missed != MissedRunOnce:
		return invalid("%s: missed is %q; want skip or run_once", d.Name, d.Missed)
	case d.Overlap != "" && d.Overlap != OverlapSkip && d.Overlap != OverlapQueue:
		return invalid("%s: overlap is %q; want skip or queue", d.Name, d.Overlap)
	case d.EndAt != nil && d.StartAt != nil && !d.EndAt.After(*d.StartAt):
		return invalid("%s: end_at must be later than start_at", d.Name)
	}
	c, err := d.cadence()
	if err != nil {
		return err
	}
	if p, ok := c.(interval); ok && p.period > 0 && p.period < minPeriod {
		return invalid("%s: period %s is shorter than the least allowed, %s", d.Name, p.period, minPeriod)
	}
	if d.Next(now).IsZero() {
		return invalid("%s: the cadence never fires after %s", d.Name, now.UTC().Format(time.RFC3339))
	}
	return nil
}

// MissedPolicy and OverlapPolicy are the policies with their defaults.
func (d *Definition) MissedPolicy() string {
	if d.Missed == "" {
		return MissedSkip
	}
	return d.Missed
}

func (d *Definition) OverlapPolicy() string {
	if d.Overlap == "" {
		return OverlapSkip
	}
	return d.Overlap
}

// cadence is when a schedule fires.
type cadence interface {
	// next is the first firing strictly after t, or zero for none.
	next(t time.Time) time.Time
}

type cronCadence struct{ s cron.Schedule }

func (c cronCadence) next(t time.Time) time.Time { return c.s.Next(t) }

type interval struct {
	start  time.Time
	period time.Duration
}

func (p interval) next(t time.Time) time.Time {
	if t.Before(p.start) {
		return p.start
	}
	if p.period <= 0 {
		return time.Time{}
	}
	n := t.Sub(p.start)/p.period + 1
	return p.start.Add(n * p.period)
}

func (d *Definition) cadence() (cadence, error) {
	if d.Cron != "" {
		loc := time.UTC
		if d.TimeZone != "" {
			l, err := time.LoadLocation(d.TimeZone)
			if err != nil {
				return nil, invalid("%s: timezone %q is not an IANA time zone: %v", d.Name, d.TimeZone, err)
			}
			loc = l
		}
		if strings.HasPrefix(strings.TrimSpace(d.Cron), "TZ=") || strings.HasPrefix(strings.TrimSpace(d.Cron), "CRON_TZ=") {
			return nil, invalid("%s: write the time zone as timezone, not in the cron expression", d.Name)
		}
		s, err := cronParser.Parse("CRON_TZ=" + loc.String() + " " + d.Cron)
		if err != nil {
			return nil, invalid("%s: cron %q: %v", d.Name, d.Cron, err)
		}
		return cronCadence{s}, nil
	}
	p, err := ParsePeriod(d.Period)
	if err != nil {
		return nil, invalid("%s: %v", d.Name, err)
	}
	return interval{start: *d.StartAt, period: p}, nil
}

// Next is the schedule's first firing strictly after t, or zero when it
// never fires again (a one-shot run past, end_at reached, a cron
// expression that matches no date).
func (d *Definition) Next(t time.Time) time.Time {
	c, err := d.cadence()
	if err != nil {
		return time.Time{}
	}
	n := c.next(t)
	if n.IsZero() || (d.EndAt != nil && n.After(*d.EndAt)) {
		return time.Time{}
	}
	return n
}

// ParsePeriod reads a period: a Go duration ("90s", "30m", "12h") or a
// number of days ("7d"); empty is no period (a one-shot schedule).
func ParsePeriod(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("period %q is not a number of days such as 7d", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	p, err := time.ParseDuration(s)
	if err != nil || p <= 0 {
		return 0, fmt.Errorf("period %q is not a duration such as 30m, 12h or 7d", s)
	}
	return p, nil
}
