package textdiff

import (
	"math/rand"
	"strings"
	"testing"
)

// apply rebuilds the new text from an edit script, and the old one.
func apply(ops []Op) (a, b []string) {
	for _, op := range ops {
		if op.Kind != '+' {
			a = append(a, op.Line)
		}
		if op.Kind != '-' {
			b = append(b, op.Line)
		}
	}
	return a, b
}

func TestDiffRoundTrips(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	words := []string{"a", "b", "c", "d"}
	for i := 0; i < 500; i++ {
		gen := func() []string {
			n := r.Intn(12)
			out := make([]string, n)
			for j := range out {
				out[j] = words[r.Intn(len(words))]
			}
			return out
		}
		a, b := gen(), gen()
		ops, ok := Diff(a, b, 0)
		if !ok {
			t.Fatal("unbounded diff gave up")
		}
		ga, gb := apply(ops)
		if strings.Join(ga, ",") != strings.Join(a, ",") || strings.Join(gb, ",") != strings.Join(b, ",") {
			t.Fatalf("diff of %v and %v does not round trip: %v", a, b, ops)
		}
	}
}

func TestUnifiedRendering(t *testing.T) {
	a := Lines("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n17\n18\n19\n20\n")
	b := Lines("1\n2\nTHREE\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n17\nEIGHTEEN\n19\n20\n")
	ops, _ := Diff(a, b, 0)
	hunks := Hunks(ops, 3)
	if len(hunks) != 2 {
		t.Fatalf("want two hunks, got %d", len(hunks))
	}
	got := Render("f.txt", hunks)
	want := "--- a/f.txt\n+++ b/f.txt\n@@ -1,6 +1,6 @@\n 1\n 2\n-3\n+THREE\n 4\n 5\n 6\n@@ -15,6 +15,6 @@\n 15\n 16\n 17\n-18\n+EIGHTEEN\n 19\n 20\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if _, ok := Diff(Lines("a\nb\nc\n"), Lines("x\ny\nz\n"), 2); ok {
		t.Fatal("a diff beyond maxEdits must give up")
	}
}

func TestLineEndings(t *testing.T) {
	for _, c := range []struct {
		text string
		crlf bool
	}{
		{"a\r\nb\r\n", true},
		{"a\r\nb", true},
		{"a\nb\n", false},
		{"a\r\nb\n", false}, // mixed
		{"no newline", false},
		{"", false},
	} {
		if got := CRLF(c.text); got != c.crlf {
			t.Errorf("CRLF(%q) = %v, want %v", c.text, got, c.crlf)
		}
	}
	for in, want := range map[string]string{
		"a\nb\n":   "a\r\nb\r\n",
		"a\r\nb\n": "a\r\nb\r\n",
		"\n":       "\r\n",
		"x":        "x",
	} {
		if got := ToCRLF(in); got != want {
			t.Errorf("ToCRLF(%q) = %q, want %q", in, got, want)
		}
	}
	if got := ToLF("a\r\nb\r\nc\r"); got != "a\nb\nc\r" {
		t.Errorf("ToLF = %q", got)
	}
}
