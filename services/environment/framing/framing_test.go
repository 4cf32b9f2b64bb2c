package framing

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/services/environment/redact"
	"github.com/penguin-agent/penguin/services/environment/tool"
)

// recorder collects the frames of one call.
type recorder struct {
	mu   sync.Mutex
	msgs []*penguinv1.OmniMessage
}

func (r *recorder) send(m *penguinv1.OmniMessage) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, m)
	return nil
}

func (r *recorder) deltas() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, m := range r.msgs {
		if p := m.GetPartialToolCallOutput(); p != nil && p.GetEventType() == penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA {
			out = append(out, p.GetOutput())
		}
	}
	return out
}

func fn(f func(ctx context.Context, args string, out tool.Output) (tool.Result, error)) tool.Tool {
	return tool.Func{Def: &penguinv1.ToolDefinition{Name: "t"}, Fn: f}
}

// run runs t and checks the stream with the contract's validator.
func run(t *testing.T, ctx context.Context, tl tool.Tool, opts Options) (*penguinv1.ToolCallOutput, *recorder) {
	t.Helper()
	rec := &recorder{}
	out := Run(ctx, "call-1", tl, "{}", opts, rec.send)
	if err := omni.ValidateToolStream("call-1", rec.msgs); err != nil {
		t.Fatalf("stream breaks the discipline: %v", err)
	}
	if got := rec.msgs[len(rec.msgs)-1].GetToolCallOutput(); got.GetOutput() != out.GetOutput() {
		t.Fatalf("returned output differs from the sent one")
	}
	return out, rec
}

func TestStreamsDeltasAndNote(t *testing.T) {
	out, rec := run(t, testkit.Context(t, 30*time.Second), fn(func(ctx context.Context, _ string, o tool.Output) (tool.Result, error) {
		o.WriteString("hello ")
		o.Write([]byte("world"))
		return tool.Result{Note: "[exit code 0]"}, nil
	}), Options{})
	if out.GetOutput() != "hello world\n[exit code 0]" {
		t.Fatalf("output %q", out.GetOutput())
	}
	if got := rec.deltas(); len(got) != 3 {
		t.Fatalf("deltas %q", got)
	}
	if out.GetStopReason() != penguinv1.StopReason_STOP_REASON_UNSPECIFIED {
		t.Fatalf("stop %v", out.GetStopReason())
	}
}

func TestEmptyOutputSaysSo(t *testing.T) {
	out, _ := run(t, testkit.Context(t, 30*time.Second), fn(func(context.Context, string, tool.Output) (tool.Result, error) {
		return tool.Result{}, nil
	}), Options{})
	if out.GetOutput() != "[no output]" {
		t.Fatalf("output %q", out.GetOutput())
	}
}

func TestTruncationKeepsHeadAndArchives(t *testing.T) {
	dir := t.TempDir()
	full := strings.Repeat("0123456789", 5) // 50 characters
	out, _ := run(t, testkit.Context(t, 30*time.Second), fn(func(ctx context.Context, _ string, o tool.Output) (tool.Result, error) {
		for i := 0; i < len(full); i += 7 {
			o.WriteString(full[i:min(i+7, len(full))])
		}
		return tool.Result{Note: "[exit code 0]"}, nil
	}), Options{Limits: tool.Limits{MaxOutput: 12}, Archives: testArchives(t, dir, 1<<20)})
	got := out.GetOutput()
	if !strings.HasPrefix(got, full[:12]+"\n[output truncated: showing the first 12 of 50 characters; the full output is saved at ") {
		t.Fatalf("output %q", got)
	}
	if !strings.HasSuffix(got, "]\n[exit code 0]") {
		t.Fatalf("the note must follow the marker: %q", got)
	}
	path := strings.TrimSuffix(got[strings.Index(got, "saved at ")+len("saved at "):], "]\n[exit code 0]")
	if !strings.HasPrefix(path, dir) {
		t.Fatalf("archive %q not under %q", path, dir)
	}
	data, err := os.ReadFile(path)
	if err != nil || string(data) != full {
		t.Fatalf("archive content %q, %v", data, err)
	}
	info, _ := os.Stat(path)
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("archive mode %v", info.Mode())
	}
}

