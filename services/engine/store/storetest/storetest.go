// Package storetest is the conformance suite every store.Store
// implementation passes. It pins down the behaviour the engine relies on:
// metadata round trips, stable newest-first paging, exact event bytes,
// atomic and race-free appends, leases measured on the database's clock,
// cascading deletes, large payloads, torn records and the error vocabulary.
//
// An implementation's test calls Run with a function that opens a fresh,
// empty store for one subtest, and a corrupter that can damage a stored
// record behind the store's back.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
	"github.com/penguin-agent/penguin/services/engine/store"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// testTimeout bounds every subtest.
const testTimeout = 60 * time.Second

// Corrupter overwrites the stored payload of one event with payload,
// directly in the database, bypassing the store's validation. It simulates
// a record damaged on disk.
type Corrupter func(t *testing.T, s store.Store, sessionID string, seq int64, payload []byte)

// Option configures Run.
type Option func(*suite)

// WithCorrupter supplies the corrupter that the torn-record tests need.
// Without it those tests fail, because an implementation that cannot be
// checked for torn-record handling has not passed the suite.
func WithCorrupter(c Corrupter) Option { return func(s *suite) { s.corrupt = c } }

// WithUnreachable supplies a function that opens the implementation's
// store where its database cannot be reached (a closed port, a path that
// cannot be created). The suite checks that it fails with ErrUnavailable
// promptly and within the context it is given. Without it that test fails.
func WithUnreachable(open func(ctx context.Context) (store.Store, error)) Option {
	return func(s *suite) { s.unreachable = open }
}

type suite struct {
	open        func(t *testing.T) store.Store
	corrupt     Corrupter
	unreachable func(ctx context.Context) (store.Store, error)
	shared      SharedPayloads
}

// Run runs the conformance suite. open must return a new, empty store each
// time it is called and arrange (with t.Cleanup) for it to be closed and
// removed. Subtests run in parallel. WithCorrupter, WithUnreachable and
// WithSharedPayloads are required for a complete run; the subtests that
// need them fail without them.
func Run(t *testing.T, open func(t *testing.T) store.Store, opts ...Option) {
	s := &suite{open: open}
	for _, o := range opts {
		o(s)
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, ctx context.Context, st store.Store)
	}{
		{"CreateAndGet", s.testCreateAndGet},
		{"CreateFillsCreatedAt", s.testCreateFillsCreatedAt},
		{"CreateRejects", s.testCreateRejects},
		{"CreateWithFirstEvents", s.testCreateWithFirstEvents},
		{"GetUnknown", s.testGetUnknown},
		{"Update", s.testUpdate},
		{"Modify", s.testModify},
		{"ConcurrentModifiesLoseNothing", s.testConcurrentModifies},
		{"WriteSessionIsOneCommit", s.testWriteSession},
		{"PatchSession", s.testPatchSession},
		{"PatchSessionRefusals", s.testPatchRefusals},
		{"ConcurrentPatchesLoseNothing", s.testConcurrentPatches},
		{"Delete", s.testDelete},
		{"ListPaging", s.testListPaging},
		{"ListBadToken", s.testListBadToken},
		{"AppendAndRead", s.testAppendAndRead},
		{"AppendRejects", s.testAppendRejects},
		{"AppendAtomic", s.testAppendAtomic},
		{"ConcurrentAppendsOneWinnerPerSequence", s.testConcurrentAppends},
		{"ConcurrentSessionsAndReaders", s.testConcurrentSessionsAndReaders},
		{"Leases", s.testLeases},
		{"LeaseExpiry", s.testLeaseExpiry},
		{"LeaseContention", s.testLeaseContention},
		{"PeekLease", s.testPeekLease},
		{"WriteClaimsLease", s.testWriteClaimsLease},
		{"ClaimContention", s.testClaimContention},
		{"LargePayload", s.testLargePayload},
		{"TornLastRecord", s.testTornLastRecord},
		{"CorruptMiddleRecord", s.testCorruptMiddleRecord},
		{"SharedPayloads", s.testSharedPayloads},
		{"SharedPayloadMissing", s.testSharedPayloadMissing},
		{"CanceledContext", s.testCanceledContext},
		{"Closed", s.testClosed},
		{"SeededAdminAndDefaultProject", s.testSeeded},
		{"Users", s.testUsers},
		{"ProjectsAndMembers", s.testProjectsAndMembers},
		{"SessionAccess", s.testSessionAccess},
		{"ReadForNewSession", s.testReadForNewSession},
		{"ListSessionsByProject", s.testListByProject},
		{"AccessTokens", s.testAccessTokens},
		{"LoginSessions", s.testLoginSessions},
		{"DeleteUserCascades", s.testDeleteUserCascades},
		{"Audit", s.testAudit},
		{"SignInStates", s.testSignInStates},
		{"Agents", testAgents},
		{"AgentConcurrentChanges", testAgentConcurrentChanges},
	}
	t.Run("Unreachable", func(t *testing.T) {
		t.Parallel()
		s.testUnreachable(t)
	})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			tc.fn(t, ctx, s.open(t))
		})
	}
}

// fullSession returns a session with every field set.
func fullSession(id string) *store.Session {
	return &store.Session{
		ID: id, Provider: "deepseek", ModelID: "deepseek-v4-pro", Workspace: "/home/u/work",
		AgentState:   "/home/u/.penguin/data/p/agents/a/agent_state",
		ApprovalMode: penguinv1.ApprovalMode_APPROVAL_MODE_READ_ONLY, ThinkingLevel: penguinv1.ThinkingLevel_THINKING_LEVEL_HIGH,
		Title: "Create hello.txt", ParentID: "session-parent", Source: "subagent",
		EnvironmentID: "env-42", EnvironmentAddr: "10.1.2.3:7070", ProjectID: "project-x",
		Config:    []byte(`{"max_turns": 30, "sandbox":"workspace_write"}`),
		Usage:     &penguinv1.TokenCounts{CacheRead: 1, CacheWrite: 2, Output: 3, Total: 4, Reasoning: 2, CostUsd: proto.Float64(0.00125), Unreported: true},
		CreatedAt: time.Date(2026, 7, 18, 3, 10, 22, 531_123_000, time.UTC),
	}
}

// diffSession describes how got differs from want, or returns "".
func diffSession(want, got *store.Session) string {
	var d []string
	cmp := func(name string, w, g any) {
		if w != g {
			d = append(d, fmt.Sprintf("%s: want %v, got %v", name, w, g))
		}
	}
	cmp("ID", want.ID, got.ID)
	cmp("Provider", want.Provider, got.Provider)
	cmp("ModelID", want.ModelID, got.ModelID)
	cmp("Workspace", want.Workspace, got.Workspace)
	cmp("AgentState", want.AgentState, got.AgentState)
	cmp("ApprovalMode", want.ApprovalMode, got.ApprovalMode)
	cmp("ThinkingLevel", want.ThinkingLevel, got.ThinkingLevel)
	cmp("Title", want.Title, got.Title)
	cmp("ParentID", want.ParentID, got.ParentID)
	cmp("Source", want.Source, got.Source)
	cmp("EnvironmentID", want.EnvironmentID, got.EnvironmentID)
	cmp("EnvironmentAddr", want.EnvironmentAddr, got.EnvironmentAddr)
	cmp("LastSequence", want.LastSequence, got.LastSequence)
	cmp("ProjectID", want.ProjectID, got.ProjectID)
	if !bytes.Equal(want.Config, got.Config) {
		d = append(d, fmt.Sprintf("Config: want %q, got %q", want.Config, got.Config))
	}
	wu := want.Usage
	if wu == nil {
		wu = &penguinv1.TokenCounts{}
	}
	if got.Usage == nil || !proto.Equal(wu, got.Usage) {
		d = append(d, fmt.Sprintf("Usage: want %v, got %v", wu, got.Usage))
	}
	if !want.CreatedAt.Equal(got.CreatedAt) {
		d = append(d, fmt.Sprintf("CreatedAt: want %v, got %v", want.CreatedAt, got.CreatedAt))
	}
	if !want.UpdatedAt.Equal(got.UpdatedAt) {
		d = append(d, fmt.Sprintf("UpdatedAt: want %v, got %v", want.UpdatedAt, got.UpdatedAt))
	}
	return strings.Join(d, "; ")
}

// mustCreate creates a session or fails the test.
func mustCreate(t *testing.T, ctx context.Context, st store.Store, s *store.Session) *store.Session {
	t.Helper()
	if err := st.CreateSession(ctx, s); err != nil {
		t.Fatalf("CreateSession(%s): %v", s.ID, err)
	}
	return s
}

// text returns a user text message.
func text(s string) *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Timestamp: timestamppb.Now(), Payload: &penguinv1.OmniMessage_Text{
		Text: &penguinv1.Text{Role: penguinv1.Role_ROLE_USER, Text: s}}}
}

// eventsOf numbers msgs from first on.
func eventsOf(first int64, msgs ...*penguinv1.OmniMessage) []store.Event {
	out := make([]store.Event, len(msgs))
	for i, m := range msgs {
		out[i] = store.Event{Sequence: first + int64(i), Message: m}
	}
	return out
}

// checkEvents fails unless got equals want exactly (sequences and
// messages, byte for byte).
func checkEvents(t *testing.T, want, got []store.Event) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("got %d events %v, want %d %v", len(got), seqsOf(got), len(want), seqsOf(want))
	}
	for i := range want {
		if want[i].Sequence != got[i].Sequence {
			t.Fatalf("event %d: sequence %d, want %d", i, got[i].Sequence, want[i].Sequence)
		}
		if !proto.Equal(want[i].Message, got[i].Message) {
			t.Fatalf("event %d (sequence %d): message differs\n got: %v\nwant: %v", i, got[i].Sequence, got[i].Message, want[i].Message)
		}
	}
}

func seqsOf(evs []store.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Sequence
	}
	return out
}

// wantErr fails unless err wraps target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want one wrapping %v", what, err, target)
	}
}

