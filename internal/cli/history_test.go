package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHistoryStaysBounded: a history file past twice the bound starts
// afresh with the newest entries, in memory and on disk, and Up still
// recalls them newest first.
func TestHistoryStaysBounded(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "chat_history")
	var b strings.Builder
	for i := range 2*maxHistory + 5 {
		fmt.Fprintf(&b, "%q\n", fmt.Sprintf("message %d", i))
	}
	b.WriteString("not json\n")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := loadHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.entries) != maxHistory || h.entries[0] != fmt.Sprintf("message %d", maxHistory+5) {
		t.Fatalf("%d entries from %q", len(h.entries), h.entries[0])
	}
	if s, ok := h.prev("draft"); !ok || s != fmt.Sprintf("message %d", 2*maxHistory+4) {
		t.Errorf("Up gives %q", s)
	}
	if s, ok := h.next(); !ok || s != "draft" {
		t.Errorf("Down back to the draft gives %q", s)
	}
	again, err := loadHistory(path)
	if err != nil || len(again.entries) != maxHistory {
		t.Fatalf("the rewritten file holds %d entries: %v", len(again.entries), err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the rewritten file: %v, %v", fi, err)
	}
}
