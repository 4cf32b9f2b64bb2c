package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// maxHistory bounds the messages kept in memory and recalled with Up.
const maxHistory = 1000

// history is what was typed into earlier chats, for Up and Down. It lives
// in a file of JSON strings, one per line (so a message can span lines),
// readable by its owner only: prompts may hold secrets.
type history struct {
	path    string
	entries []string
	// pos is the entry shown, len(entries) when none is (the draft).
	pos   int
	draft string
}

// loadHistory reads the file at path; a missing file is an empty history,
// and an unreadable line is skipped. An empty path keeps no history.
func loadHistory(path string) (*history, error) {
	h := &history{path: path}
	if path == "" {
		return h, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return h, nil
	}
	if err != nil {
		return h, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var s string
		if json.Unmarshal(sc.Bytes(), &s) == nil && s != "" {
			h.entries = append(h.entries, s)
		}
	}
	if err := sc.Err(); err != nil {
		return h, err
	}
	if len(h.entries) > 2*maxHistory {
		// The file only grows by appends: start it afresh with what is
		// kept, so it stays bounded too.
		h.entries = h.entries[len(h.entries)-maxHistory:]
		if err := h.rewrite(); err != nil {
			return h, err
		}
	}
	if len(h.entries) > maxHistory {
		h.entries = h.entries[len(h.entries)-maxHistory:]
	}
	h.pos = len(h.entries)
	return h, nil
}

// rewrite replaces the file with the entries in memory, through a
// temporary file renamed over it, so a crash leaves one or the other.
func (h *history) rewrite() error {
	tmp, err := os.CreateTemp(filepath.Dir(h.path), ".chat_history-*")
	if err != nil {
		return err
	}
	w := bufio.NewWriter(tmp)
	for _, e := range h.entries {
		line, _ := json.Marshal(e)
		_, _ = w.Write(append(line, '\n'))
	}
	err = errors.Join(w.Flush(), tmp.Chmod(0o600), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), h.path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}

// add records a sent message, in memory and in the file, unless it repeats
// the last one.
func (h *history) add(s string) error {
	h.pos, h.draft = len(h.entries), ""
	if s == "" || len(h.entries) > 0 && h.entries[len(h.entries)-1] == s {
		h.pos = len(h.entries)
		return nil
	}
	h.entries = append(h.entries, s)
	if len(h.entries) > maxHistory {
		h.entries = h.entries[1:]
	}
	h.pos = len(h.entries)
	if h.path == "" {
		return nil
	}
	line, err := json.Marshal(s)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(h.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(line, '\n'))
	return errors.Join(err, f.Close())
}

// prev returns the entry before the one shown; current is the text being
// edited, kept as the draft when leaving it. ok is false at the oldest.
func (h *history) prev(current string) (string, bool) {
	if h.pos == 0 {
		return "", false
	}
	if h.pos == len(h.entries) {
		h.draft = current
	}
	h.pos--
	return h.entries[h.pos], true
}

// next returns the entry after the one shown, or the draft after the
// newest; ok is false when the draft is already shown.
func (h *history) next() (string, bool) {
	if h.pos >= len(h.entries) {
		return "", false
	}
	h.pos++
	if h.pos == len(h.entries) {
		return h.draft, true
	}
	return h.entries[h.pos], true
}