func (s *suite) testCreateAndGet(t *testing.T, ctx context.Context, st store.Store) {
	want := fullSession("session-a")
	mustCreate(t, ctx, st, want)
	if want.LastSequence != 0 || !want.UpdatedAt.Equal(want.CreatedAt) {
		t.Fatalf("CreateSession wrote back LastSequence %d, UpdatedAt %v, CreatedAt %v; want 0 and UpdatedAt == CreatedAt",
			want.LastSequence, want.UpdatedAt, want.CreatedAt)
	}
	got, err := st.GetSession(ctx, "session-a")
	if err != nil {
		t.Fatalf("GetSession: %v", err)
	}
	if d := diffSession(want, got); d != "" {
		t.Fatalf("GetSession returned a different session: %s", d)
	}

	// A minimal session: no config, no usage. Usage comes back as zeros,
	// Config as nil.
	min := &store.Session{ID: "session-min"}
	mustCreate(t, ctx, st, min)
	got, err = st.GetSession(ctx, "session-min")
	if err != nil {
		t.Fatalf("GetSession: %v", err)
	}
	if d := diffSession(min, got); d != "" {
		t.Fatalf("minimal session: %s", d)
	}
	if got.Config != nil {
		t.Fatalf("Config = %q, want nil", got.Config)
	}
	// LastSequence supplied by the caller is ignored.
	ls := &store.Session{ID: "session-ls", LastSequence: 99}
	mustCreate(t, ctx, st, ls)
	if got, err := st.GetSession(ctx, "session-ls"); err != nil || got.LastSequence != 0 {
		t.Fatalf("GetSession after creating with LastSequence 99: %v, %v; want LastSequence 0", got, err)
	}
}

func (s *suite) testCreateFillsCreatedAt(t *testing.T, ctx context.Context, st store.Store) {
	before, err := st.Now(ctx)
	if err != nil {
		t.Fatalf("Now: %v", err)
	}
	sess := mustCreate(t, ctx, st, &store.Session{ID: "session-now"})
	after, err := st.Now(ctx)
	if err != nil {
		t.Fatalf("Now: %v", err)
	}
	if sess.CreatedAt.Before(before.Add(-time.Millisecond)) || sess.CreatedAt.After(after.Add(time.Millisecond)) {
		t.Fatalf("CreatedAt %v is outside the store clock's [%v, %v]", sess.CreatedAt, before, after)
	}
	got, err := st.GetSession(ctx, "session-now")
	if err != nil {
		t.Fatalf("GetSession: %v", err)
	}
	if !got.CreatedAt.Equal(sess.CreatedAt) || !got.UpdatedAt.Equal(sess.CreatedAt) {
		t.Fatalf("stored CreatedAt/UpdatedAt %v/%v, written back %v", got.CreatedAt, got.UpdatedAt, sess.CreatedAt)
	}
}

func (s *suite) testCreateRejects(t *testing.T, ctx context.Context, st store.Store) {
	mustCreate(t, ctx, st, fullSession("dup"))
	wantErr(t, "duplicate id", st.CreateSession(ctx, &store.Session{ID: "dup", Title: "second"}), store.ErrConflict)
	got, err := st.GetSession(ctx, "dup")
	if err != nil || got.Title != "Create hello.txt" {
		t.Fatalf("the duplicate create changed the session: %v, %v", got, err)
	}
	wantErr(t, "empty id", st.CreateSession(ctx, &store.Session{}), store.ErrInvalid)
	wantErr(t, "nil session", st.CreateSession(ctx, nil), store.ErrInvalid)
	wantErr(t, "long id", st.CreateSession(ctx, &store.Session{ID: strings.Repeat("x", store.MaxIDLength+1)}), store.ErrInvalid)
}