func TestArchiveKeepsHeadAndTailBeyondBudget(t *testing.T) {
	a := newArchive(100)
	for i := 0; i < 50; i++ {
		a.add("abcdefghij")
	}
	dir := t.TempDir()
	path, err := testArchives(t, dir, 1<<20).save(a, "c/1")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(path) != filepath.ToSlash(dir) {
		t.Fatalf("saved at %q", path)
	}
	data, _ := os.ReadFile(path)
	s := string(data)
	if !strings.HasPrefix(s, strings.Repeat("abcdefghij", 5)) || !strings.HasSuffix(s, strings.Repeat("abcdefghij", 5)) ||
		!strings.Contains(s, "[... 400 bytes of the middle of the output are not kept ...]") {
		t.Fatalf("archive %q", s)
	}
}

// TestArchiveWithinBudgetIsWhole saves outputs that pass the head but fit
// the budget, within one archive block and across several: all of each is
// kept, with no note.
func TestArchiveWithinBudgetIsWhole(t *testing.T) {
	store := testArchives(t, t.TempDir(), 1<<30)
	for _, n := range []int{70, 100, 3*archiveBlock + 17} {
		budget := max(100, n+n/3)
		a := newArchive(budget)
		var want strings.Builder
		for i := 0; want.Len() < n; i++ {
			piece := strconv.Itoa(i) + ","
			piece = piece[:min(len(piece), n-want.Len())]
			want.WriteString(piece)
			a.add(piece)
		}
		path, err := store.save(a, "w")
		if err != nil {
			t.Fatal(err)
		}
		if data, _ := os.ReadFile(path); string(data) != want.String() {
			t.Fatalf("%d bytes in a budget of %d: archive of %d bytes, want them all", n, budget, len(data))
		}
	}
}

// testArchives opens dir as an archive store of limit bytes.
func testArchives(t *testing.T, dir string, limit int64) *Archives {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return NewArchives(dir, func() (*os.Root, error) { return root, nil }, limit)
}

// TestArchivesRemoveTheOldestBeyondTheLimit saves more than the limit
// holds: the newest archives stay, the oldest go, and the directory never
// holds more than the limit.
func TestArchivesRemoveTheOldestBeyondTheLimit(t *testing.T) {
	dir := t.TempDir()
	store := testArchives(t, dir, 2500)
	var paths []string
	for i := 0; i < 10; i++ {
		a := newArchive(store.budget())
		a.add(strings.Repeat(strconv.Itoa(i), 1000))
		p, err := store.save(a, "call-"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
		var total int64
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			info, _ := e.Info()
			total += info.Size()
		}
		if total > 2500 {
			t.Fatalf("after save %d the directory holds %d bytes, over the 2500 limit", i, total)
		}
	}
	for i, p := range paths {
		_, err := os.Stat(p)
		if kept := err == nil; kept != (i >= 8) {
			t.Fatalf("archive %d kept=%v (%v); want only the two newest", i, kept, err)
		}
	}
	// One archive larger than the limit is cut to the limit.
	a := newArchive(store.budget())
	a.add(strings.Repeat("x", 10000))
	p, err := store.save(a, "big")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(p); err != nil || info.Size() > 2600 {
		t.Fatalf("a big archive: %v %v", info, err)
	}
}

// TestArchivesStayInTheirDirectory replaces the archive directory with a
// symbolic link to another directory after the store was opened: saves go
// on landing in the original directory, never through the link.
func TestArchivesStayInTheirDirectory(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "archives")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{dir, outside} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	store := testArchives(t, dir, 1<<20)
	moved := filepath.Join(base, "moved")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, dir); err != nil {
		t.Fatal(err)
	}
	a := newArchive(store.budget())
	a.add("text")
	if _, err := store.save(a, "c"); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("the save followed the link out: %v", entries)
	}
	if entries, _ := os.ReadDir(moved); len(entries) != 1 {
		t.Fatalf("the save is not in the original directory: %v", entries)
	}
}

