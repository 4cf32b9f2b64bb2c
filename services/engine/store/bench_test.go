package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// benchChunk is how many appends run between two stretches of baseline
// inserts. Interleaving the two keeps background load and checkpoint
// timing from favouring one side of the ratio.
const benchChunk = 50

// benchMessage is what the loop appends most: an assistant text of a few
// hundred bytes.
func benchMessage() *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Timestamp: timestamppb.Now(), Payload: &penguinv1.OmniMessage_Text{Text: &penguinv1.Text{
		Role: penguinv1.Role_ROLE_ASSISTANT,
		Text: "I created hello.txt with the contents \"hi\" and checked it with cat; the file is in the workspace root. " +
			"Next I will run the tests to make sure nothing else changed, then summarize what I did for you.",
	}}}
}

// runAppendBench measures AppendEvents of one event per call, as the loop
// persists each message before streaming it, against rawInsert of the same
// bytes into a bare table of the same database, interleaved in the same
// run, and reports the ratio.
func runAppendBench(b *testing.B, st store.Store, rawInsert func(ctx context.Context, seq int64, payload []byte) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	m := benchMessage()
	payload, err := proto.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	id := "bench-" + time.Now().Format("150405.000000000")
	if err := st.CreateSession(ctx, &store.Session{ID: id}); err != nil {
		b.Fatal(err)
	}

	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	var base time.Duration
	for done := 0; done < b.N; {
		n := min(benchChunk, b.N-done)
		b.StopTimer()
		start := time.Now()
		for i := range n {
			if err := rawInsert(ctx, int64(done+i+1), payload); err != nil {
				b.Fatalf("raw insert: %v", err)
			}
		}
		base += time.Since(start)
		b.StartTimer()
		for i := range n {
			if err := st.AppendEvents(ctx, id, store.Event{Sequence: int64(done + i + 1), Message: m}); err != nil {
				b.Fatalf("AppendEvents: %v", err)
			}
		}
		done += n
	}
	b.StopTimer()
	appendNs := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	baseNs := float64(base.Nanoseconds()) / float64(b.N)
	b.ReportMetric(baseNs, "raw-insert-ns/op")
	b.ReportMetric(appendNs/baseNs, "x-raw-insert")
}

