// Package schedule runs an agent's schedules: timed tasks that send a
// preset prompt to the agent on a cadence, in a new session or in one that
// exists, exactly once per due time whichever engine replicas are up.
//
// A schedule is one file of the agent, schedule/<name>.yaml, kept in the
// store with the agent's other files, so the model manages its schedules
// with its agent-file tools and people through ScheduleService, the web
// app and `penguin schedules`; every path validates a definition with
// [Parse], whose errors name the line. The store's schedules table holds
// what a replica needs to fire them: the definition as last read and the
// next due time (see package store, ScheduleStore).
//
// Cadences are a period ("30m", "12h", "7d") counted from start_at, a
// cron expression in a time zone, or one shot at start_at. Cron
// expressions are parsed by github.com/robfig/cron/v3, the most used Go
// cron parser, which takes the standard five fields, the descriptors
// (@daily, @every) and an optional seconds field; periods and one-shots
// are plain arithmetic on start_at and need no library.
package schedule

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/robfig/cron/v3"
	"gopkg.in/yaml.v3"
)

// Dir is the directory of an agent that holds its schedules, one file
// each, named <name>.yaml.
const Dir = "schedule"

// Ext is the extension of a schedule's file.
const Ext = ".yaml"

// Bounds of a definition.
const (
	// MaxPromptBytes is the longest prompt a schedule may send.
	MaxPromptBytes = 32 << 10
	// MaxFileBytes is the largest definition file.
	MaxFileBytes = 64 << 10
	// MinPeriod is the shortest period. PenguinHarness asks for five
	// minutes; Penguin takes seconds, since a firing costs one row
	// update and the tests run real cadences.
	MinPeriod = time.Second
	// horizon is how far ahead a cron expression is looked at for its
	// next time; one that has none within it never fires and is refused.
	horizon = 5 * 366 * 24 * time.Hour
)

// Policies for a due time that every replica missed, and for a due time
// that comes while the schedule's previous run still runs.
const (
	// MissedRunOnce runs a schedule once when the replicas come back
	// after missing one or more of its due times (the default).
	MissedRunOnce = "run_once"
	// MissedSkip skips due times that were missed, recording them as
	// skipped, and waits for the next one.
	MissedSkip = "skip"
	// OverlapSkip records a due time that comes while the previous run
	// still runs as skipped (the default).
	OverlapSkip = "skip"
	// OverlapQueue starts it once the previous run has ended.
	OverlapQueue = "queue"
)

// Definition is one schedule as its file states it.
type Definition struct {
	// Name is the file's name without its extension: the schedule's
	// identity within its agent.
	Name string `yaml:"-"`
	// Prompt is what each run sends.
	Prompt  string `yaml:"prompt"`
	Enabled bool   `yaml:"enabled"`
	// StartAt is the first due time of a period or a one-shot, and the
	// time before which a cron expression does not fire.
	StartAt time.Time `yaml:"start_at,omitempty"`
	// Period is the time between due times, counted from StartAt.
	Period string `yaml:"period,omitempty"`
	// Cron is a cron expression, read in TimeZone (UTC when empty).
	Cron     string `yaml:"cron,omitempty"`
	TimeZone string `yaml:"timezone,omitempty"`
	// EndAt, when set, is the time after which the schedule stops.
	EndAt time.Time `yaml:"end_at,omitempty"`
	// SessionID names an existing session of the project each run sends
	// the prompt to; empty starts a new session per run, in Workspace
	// with the model Provider/ModelID (the agent's default when both are
	// empty).
	SessionID string `yaml:"session_id,omitempty"`
	Workspace string `yaml:"workspace,omitempty"`
	Provider  string `yaml:"provider,omitempty"`
	ModelID   string `yaml:"model_id,omitempty"`
	// Missed and Overlap are the policies above; empty means the
	// defaults.
	Missed  string `yaml:"missed,omitempty"`
	Overlap string `yaml:"overlap,omitempty"`

	period time.Duration
	cron   cron.Schedule
}