func TestCeilingAppliesWithoutCap(t *testing.T) {
	out, _ := run(t, testkit.Context(t, 30*time.Second), fn(func(ctx context.Context, _ string, o tool.Output) (tool.Result, error) {
		o.WriteString(strings.Repeat("x", 100))
		return tool.Result{}, nil
	}), Options{Ceiling: 10})
	if !strings.HasPrefix(out.GetOutput(), strings.Repeat("x", 10)+"\n[output truncated: showing the first 10 of 100 characters]") {
		t.Fatalf("output %q", out.GetOutput())
	}
}

func TestTruncationCountsCharactersNotBytes(t *testing.T) {
	out, _ := run(t, testkit.Context(t, 30*time.Second), fn(func(ctx context.Context, _ string, o tool.Output) (tool.Result, error) {
		o.WriteString("ééééé")
		return tool.Result{}, nil
	}), Options{Limits: tool.Limits{MaxOutput: 3}})
	if !strings.HasPrefix(out.GetOutput(), "ééé\n[output truncated: showing the first 3 of 5 characters]") {
		t.Fatalf("output %q", out.GetOutput())
	}
}

func TestInvalidAndSplitUTF8(t *testing.T) {
	out, _ := run(t, testkit.Context(t, 30*time.Second), fn(func(ctx context.Context, _ string, o tool.Output) (tool.Result, error) {
		e := []byte("é")
		o.Write(e[:1])
		o.Write(e[1:])
		o.Write([]byte{'a', 0xff, 'b'})
		o.Write([]byte("€")[:2]) // never completed
		return tool.Result{}, nil
	}), Options{})
	if out.GetOutput() != "éa\uFFFDb\uFFFD" {
		t.Fatalf("output %q", out.GetOutput())
	}
}

func TestRedactsAcrossDeltas(t *testing.T) {
	v := redact.New(map[string]string{"TOKEN": "supersecret"})
	out, rec := run(t, testkit.Context(t, 30*time.Second), fn(func(ctx context.Context, _ string, o tool.Output) (tool.Result, error) {
		o.WriteString("token=super")
		o.WriteString("secret done")
		return tool.Result{Note: "[note supersecret]"}, errors.New("failed with supersecret")
	}), Options{Vault: v})
	for _, d := range rec.deltas() {
		if strings.Contains(d, "super") && strings.Contains(d, "secret") {
			t.Fatalf("delta leaks: %q", d)
		}
	}
	if strings.Contains(out.GetOutput(), "supersecret") || !strings.Contains(out.GetOutput(), "token=$TOKEN done") {
		t.Fatalf("output %q", out.GetOutput())
	}
}

func TestTimeoutCancelsTheTool(t *testing.T) {
	start := time.Now()
	out, _ := run(t, testkit.Context(t, 30*time.Second), fn(func(ctx context.Context, _ string, o tool.Output) (tool.Result, error) {
		o.WriteString("working")
		<-ctx.Done()
		return tool.Result{StopReason: penguinv1.StopReason_STOP_REASON_FAILED}, errors.New("interrupted")
	}), Options{Limits: tool.Limits{Timeout: 50 * time.Millisecond}})
	if out.GetStopReason() != penguinv1.StopReason_STOP_REASON_TIMEOUT {
		t.Fatalf("stop %v", out.GetStopReason())
	}
	if !strings.Contains(out.GetOutput(), "[timed out after 50ms]") || !strings.HasPrefix(out.GetOutput(), "working") {
		t.Fatalf("output %q", out.GetOutput())
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("timeout took too long")
	}
}

