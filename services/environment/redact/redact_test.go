package redact

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/penguin-agent/penguin/services/environment/redact/redacttest"
)

func TestStringReplacesEveryValue(t *testing.T) {
	v := New(map[string]string{"TOKEN": "s3cr3t", "LONG": "s3cr3t-and-more", "EMPTY": ""})
	got := v.String("a s3cr3t b s3cr3t-and-more c s3cr3")
	want := "a $TOKEN b $LONG c s3cr3"
	if got != want {
		t.Fatalf("String = %q, want %q", got, want)
	}
	if New(map[string]string{"EMPTY": ""}) != nil {
		t.Fatal("a vault of empty values should be nil")
	}
	var nilVault *Vault
	if nilVault.String("x") != "x" {
		t.Fatal("nil vault must pass text through")
	}
}

// TestStreamSplitsAtEveryBoundary feeds the same text cut at every pair of
// positions and checks that the joined output never contains a value.
func TestStreamSplitsAtEveryBoundary(t *testing.T) {
	v := New(map[string]string{"API_KEY": "abcdef", "PW": "hunter2"})
	text := "xxabcdefyy hunter2 abcdeab abcdef hunte"
	want := v.String(text)
	for i := 0; i <= len(text); i++ {
		for j := i; j <= len(text); j++ {
			s := v.NewStream()
			got := s.Write(text[:i]) + s.Write(text[i:j]) + s.Write(text[j:]) + s.Flush()
			if got != want {
				t.Fatalf("split at %d,%d: got %q, want %q", i, j, got, want)
			}
			if strings.Contains(got, "abcdef") || strings.Contains(got, "hunter2") {
				t.Fatalf("split at %d,%d leaked a value: %q", i, j, got)
			}
		}
	}
}

