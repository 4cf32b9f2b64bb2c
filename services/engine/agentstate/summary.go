package agentstate

import (
	"regexp"
	"strings"
	"sync"
)

// Summary markers. System markers are written [tag]…[/tag]; the older
// angle-bracket form (<summary>…</summary>) is still read, for old
// persisted compaction prompts and models that prefer it.
const (
	SummaryOpen         = "[summary]"
	SummaryClose        = "[/summary]"
	ContextSummaryOpen  = "[context_summary]"
	ContextSummaryClose = "[/context_summary]"
)

var (
	// summaryPairRe matches one tagged block, lazily, in either bracket
	// style; the two ends may differ in style, since a model that mixes
	// them still meant one block.
	summaryPairRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?is)(?:\[summary\]|<summary>)(.*?)(?:\[/summary\]|</summary>)`)
	})
	// summaryTagRe matches any summary tag, open or close.
	summaryTagRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)\[/?summary\]|</?summary>`) })
)

// ExtractSummary takes the summary out of a compaction reply with a
// tolerance ladder, each rung tried only when the one before found nothing:
//
//  1. the first tagged block ([summary]…[/summary]) whose body is not blank;
//  2. when tags are present but every block is blank (or a tag is left
//     unclosed), the text left after removing the tags, which rescues a
//     model that wrote its summary after the closing tag;
//  3. with no tags at all, the whole reply.
//
// The result is trimmed of surrounding white space; ok is false when it is
// empty, which the caller counts as a failed compaction attempt.
func ExtractSummary(reply string) (summary string, ok bool) {
	for _, m := range summaryPairRe().FindAllStringSubmatch(reply, -1) {
		if body := strings.TrimSpace(m[1]); body != "" {
			return body, true
		}
	}
	if summaryTagRe().MatchString(reply) {
		rest := strings.TrimSpace(summaryTagRe().ReplaceAllString(reply, ""))
		return rest, rest != ""
	}
	whole := strings.TrimSpace(reply)
	return whole, whole != ""
}

// WrapContextSummary puts a summary into the user text that opens the new
// context after a summarize compaction.
func WrapContextSummary(summary string) string {
	return ContextSummaryOpen + "\n" +
		"The earlier part of this session was compacted. This is its summary, written to carry the work on:\n\n" +
		strings.TrimSpace(summary) + "\n" + ContextSummaryClose
}