func TestAbortWinsOverEverything(t *testing.T) {
	ctx, cancel := context.WithCancel(testkit.Context(t, 30*time.Second))
	started := make(chan struct{})
	go func() { <-started; cancel() }()
	out, _ := run(t, ctx, fn(func(ctx context.Context, _ string, o tool.Output) (tool.Result, error) {
		close(started)
		<-ctx.Done()
		return tool.Result{}, errors.New("boom")
	}), Options{Limits: tool.Limits{Timeout: time.Hour}})
	if out.GetStopReason() != penguinv1.StopReason_STOP_REASON_ABORTED || !strings.Contains(out.GetOutput(), "[aborted]") {
		t.Fatalf("got %v %q", out.GetStopReason(), out.GetOutput())
	}
}

func TestStuckToolIsAbandonedAfterGrace(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	out, _ := run(t, testkit.Context(t, 30*time.Second), fn(func(ctx context.Context, _ string, o tool.Output) (tool.Result, error) {
		<-release // ignores ctx
		o.WriteString("late")
		return tool.Result{}, nil
	}), Options{Limits: tool.Limits{Timeout: 20 * time.Millisecond}, Grace: 20 * time.Millisecond})
	if out.GetStopReason() != penguinv1.StopReason_STOP_REASON_TIMEOUT || !strings.Contains(out.GetOutput(), "did not stop") {
		t.Fatalf("got %v %q", out.GetStopReason(), out.GetOutput())
	}
}

func TestErrorsAndPanicsBecomeFailedOutputs(t *testing.T) {
	out, _ := run(t, testkit.Context(t, 30*time.Second), fn(func(ctx context.Context, _ string, o tool.Output) (tool.Result, error) {
		o.WriteString("partial")
		return tool.Result{}, errors.New("disk on fire")
	}), Options{})
	if out.GetStopReason() != penguinv1.StopReason_STOP_REASON_FAILED || out.GetOutput() != "partial\ndisk on fire" {
		t.Fatalf("got %v %q", out.GetStopReason(), out.GetOutput())
	}
	out, _ = run(t, testkit.Context(t, 30*time.Second), fn(func(ctx context.Context, _ string, o tool.Output) (tool.Result, error) {
		var m map[string]int
		m["x"] = 1
		return tool.Result{}, nil
	}), Options{})
	if out.GetStopReason() != penguinv1.StopReason_STOP_REASON_FAILED || !strings.Contains(out.GetOutput(), "the tool failed unexpectedly: assignment to entry in nil map") {
		t.Fatalf("got %v %q", out.GetStopReason(), out.GetOutput())
	}
	out, _ = run(t, testkit.Context(t, 30*time.Second), fn(func(ctx context.Context, _ string, o tool.Output) (tool.Result, error) {
		return tool.Result{StopReason: penguinv1.StopReason_STOP_REASON_FAILED, Note: "[exit code 3]"}, nil
	}), Options{})
	if out.GetStopReason() != penguinv1.StopReason_STOP_REASON_FAILED || out.GetOutput() != "[no output]\n[exit code 3]" {
		t.Fatalf("got %v %q", out.GetStopReason(), out.GetOutput())
	}
}

func TestImagesRideTheLastDelta(t *testing.T) {
	out, _ := run(t, testkit.Context(t, 30*time.Second), fn(func(ctx context.Context, _ string, o tool.Output) (tool.Result, error) {
		o.WriteString("an image")
		return tool.Result{Images: []string{"data:image/png;base64,AAAA"}}, nil
	}), Options{})
	if len(out.GetImages()) != 1 || out.GetOutput() != "an image" {
		t.Fatalf("got %q %v", out.GetOutput(), out.GetImages())
	}
}

func TestReply(t *testing.T) {
	rec := &recorder{}
	out := Reply(testkit.Context(t, 30*time.Second), "c", "Tool call denied by policy.", penguinv1.StopReason_STOP_REASON_ABORTED, Options{}, rec.send)
	if err := omni.ValidateToolStream("c", rec.msgs); err != nil {
		t.Fatal(err)
	}
	if out.GetOutput() != "Tool call denied by policy." || out.GetStopReason() != penguinv1.StopReason_STOP_REASON_ABORTED {
		t.Fatalf("got %v %q", out.GetStopReason(), out.GetOutput())
	}
}

