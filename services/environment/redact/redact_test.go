package redact

import (
	"strings"
	"testing"
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
