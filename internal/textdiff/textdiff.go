// Package textdiff computes line diffs and renders them as git-style
// unified diffs, for the file tools' echo of what they changed.
package textdiff

import (
	"fmt"
	"strings"
)

// Op is one line of an edit script.
type Op struct {
	Kind byte // ' ' kept, '-' removed, '+' added
	Line string
	A, B int // 0-based line numbers in the old and new text
}

// Lines splits text into lines without their terminators; a final line
// without a newline is kept.
func Lines(text string) []string {
	if text == "" {
		return nil
	}
	lines := strings.SplitAfter(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\n")
	}
	return lines
}

// Diff returns an edit script from a to b, or ok false when the texts
// differ by more than maxEdits line insertions and deletions (so that a
// rewrite of a large file costs a summary, not quadratic time).
func Diff(a, b []string, maxEdits int) (ops []Op, ok bool) {
	// Common prefix and suffix need no search.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	for i := 0; i < pre; i++ {
		ops = append(ops, Op{Kind: ' ', Line: a[i], A: i, B: i})
	}
	mid, ok := myers(a[pre:len(a)-suf], b[pre:len(b)-suf], maxEdits)
	if !ok {
		return nil, false
	}
	for _, op := range mid {
		op.A += pre
		op.B += pre
		ops = append(ops, op)
	}
	for i := 0; i < suf; i++ {
		ai, bi := len(a)-suf+i, len(b)-suf+i
		ops = append(ops, Op{Kind: ' ', Line: a[ai], A: ai, B: bi})
	}
	return ops, true
}

// myers is the O(ND) greedy diff, keeping one frontier per edit distance
// for the backtrack.
func myers(a, b []string, maxEdits int) ([]Op, bool) {
	n, m := len(a), len(b)
	if n == 0 && m == 0 {
		return nil, true
	}
	max := n + m
	if maxEdits > 0 && max > maxEdits {
		max = maxEdits
	}
	offset := max + 1
	v := make([]int, 2*max+3)
	var trace [][]int
	found := -1
	for d := 0; d <= max && found < 0; d++ {
		snapshot := make([]int, 2*d+3)
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[offset+k-1] < v[offset+k+1]) {
				x = v[offset+k+1]
			} else {
				x = v[offset+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[offset+k] = x
			if x >= n && y >= m {
				found = d
			}
		}
		for k := -d - 1; k <= d+1; k++ {
			snapshot[k+d+1] = v[offset+k]
		}
		trace = append(trace, snapshot)
	}
	if found < 0 {
		return nil, false
	}
	// Backtrack from (n, m).
	var rev []Op
	x, y := n, m
	for d := found; d > 0; d-- {
		prev := trace[d-1]
		get := func(k int) int { return prev[k+(d-1)+1] }
		k := x - y
		var pk int
		if k == -d || (k != d && get(k-1) < get(k+1)) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := get(pk)
		py := px - pk
		for x > px && y > py {
			x--
			y--
			rev = append(rev, Op{Kind: ' ', Line: a[x], A: x, B: y})
		}
		if x == px {
			y--
			rev = append(rev, Op{Kind: '+', Line: b[y], A: x, B: y})
		} else {
			x--
			rev = append(rev, Op{Kind: '-', Line: a[x], A: x, B: y})
		}
	}
	for x > 0 && y > 0 {
		x--
		y--
		rev = append(rev, Op{Kind: ' ', Line: a[x], A: x, B: y})
	}
	ops := make([]Op, len(rev))
	for i := range rev {
		ops[i] = rev[len(rev)-1-i]
	}
	return ops, true
}

// Hunk is one region of change with its context.
type Hunk struct {
	Ops []Op
}

// Hunks groups the changes of ops into hunks with up to context unchanged
// lines around each change; changes closer than 2*context lines share a
// hunk.
func Hunks(ops []Op, context int) []Hunk {
	var hunks []Hunk
	i := 0
	for i < len(ops) {
		for i < len(ops) && ops[i].Kind == ' ' {
			i++
		}
		if i == len(ops) {
			break
		}
		start := max(0, i-context)
		end := i
		for end < len(ops) {
			if ops[end].Kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].Kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*context {
				end = min(len(ops), end+context)
				break
			}
			end = run
		}
		hunks = append(hunks, Hunk{Ops: ops[start:end]})
		i = end
	}
	return hunks
}

// Header returns the @@ line of h.
func (h Hunk) Header() string {
	aStart, bStart, aLen, bLen := -1, -1, 0, 0
	for _, op := range h.Ops {
		if aStart < 0 {
			aStart, bStart = op.A, op.B
		}
		if op.Kind != '+' {
			aLen++
		}
		if op.Kind != '-' {
			bLen++
		}
	}
	return fmt.Sprintf("@@ -%s +%s @@", span(aStart, aLen), span(bStart, bLen))
}

func span(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

// Render writes hunks as a unified diff with file headers.
func Render(name string, hunks []Hunk) string {
	var b strings.Builder
	fmt.Fprintf(&b, "--- a/%s\n+++ b/%s\n", name, name)
	for _, h := range hunks {
		b.WriteString(h.Header())
		b.WriteByte('\n')
		for _, op := range h.Ops {
			b.WriteByte(op.Kind)
			b.WriteString(op.Line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// Count returns the numbers of added and removed lines in ops.
func Count(ops []Op) (added, removed int) {
	for _, op := range ops {
		switch op.Kind {
		case '+':
			added++
		case '-':
			removed++
		}
	}
	return added, removed
}
