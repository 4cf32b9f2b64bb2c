package audit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/services/engine/audit"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// TestRecorderKeepsTheLogBounded records past the bound and checks that
// the log is cut back to the newest Keep records, and that a record older
// than MaxAge goes at the next pruning.
func TestRecorderKeepsTheLogBounded(t *testing.T) {
	st, err := store.Open(t.Context(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	r := audit.New(st, audit.Options{Keep: 3, MaxAge: time.Hour, Now: func() time.Time { return now }})
	r.Record(t.Context(), store.AuditRecord{Action: "ancient", At: now.Add(-2 * time.Hour)})
	for i := range 600 {
		r.Record(t.Context(), store.AuditRecord{Actor: "alice", Action: fmt.Sprintf("a%d", i)})
	}
	got, err := st.ListAudit(t.Context(), "", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	// The first record is pruned at once (too old); the 501st record
	// (a499) prunes the log to its newest 3; 100 more since.
	if len(got) != 103 || got[0].Action != "a599" || got[len(got)-1].Action != "a497" {
		t.Fatalf("after 601 records the log has %d, newest %q, oldest %q; want 103, a599 ... a497", len(got), got[0].Action, got[len(got)-1].Action)
	}
	r.Prune(t.Context())
	if got, _ := st.ListAudit(t.Context(), "", 0, 1000); len(got) != 3 {
		t.Fatalf("after Prune the log has %d records; want 3", len(got))
	}
}