// BenchmarkAppendEvents measures single-event appends on SQLite (a WAL file
// with synchronous=NORMAL) and PostgreSQL (loopback), each against a raw
// INSERT of the same payload bytes through the same kind of connection
// with the same settings, prepared once as the store prepares its own
// statements (pgx caches them by itself).
func BenchmarkAppendEvents(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		ctx := testkit.Context(b, time.Minute)
		path := filepath.Join(b.TempDir(), "bench.db")
		st, err := store.Open(ctx, path)
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		raw, err := sql.Open("sqlite", path+"?_busy_timeout=10000&_journal_mode=WAL&_synchronous=NORMAL")
		if err != nil {
			b.Fatal(err)
		}
		defer raw.Close()
		raw.SetMaxOpenConns(1)
		if _, err := raw.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS bench_raw (session_id TEXT NOT NULL, seq INTEGER NOT NULL, payload BLOB NOT NULL, PRIMARY KEY (session_id, seq))`); err != nil {
			b.Fatal(err)
		}
		if _, err := raw.ExecContext(ctx, `DELETE FROM bench_raw`); err != nil {
			b.Fatal(err)
		}
		insert, err := raw.PrepareContext(ctx, `INSERT INTO bench_raw (session_id, seq, payload) VALUES (?, ?, ?)`)
		if err != nil {
			b.Fatal(err)
		}
		defer insert.Close()
		runAppendBench(b, st, func(ctx context.Context, seq int64, payload []byte) error {
			_, err := insert.ExecContext(ctx, "raw", seq, payload)
			return err
		})
	})
	b.Run("postgres", func(b *testing.B) {
		env := newPGEnv(b)
		schema, u := env.freshSchema(b)
		ctx := testkit.Context(b, time.Minute)
		st, err := store.Open(ctx, u)
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		table := pgx.Identifier{schema, "bench_raw"}.Sanitize()
		if _, err := env.admin.Exec(ctx, `CREATE TABLE `+table+` (session_id text NOT NULL, seq bigint NOT NULL, payload bytea NOT NULL, PRIMARY KEY (session_id, seq))`); err != nil {
			b.Fatal(err)
		}
		runAppendBench(b, st, func(ctx context.Context, seq int64, payload []byte) error {
			_, err := env.admin.Exec(ctx, `INSERT INTO `+table+` (session_id, seq, payload) VALUES ($1, $2, $3)`, "raw", seq, payload)
			return err
		})
	})
}

// runModifyBench measures ModifySession against what it replaced in the
// engine, GetSession then UpdateSession of the same change, interleaved in
// chunks in the same run, and reports the ratio.
func runModifyBench(b *testing.B, st store.Store) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	id := "bench-" + time.Now().Format("150405.000000000")
	if err := st.CreateSession(ctx, &store.Session{ID: id, Config: []byte(`{}`)}); err != nil {
		b.Fatal(err)
	}
	change := func(s *store.Session) error {
		s.Title = "step " + time.Now().Format("150405.000000000")
		return nil
	}
	b.ResetTimer()
	var base time.Duration
	for done := 0; done < b.N; {
		n := min(benchChunk, b.N-done)
		b.StopTimer()
		start := time.Now()
		for range n {
			s, err := st.GetSession(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			_ = change(s)
			if err := st.UpdateSession(ctx, s); err != nil {
				b.Fatal(err)
			}
		}
		base += time.Since(start)
		b.StartTimer()
		for range n {
			if err := st.ModifySession(ctx, id, change); err != nil {
				b.Fatal(err)
			}
		}
		done += n
	}
	b.StopTimer()
	modifyNs := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	baseNs := float64(base.Nanoseconds()) / float64(b.N)
	b.ReportMetric(baseNs, "get-then-update-ns/op")
	b.ReportMetric(modifyNs/baseNs, "x-get-then-update")
}

// BenchmarkModifySession measures a read-modify-write of a session row in
// one transaction against a GetSession and an UpdateSession, on SQLite (a
// WAL file, where the read goes to a reader connection whose cache every
// write invalidates) and PostgreSQL (loopback).
func BenchmarkModifySession(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) { runModifyBench(b, openSQLiteBench(b)) })
	b.Run("postgres", func(b *testing.B) { runModifyBench(b, openPGBench(b)) })
}

// openSQLiteBench opens a store in a new SQLite file, closed when b ends.
func openSQLiteBench(b *testing.B) store.Store {
	st, err := store.Open(testkit.Context(b, time.Minute), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return st
}

// openPGBench opens a store in a new schema of the test PostgreSQL,
// closed when b ends.
func openPGBench(b *testing.B) store.Store {
	env := newPGEnv(b)
	_, u := env.freshSchema(b)
	st, err := store.Open(testkit.Context(b, time.Minute), u)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return st
}

// BenchmarkAppendEventBatches measures AppendEvents of a batch of events
// per call, as the session's journal commits what queued up before a
// durability point, on SQLite and PostgreSQL; it reports the cost per
// event.
func BenchmarkAppendEventBatches(b *testing.B) {
	for _, n := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("sqlite/%d", n), func(b *testing.B) { runBatchBench(b, openSQLiteBench(b), n) })
	}
	for _, n := range []int{1, 4} {
		b.Run(fmt.Sprintf("postgres/%d", n), func(b *testing.B) { runBatchBench(b, openPGBench(b), n) })
	}
}

// runBatchBench appends batches of n events to one session.
func runBatchBench(b *testing.B, st store.Store, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	id := "bench-" + time.Now().Format("150405.000000000")
	if err := st.CreateSession(ctx, &store.Session{ID: id}); err != nil {
		b.Fatal(err)
	}
	m := benchMessage()
	batch := make([]store.Event, n)
	var seq int64
	b.ResetTimer()
	for range b.N {
		for i := range batch {
			seq++
			batch[i] = store.Event{Sequence: seq, Message: m}
		}
		if err := st.AppendEvents(ctx, id, batch...); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
}

// BenchmarkTaskLog writes what one task of the end-to-end benchmark
// logs, in its commits, to a new session of a SQLite file: the row with
// its session_meta (a system prompt of some 5 KiB), the prompt with the
// title, the tool list (some 10 KiB) with the first request's events and
// the environment's binding, the tool's output, and the task's end with
// the usage and the config's members that say how it ended. Every
// session of the benchmark logs the same prompt and tools, as every
// session of an agent does. It reports the bytes allocated per task
// (-benchmem), the process's CPU time per task (the background
// checkpoints' included) and the database's growth. The row changes are made as the
// engine makes them (patch), or as it made them before 2026-12-07's
// eleventh round (modify: each read back and written whole, the config
// decoded and encoded in Go).
//
// The third, alternating, writes chunks of tasks the two ways in turn on
// one store and reports each way's CPU time per task: on a loaded
// machine, where one run's CPU moves by a third with the load, only
// figures taken in the same moments compare.
//
// postgres-alternating does what alternating does on the test
// PostgreSQL (loopback); the process's CPU is then the client's only, and
// each way's wall time per task is reported too.
func BenchmarkTaskLog(b *testing.B) {
	alternate := func(i int) bool { return i/25%2 == 0 }
	sqlite := func(patch func(int) bool) func(*testing.B) {
		return func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "bench.db")
			st, err := store.Open(testkit.Context(b, time.Minute), path)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			runTaskLog(b, st, patch)
			if err := st.Close(); err != nil {
				b.Fatal(err)
			}
			var size int64
			for _, suffix := range []string{"", "-wal"} {
				if fi, err := os.Stat(path + suffix); err == nil {
					size += fi.Size()
				}
			}
			b.ReportMetric(float64(size)/float64(b.N), "db-bytes/task")
		}
	}
	b.Run("patch", sqlite(func(int) bool { return true }))
	b.Run("modify", sqlite(func(int) bool { return false }))
	b.Run("alternating", sqlite(alternate))
	b.Run("postgres-alternating", func(b *testing.B) { runTaskLog(b, openPGBench(b), alternate) })
}

// taskLogConfig is the part of the engine's config a task's end changes.
type taskLogConfig struct {
	SeqHigh           int64           `json:"seq_high,omitempty"`
	ContextSeq        int64           `json:"context_seq,omitempty"`
	Note              string          `json:"note,omitempty"`
	NoteSeq           int64           `json:"note_seq,omitempty"`
	SharedEnvironment bool            `json:"shared_environment,omitempty"`
	LastEnd           json.RawMessage `json:"last_end,omitempty"`
}

// modifyConfig is a Modify that changes the row's config with f, as the
// engine's did.
func modifyConfig(f func(*store.Session, *taskLogConfig)) func(*store.Session) error {
	return func(s *store.Session) error {
		var c taskLogConfig
		if len(s.Config) > 0 {
			if err := json.Unmarshal(s.Config, &c); err != nil {
				return err
			}
		}
		f(s, &c)
		var err error
		s.Config, err = json.Marshal(c)
		return err
	}
}

// runTaskLog runs BenchmarkTaskLog, the ith task with patches when
// patch(i) says so and with Modify otherwise.
func runTaskLog(b *testing.B, st store.Store, patch func(i int) bool) {
	ctx := testkit.Context(b, 5*time.Minute)
	prompt := strings.Repeat("You are Penguin, a careful coding agent. Read before you write. ", 75)
	tools := &penguinv1.ToolListReady{}
	for i := range 20 {
		tools.Tools = append(tools.Tools, &penguinv1.ToolDefinition{
			Name:        fmt.Sprintf("tool_%d", i),
			Description: strings.Repeat("Reads a file of the workspace and returns its lines. ", 7),
			Parameters:  `{"type":"object","properties":{"path":{"type":"string"},"offset":{"type":"integer"}},"required":["path"]}`,
		})
	}
	msg := func(p any) *penguinv1.OmniMessage {
		m := &penguinv1.OmniMessage{Timestamp: timestamppb.Now()}
		switch p := p.(type) {
		case *penguinv1.SessionMeta:
			m.Payload = &penguinv1.OmniMessage_SessionMeta{SessionMeta: p}
		case *penguinv1.ToolListReady:
			m.Payload = &penguinv1.OmniMessage_ToolListReady{ToolListReady: p}
		case string:
			m.Payload = &penguinv1.OmniMessage_Text{Text: &penguinv1.Text{Role: penguinv1.Role_ROLE_USER, Text: p}}
		}
		return m
	}
	usage := &penguinv1.TokenCounts{Output: 12, Total: 3400}
	lastEnd := []byte(`{"sequence":40,"status":1}`)
	// The row's changes at the prompt, the binding and the end: patched
	// and modified.
	var patched, modified [3]store.SessionWrite
	{
		changes := &patched
		changes[0].Patch = &store.SessionPatch{Title: "Read hello.txt and tell me what it says"}
		changes[1].Patch = &store.SessionPatch{Environment: &store.EnvironmentBinding{ID: "env-1", Addr: "127.0.0.1:7070"}}
		changes[2].Patch = &store.SessionPatch{Usage: usage, Config: []store.ConfigChange{
			{Key: "seq_high", Rule: store.ConfigRaise, N: 41},
			{Key: "last_end", Value: lastEnd},
			{Key: "note"},
			{Key: "note_seq", Rule: store.ConfigLastSequence},
		}}
		changes = &modified
		changes[0].Modify = func(s *store.Session) error {
			if s.Title == "" {
				s.Title = "Read hello.txt and tell me what it says"
			}
			return nil
		}
		changes[1].Modify = modifyConfig(func(s *store.Session, c *taskLogConfig) {
			s.EnvironmentID, s.EnvironmentAddr = "env-1", "127.0.0.1:7070"
			c.SharedEnvironment = false
		})
		changes[2].Modify = modifyConfig(func(s *store.Session, c *taskLogConfig) {
			s.Usage = usage
			c.SeqHigh = max(c.SeqHigh, 41)
			c.LastEnd = lastEnd
			c.Note, c.NoteSeq = "", s.LastSequence
		})
	}
	b.ReportAllocs()
	var cpu, wall [2]time.Duration // of the tasks modified and patched
	var tasks [2]int
	b.ResetTimer()
	for i := range b.N {
		p := patch(i)
		changes, side := &modified, 0
		if p {
			changes, side = &patched, 1
		}
		start, t0 := processCPU(b), time.Now()
		id := fmt.Sprintf("task-%08d", i)
		meta := &penguinv1.SessionMeta{SessionId: id, Provider: "openai", ModelId: "mock", SystemPrompt: prompt,
			Workspace: "/work/" + id, AgentState: "/agents/default"}
		if err := st.CreateSession(ctx, &store.Session{ID: id, Config: []byte(`{"seq_high":1,"context_seq":1}`)}, store.Event{Sequence: 1, Message: msg(meta)}); err != nil {
			b.Fatal(err)
		}
		commits := []struct {
			events []store.Event
			row    store.SessionWrite
		}{
			{[]store.Event{{Sequence: 2, Message: msg("Read hello.txt and tell me what it says")}}, changes[0]},
			{[]store.Event{{Sequence: 3, Message: msg(tools)}, {Sequence: 4, Message: msg("calling read_file")}}, changes[1]},
			{[]store.Event{{Sequence: 5, Message: msg("hello world")}}, store.SessionWrite{}},
			{[]store.Event{{Sequence: 6, Message: msg("It says hello world.")}}, changes[2]},
		}
		for _, c := range commits {
			w := c.row
			w.Events = c.events
			if err := st.WriteSession(ctx, id, w); err != nil {
				b.Fatal(err)
			}
		}
		cpu[side] += processCPU(b) - start
		wall[side] += time.Since(t0)
		tasks[side]++
	}
	b.StopTimer()
	for side, name := range []string{"modify", "patch"} {
		if tasks[side] > 0 {
			b.ReportMetric(float64(cpu[side].Microseconds())/float64(tasks[side]), name+"-cpu-µs/task")
			b.ReportMetric(float64(wall[side].Microseconds())/float64(tasks[side]), name+"-µs/task")
		}
	}
}

// BenchmarkRunReads measures what a Run reads from a SQLite store for a
// new session's task, the two ways in turn on the same store: apart (the
// row, then the caller's membership, the lease, the row again and the
// log, as before 2026-12-07's tenth round), and joined (the row with the
// membership in one statement, then the row and the log in the lease's
// transaction). Each task's session is created first with a log of the
// size a new session's is (its session_meta and tool list, some 15
// KiB), so the readers' caches are as cold as after a commit.
func BenchmarkRunReads(b *testing.B) {
	st := openSQLiteBench(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	text := func(n int) *penguinv1.OmniMessage {
		return &penguinv1.OmniMessage{Timestamp: timestamppb.Now(), Payload: &penguinv1.OmniMessage_Text{Text: &penguinv1.Text{
			Role: penguinv1.Role_ROLE_USER, Text: strings.Repeat("x", n)}}}
	}
	first := []store.Event{{Sequence: 1, Message: text(4800)}, {Sequence: 2, Message: text(10300)}}
	lr := st.(store.LeaseReader)
	var apart, joined time.Duration
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("s-%d", i)
		if err := st.CreateSession(ctx, &store.Session{ID: id}, first...); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if i%2 == 0 {
			if _, err := st.GetSession(ctx, id); err != nil {
				b.Fatal(err)
			}
			if _, err := st.GetMember(ctx, store.DefaultProject, store.AdminUser); err != nil {
				b.Fatal(err)
			}
			if ok, err := st.AcquireLease(ctx, id, "me", "", time.Minute); err != nil || !ok {
				b.Fatal(ok, err)
			}
			if _, err := st.GetSession(ctx, id); err != nil {
				b.Fatal(err)
			}
			if _, err := st.ReadEvents(ctx, id, 0, 0); err != nil {
				b.Fatal(err)
			}
			apart += time.Since(t0)
		} else {
			if _, _, err := st.GetSessionAccess(ctx, id, store.AdminUser); err != nil {
				b.Fatal(err)
			}
			if ok, r, err := lr.AcquireLeaseRead(ctx, id, "me", "", time.Minute); err != nil || !ok || !r.Whole {
				b.Fatal(ok, r, err)
			}
			joined += time.Since(t0)
		}
	}
	b.StopTimer()
	half := float64(b.N) / 2
	b.ReportMetric(float64(apart.Microseconds())/half, "apart-µs/task")
	b.ReportMetric(float64(joined.Microseconds())/half, "joined-µs/task")
}

// BenchmarkNewSessionReads measures what creating a session reads from
// the store, the two ways in turn on the same store: apart (the caller's
// memberships, the agent's version and the model's settings, three
// statements, as before 2026-12-07's thirteenth round) and joined (one
// statement, ReadForNewSession). Each task's session is created first,
// with a session_meta, so the readers' caches are as cold as after a
// commit. It reports each way's wall time, allocations and bytes
// allocated per task; on SQLite it runs on a file, and postgres on the
// test PostgreSQL (loopback).
func BenchmarkNewSessionReads(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) { runNewSessionReads(b, openSQLiteBench(b)) })
	b.Run("postgres", func(b *testing.B) { runNewSessionReads(b, openPGBench(b)) })
}

func runNewSessionReads(b *testing.B, st store.Store) {
	ctx := testkit.Context(b, 5*time.Minute)
	agents := st.(store.AgentStore)
	if _, err := agents.CreateAgent(ctx, store.DefaultProject, "coder", []store.AgentFile{{Path: "AGENTS.md", Data: []byte("a")}}); err != nil {
		b.Fatal(err)
	}
	if err := st.PutModelSetting(ctx, &store.ModelSetting{Project: store.DefaultProject, Provider: "openai", ModelID: "mock", ContextWindow: 8192}); err != nil {
		b.Fatal(err)
	}
	meta := &penguinv1.OmniMessage{Timestamp: timestamppb.Now(), Payload: &penguinv1.OmniMessage_SessionMeta{SessionMeta: &penguinv1.SessionMeta{
		Provider: "openai", ModelId: "mock", SystemPrompt: strings.Repeat("You are Penguin. ", 280)}}}
	q := store.NewSessionQuery{UserID: store.AdminUser, Agent: store.AgentRef{Project: store.DefaultProject, Name: "coder"},
		Provider: "openai", ModelID: "mock", Project: store.DefaultProject}
	apart := func() {
		if ms, err := st.MembershipsOf(ctx, store.AdminUser); err != nil || len(ms) != 1 {
			b.Fatal(ms, err)
		}
		if a, err := agents.GetAgent(ctx, store.DefaultProject, "coder"); err != nil || a.Version != 1 {
			b.Fatal(a, err)
		}
		if s, err := st.GetModelSetting(ctx, store.DefaultProject, "openai", "mock"); err != nil || s.ContextWindow != 8192 {
			b.Fatal(s, err)
		}
	}
	joined := func() {
		r, err := st.ReadForNewSession(ctx, q)
		if err != nil || len(r.Memberships) != 1 || r.AgentVersion != 1 {
			b.Fatal(r, err)
		}
		if s, ok := r.ModelSetting(store.DefaultProject, "openai", "mock"); !ok || s.ContextWindow != 8192 {
			b.Fatal(s, ok)
		}
	}
	var (
		wall          [2]time.Duration
		allocs, bytes [2]uint64
		ms            runtime.MemStats
	)
	b.ResetTimer()
	for i := range b.N {
		if err := st.CreateSession(ctx, &store.Session{ID: fmt.Sprintf("s-%d", i)}, store.Event{Sequence: 1, Message: meta}); err != nil {
			b.Fatal(err)
		}
		way, read := i%2, apart
		if way == 1 {
			read = joined
		}
		runtime.ReadMemStats(&ms)
		m0, b0, t0 := ms.Mallocs, ms.TotalAlloc, time.Now()
		read()
		wall[way] += time.Since(t0)
		runtime.ReadMemStats(&ms)
		allocs[way] += ms.Mallocs - m0
		bytes[way] += ms.TotalAlloc - b0
	}
	b.StopTimer()
	for way, name := range []string{"apart", "joined"} {
		n := float64(b.N / 2)
		if n == 0 {
			continue
		}
		b.ReportMetric(float64(wall[way].Microseconds())/n, name+"-µs/task")
		b.ReportMetric(float64(allocs[way])/n, name+"-allocs/task")
		b.ReportMetric(float64(bytes[way])/n, name+"-B/task")
	}
}
