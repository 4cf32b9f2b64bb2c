package schedule

import (
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, text string) *Definition {
	t.Helper()
	d, err := Parse("s", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestNextPeriod(t *testing.T) {
	d := mustParse(t, "prompt: p\nperiod: 12h\nstart_at: 2026-08-01T09:00:00Z\nend_at: 2026-08-02T09:00:00Z\nworkspace: ws\n")
	for _, c := range []struct{ after, want string }{
		{"2026-07-01T00:00:00Z", "2026-08-01T09:00:00Z"}, // before the start: the start
		{"2026-08-01T09:00:00Z", "2026-08-01T21:00:00Z"}, // strictly after
		{"2026-08-01T20:59:59Z", "2026-08-01T21:00:00Z"},
		{"2026-08-01T21:00:00Z", "2026-08-02T09:00:00Z"}, // end_at itself is due
		{"2026-08-02T09:00:00Z", ""},                     // past end_at: none
	} {
		got := d.Next(at(c.after))
		if (c.want == "" && !got.IsZero()) || (c.want != "" && !got.Equal(at(c.want))) {
			t.Errorf("Next(%s) = %v, want %s", c.after, got, c.want)
		}
	}
	if d.MissedPolicy() != MissedRunOnce || d.OverlapPolicy() != OverlapSkip || d.Cadence() != "every 12h" {
		t.Errorf("defaults: %s %s %s", d.MissedPolicy(), d.OverlapPolicy(), d.Cadence())
	}
}

func TestNextCronInZone(t *testing.T) {
	d := mustParse(t, "prompt: p\ncron: \"0 9 * * 1-5\"\ntimezone: Europe/Paris\nworkspace: ws\n")
	// Friday 2026-08-07 at 10:00 in Paris: the next is Monday 09:00
	// Paris time, 07:00 UTC (summer time).
	got := d.Next(at("2026-08-07T08:00:00Z"))
	if !got.Equal(at("2026-08-10T07:00:00Z")) {
		t.Errorf("Next = %v", got)
	}
}

func TestNextOneShot(t *testing.T) {
	d := mustParse(t, "prompt: p\nstart_at: 2026-08-01T09:00:00+02:00\nsession_id: s1\n")
	if got := d.Next(at("2026-08-01T06:00:00Z")); !got.Equal(at("2026-08-01T07:00:00Z")) {
		t.Errorf("Next = %v", got)
	}
	if got := d.Next(at("2026-08-01T07:00:00Z")); !got.IsZero() {
		t.Errorf("a one-shot fired twice: %v", got)
	}
}

func TestParseErrorsNameTheLine(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"prompt: p\nperiod: 1h\nperiod: 2h\n", "schedule/s.yaml:3: period: given twice"},
		{"prompt: p\nenabled: yes please\n", "schedule/s.yaml:2: enabled: \"yes please\" is not true or false"},
		{"prompt: p\nstart_at: tomorrow\n", "schedule/s.yaml:2: start_at: \"tomorrow\" is not a time"},
		{"prompt: p\nperiod: 500ms\nstart_at: 2026-01-01T00:00:00Z\nworkspace: w\n", "schedule/s.yaml:2: period: \"500ms\" is shorter than 1s"},
		{"prompt: p\ncron: \"61 * * * *\"\nworkspace: w\n", "schedule/s.yaml:2: cron:"},
		{"prompt: p\ncron: \"@daily\"\ntimezone: Mars/Base\nworkspace: w\n", "schedule/s.yaml:3: timezone: \"Mars/Base\" is not a time zone"},
		{"prompt: p\nperiod: 1h\ncron: \"@daily\"\nworkspace: w\n", "cron: give period or cron, not both"},
		{"prompt: p\nperiod: 1h\nstart_at: 2026-01-01T00:00:00Z\nsession_id: s\nworkspace: w\n", "session_id: runs in an existing session"},
		{"prompt: p\nperiod: 1h\nstart_at: 2026-01-01T00:00:00Z\nworkspace: w\nmissed: always\noverlap: stack\n", "schedule/s.yaml:5: missed: \"always\""},
		{"- a list\n", "schedule/s.yaml:1: a schedule is a mapping"},
		{"prompt: [p\n", "not YAML"},
	} {
		_, err := Parse("s", []byte(c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.text, err, c.want)
		}
	}
	if _, err := Parse("../x", []byte("prompt: p\n")); err == nil {
		t.Error("a name with a path was taken")
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	d := mustParse(t, "prompt: p\nenabled: true\nperiod: 7d\nstart_at: 2026-08-01T09:00:00Z\nworkspace: ws\nprovider: emu\nmodel_id: m\noverlap: queue\n")
	b, err := Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	back := mustParse(t, string(b))
	if back.Prompt != d.Prompt || !back.StartAt.Equal(d.StartAt) || back.Period != "7d" || back.Overlap != "queue" || back.ModelID != "m" || !back.Enabled {
		t.Errorf("round trip: %s", b)
	}
	if strings.Contains(string(b), "end_at") || strings.Contains(string(b), "cron") {
		t.Errorf("empty fields written: %s", b)
	}
}
