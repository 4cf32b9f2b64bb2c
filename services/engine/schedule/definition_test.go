package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)

func TestParseCadences(t *testing.T) {
	for _, c := range []struct {
		file string
		next time.Time
	}{
		{"prompt = \"p\"\nenabled = true\ncron = \"30 9 * * *\"\ntimezone = \"Europe/Paris\"\n", time.Date(2026, 12, 6, 8, 30, 0, 0, time.UTC)},
		{"prompt = \"p\"\ncron = \"@hourly\"\n", time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC)},
		{"prompt = \"p\"\nstart_at = 2026-12-06T04:00:00Z\nperiod = \"90m\"\n", time.Date(2026, 12, 6, 5, 30, 0, 0, time.UTC)},
		{"prompt = \"p\"\nstart_at = 2026-12-07T00:00:00Z\n", time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)},
		{"prompt = \"p\"\nstart_at = 2026-12-01T00:00:00Z\nperiod = \"7d\"\n", time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)},
	} {
		d, err := Parse("s", []byte(c.file), time.Minute, now)
		if err != nil {
			t.Fatalf("%q: %v", c.file, err)
		}
		if got := d.Next(now); !got.Equal(c.next) {
			t.Errorf("%q: next %v, want %v", c.file, got, c.next)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for file, why := range map[string]string{
		"prompt = \"p\"\ncron = \"61 * * * *\"\n":                                                           "cron",
		"prompt = \"p\"\ncron = \"0 0 30 2 *\"\n":                                                           "never fires",
		"prompt = \"p\"\nstart_at = 2026-01-01T00:00:00Z\n":                                                 "never fires",
		"prompt = \"p\"\nstart_at = 2026-12-01T00:00:00Z\nperiod = \"1d\"\nend_at = 2026-12-02T00:00:00Z\n": "never fires",
		"prompt = \"p\"\ncron = \"* * * * *\"\ntimezone = \"Mars/Olympus\"\n":                               "time zone",
		"prompt = \"p\"\nstart_at = 2026-12-07T00:00:00Z\nperiod = \"10s\"\n":                               "shorter",
		"prompt = \"p\"\nstart_at = 2026-12-07T00:00:00Z\nperiod = \"soon\"\n":                              "duration",
		"prompt = \"\"\ncron = \"@daily\"\n":                                                                "empty",
		"prompt = \"p\"\n":                                                                                  "one of them",
		"prompt = \"p\"\ncron = \"@daily\"\nmodel_id = \"m\"\n":                                             "together",
		"prompt = \"p\"\ncron = \"@daily\"\ncadence = \"daily\"\n":                                          "unknown keys",
		"prompt = \"p\"\ncron = \"@daily\"\noverlap = \"merge\"\n":                                          "overlap",
		"prompt = \"p\"\ncron = \"@daily\"\nsession_id = \"s\"\nworkspace = \"w\"\n":                        "session_id",
		"prompt = [\n": "TOML",
		"prompt = \"" + strings.Repeat("x", MaxPromptBytes+1) + "\"\ncron = \"@daily\"\n": "bytes",
	} {
		_, err := Parse("s", []byte(file), time.Minute, now)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), why) {
			t.Errorf("Parse(%.60q) = %v; want an error saying %q", file, err, why)
		}
	}
	if _, err := Parse("../x", []byte("prompt = \"p\"\ncron = \"@daily\"\n"), time.Minute, now); !errors.Is(err, ErrInvalid) {
		t.Errorf("a name with a path: %v", err)
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	d, err := Parse("nightly", []byte("prompt = \"Check the builds\"\nenabled = true\ncron = \"0 3 * * *\"\ntimezone = \"UTC\"\nmissed = \"run_once\"\n"), time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("nightly", d.Encode(), time.Minute, now)
	if err != nil || back.Prompt != d.Prompt || back.Cron != d.Cron || !back.Enabled || back.MissedPolicy() != MissedRunOnce || back.OverlapPolicy() != OverlapSkip {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
}