func TestStreamByteAtATime(t *testing.T) {
	v := New(map[string]string{"K": "ééé-secret"})
	text := "before ééé-secret after ééé"
	s := v.NewStream()
	var b strings.Builder
	for i := 0; i < len(text); i++ {
		b.WriteString(s.Write(text[i : i+1]))
	}
	b.WriteString(s.Flush())
	if got, want := b.String(), "before $K after ééé"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// encodings are the ways a command commonly prints a value, each of
// which the vault must catch.
func encodings(value string) map[string]string {
	out := map[string]string{}
	for k := 0; k < 6; k++ {
		// The value inside a longer text, at every alignment.
		pre, suf := strings.Repeat("x", k)+"token=", "\n"
		raw := []byte(pre + value + suf)
		out["base64 std k="+itoa(k)] = base64.StdEncoding.EncodeToString(raw)
		out["base64 raw std k="+itoa(k)] = base64.RawStdEncoding.EncodeToString(raw)
		out["base64 url k="+itoa(k)] = base64.URLEncoding.EncodeToString(raw)
		out["base64 raw url k="+itoa(k)] = base64.RawURLEncoding.EncodeToString(raw)
		out["base64 wrapped k="+itoa(k)] = wrap(base64.StdEncoding.EncodeToString(raw), 76, "\n")
		out["base64 wrapped tty k="+itoa(k)] = wrap(base64.StdEncoding.EncodeToString(raw), 20, "\r\n")
	}
	rev := []rune(value)
	slices.Reverse(rev)
	out["rev"] = "token=" + string(rev) + "\n"
	h := hex.EncodeToString([]byte(value))
	out["hex"] = h
	out["HEX"] = strings.ToUpper(h)
	out["hex wrapped"] = wrap(h, 60, "\n")
	mixed := []byte(h)
	for i := range mixed {
		if i%3 == 0 {
			mixed[i] = upper(mixed[i])
		}
	}
	out["hex mixed"] = string(mixed)
	out["query"] = url.QueryEscape(value)
	out["path"] = url.PathEscape(value)
	out["query lower"] = regexp.MustCompile(`%[0-9A-F]{2}`).ReplaceAllStringFunc(url.QueryEscape(value), strings.ToLower)
	var every strings.Builder
	for i := 0; i < len(value); i++ {
		fmt.Fprintf(&every, "%%%02X", value[i])
	}
	out["every byte"] = every.String()
	out["every byte lower"] = strings.ToLower(every.String())
	return out
}

func wrap(s string, n int, br string) string {
	var b strings.Builder
	for i := 0; i < len(s); i += n {
		b.WriteString(s[i:min(i+n, len(s))])
		b.WriteString(br)
	}
	return b.String()
}

func itoa(i int) string { return fmt.Sprint(i) }

func TestEncodedFormsAreReplaced(t *testing.T) {
	for _, value := range []string{"ghp_16C7e42F292c6912E7710c838347Ae178B4a", "p@ss w0rd/+=&ünï?x~y"} {
		v := New(map[string]string{"K": value})
		for name, text := range encodings(value) {
			if !redacttest.Leaks(text, value) {
				t.Fatalf("%s: the leak check itself finds nothing in %q", name, text)
			}
			got := v.String(text)
			if redacttest.Leaks(got, value) || !strings.Contains(got, "$K") {
				t.Errorf("%s of %q: %q became %q", name, value, text, got)
			}
			// Split anywhere in a stream, the same.
			for i := 0; i <= len(text); i += 3 {
				s := v.NewStream()
				if split := s.Write(text[:i]) + s.Write(text[i:]) + s.Flush(); split != got {
					t.Fatalf("%s split at %d: %q, want %q", name, i, split, got)
				}
			}
		}
	}
}

func TestUnrelatedTextIsUntouched(t *testing.T) {
	v := New(map[string]string{"K": "ghp_16C7e42F292c6912E7710c838347Ae178B4a", "SHORT": "abc"})
	for _, text := range []string{
		base64.StdEncoding.EncodeToString([]byte(strings.Repeat("some other output 0123456789\n", 40))),
		hex.EncodeToString([]byte("ghp_16C7e42F292c6912E7710c838347Ae178B4b"))[:60],
		"%61%62 ab c",
		"line one\r\nline two\n",
	} {
		if got := v.String(text); got != text {
			t.Errorf("unrelated text changed:\n%q\n%q", text, got)
		}
	}
}

// TestStreamHoldsBackABoundedTail feeds text byte by byte that keeps
// looking like the start of a wrapped encoded value: what the stream holds
// back never exceeds MaxHeld.
func TestStreamHoldsBackABoundedTail(t *testing.T) {
	value := "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
	v := New(map[string]string{"K": value})
	h := hex.EncodeToString([]byte(value))
	text := h[:30] + "\n\n\n\n\n\n\n\n" + strings.Repeat(h[:10]+"\r\n", 50)
	s := v.NewStream()
	var out strings.Builder
	for i := 0; i < len(text); i++ {
		out.WriteString(s.Write(text[i : i+1]))
		if len(s.pending) > v.MaxHeld() {
			t.Fatalf("holding %d bytes, more than %d", len(s.pending), v.MaxHeld())
		}
	}
	out.WriteString(s.Flush())
	if out.String() != text {
		t.Fatalf("text without the value changed")
	}
	if v.MaxHeld() > MaxHold(len(h)*3) {
		t.Fatalf("MaxHeld %d is beyond the longest form's bound", v.MaxHeld())
	}
}

// TestNewWithoutSecretsAllocatesNothing: every environment makes a Vault,
// and most have no secrets; the Vault's tables (14 KiB) are made only for
// one that has.
func TestNewWithoutSecretsAllocatesNothing(t *testing.T) {
	empty := map[string]string{"UNSET": ""}
	if n := testing.AllocsPerRun(100, func() {
		if New(empty) != nil {
			t.Fatal("a vault without values is not nil")
		}
	}); n != 0 {
		t.Errorf("New without secrets allocates %v times", n)
	}
}