// testCreateWithFirstEvents: a session created with its first events has
// them in its log, and a session whose events are refused is not created.
func (s *suite) testCreateWithFirstEvents(t *testing.T, ctx context.Context, st store.Store) {
	sess := &store.Session{ID: "first"}
	first := eventsOf(1, text("one"), text("two"))
	if err := st.CreateSession(ctx, sess, first...); err != nil {
		t.Fatalf("CreateSession with events: %v", err)
	}
	got, err := st.GetSession(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	if sess.LastSequence != 2 || got.LastSequence != 2 || !got.UpdatedAt.Equal(sess.UpdatedAt) {
		t.Fatalf("LastSequence written back %d, stored %d; UpdatedAt written back %v, stored %v", sess.LastSequence, got.LastSequence, sess.UpdatedAt, got.UpdatedAt)
	}
	evs, err := st.ReadEvents(ctx, "first", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkEvents(t, first, evs)
	if err := st.AppendEvents(ctx, "first", eventsOf(3, text("three"))...); err != nil {
		t.Fatalf("AppendEvents after the first events: %v", err)
	}

	// Refused events leave no session behind.
	bad := []store.Event{{Sequence: 1, Message: text("ok")}, {Sequence: 2, Message: &penguinv1.OmniMessage{}}}
	wantErr(t, "create with an empty event", st.CreateSession(ctx, &store.Session{ID: "refused"}, bad...), store.ErrInvalid)
	wantErr(t, "get the refused session", func() error { _, err := st.GetSession(ctx, "refused"); return err }(), store.ErrNotFound)
	// A taken id stores none of the events.
	wantErr(t, "create a taken id with events", st.CreateSession(ctx, &store.Session{ID: "first"}, eventsOf(4, text("four"))...), store.ErrConflict)
	if evs, err := st.ReadEvents(ctx, "first", 0, 0); err != nil || !slices.Equal(seqsOf(evs), []int64{1, 2, 3}) {
		t.Fatalf("log after the refused create = %v, %v; want [1 2 3]", seqsOf(evs), err)
	}
}

func (s *suite) testGetUnknown(t *testing.T, ctx context.Context, st store.Store) {
	_, err := st.GetSession(ctx, "nope")
	wantErr(t, "GetSession(unknown)", err, store.ErrNotFound)
	if !strings.Contains(err.Error(), "nope") {
		t.Fatalf("error %q does not name the session", err)
	}
	_, err = st.ReadEvents(ctx, "nope", 0, 0)
	wantErr(t, "ReadEvents(unknown)", err, store.ErrNotFound)
	wantErr(t, "AppendEvents(unknown)", st.AppendEvents(ctx, "nope", eventsOf(1, text("x"))...), store.ErrNotFound)
	wantErr(t, "UpdateSession(unknown)", st.UpdateSession(ctx, &store.Session{ID: "nope"}), store.ErrNotFound)
	wantErr(t, "DeleteSession(unknown)", st.DeleteSession(ctx, "nope"), store.ErrNotFound)
	_, err = st.AcquireLease(ctx, "nope", "owner", "addr", time.Minute)
	wantErr(t, "AcquireLease(unknown)", err, store.ErrNotFound)
	_, _, _, err = st.LeaseHolder(ctx, "nope")
	wantErr(t, "LeaseHolder(unknown)", err, store.ErrNotFound)
	if err := st.ReleaseLease(ctx, "nope", "owner"); err != nil {
		t.Fatalf("ReleaseLease(unknown) = %v, want nil", err)
	}
}

func (s *suite) testUpdate(t *testing.T, ctx context.Context, st store.Store) {
	orig := mustCreate(t, ctx, st, fullSession("upd"))
	if err := st.AppendEvents(ctx, "upd", eventsOf(1, text("one"), text("two"))...); err != nil {
		t.Fatalf("AppendEvents: %v", err)
	}
	before, err := st.GetSession(ctx, "upd")
	if err != nil {
		t.Fatalf("GetSession: %v", err)
	}
	changed := &store.Session{
		ID: "upd", Provider: "anthropic", ModelID: "claude", Workspace: "/w2", AgentState: "/as2",
		ApprovalMode: penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL, ThinkingLevel: penguinv1.ThinkingLevel_THINKING_LEVEL_LOW,
		Title: "new title", ParentID: "", Source: "fork", EnvironmentID: "env-43", EnvironmentAddr: "10.9.9.9:1",
		Config: []byte(`{}`), Usage: &penguinv1.TokenCounts{CacheRead: 10, CacheWrite: 20, Output: 30, Total: 40, Reasoning: 5, CostUsd: proto.Float64(0.5)},
		// The store owns these; UpdateSession must ignore them.
		CreatedAt: orig.CreatedAt.Add(time.Hour), UpdatedAt: orig.CreatedAt.Add(time.Hour), LastSequence: 1000,
	}
	if err := st.UpdateSession(ctx, changed); err != nil {
		t.Fatalf("UpdateSession: %v", err)
	}
	got, err := st.GetSession(ctx, "upd")
	if err != nil {
		t.Fatalf("GetSession: %v", err)
	}
	want := *changed
	want.CreatedAt, want.UpdatedAt, want.LastSequence = before.CreatedAt, before.UpdatedAt, before.LastSequence
	want.ProjectID = before.ProjectID // fixed at creation
	if d := diffSession(&want, got); d != "" {
		t.Fatalf("after UpdateSession: %s", d)
	}
	evs, err := st.ReadEvents(ctx, "upd", 0, 0)
	if err != nil || len(evs) != 2 {
		t.Fatalf("UpdateSession touched the log: %d events, %v", len(evs), err)
	}
	// Clearing optional fields works too.
	cleared := &store.Session{ID: "upd"}
	if err := st.UpdateSession(ctx, cleared); err != nil {
		t.Fatalf("UpdateSession(cleared): %v", err)
	}
	got, err = st.GetSession(ctx, "upd")
	if err != nil {
		t.Fatalf("GetSession: %v", err)
	}
	if got.Config != nil || got.Title != "" || got.Usage.GetTotal() != 0 || got.LastSequence != 2 {
		t.Fatalf("cleared session = %+v", got)
	}
	wantErr(t, "UpdateSession(nil)", st.UpdateSession(ctx, nil), store.ErrInvalid)
}

func (s *suite) testModify(t *testing.T, ctx context.Context, st store.Store) {
	mustCreate(t, ctx, st, fullSession("mod"))
	if err := st.AppendEvents(ctx, "mod", eventsOf(1, text("one"))...); err != nil {
		t.Fatalf("AppendEvents: %v", err)
	}
	before, err := st.GetSession(ctx, "mod")
	if err != nil {
		t.Fatalf("GetSession: %v", err)
	}
	err = st.ModifySession(ctx, "mod", func(got *store.Session) error {
		// f sees the session as GetSession returns it.
		if d := diffSession(before, got); d != "" {
			t.Errorf("ModifySession handed f: %s", d)
		}
		got.Title, got.EnvironmentID, got.Config = "modified", "", []byte(`{"n":1}`)
		// The store owns these, and the id is the one asked for.
		got.ID, got.CreatedAt, got.LastSequence = "other", got.CreatedAt.Add(time.Hour), 1000
		return nil
	})
	if err != nil {
		t.Fatalf("ModifySession: %v", err)
	}
	got, err := st.GetSession(ctx, "mod")
	if err != nil {
		t.Fatalf("GetSession: %v", err)
	}
	want := *before
	want.Title, want.EnvironmentID, want.Config = "modified", "", []byte(`{"n":1}`)
	if d := diffSession(&want, got); d != "" {
		t.Fatalf("after ModifySession: %s", d)
	}
	// An error from f is returned as it is, and stores nothing.
	refusal := errors.New("refused")
	err = st.ModifySession(ctx, "mod", func(s *store.Session) error {
		s.Title = "never stored"
		return refusal
	})
	if !errors.Is(err, refusal) {
		t.Fatalf("ModifySession with f failing: %v, want f's error", err)
	}
	if got, err := st.GetSession(ctx, "mod"); err != nil || got.Title != "modified" {
		t.Fatalf("after a failed f: %+v, %v", got, err)
	}
	wantErr(t, "ModifySession(unknown)", st.ModifySession(ctx, "nope", func(*store.Session) error { return nil }), store.ErrNotFound)
}

// inParallel runs the jobs at once (each starts once all have been
// started) and fails the test, naming what, with the first error any of
// them returned, once all have ended.
func inParallel(t *testing.T, what string, jobs []func() error) {
	t.Helper()
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, len(jobs))
	for _, job := range jobs {
		wg.Go(func() {
			<-start
			if err := job(); err != nil {
				errs <- err
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("%s: %v", what, err)
	}
}

// contend has contenders replicas, named replica-0 and on, try at once
// to win what only one may (try reports whether it won), fails the test
// with any error, and returns the winners.
func contend(t *testing.T, what string, contenders int, try func(i int, owner string) (bool, error)) []string {
	t.Helper()
	var (
		mu  sync.Mutex
		won []string
	)
	jobs := make([]func() error, contenders)
	for i := range contenders {
		owner := fmt.Sprintf("replica-%d", i)
		jobs[i] = func() error {
			ok, err := try(i, owner)
			if ok {
				mu.Lock()
				won = append(won, owner)
				mu.Unlock()
			}
			return err
		}
	}
	inParallel(t, what, jobs)
	return won
}

// testConcurrentModifies has writers add to one counter in the session's
// config at once: with the read and the write in one transaction, none of
// the additions is lost.
func (s *suite) testConcurrentModifies(t *testing.T, ctx context.Context, st store.Store) {
	mustCreate(t, ctx, st, &store.Session{ID: "count", Config: []byte(`{"n":0}`)})
	const writers, each = 8, 10
	var jobs []func() error
	for range writers {
		jobs = append(jobs, func() error {
			for range each {
				err := st.ModifySession(ctx, "count", func(s *store.Session) error {
					var c struct{ N int }
					if err := json.Unmarshal(s.Config, &c); err != nil {
						return err
					}
					c.N++
					s.Config = fmt.Appendf(nil, `{"n":%d}`, c.N)
					return nil
				})
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	inParallel(t, "ModifySession", jobs)
	got, err := st.GetSession(ctx, "count")
	if err != nil {
		t.Fatalf("GetSession: %v", err)
	}
	var c struct{ N int }
	if err := json.Unmarshal(got.Config, &c); err != nil || c.N != writers*each {
		t.Fatalf("config after %d concurrent additions = %s (%v)", writers*each, got.Config, err)
	}
}

// testWriteSession checks that WriteSession's events, row change and
// lease release are stored together or not at all.
func (s *suite) testWriteSession(t *testing.T, ctx context.Context, st store.Store) {
	mustCreate(t, ctx, st, fullSession("w"))
	if ok, err := st.AcquireLease(ctx, "w", "me", "addr", time.Minute); err != nil || !ok {
		t.Fatalf("AcquireLease: %v, %v", ok, err)
	}
	written := eventsOf(1, text("one"), text("two"))
	err := st.WriteSession(ctx, "w", store.SessionWrite{
		Events: written,
		Modify: func(got *store.Session) error {
			// Modify sees the events appended.
			if got.LastSequence != 2 {
				t.Errorf("Modify saw LastSequence %d, want 2", got.LastSequence)
			}
			got.Title = "written"
			return nil
		},
		ReleaseLease: "me",
	})
	if err != nil {
		t.Fatalf("WriteSession: %v", err)
	}
	got, err := st.GetSession(ctx, "w")
	if err != nil || got.Title != "written" || got.LastSequence != 2 {
		t.Fatalf("after WriteSession: %+v, %v", got, err)
	}
	evs, err := st.ReadEvents(ctx, "w", 0, 0)
	if err != nil {
		t.Fatalf("ReadEvents: %v", err)
	}
	checkEvents(t, written, evs)
	if _, _, _, err := st.LeaseHolder(ctx, "w"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("lease after WriteSession released it: %v, want ErrNotFound", err)
	}

	// Any part refused stores no part: a failing Modify, and an append
	// below the log's end.
	if ok, err := st.AcquireLease(ctx, "w", "me", "addr", time.Minute); err != nil || !ok {
		t.Fatalf("AcquireLease: %v, %v", ok, err)
	}
	refusal := errors.New("refused")
	err = st.WriteSession(ctx, "w", store.SessionWrite{
		Events:       eventsOf(3, text("three")),
		Modify:       func(s *store.Session) error { s.Title = "never stored"; return refusal },
		ReleaseLease: "me",
	})
	if !errors.Is(err, refusal) {
		t.Fatalf("WriteSession with Modify failing: %v, want its error", err)
	}
	err = st.WriteSession(ctx, "w", store.SessionWrite{
		Events:       eventsOf(2, text("again")),
		Modify:       func(s *store.Session) error { s.Title = "never stored"; return nil },
		ReleaseLease: "me",
	})
	wantErr(t, "WriteSession(stale sequence)", err, store.ErrConflict)
	got, err = st.GetSession(ctx, "w")
	if err != nil || got.Title != "written" || got.LastSequence != 2 {
		t.Fatalf("after refused writes: %+v, %v", got, err)
	}
	if owner, _, _, err := st.LeaseHolder(ctx, "w"); err != nil || owner != "me" {
		t.Fatalf("lease after refused writes: %q, %v; want it still held", owner, err)
	}
	wantErr(t, "WriteSession(unknown)", st.WriteSession(ctx, "nope", store.SessionWrite{
		Modify: func(*store.Session) error { return nil }, ReleaseLease: "me"}), store.ErrNotFound)
}

// configOf decodes a session's config, failing t when it is no JSON
// object.
func configOf(t *testing.T, sess *store.Session) map[string]any {
	t.Helper()
	var c map[string]any
	if err := json.Unmarshal(sess.Config, &c); err != nil {
		t.Fatalf("config %q: %v", sess.Config, err)
	}
	return c
}

// testPatchSession checks that a SessionPatch changes the columns it
// names and nothing else: a title only where there is none, config
// members set whole, removed, raised and set to the log's last sequence
// beside members it leaves alone, and neither UpdatedAt nor LastSequence
// moved by the patch itself.
func (s *suite) testPatchSession(t *testing.T, ctx context.Context, st store.Store) {
	want := fullSession("p")
	want.Config = []byte(`{"max_turns":30,"pinned":true,"seq_high":40,"note":"[turn_aborted]","last_end":{"sequence":3,"status":2,"message":"old","not_recorded":true}}`)
	mustCreate(t, ctx, st, want)
	before, err := st.GetSession(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	usage := &penguinv1.TokenCounts{CacheRead: 7, Output: 8, Total: 9, CostUsd: proto.Float64(0.5)}
	err = st.WriteSession(ctx, "p", store.SessionWrite{Patch: &store.SessionPatch{
		Title:        "not over a title",
		ApprovalMode: penguinv1.ApprovalMode_APPROVAL_MODE_ALWAYS_ASK,
		Environment:  &store.EnvironmentBinding{ID: "env-43", Addr: "10.1.2.4:7070"},
		Usage:        usage,
		Config: []store.ConfigChange{
			{Key: "seq_high", Rule: store.ConfigRaise, N: 12},
			{Key: "last_end", Value: []byte(`{"sequence":12,"status":1}`)},
			{Key: "note"},
			{Key: "note_seq", Rule: store.ConfigLastSequence},
			{Key: "context_seq", Value: []byte(`5`)},
		},
	}})
	if err != nil {
		t.Fatalf("WriteSession(patch): %v", err)
	}
	got, err := st.GetSession(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	want.ApprovalMode = penguinv1.ApprovalMode_APPROVAL_MODE_ALWAYS_ASK
	want.EnvironmentID, want.EnvironmentAddr = "env-43", "10.1.2.4:7070"
	want.Usage = usage
	want.Config, got.Config = nil, nil
	if d := diffSession(want, got); d != "" {
		t.Errorf("after the patch: %s", d)
	}
	if !got.UpdatedAt.Equal(before.UpdatedAt) || got.LastSequence != before.LastSequence {
		t.Errorf("the patch moved UpdatedAt %v -> %v, LastSequence %d -> %d", before.UpdatedAt, got.UpdatedAt, before.LastSequence, got.LastSequence)
	}
	got, _ = st.GetSession(ctx, "p")
	wantConfig := map[string]any{"max_turns": 30.0, "pinned": true, "seq_high": 40.0, "note_seq": 0.0, "context_seq": 5.0,
		"last_end": map[string]any{"sequence": 12.0, "status": 1.0}}
	if c := configOf(t, got); !reflect.DeepEqual(c, wantConfig) {
		t.Errorf("config after the patch = %v, want %v", c, wantConfig)
	}

	// With events, in their commit: the members see the log's new last
	// sequence, a raise above the member takes, and a titleless session
	// takes the title.
	if err := st.UpdateSession(ctx, &store.Session{ID: "p", Config: got.Config, Usage: usage}); err != nil {
		t.Fatal(err)
	}
	err = st.WriteSession(ctx, "p", store.SessionWrite{
		Events: eventsOf(1, text("one"), text("two"), text("three")),
		Patch: &store.SessionPatch{Title: "first title", Config: []store.ConfigChange{
			{Key: "seq_high", Rule: store.ConfigRaise, N: 41},
			{Key: "note_seq", Rule: store.ConfigLastSequence},
			{Key: "new_member", Value: []byte(`"x"`)},
		}},
	})
	if err != nil {
		t.Fatalf("WriteSession(events and patch): %v", err)
	}
	got, err = st.GetSession(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if got.Title != "first title" || got.LastSequence != 3 || got.ApprovalMode != penguinv1.ApprovalMode_APPROVAL_MODE_UNSPECIFIED || got.EnvironmentID != "" {
		t.Errorf("after events and patch: %+v", got)
	}
	wantConfig["seq_high"], wantConfig["note_seq"], wantConfig["new_member"] = 41.0, 3.0, "x"
	if c := configOf(t, got); !reflect.DeepEqual(c, wantConfig) {
		t.Errorf("config after events and patch = %v, want %v", c, wantConfig)
	}

	// A session without config takes the members into a new object; a
	// patch of nothing changes nothing.
	mustCreate(t, ctx, st, &store.Session{ID: "bare"})
	err = st.WriteSession(ctx, "bare", store.SessionWrite{Patch: &store.SessionPatch{Config: []store.ConfigChange{
		{Key: "seq_high", Rule: store.ConfigRaise, N: 2}, {Key: "note"},
	}}})
	if err != nil {
		t.Fatalf("WriteSession(patch of a session without config): %v", err)
	}
	if err := st.WriteSession(ctx, "bare", store.SessionWrite{Patch: &store.SessionPatch{}}); err != nil {
		t.Fatalf("WriteSession(empty patch): %v", err)
	}
	got, err = st.GetSession(ctx, "bare")
	if err != nil {
		t.Fatal(err)
	}
	if c := configOf(t, got); !reflect.DeepEqual(c, map[string]any{"seq_high": 2.0}) || got.Title != "" {
		t.Errorf("bare session after patches: title %q, config %v", got.Title, c)
	}

	// A Modify and a patch in one write: the patch comes after Modify
	// and sees what it wrote.
	err = st.WriteSession(ctx, "bare", store.SessionWrite{
		Modify: func(s *store.Session) error {
			s.ThinkingLevel, s.Title = penguinv1.ThinkingLevel_THINKING_LEVEL_HIGH, "by modify"
			return nil
		},
		Patch: &store.SessionPatch{Title: "not over modify's", ApprovalMode: penguinv1.ApprovalMode_APPROVAL_MODE_DENY_ALL},
	})
	if err != nil {
		t.Fatalf("WriteSession(modify and patch): %v", err)
	}
	got, err = st.GetSession(ctx, "bare")
	if err != nil || got.Title != "by modify" || got.ThinkingLevel != penguinv1.ThinkingLevel_THINKING_LEVEL_HIGH ||
		got.ApprovalMode != penguinv1.ApprovalMode_APPROVAL_MODE_DENY_ALL {
		t.Errorf("after modify and patch: %+v, %v", got, err)
	}
}

// testPatchRefusals checks that a patch of an unknown session is
// ErrNotFound, that a config change the dialects could read apart is
// ErrInvalid, and that a write whose patch or append is refused stores
// none of its parts.
func (s *suite) testPatchRefusals(t *testing.T, ctx context.Context, st store.Store) {
	patch := &store.SessionPatch{Title: "t"}
	wantErr(t, "WriteSession(patch of unknown)", st.WriteSession(ctx, "nope", store.SessionWrite{Patch: patch}), store.ErrNotFound)
	wantErr(t, "WriteSession(empty patch of unknown)", st.WriteSession(ctx, "nope", store.SessionWrite{Patch: &store.SessionPatch{}}), store.ErrNotFound)
	wantErr(t, "WriteSession(patch and lease of unknown)", st.WriteSession(ctx, "nope", store.SessionWrite{Patch: patch, ReleaseLease: "me"}), store.ErrNotFound)
	mustCreate(t, ctx, st, &store.Session{ID: "r", Config: []byte(`{"a":1}`)})
	if err := st.AppendEvents(ctx, "r", eventsOf(1, text("one"))...); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.AcquireLease(ctx, "r", "me", "", time.Minute); err != nil || !ok {
		t.Fatalf("AcquireLease: %v, %v", ok, err)
	}
	for _, changes := range [][]store.ConfigChange{
		{{Key: "a.b", Value: []byte(`1`)}},
		{{Key: "", Value: []byte(`1`)}},
		{{Key: `a"`}},
		{{Key: "a", Value: []byte(`1`)}, {Key: "a", Rule: store.ConfigRaise, N: 2}},
		{{Key: "a", Rule: store.ConfigLastSequence + 1}},
	} {
		err := st.WriteSession(ctx, "r", store.SessionWrite{Events: eventsOf(2, text("two")), Patch: &store.SessionPatch{Title: "t", Config: changes}, ReleaseLease: "me"})
		wantErr(t, fmt.Sprintf("WriteSession(config changes %+v)", changes), err, store.ErrInvalid)
	}
	err := st.WriteSession(ctx, "r", store.SessionWrite{Events: eventsOf(1, text("again")), Patch: &store.SessionPatch{Title: "t"}, ReleaseLease: "me"})
	wantErr(t, "WriteSession(stale sequence and patch)", err, store.ErrConflict)
	got, err := st.GetSession(ctx, "r")
	if err != nil || got.Title != "" || got.LastSequence != 1 || string(got.Config) != `{"a":1}` {
		t.Fatalf("after refused patches: %+v, %v", got, err)
	}
	if owner, _, _, err := st.LeaseHolder(ctx, "r"); err != nil || owner != "me" {
		t.Fatalf("lease after refused patches: %q, %v; want it still held", owner, err)
	}
}

// testConcurrentPatches has writers patch one session at once, each
// raising one shared member and setting a member of its own, beside
// ModifySessions that count in a third: the patches read what they
// change in their own statement, so no change is lost and the raised
// member ends at the largest value.
func (s *suite) testConcurrentPatches(t *testing.T, ctx context.Context, st store.Store) {
	mustCreate(t, ctx, st, &store.Session{ID: "c", Config: []byte(`{"n":0}`)})
	const writers, each = 6, 10
	var jobs []func() error
	for w := range writers {
		jobs = append(jobs, func() error {
			for i := range each {
				err := st.WriteSession(ctx, "c", store.SessionWrite{Patch: &store.SessionPatch{Config: []store.ConfigChange{
					{Key: "high", Rule: store.ConfigRaise, N: int64(w*each + i)},
					{Key: fmt.Sprintf("w%d", w), Value: fmt.Appendf(nil, "%d", i)},
				}}})
				if err != nil {
					return err
				}
			}
			return nil
		}, func() error {
			for range each {
				err := st.ModifySession(ctx, "c", func(s *store.Session) error {
					var c map[string]any
					if err := json.Unmarshal(s.Config, &c); err != nil {
						return err
					}
					c["n"] = c["n"].(float64) + 1
					var err error
					s.Config, err = json.Marshal(c)
					return err
				})
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	inParallel(t, "concurrent write", jobs)
	got, err := st.GetSession(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	c := configOf(t, got)
	if c["n"] != float64(writers*each) || c["high"] != float64(writers*each-1) {
		t.Errorf("config after concurrent patches = %v; want n %d, high %d", c, writers*each, writers*each-1)
	}
	for w := range writers {
		if v := c[fmt.Sprintf("w%d", w)]; v != float64(each-1) {
			t.Errorf("member w%d = %v, want %d", w, v, each-1)
		}
	}
}

func (s *suite) testDelete(t *testing.T, ctx context.Context, st store.Store) {
	mustCreate(t, ctx, st, fullSession("del"))
	mustCreate(t, ctx, st, fullSession("keep"))
	for _, id := range []string{"del", "keep"} {
		if err := st.AppendEvents(ctx, id, eventsOf(1, Messages()...)...); err != nil {
			t.Fatalf("AppendEvents(%s): %v", id, err)
		}
		if ok, err := st.AcquireLease(ctx, id, "replica-1", "10.0.0.1:1", time.Hour); err != nil || !ok {
			t.Fatalf("AcquireLease(%s) = %v, %v", id, ok, err)
		}
	}
	if err := st.DeleteSession(ctx, "del"); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	_, err := st.GetSession(ctx, "del")
	wantErr(t, "GetSession after delete", err, store.ErrNotFound)
	_, err = st.ReadEvents(ctx, "del", 0, 0)
	wantErr(t, "ReadEvents after delete", err, store.ErrNotFound)
	_, _, _, err = st.LeaseHolder(ctx, "del")
	wantErr(t, "LeaseHolder after delete", err, store.ErrNotFound)
	wantErr(t, "second delete", st.DeleteSession(ctx, "del"), store.ErrNotFound)

	// Re-creating the id starts from nothing: no events, no lease.
	mustCreate(t, ctx, st, &store.Session{ID: "del"})
	evs, err := st.ReadEvents(ctx, "del", 0, 0)
	if err != nil || len(evs) != 0 {
		t.Fatalf("re-created session has %d events (%v); the delete did not cascade", len(evs), err)
	}
	if ok, err := st.AcquireLease(ctx, "del", "replica-2", "", time.Hour); err != nil || !ok {
		t.Fatalf("AcquireLease on re-created session = %v, %v; the old lease survived the delete", ok, err)
	}
	if err := st.AppendEvents(ctx, "del", eventsOf(1, text("fresh"))...); err != nil {
		t.Fatalf("AppendEvents(1) on re-created session: %v; old events survived the delete", err)
	}

	// The other session is untouched.
	evs, err = st.ReadEvents(ctx, "keep", 0, 0)
	if err != nil || len(evs) != len(Messages()) {
		t.Fatalf("other session has %d events (%v), want %d", len(evs), err, len(Messages()))
	}
	if owner, _, _, err := st.LeaseHolder(ctx, "keep"); err != nil || owner != "replica-1" {
		t.Fatalf("other session's lease: %q, %v", owner, err)
	}
}

func (s *suite) testListPaging(t *testing.T, ctx context.Context, st store.Store) {
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var want []string // expected order: created_at desc, id desc
	const n = 23
	for i := range n {
		// Three sessions share each creation time, to exercise the id
		// tie-break.
		mustCreate(t, ctx, st, &store.Session{ID: fmt.Sprintf("s-%02d", i), CreatedAt: base.Add(time.Duration(i/3) * time.Second)})
	}
	for i := n - 1; i >= 0; i-- {
		want = append(want, fmt.Sprintf("s-%02d", i))
	}

	// Everything on one default-sized page.
	all, next, err := st.ListSessions(ctx, 0, "")
	if err != nil {
		t.Fatalf("ListSessions: %v", err)
	}
	if next != "" || !slices.Equal(idsOf(all), want) {
		t.Fatalf("ListSessions(0) = %v, next %q; want %v and no next page", idsOf(all), next, want)
	}
	// A page that exactly fits has no next page.
	exact, next, err := st.ListSessions(ctx, n, "")
	if err != nil || next != "" || len(exact) != n {
		t.Fatalf("ListSessions(%d) = %d sessions, next %q, %v; want all and no next page", n, len(exact), next, err)
	}

	// Paging in fives, with a newer session created and a not-yet-seen one
	// deleted half way: nothing repeats, nothing shifts.
	var got []string
	token := ""
	for page := 0; ; page++ {
		sessions, next, err := st.ListSessions(ctx, 5, token)
		if err != nil {
			t.Fatalf("ListSessions page %d: %v", page, err)
		}
		if len(sessions) > 5 {
			t.Fatalf("page %d has %d sessions, want at most 5", page, len(sessions))
		}
		got = append(got, idsOf(sessions)...)
		if page == 1 {
			mustCreate(t, ctx, st, &store.Session{ID: "s-newest", CreatedAt: base.Add(time.Hour)})
			if err := st.DeleteSession(ctx, "s-00"); err != nil {
				t.Fatalf("DeleteSession: %v", err)
			}
		}
		if next == "" {
			break
		}
		token = next
	}
	if wantPaged := want[:n-1]; !slices.Equal(got, wantPaged) {
		t.Fatalf("paged listing = %v\nwant %v", got, wantPaged)
	}
	first, _, err := st.ListSessions(ctx, 1, "")
	if err != nil || len(first) != 1 || first[0].ID != "s-newest" {
		t.Fatalf("first session after creating a newer one = %v, %v", idsOf(first), err)
	}
}

func idsOf(ss []*store.Session) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.ID
	}
	return out
}

func (s *suite) testListBadToken(t *testing.T, ctx context.Context, st store.Store) {
	for _, tok := range []string{"!!!", "bm90IGEgdG9rZW4", "djE6eHl6OmE"} {
		_, _, err := st.ListSessions(ctx, 10, tok)
		wantErr(t, fmt.Sprintf("ListSessions(token %q)", tok), err, store.ErrInvalid)
	}
}

func (s *suite) testAppendAndRead(t *testing.T, ctx context.Context, st store.Store) {
	sess := mustCreate(t, ctx, st, &store.Session{ID: "log"})
	msgs := Messages()
	// One at a time with gaps in the numbering (partials took the missing
	// numbers on the live stream), then the rest in one batch.
	var want []store.Event
	seq := int64(0)
	for i, m := range msgs[:10] {
		seq += int64(1 + i%3)
		e := store.Event{Sequence: seq, Message: m}
		if err := st.AppendEvents(ctx, "log", e); err != nil {
			t.Fatalf("AppendEvents(%d, %s): %v", seq, store.PayloadKind(m), err)
		}
		want = append(want, e)
	}
	batch := eventsOf(seq+1, msgs[10:]...)
	if err := st.AppendEvents(ctx, "log", batch...); err != nil {
		t.Fatalf("AppendEvents(batch): %v", err)
	}
	want = append(want, batch...)
	last := want[len(want)-1].Sequence

	got, err := st.ReadEvents(ctx, "log", 0, 0)
	if err != nil {
		t.Fatalf("ReadEvents: %v", err)
	}
	checkEvents(t, want, got)
	// Fidelity and arguments come back byte for byte.
	for _, e := range got {
		if th := e.Message.GetThinking(); th != nil && th.GetThinking() != "" {
			if string(th.GetFidelity()) != `{ "signature" : "EqQBCkYIBxgCKkB\u00e9+/=",  "n": 1.50 }` {
				t.Fatalf("fidelity bytes changed: %q", th.GetFidelity())
			}
		}
		if tc := e.Message.GetToolCall(); tc != nil && tc.GetArguments() != `{"cmd": "printf hi > hello.txt",  "b":1.0e2 ,"a":"\u0041"}` {
			t.Fatalf("arguments changed: %q", tc.GetArguments())
		}
	}

	// afterSequence and limit.
	mid := want[5].Sequence
	got, err = st.ReadEvents(ctx, "log", mid, 0)
	if err != nil {
		t.Fatalf("ReadEvents(after %d): %v", mid, err)
	}
	checkEvents(t, want[6:], got)
	got, err = st.ReadEvents(ctx, "log", mid, 4)
	if err != nil {
		t.Fatalf("ReadEvents(after %d, limit 4): %v", mid, err)
	}
	checkEvents(t, want[6:10], got)
	// An afterSequence between two numbers starts at the next one.
	got, err = st.ReadEvents(ctx, "log", want[1].Sequence+1, 1)
	if err != nil {
		t.Fatalf("ReadEvents: %v", err)
	}
	checkEvents(t, want[2:3], got)
	got, err = st.ReadEvents(ctx, "log", last, 0)
	if err != nil || len(got) != 0 {
		t.Fatalf("ReadEvents(after last) = %v, %v; want none", seqsOf(got), err)
	}

	// The session's LastSequence and UpdatedAt followed the appends.
	after, err := st.GetSession(ctx, "log")
	if err != nil {
		t.Fatalf("GetSession: %v", err)
	}
	if after.LastSequence != last {
		t.Fatalf("LastSequence = %d, want %d", after.LastSequence, last)
	}
	if after.UpdatedAt.Before(sess.CreatedAt) {
		t.Fatalf("UpdatedAt %v is before CreatedAt %v", after.UpdatedAt, sess.CreatedAt)
	}
	now, err := st.Now(ctx)
	if err != nil {
		t.Fatalf("Now: %v", err)
	}
	if after.UpdatedAt.After(now.Add(time.Millisecond)) {
		t.Fatalf("UpdatedAt %v is after the store's now %v", after.UpdatedAt, now)
	}

	// An empty session reads as empty, not as an error; appending nothing
	// is a no-op.
	mustCreate(t, ctx, st, &store.Session{ID: "empty"})
	if err := st.AppendEvents(ctx, "empty"); err != nil {
		t.Fatalf("AppendEvents(no events) = %v", err)
	}
	got, err = st.ReadEvents(ctx, "empty", 0, 0)
	if err != nil || len(got) != 0 {
		t.Fatalf("ReadEvents(empty) = %v, %v", seqsOf(got), err)
	}
}

func (s *suite) testAppendRejects(t *testing.T, ctx context.Context, st store.Store) {
	mustCreate(t, ctx, st, &store.Session{ID: "rej"})
	if err := st.AppendEvents(ctx, "rej", eventsOf(5, text("five"))...); err != nil {
		t.Fatalf("AppendEvents(5): %v", err)
	}
	partials := []*penguinv1.OmniMessage{
		{Timestamp: timestamppb.Now(), Payload: &penguinv1.OmniMessage_PartialText{PartialText: &penguinv1.PartialText{
			Role: penguinv1.Role_ROLE_ASSISTANT, EventType: penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA, Text: "he"}}},
		{Payload: &penguinv1.OmniMessage_PartialThinking{PartialThinking: &penguinv1.PartialThinking{}}},
		{Payload: &penguinv1.OmniMessage_PartialToolCall{PartialToolCall: &penguinv1.PartialToolCall{}}},
		{Payload: &penguinv1.OmniMessage_PartialToolCallOutput{PartialToolCallOutput: &penguinv1.PartialToolCallOutput{}}},
	}
	for _, p := range partials {
		err := st.AppendEvents(ctx, "rej", store.Event{Sequence: 6, Message: p})
		wantErr(t, "append "+store.PayloadKind(p), err, store.ErrInvalid)
		if !strings.Contains(err.Error(), "partial") {
			t.Fatalf("error %q does not say the message is a partial", err)
		}
	}
	withOrigin := text("from child")
	withOrigin.Origin = []string{"session-child"}
	wantErr(t, "append origin-tagged", st.AppendEvents(ctx, "rej", store.Event{Sequence: 6, Message: withOrigin}), store.ErrInvalid)
	wantErr(t, "append nil message", st.AppendEvents(ctx, "rej", store.Event{Sequence: 6}), store.ErrInvalid)
	wantErr(t, "append empty payload", st.AppendEvents(ctx, "rej", store.Event{Sequence: 6, Message: &penguinv1.OmniMessage{}}), store.ErrInvalid)
	wantErr(t, "append sequence 0", st.AppendEvents(ctx, "rej", store.Event{Sequence: 0, Message: text("x")}), store.ErrInvalid)
	wantErr(t, "append empty session id", st.AppendEvents(ctx, "", store.Event{Sequence: 6, Message: text("x")}), store.ErrInvalid)
	// Sequences at or below the last, or not increasing within a batch.
	for _, evs := range [][]store.Event{
		eventsOf(5, text("again")),
		eventsOf(3, text("below")),
		{{Sequence: 7, Message: text("a")}, {Sequence: 7, Message: text("b")}},
		{{Sequence: 8, Message: text("a")}, {Sequence: 7, Message: text("b")}},
	} {
		err := st.AppendEvents(ctx, "rej", evs...)
		wantErr(t, fmt.Sprintf("append sequences %v", seqsOf(evs)), err, store.ErrConflict)
	}
	got, err := st.ReadEvents(ctx, "rej", 0, 0)
	if err != nil {
		t.Fatalf("ReadEvents: %v", err)
	}
	if len(got) != 1 || got[0].Sequence != 5 || got[0].Message.GetText().GetText() != "five" {
		t.Fatalf("log after rejected appends = %v, want only sequence 5", seqsOf(got))
	}
	if sess, err := st.GetSession(ctx, "rej"); err != nil || sess.LastSequence != 5 {
		t.Fatalf("LastSequence after rejected appends = %v, %v; want 5", sess, err)
	}
}

func (s *suite) testAppendAtomic(t *testing.T, ctx context.Context, st store.Store) {
	mustCreate(t, ctx, st, &store.Session{ID: "atomic"})
	if err := st.AppendEvents(ctx, "atomic", eventsOf(1, text("1"), text("2"))...); err != nil {
		t.Fatalf("AppendEvents: %v", err)
	}
	// A batch with a good event followed by a partial stores nothing.
	bad := []store.Event{
		{Sequence: 3, Message: text("3")},
		{Sequence: 4, Message: &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_PartialText{PartialText: &penguinv1.PartialText{}}}},
	}
	wantErr(t, "batch with a partial", st.AppendEvents(ctx, "atomic", bad...), store.ErrInvalid)
	// A batch that overlaps the log stores nothing either.
	wantErr(t, "overlapping batch", st.AppendEvents(ctx, "atomic", eventsOf(2, text("2 again"), text("3"))...), store.ErrConflict)
	got, err := st.ReadEvents(ctx, "atomic", 0, 0)
	if err != nil || !slices.Equal(seqsOf(got), []int64{1, 2}) {
		t.Fatalf("log = %v, %v; want [1 2]", seqsOf(got), err)
	}
	if err := st.AppendEvents(ctx, "atomic", eventsOf(3, text("3"), text("4"))...); err != nil {
		t.Fatalf("AppendEvents(3, 4) after the rejected batches: %v", err)
	}
	// A batch longer than one statement takes (SQLite's inserts carry
	// at most 16 events) goes in whole, or, overlapping the log in its
	// first part while the rest is new, not at all.
	long := func(first int64, n int) []store.Event {
		msgs := make([]*penguinv1.OmniMessage, n)
		for i := range msgs {
			msgs[i] = text(fmt.Sprintf("long %d", first+int64(i)))
		}
		return eventsOf(first, msgs...)
	}
	wantErr(t, "long overlapping batch", st.AppendEvents(ctx, "atomic", long(3, 40)...), store.ErrConflict)
	batch := long(5, 40)
	if err := st.AppendEvents(ctx, "atomic", batch...); err != nil {
		t.Fatalf("AppendEvents of 40 events: %v", err)
	}
	got, err = st.ReadEvents(ctx, "atomic", 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkEvents(t, batch, got)
	if sess, err := st.GetSession(ctx, "atomic"); err != nil || sess.LastSequence != 44 {
		t.Fatalf("LastSequence after a batch of 40 = %v, %v; want 44", sess, err)
	}
}

func (s *suite) testConcurrentAppends(t *testing.T, ctx context.Context, st store.Store) {
	mustCreate(t, ctx, st, &store.Session{ID: "race"})
	const writers, seqs = 8, 40
	var (
		mu      sync.Mutex
		winners = make(map[int64][]string)
		wg      sync.WaitGroup
		errs    = make(chan error, writers)
	)
	for w := range writers {
		wg.Go(func() {
			for seq := int64(1); seq <= seqs; seq++ {
				label := fmt.Sprintf("writer %d sequence %d", w, seq)
				err := st.AppendEvents(ctx, "race", store.Event{Sequence: seq, Message: text(label)})
				switch {
				case err == nil:
					mu.Lock()
					winners[seq] = append(winners[seq], label)
					mu.Unlock()
				case errors.Is(err, store.ErrConflict):
				default:
					errs <- fmt.Errorf("%s: %w", label, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent append failed with something other than ErrConflict: %v", err)
	}
	got, err := st.ReadEvents(ctx, "race", 0, 0)
	if err != nil {
		t.Fatalf("ReadEvents: %v", err)
	}
	if len(got) != seqs {
		t.Fatalf("log has %d events, want %d", len(got), seqs)
	}
	for i, e := range got {
		seq := int64(i + 1)
		w := winners[seq]
		if len(w) != 1 {
			t.Fatalf("sequence %d had %d winners %v, want exactly 1", seq, len(w), w)
		}
		if e.Sequence != seq || e.Message.GetText().GetText() != w[0] {
			t.Fatalf("event %d = %d %q, want %d %q (the winner's)", i, e.Sequence, e.Message.GetText().GetText(), seq, w[0])
		}
	}
	if sess, err := st.GetSession(ctx, "race"); err != nil || sess.LastSequence != seqs {
		t.Fatalf("LastSequence = %v, %v; want %d", sess, err, seqs)
	}
}

func (s *suite) testConcurrentSessionsAndReaders(t *testing.T, ctx context.Context, st store.Store) {
	const sessions, pairs = 4, 25
	for i := range sessions {
		mustCreate(t, ctx, st, &store.Session{ID: fmt.Sprintf("par-%d", i)})
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*sessions)
	done := make(chan struct{})
	for i := range sessions {
		id := fmt.Sprintf("par-%d", i)
		// A writer appends pairs atomically...
		wg.Go(func() {
			for p := int64(0); p < pairs; p++ {
				if err := st.AppendEvents(ctx, id, eventsOf(2*p+1, text("q"), text("a"))...); err != nil {
					errs <- fmt.Errorf("append to %s: %w", id, err)
					return
				}
			}
		})
	}
	// ...while readers check that they only ever see whole pairs, in order.
	var rg sync.WaitGroup
	for i := range sessions {
		id := fmt.Sprintf("par-%d", i)
		rg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				evs, err := st.ReadEvents(ctx, id, 0, 0)
				if err != nil {
					errs <- fmt.Errorf("read %s: %w", id, err)
					return
				}
				if len(evs)%2 != 0 {
					errs <- fmt.Errorf("read %s saw %d events: half an atomic append", id, len(evs))
					return
				}
				for j, e := range evs {
					if e.Sequence != int64(j+1) {
						errs <- fmt.Errorf("read %s: event %d has sequence %d", id, j, e.Sequence)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(done)
	rg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range sessions {
		id := fmt.Sprintf("par-%d", i)
		if sess, err := st.GetSession(ctx, id); err != nil || sess.LastSequence != 2*pairs {
			t.Fatalf("%s: LastSequence %v, %v; want %d", id, sess, err, 2*pairs)
		}
	}
}

func (s *suite) testLeases(t *testing.T, ctx context.Context, st store.Store) {
	mustCreate(t, ctx, st, &store.Session{ID: "lease"})
	_, _, _, err := st.LeaseHolder(ctx, "lease")
	wantErr(t, "LeaseHolder before any lease", err, store.ErrNotFound)

	ok, err := st.AcquireLease(ctx, "lease", "replica-a", "10.0.0.1:7000", 30*time.Second)
	if err != nil || !ok {
		t.Fatalf("AcquireLease(a) = %v, %v; want true", ok, err)
	}
	owner, addr, exp1, err := st.LeaseHolder(ctx, "lease")
	if err != nil || owner != "replica-a" || addr != "10.0.0.1:7000" {
		t.Fatalf("LeaseHolder = %q %q %v; want replica-a at 10.0.0.1:7000", owner, addr, err)
	}
	now, err := st.Now(ctx)
	if err != nil {
		t.Fatalf("Now: %v", err)
	}
	if left := exp1.Sub(now); left <= 20*time.Second || left > 30*time.Second+time.Millisecond {
		t.Fatalf("lease expires %v after the store's now, want about 30s", left)
	}

	// Another owner cannot take a live lease.
	ok, err = st.AcquireLease(ctx, "lease", "replica-b", "10.0.0.2:7000", time.Minute)
	if err != nil || ok {
		t.Fatalf("AcquireLease(b) while a holds it = %v, %v; want false", ok, err)
	}
	if owner, _, _, _ := st.LeaseHolder(ctx, "lease"); owner != "replica-a" {
		t.Fatalf("holder after b's attempt = %q, want replica-a", owner)
	}

	// The owner renews, extending the expiry and updating its address.
	ok, err = st.AcquireLease(ctx, "lease", "replica-a", "10.0.0.1:7001", time.Minute)
	if err != nil || !ok {
		t.Fatalf("renew = %v, %v; want true", ok, err)
	}
	owner, addr, exp2, err := st.LeaseHolder(ctx, "lease")
	if err != nil || owner != "replica-a" || addr != "10.0.0.1:7001" || !exp2.After(exp1) {
		t.Fatalf("after renew: %q %q expires %v (was %v), %v", owner, addr, exp2, exp1, err)
	}

	// Releasing someone else's lease does nothing.
	if err := st.ReleaseLease(ctx, "lease", "replica-b"); err != nil {
		t.Fatalf("ReleaseLease(b) = %v", err)
	}
	if owner, _, _, _ := st.LeaseHolder(ctx, "lease"); owner != "replica-a" {
		t.Fatalf("holder after b's release = %q, want replica-a", owner)
	}
	if err := st.ReleaseLease(ctx, "lease", "replica-a"); err != nil {
		t.Fatalf("ReleaseLease(a) = %v", err)
	}
	_, _, _, err = st.LeaseHolder(ctx, "lease")
	wantErr(t, "LeaseHolder after release", err, store.ErrNotFound)
	if err := st.ReleaseLease(ctx, "lease", "replica-a"); err != nil {
		t.Fatalf("second ReleaseLease(a) = %v, want nil", err)
	}
	ok, err = st.AcquireLease(ctx, "lease", "replica-b", "10.0.0.2:7000", time.Minute)
	if err != nil || !ok {
		t.Fatalf("AcquireLease(b) after release = %v, %v; want true", ok, err)
	}

	// Leases are per session.
	mustCreate(t, ctx, st, &store.Session{ID: "lease-2"})
	if ok, err := st.AcquireLease(ctx, "lease-2", "replica-a", "", time.Minute); err != nil || !ok {
		t.Fatalf("AcquireLease on another session = %v, %v", ok, err)
	}

	_, err = st.AcquireLease(ctx, "lease", "", "addr", time.Minute)
	wantErr(t, "AcquireLease(empty owner)", err, store.ErrInvalid)
	_, err = st.AcquireLease(ctx, "lease", "replica-a", "addr", 0)
	wantErr(t, "AcquireLease(ttl 0)", err, store.ErrInvalid)
}

func (s *suite) testLeaseExpiry(t *testing.T, ctx context.Context, st store.Store) {
	mustCreate(t, ctx, st, &store.Session{ID: "expiry"})
	const ttl = time.Second
	ok, err := st.AcquireLease(ctx, "expiry", "replica-a", "a:1", ttl)
	if err != nil || !ok {
		t.Fatalf("AcquireLease(a) = %v, %v", ok, err)
	}
	_, _, expA, err := st.LeaseHolder(ctx, "expiry")
	if err != nil {
		t.Fatalf("LeaseHolder: %v", err)
	}
	// Until the store's clock passes expA, b is refused.
	ok, err = st.AcquireLease(ctx, "expiry", "replica-b", "b:1", time.Minute)
	if err != nil {
		t.Fatalf("AcquireLease(b): %v", err)
	}
	if ok {
		now, _ := st.Now(ctx)
		if now.Before(expA) {
			t.Fatalf("b took a's lease at %v, before it expired at %v", now, expA)
		}
		t.Fatalf("the machine was too slow to test a %v lease: b's first attempt came after expiry", ttl)
	}
	// A live lease is stale only to its own owner (a replica restarted
	// under the same name finds the runs it was cut off from).
	if isStale(t, ctx, st, "replica-b", "expiry") {
		t.Fatal("StaleLeases(b) lists the session while a's lease is live")
	}
	if !isStale(t, ctx, st, "replica-a", "expiry") {
		t.Fatal("StaleLeases(a) does not list a's own live lease")
	}
	// Once it has expired, nobody holds it...
	eventually.Within(t, 20*time.Second, "a's lease to expire", func() bool {
		_, _, _, err := st.LeaseHolder(ctx, "expiry")
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("LeaseHolder: %v", err)
		}
		return err != nil
	})
	if now, err := st.Now(ctx); err != nil || now.Before(expA) {
		t.Fatalf("LeaseHolder reported no live lease at store time %v, before the expiry %v (%v)", now, expA, err)
	}
	// ...it is stale to everyone...
	if !isStale(t, ctx, st, "replica-b", "expiry") {
		t.Fatal("StaleLeases(b) does not list the session after a's lease expired")
	}
	// ...and b can take it.
	eventually.Within(t, 20*time.Second, "b to take the expired lease", func() bool {
		ok, err := st.AcquireLease(ctx, "expiry", "replica-b", "b:1", time.Minute)
		if err != nil {
			t.Fatalf("AcquireLease(b): %v", err)
		}
		return ok
	})
	owner, addr, _, err := st.LeaseHolder(ctx, "expiry")
	if err != nil || owner != "replica-b" || addr != "b:1" {
		t.Fatalf("holder = %q %q %v, want replica-b", owner, addr, err)
	}
	if isStale(t, ctx, st, "replica-a", "expiry") {
		t.Fatal("StaleLeases(a) lists the session after b took the lease")
	}
	// a coming back late cannot take it over, and its release is a no-op.
	if ok, err := st.AcquireLease(ctx, "expiry", "replica-a", "a:1", ttl); err != nil || ok {
		t.Fatalf("late AcquireLease(a) = %v, %v; want false", ok, err)
	}
	if err := st.ReleaseLease(ctx, "expiry", "replica-a"); err != nil {
		t.Fatalf("late ReleaseLease(a) = %v", err)
	}
	if owner, _, _, err := st.LeaseHolder(ctx, "expiry"); err != nil || owner != "replica-b" {
		t.Fatalf("holder after a's late release = %q, %v; want replica-b", owner, err)
	}
	// A released lease is nobody's stale lease.
	if err := st.ReleaseLease(ctx, "expiry", "replica-b"); err != nil {
		t.Fatalf("ReleaseLease(b) = %v", err)
	}
	if isStale(t, ctx, st, "replica-b", "expiry") {
		t.Fatal("StaleLeases(b) lists the session after b released the lease")
	}
}

// isStale reports whether StaleLeases(owner) lists session id, and fails
// when LeaseCutOff, which answers the same for one session, disagrees.
func isStale(t *testing.T, ctx context.Context, st store.Store, owner, id string) bool {
	t.Helper()
	ids, err := st.StaleLeases(ctx, owner)
	if err != nil {
		t.Fatalf("StaleLeases(%s): %v", owner, err)
	}
	listed := slices.Contains(ids, id)
	if cut, err := st.LeaseCutOff(ctx, id, owner); err != nil || cut != listed {
		t.Fatalf("LeaseCutOff(%s, %s) = %v, %v; StaleLeases = %v", id, owner, cut, err, ids)
	}
	return listed
}

func (s *suite) testLeaseContention(t *testing.T, ctx context.Context, st store.Store) {
	mustCreate(t, ctx, st, &store.Session{ID: "contend"})
	won := contend(t, "AcquireLease", 8, func(_ int, owner string) (bool, error) {
		return st.AcquireLease(ctx, "contend", owner, owner+":1", time.Minute)
	})
	if len(won) != 1 {
		t.Fatalf("%d contenders won the lease (%v), want exactly 1", len(won), won)
	}
	if owner, addr, _, err := st.LeaseHolder(ctx, "contend"); err != nil || owner != won[0] || addr != won[0]+":1" {
		t.Fatalf("holder = %q %q %v, want the winner %q", owner, addr, err, won[0])
	}
}

// PeekLease reads the row and whether a lease row is on the session,
// live or expired, and takes nothing; with the row, the project's
// settings of its model and the version of the agent asked for, as they
// stand.
func (s *suite) testPeekLease(t *testing.T, ctx context.Context, st store.Store) {
	mustCreate(t, ctx, st, &store.Session{ID: "peek", Title: "peeked", Provider: "peek", ModelID: "m1"})
	logged := eventsOf(1, text("a"), text("b"))
	if err := st.AppendEvents(ctx, "peek", logged...); err != nil {
		t.Fatal(err)
	}
	r, err := st.PeekLease(ctx, "peek", store.AgentRef{})
	if err != nil || r.Leased || r.Row.Title != "peeked" || r.Row.LastSequence != 2 {
		t.Fatalf("PeekLease of a free session = %+v, %v; want its row at sequence 2, not leased", r, err)
	}
	if r.Whole {
		checkEvents(t, logged, r.Log)
	}
	if !r.ModelRead || r.Model != nil {
		t.Fatalf("PeekLease read settings %+v (read: %v) of a model that has none; want none read", r.Model, r.ModelRead)
	}
	if r.AgentRead {
		t.Fatalf("PeekLease read an agent (version %d) it was not asked for", r.AgentVersion)
	}
	for _, window := range []int64{1000, 2000} {
		price := &store.Price{Input: float64(window), Output: 1}
		if err := st.PutModelSetting(ctx, &store.ModelSetting{Project: store.DefaultProject, Provider: "peek", ModelID: "m1", ContextWindow: window, Price: price}); err != nil {
			t.Fatal(err)
		}
		r, err := st.PeekLease(ctx, "peek", store.AgentRef{})
		if err != nil || !r.ModelRead || r.Model == nil || r.Model.ContextWindow != window || r.Model.Price == nil || *r.Model.Price != *price ||
			r.Model.Project != store.DefaultProject || r.Model.Provider != "peek" || r.Model.ModelID != "m1" || r.Model.UpdatedAt.IsZero() {
			t.Fatalf("PeekLease = %+v (model %+v), %v; want the model's settings with window %d and price %+v", r, r.Model, err, window, price)
		}
	}
	// The agent asked for: none yet, then each version it reaches.
	agent := store.AgentRef{Project: store.DefaultProject, Name: "peeker"}
	if r, err := st.PeekLease(ctx, "peek", agent); err != nil || !r.AgentRead || r.AgentVersion != 0 || r.Agent != agent {
		t.Fatalf("PeekLease asking for an agent the store lacks = %+v, %v; want it read, at version 0", r, err)
	}
	if as, ok := st.(store.AgentStore); ok {
		if _, err := as.CreateAgent(ctx, agent.Project, agent.Name, []store.AgentFile{{Path: "AGENTS.md", Data: []byte("a")}}); err != nil {
			t.Fatal(err)
		}
		for want := int64(1); want <= 2; want++ {
			if r, err := st.PeekLease(ctx, "peek", agent); err != nil || !r.AgentRead || r.AgentVersion != want {
				t.Fatalf("PeekLease asking for the agent = %+v, %v; want it read at version %d", r, err, want)
			}
			if _, err := as.ChangeAgent(ctx, agent.Project, agent.Name, []store.AgentChange{{Path: "AGENTS.md", Data: []byte("b"), IfVersion: store.AnyVersion}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, _, _, err := st.LeaseHolder(ctx, "peek"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("PeekLease took a lease: LeaseHolder = %v", err)
	}
	if ok, err := st.AcquireLease(ctx, "peek", "replica-a", "a:1", time.Millisecond); err != nil || !ok {
		t.Fatalf("AcquireLease = %v, %v", ok, err)
	}
	time.Sleep(5 * time.Millisecond)
	// An expired lease is still on the session: its run was cut off.
	if r, err := st.PeekLease(ctx, "peek", store.AgentRef{}); err != nil || !r.Leased {
		t.Fatalf("PeekLease of a session with an expired lease = %+v, %v; want leased", r, err)
	}
	_, err = st.PeekLease(ctx, "nope", agent)
	wantErr(t, "PeekLease(unknown)", err, store.ErrNotFound)
}

// A write with a claim takes the lease and writes in one commit; it
// stores nothing, and fails with ErrLeaseTaken, when another owner holds
// a live lease or the log moved since the claimer read it.
func (s *suite) testWriteClaimsLease(t *testing.T, ctx context.Context, st store.Store) {
	mustCreate(t, ctx, st, &store.Session{ID: "claim"})
	claim := func(owner string, last int64) *store.LeaseClaim {
		return &store.LeaseClaim{Owner: owner, OwnerAddr: owner + ":1", TTL: time.Minute, LastSequence: last}
	}
	titled := func(r *store.Session) error { r.Title = "prompted"; return nil }
	prompt := eventsOf(1, text("prompt"))
	if err := st.WriteSession(ctx, "claim", store.SessionWrite{Events: prompt, Modify: titled, Claim: claim("replica-a", 0)}); err != nil {
		t.Fatalf("WriteSession with a claim of a free lease: %v", err)
	}
	if owner, addr, _, err := st.LeaseHolder(ctx, "claim"); err != nil || owner != "replica-a" || addr != "replica-a:1" {
		t.Fatalf("holder after the claim = %q %q %v, want replica-a", owner, addr, err)
	}
	if got, err := st.GetSession(ctx, "claim"); err != nil || got.Title != "prompted" || got.LastSequence != 1 {
		t.Fatalf("row after the claim = %+v, %v; want titled at sequence 1", got, err)
	}
	// Another owner is refused while a's lease is live, and so is a
	// claim of a's own that read the log before its last write.
	err := st.WriteSession(ctx, "claim", store.SessionWrite{Events: eventsOf(2, text("b")), Claim: claim("replica-b", 1)})
	wantErr(t, "WriteSession claiming a held lease", err, store.ErrLeaseTaken)
	err = st.WriteSession(ctx, "claim", store.SessionWrite{Modify: titled, Claim: claim("replica-b", 1)})
	wantErr(t, "WriteSession of the row claiming a held lease", err, store.ErrLeaseTaken)
	if err := st.ReleaseLease(ctx, "claim", "replica-a"); err != nil {
		t.Fatal(err)
	}
	// Free again, but the log moved since b read it at sequence 0.
	err = st.WriteSession(ctx, "claim", store.SessionWrite{Events: eventsOf(7, text("b")), Claim: claim("replica-b", 0)})
	wantErr(t, "WriteSession claiming after the log moved", err, store.ErrLeaseTaken)
	if _, _, _, err := st.LeaseHolder(ctx, "claim"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused claim left a lease: LeaseHolder = %v", err)
	}
	got, err := st.ReadEvents(ctx, "claim", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkEvents(t, prompt, got)
	// A claim of the row alone takes the lease too.
	if err := st.WriteSession(ctx, "claim", store.SessionWrite{Modify: titled, Claim: claim("replica-b", 1)}); err != nil {
		t.Fatalf("WriteSession of the row with a claim: %v", err)
	}
	if owner, _, _, err := st.LeaseHolder(ctx, "claim"); err != nil || owner != "replica-b" {
		t.Fatalf("holder after a claim of the row = %q %v, want replica-b", owner, err)
	}
	err = st.WriteSession(ctx, "nope", store.SessionWrite{Events: eventsOf(1, text("x")), Claim: claim("replica-a", 0)})
	wantErr(t, "WriteSession claiming an unknown session", err, store.ErrNotFound)
	err = st.WriteSession(ctx, "claim", store.SessionWrite{Events: eventsOf(2, text("x")), Claim: &store.LeaseClaim{Owner: "replica-b", LastSequence: 1}})
	wantErr(t, "WriteSession with a claim without a ttl", err, store.ErrInvalid)
}

// Of many replicas that read a free session and claim its lease with
// their first write, exactly one writes.
func (s *suite) testClaimContention(t *testing.T, ctx context.Context, st store.Store) {
	mustCreate(t, ctx, st, &store.Session{ID: "claims"})
	won := contend(t, "WriteSession with a claim", 8, func(i int, owner string) (bool, error) {
		// Each numbers its events as it likes: the claim, not the
		// sequence, decides.
		err := st.WriteSession(ctx, "claims", store.SessionWrite{
			Events: eventsOf(int64(1+i*10), text(owner)),
			Claim:  &store.LeaseClaim{Owner: owner, OwnerAddr: owner + ":1", TTL: time.Minute},
		})
		if errors.Is(err, store.ErrLeaseTaken) {
			return false, nil
		}
		return err == nil, err
	})
	if len(won) != 1 {
		t.Fatalf("%d contenders wrote with their claim (%v), want exactly 1", len(won), won)
	}
	if owner, _, _, err := st.LeaseHolder(ctx, "claims"); err != nil || owner != won[0] {
		t.Fatalf("holder = %q %v, want the winner %q", owner, err, won[0])
	}
	got, err := st.ReadEvents(ctx, "claims", 0, 0)
	if err != nil || len(got) != 1 || got[0].Message.GetText().GetText() != won[0] {
		t.Fatalf("log after the contention = %v, %v; want the winner's one event", got, err)
	}
}

func (s *suite) testLargePayload(t *testing.T, ctx context.Context, st store.Store) {
	mustCreate(t, ctx, st, &store.Session{ID: "big"})
	url := bigDataURL(5 << 20)
	img := &penguinv1.OmniMessage{Timestamp: timestamppb.Now(), Payload: &penguinv1.OmniMessage_ImageUrl{
		ImageUrl: &penguinv1.ImageUrl{Role: penguinv1.Role_ROLE_USER, ImageUrl: url}}}
	out := &penguinv1.OmniMessage{Timestamp: timestamppb.Now(), Payload: &penguinv1.OmniMessage_ToolCallOutput{
		ToolCallOutput: &penguinv1.ToolCallOutput{Role: penguinv1.Role_ROLE_USER, Output: "read image.png", ToolCallId: "call_img",
			Images: []string{url}}}}
	want := eventsOf(1, text("before"), img, out, text("after"))
	for _, e := range want {
		if err := st.AppendEvents(ctx, "big", e); err != nil {
			t.Fatalf("AppendEvents(%d): %v", e.Sequence, err)
		}
	}
	got, err := st.ReadEvents(ctx, "big", 0, 0)
	if err != nil {
		t.Fatalf("ReadEvents: %v", err)
	}
	checkEvents(t, want, got)
	if got[1].Message.GetImageUrl().GetImageUrl() != url {
		t.Fatal("the 5 MB data URL did not come back intact")
	}
}

// tornPayload returns the first half of the encoding of a long text: what
// a write cut short would leave. It checks that the bytes really do not
// decode.
func tornPayload(t *testing.T) []byte {
	t.Helper()
	b, err := proto.Marshal(text(strings.Repeat("a long line of text ", 50)))
	if err != nil {
		t.Fatal(err)
	}
	torn := b[:len(b)/2]
	if err := proto.Unmarshal(torn, new(penguinv1.OmniMessage)); err == nil {
		t.Fatal("the torn payload decodes; the test cannot simulate a torn record with it")
	}
	return torn
}

func (s *suite) testTornLastRecord(t *testing.T, ctx context.Context, st store.Store) {
	if s.corrupt == nil {
		t.Fatal("no corrupter given to storetest.Run (use WithCorrupter); torn-record handling is unverified")
	}
	mustCreate(t, ctx, st, &store.Session{ID: "torn"})
	want := eventsOf(1, text("one"), text("two"), text("three"))
	if err := st.AppendEvents(ctx, "torn", want...); err != nil {
		t.Fatalf("AppendEvents: %v", err)
	}
	s.corrupt(t, st, "torn", 3, tornPayload(t))

	// A page that stops before the torn record does not notice it.
	got, err := st.ReadEvents(ctx, "torn", 0, 2)
	if err != nil {
		t.Fatalf("ReadEvents(limit 2): %v", err)
	}
	checkEvents(t, want[:2], got)
	// A read that reaches it skips it.
	got, err = st.ReadEvents(ctx, "torn", 0, 0)
	if err != nil {
		t.Fatalf("ReadEvents with a torn last record: %v", err)
	}
	checkEvents(t, want[:2], got)
	got, err = st.ReadEvents(ctx, "torn", 2, 0)
	if err != nil || len(got) != 0 {
		t.Fatalf("ReadEvents(after 2) = %v, %v; want none", seqsOf(got), err)
	}
	// The sequence number stays used: the next append continues after it,
	// and the torn record never turns into a corrupt middle record.
	sess, err := st.GetSession(ctx, "torn")
	if err != nil || sess.LastSequence != 3 {
		t.Fatalf("LastSequence = %v, %v; want 3", sess, err)
	}
	wantErr(t, "append over the torn sequence", st.AppendEvents(ctx, "torn", eventsOf(3, text("3 again"))...), store.ErrConflict)
	four := eventsOf(4, text("four"))
	if err := st.AppendEvents(ctx, "torn", four...); err != nil {
		t.Fatalf("AppendEvents(4) after a torn record: %v", err)
	}
	got, err = st.ReadEvents(ctx, "torn", 0, 0)
	if err != nil {
		t.Fatalf("ReadEvents after appending past a torn record: %v", err)
	}
	checkEvents(t, append(want[:2:2], four...), got)
}

func (s *suite) testCorruptMiddleRecord(t *testing.T, ctx context.Context, st store.Store) {
	if s.corrupt == nil {
		t.Fatal("no corrupter given to storetest.Run (use WithCorrupter); corrupt-record handling is unverified")
	}
	mustCreate(t, ctx, st, &store.Session{ID: "corrupt-mid"})
	want := eventsOf(1, text("one"), text("two"), text("three"))
	if err := st.AppendEvents(ctx, "corrupt-mid", want...); err != nil {
		t.Fatalf("AppendEvents: %v", err)
	}
	s.corrupt(t, st, "corrupt-mid", 2, []byte{0xff, 0xff, 0xff, 0x01, 0x00})

	_, err := st.ReadEvents(ctx, "corrupt-mid", 0, 0)
	wantErr(t, "ReadEvents over a corrupt middle record", err, store.ErrCorrupt)
	if msg := err.Error(); !strings.Contains(msg, "corrupt-mid") || !strings.Contains(msg, "sequence 2") {
		t.Fatalf("error %q does not name the session and the sequence", msg)
	}
	// Reads that do not reach it still work.
	got, err := st.ReadEvents(ctx, "corrupt-mid", 0, 1)
	if err != nil {
		t.Fatalf("ReadEvents(limit 1): %v", err)
	}
	checkEvents(t, want[:1], got)
	got, err = st.ReadEvents(ctx, "corrupt-mid", 2, 0)
	if err != nil {
		t.Fatalf("ReadEvents(after 2): %v", err)
	}
	checkEvents(t, want[2:], got)
	// The record was not quietly dropped: reading it again fails again.
	_, err = st.ReadEvents(ctx, "corrupt-mid", 1, 0)
	wantErr(t, "second ReadEvents over a corrupt middle record", err, store.ErrCorrupt)
}

func (s *suite) testCanceledContext(t *testing.T, ctx context.Context, st store.Store) {
	mustCreate(t, ctx, st, &store.Session{ID: "ctx"})
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err := st.GetSession(canceled, "ctx")
	wantErr(t, "GetSession(canceled)", err, context.Canceled)
	err = st.AppendEvents(canceled, "ctx", eventsOf(1, text("never"))...)
	wantErr(t, "AppendEvents(canceled)", err, context.Canceled)
	if errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a canceled call reported ErrUnavailable: %v", err)
	}
	got, err := st.ReadEvents(ctx, "ctx", 0, 0)
	if err != nil || len(got) != 0 {
		t.Fatalf("log after a canceled append = %v, %v; want empty", seqsOf(got), err)
	}
}

func (s *suite) testClosed(t *testing.T, ctx context.Context, st store.Store) {
	mustCreate(t, ctx, st, &store.Session{ID: "closed"})
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, err := st.GetSession(ctx, "closed")
	wantErr(t, "GetSession after Close", err, store.ErrUnavailable)
	wantErr(t, "AppendEvents after Close", st.AppendEvents(ctx, "closed", eventsOf(1, text("x"))...), store.ErrUnavailable)
	_, err = st.AcquireLease(ctx, "closed", "a", "", time.Minute)
	wantErr(t, "AcquireLease after Close", err, store.ErrUnavailable)
	_, err = st.Now(ctx)
	wantErr(t, "Now after Close", err, store.ErrUnavailable)
	if err := st.Close(); err != nil {
		t.Fatalf("second Close = %v, want nil", err)
	}
}

func (s *suite) testUnreachable(t *testing.T) {
	if s.unreachable == nil {
		t.Fatal("no unreachable opener given to storetest.Run (use WithUnreachable); unavailability is unverified")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	st, err := s.unreachable(ctx)
	if err == nil {
		_ = st.Close()
		t.Fatal("opening an unreachable store succeeded")
	}
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("opening an unreachable store = %v; want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("opening an unreachable store took %v; want a prompt failure", d)
	}
}