func TestSendFailureStopsSending(t *testing.T) {
	calls := 0
	send := func(*penguinv1.OmniMessage) error { calls++; return errors.New("gone") }
	out := Run(testkit.Context(t, 30*time.Second), "c", fn(func(ctx context.Context, _ string, o tool.Output) (tool.Result, error) {
		o.WriteString("a")
		o.WriteString("b")
		return tool.Result{}, nil
	}), "", Options{}, send)
	if calls != 1 || out.GetOutput() != "ab" {
		t.Fatalf("calls %d output %q", calls, out.GetOutput())
	}
}

// TestArchiveOfBulkOutputPastTheCap writes a long output in pieces of
// varying sizes through Write, as a command's output arrives: the count of
// characters, the archive's head and its tail window (a ring that wraps
// many times, pieces larger than it included) must match the text, with
// multi-byte characters split across pieces and an invalid byte repaired.
func TestArchiveOfBulkOutputPastTheCap(t *testing.T) {
	// Odd budgets, so that the ring's size and the pieces never line up:
	// one within an archive block, one across several.
	for _, budget := range []int{1001, 3*archiveBlock + 1001} {
		testArchiveOfBulkOutput(t, budget)
	}
}

func testArchiveOfBulkOutput(t *testing.T, budget int) {
	var full strings.Builder
	for i := 0; full.Len() < 40*budget; i++ {
		full.WriteString("line " + strconv.Itoa(i) + " é€😀\n")
	}
	text := []byte(full.String() + "\xff end")
	want := full.String() + "\uFFFD end"
	dir := t.TempDir()
	store := testArchives(t, dir, int64(budget))
	out, _ := run(t, testkit.Context(t, 30*time.Second), fn(func(ctx context.Context, _ string, o tool.Output) (tool.Result, error) {
		sizes := []int{1, 7, 3000, 333, 2, 900, 64, 5, 70000}
		for i, off := 0, 0; off < len(text); i++ {
			n := min(sizes[i%len(sizes)], len(text)-off)
			o.Write(text[off : off+n])
			off += n
		}
		return tool.Result{}, nil
	}), Options{Limits: tool.Limits{MaxOutput: 10}, Archives: store})
	total := utf8.RuneCountInString(want)
	if !strings.Contains(out.GetOutput(), "showing the first 10 of "+strconv.Itoa(total)+" characters") {
		t.Fatalf("budget %d: output %q; want %d characters counted", budget, out.GetOutput(), total)
	}
	got := out.GetOutput()
	path := strings.TrimSuffix(got[strings.Index(got, "saved at ")+len("saved at "):], "]")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	headCap, tailCap := budget-budget/2, budget/2
	tail := want[len(want)-tailCap:]
	for !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	note := "\n[... " + strconv.Itoa(len(want)-headCap-len(tail)) + " bytes of the middle of the output are not kept ...]\n"
	if string(data) != want[:headCap]+note+tail {
		t.Fatalf("budget %d: archive of %d bytes, not the %d bytes of head, note and tail", budget, len(data), len(want[:headCap]+note+tail))
	}
}

func TestValidRunes(t *testing.T) {
	for _, s := range []string{"", "a", strings.Repeat("x", 100), strings.Repeat("ab", 40) + "é" + strings.Repeat("c", 33),
		"€😀" + strings.Repeat("z", 64), "a\xffb", strings.Repeat("y", 40) + "\xed\xa0\x80", "\xe2\x82", "\uFFFD"} {
		n, ok := validRunes([]byte(s))
		if ok != utf8.ValidString(s) || ok && n != utf8.RuneCountInString(s) {
			t.Errorf("validRunes(%q) = %d, %v", s, n, ok)
		}
	}
}