// Error is a problem of a definition file: the line (when known), the
// field and what is wrong, for a person or the model to go straight to.
type Error struct {
	Name  string
	Line  int
	Field string
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(Dir + "/" + e.Name + Ext)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// nameRule is what a schedule may be called: its file name, plain enough
// for any filesystem and a URL path.
var nameRule = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`) })

// CheckName refuses a name that cannot name a schedule.
func CheckName(name string) error {
	if !nameRule().MatchString(name) {
		return fmt.Errorf("schedule name %q: use 1 to 64 letters, digits, '-' or '_', starting with a letter or digit", name)
	}
	return nil
}

// FileName returns the path of a schedule's file within its agent.
func FileName(name string) string { return Dir + "/" + name + Ext }

// NameOf returns the schedule a path within an agent names, and whether
// it names one: schedule/<name>.yaml.
func NameOf(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, Dir+"/")
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, Ext)
	if !ok || CheckName(name) != nil {
		return "", false
	}
	return name, true
}

// cronParser takes the standard five fields, an optional leading seconds
// field and the descriptors.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse reads and checks the definition file of schedule name. Every
// problem is an [*Error] naming the line; several are joined.
func Parse(name string, data []byte) (*Definition, error) {
	if err := CheckName(name); err != nil {
		return nil, &Error{Name: name, Msg: err.Error()}
	}
	fail := func(line int, field, format string, args ...any) error {
		return &Error{Name: name, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if len(data) > MaxFileBytes {
		return nil, fail(0, "", "the file is %d bytes; at most %d", len(data), MaxFileBytes)
	}
	if !utf8.Valid(data) {
		return nil, fail(0, "", "the file is not UTF-8 text")
	}
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		return nil, fail(0, "", "not YAML: %v", err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		line := 0
		if len(doc.Content) == 1 {
			line = doc.Content[0].Line
		}
		return nil, fail(line, "", "a schedule is a mapping of fields (prompt, enabled, start_at, period or cron, ...)")
	}
	d := &Definition{Name: name}
	lines := map[string]int{}
	var errs []error
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if _, dup := lines[k.Value]; dup {
			errs = append(errs, fail(k.Line, k.Value, "given twice"))
			continue
		}
		lines[k.Value] = k.Line
		if err := d.set(k.Value, v); err != nil {
			errs = append(errs, fail(v.Line, k.Value, "%s", err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	line := func(f string) int {
		if l, ok := lines[f]; ok {
			return l
		}
		return m.Line
	}
	for _, p := range d.check() {
		errs = append(errs, fail(line(p.field), p.field, "%s", p.msg))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return d, nil
}

// set reads one field from its YAML value.
func (d *Definition) set(key string, v *yaml.Node) error {
	str := func(dst *string) error {
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			return errors.New("must be a string")
		}
		*dst = v.Value
		return nil
	}
	when := func(dst *time.Time) error {
		if v.Kind != yaml.ScalarNode {
			return errors.New("must be a time such as 2026-08-01T09:00:00Z")
		}
		t, err := time.Parse(time.RFC3339, v.Value)
		if err != nil {
			return fmt.Errorf("%q is not a time such as 2026-08-01T09:00:00Z (RFC 3339, with its offset)", v.Value)
		}
		*dst = t.UTC()
		return nil
	}
	switch key {
	case "prompt":
		return str(&d.Prompt)
	case "enabled":
		b, err := strconv.ParseBool(v.Value)
		if v.Kind != yaml.ScalarNode || err != nil {
			return fmt.Errorf("%q is not true or false", v.Value)
		}
		d.Enabled = b
		return nil
	case "start_at":
		return when(&d.StartAt)
	case "end_at":
		return when(&d.EndAt)
	case "period":
		return str(&d.Period)
	case "cron":
		return str(&d.Cron)
	case "timezone":
		return str(&d.TimeZone)
	case "session_id":
		return str(&d.SessionID)
	case "workspace":
		return str(&d.Workspace)
	case "provider":
		return str(&d.Provider)
	case "model_id":
		return str(&d.ModelID)
	case "missed":
		return str(&d.Missed)
	case "overlap":
		return str(&d.Overlap)
	}
	return errors.New("unknown field; the fields are prompt, enabled, start_at, period, cron, timezone, end_at, session_id, workspace, provider, model_id, missed and overlap")
}

type problem struct{ field, msg string }

// check validates the fields together and readies the cadence.
func (d *Definition) check() []problem {
	var ps []problem
	add := func(field, format string, args ...any) { ps = append(ps, problem{field, fmt.Sprintf(format, args...)}) }
	switch {
	case strings.TrimSpace(d.Prompt) == "":
		add("prompt", "is required: the text each run sends")
	case len(d.Prompt) > MaxPromptBytes:
		add("prompt", "is %d bytes; at most %d", len(d.Prompt), MaxPromptBytes)
	}
	switch {
	case d.Period != "" && d.Cron != "":
		add("cron", "give period or cron, not both")
	case d.Period != "":
		p, err := ParsePeriod(d.Period)
		if err != nil {
			add("period", "%v", err)
		}
		d.period = p
		if d.StartAt.IsZero() {
			add("start_at", "is required with a period: the first due time, such as 2026-08-01T09:00:00Z")
		}
	case d.Cron != "":
		if strings.HasPrefix(strings.TrimSpace(d.Cron), "TZ=") || strings.HasPrefix(strings.TrimSpace(d.Cron), "CRON_TZ=") {
			add("cron", "give the time zone in the field timezone, not in the expression")
			break
		}
		loc := time.UTC
		if d.TimeZone != "" {
			l, err := time.LoadLocation(d.TimeZone)
			if err != nil {
				add("timezone", "%q is not a time zone such as Europe/Paris or UTC", d.TimeZone)
				break
			}
			loc = l
		}
		s, err := cronParser.Parse(d.Cron)
		if err != nil {
			add("cron", "%q: %v", d.Cron, err)
			break
		}
		d.cron = inZone{s, loc}
		from := time.Now()
		if d.StartAt.After(from) {
			from = d.StartAt
		}
		if next := d.cron.Next(from); next.IsZero() || next.Sub(from) > horizon {
			add("cron", "%q never fires", d.Cron)
		}
	default:
		if d.StartAt.IsZero() {
			add("start_at", "is required: the time of a one-shot, or give period or cron for a cadence")
		}
	}
	if d.TimeZone != "" && d.Cron == "" {
		add("timezone", "applies to cron only; start_at and end_at carry their offset")
	}
	if !d.EndAt.IsZero() && !d.StartAt.IsZero() && !d.EndAt.After(d.StartAt) {
		add("end_at", "must be later than start_at, or the schedule never fires")
	}
	if d.SessionID != "" && (d.Workspace != "" || d.Provider != "" || d.ModelID != "") {
		add("session_id", "runs in an existing session, which has its workspace and model: leave out workspace, provider and model_id")
	}
	if (d.Provider == "") != (d.ModelID == "") {
		add("model_id", "give provider and model_id together, or neither for the agent's default model")
	}
	if d.SessionID == "" && strings.TrimSpace(d.Workspace) == "" {
		add("workspace", "is required for a run in a new session (or give session_id to run in an existing one)")
	}
	switch d.Missed {
	case "", MissedRunOnce, MissedSkip:
	default:
		add("missed", "%q: use run_once or skip", d.Missed)
	}
	switch d.Overlap {
	case "", OverlapSkip, OverlapQueue:
	default:
		add("overlap", "%q: use skip or queue", d.Overlap)
	}
	return ps
}

// inZone reads a cron schedule in a time zone and answers in UTC.
type inZone struct {
	s   cron.Schedule
	loc *time.Location
}

func (z inZone) Next(t time.Time) time.Time {
	n := z.s.Next(t.In(z.loc))
	if n.IsZero() {
		return n
	}
	return n.UTC()
}

// ParsePeriod reads a period: a Go duration ("90s", "30m", "12h") or a
// number of days ("7d"), at least MinPeriod.
func ParsePeriod(s string) (time.Duration, error) {
	var p time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%q is not a period such as 30m, 12h or 7d", s)
		}
		p = time.Duration(n) * 24 * time.Hour
	} else {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("%q is not a period such as 30m, 12h or 7d", s)
		}
		p = d
	}
	if p < MinPeriod {
		return 0, fmt.Errorf("%q is shorter than %v", s, MinPeriod)
	}
	return p, nil
}

// MissedPolicy and OverlapPolicy return the policies with their defaults.
func (d *Definition) MissedPolicy() string {
	if d.Missed == "" {
		return MissedRunOnce
	}
	return d.Missed
}

// OverlapPolicy returns the overlap policy, OverlapSkip by default.
func (d *Definition) OverlapPolicy() string {
	if d.Overlap == "" {
		return OverlapSkip
	}
	return d.Overlap
}

// Cadence describes the cadence in words, for listings.
func (d *Definition) Cadence() string {
	switch {
	case d.Period != "":
		return "every " + d.Period
	case d.Cron != "":
		if d.TimeZone != "" {
			return "cron " + d.Cron + " (" + d.TimeZone + ")"
		}
		return "cron " + d.Cron
	}
	return "once"
}

// Next returns the first due time strictly after t, or the zero time when
// the schedule has none left (a one-shot that passed, or past end_at).
func (d *Definition) Next(t time.Time) time.Time {
	var n time.Time
	switch {
	case d.period > 0:
		if t.Before(d.StartAt) {
			n = d.StartAt
		} else {
			k := t.Sub(d.StartAt)/d.period + 1
			n = d.StartAt.Add(k * d.period)
		}
	case d.cron != nil:
		from := t
		if !d.StartAt.IsZero() && from.Before(d.StartAt) {
			from = d.StartAt.Add(-time.Nanosecond)
		}
		n = d.cron.Next(from)
	default:
		if t.Before(d.StartAt) {
			n = d.StartAt
		}
	}
	if n.IsZero() || (!d.EndAt.IsZero() && n.After(d.EndAt)) {
		return time.Time{}
	}
	return n.UTC()
}

// Marshal writes a definition as its file.
func Marshal(d *Definition) ([]byte, error) {
	return yaml.Marshal(d)
}
