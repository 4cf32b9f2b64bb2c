package cmdpolicy

import (
	"strings"
)

// token is one lexed shell word or operator.
type token struct {
	text string
	op   bool // a control or redirection operator, not a word
}

// lex splits a command into words and operators the way a shell would for
// plain text: quotes and backslashes group and are removed, nothing is
// expanded. Unterminated quotes run to the end.
func lex(s string) []token {
	var toks []token
	var w strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			toks = append(toks, token{text: w.String()})
			w.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			inWord = true
			if i+1 < len(s) {
				i++
				if s[i] != '\n' {
					w.WriteByte(s[i])
				}
			}
		case c == '\'':
			inWord = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				w.WriteString(s[i+1:])
				i = len(s)
			} else {
				w.WriteString(s[i+1 : i+1+j])
				i += j + 1
			}
		case c == '"':
			inWord = true
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`\n", s[i+1]) >= 0 {
					i++
				}
				w.WriteByte(s[i])
			}
		case c == ' ' || c == '\t' || c == '\r':
			flush()
		case c == '\n' || c == ';' || c == '(' || c == ')':
			flush()
			toks = append(toks, token{text: string(c), op: true})
		case c == '&' || c == '|' || c == '>' || c == '<':
			flush()
			op := string(c)
			if i+1 < len(s) && (s[i+1] == c || (c == '>' && s[i+1] == '|') || (c == '&' && s[i+1] == '>') || (c == '>' && s[i+1] == '&')) {
				op += string(s[i+1])
				i++
			}
			toks = append(toks, token{text: op, op: true})
		default:
			inWord = true
			w.WriteByte(c)
		}
	}
	flush()
	return toks
}

// separators end a simple command.
var separators = map[string]bool{";": true, "\n": true, "&&": true, "||": true, "|": true, "&": true, "(": true, ")": true, "|&": true}

// wrappers run the command that follows them; their own options are skipped
// and the value-taking ones consume their value.
var wrappers = map[string]map[string]bool{
	"sudo":    {"-u": true, "-g": true, "-C": true, "-D": true, "-h": true, "-p": true, "-r": true, "-t": true, "-T": true, "-U": true},
	"doas":    {"-u": true, "-C": true},
	"env":     {"-u": true, "-C": true, "-S": true, "--unset": true, "--chdir": true},
	"command": {},
	"builtin": {},
	"exec":    {"-a": true},
	"nice":    {"-n": true, "--adjustment": true},
	"ionice":  {"-c": true, "-n": true, "-p": true},
	"nohup":   {},
	"time":    {"-f": true, "-o": true},
	"stdbuf":  {"-i": true, "-o": true, "-e": true},
	"timeout": {"-s": true, "-k": true, "--signal": true, "--kill-after": true},
	"xargs":   {"-n": true, "-I": true, "-L": true, "-P": true, "-s": true, "-d": true, "-E": true, "-a": true, "--max-args": true, "--max-procs": true, "--delimiter": true, "--arg-file": true, "--replace": false},
}

var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "ash": true, "mksh": true}

// Candidates returns the spellings of command that rules are matched
// against: the whitespace-normalized text as typed, the dequoted text with
// every simple command normalized (wrappers and leading paths removed), each
// normalized simple command alone, and the same for every literal
// `sh -c '...'` payload.
func Candidates(command string) []string {
	return candidates(command, 0)
}

func candidates(command string, depth int) []string {
	out := []string{strings.Join(strings.Fields(command), " ")}
	var full []string
	var nested []string
	var simple []token
	emit := func() {
		words, payload := normalizeSimple(simple)
		simple = simple[:0]
		if len(words) == 0 {
			return
		}
		s := strings.Join(words, " ")
		full = append(full, s)
		out = append(out, s)
		if payload != "" && depth < 4 {
			nested = append(nested, candidates(payload, depth+1)...)
		}
	}
	for _, t := range lex(command) {
		if t.op && separators[t.text] {
			emit()
			full = append(full, t.text)
			continue
		}
		simple = append(simple, t)
	}
	emit()
	out = append(out, strings.Join(strings.Fields(strings.Join(full, " ")), " "))
	return append(out, nested...)
}

// normalizeSimple strips assignments, wrappers and the command word's path
// from one simple command, and returns its words and, for a shell run with
// -c, the literal payload.
func normalizeSimple(toks []token) (words []string, payload string) {
	for _, t := range toks {
		words = append(words, t.text)
	}
	for guard := 0; len(words) > 0 && guard < 16; guard++ {
		words = skipAssignments(words)
		if len(words) == 0 {
			return nil, ""
		}
		name := baseName(words[0])
		opts, isWrapper := wrappers[name]
		if !isWrapper {
			break
		}
		words = skipOptions(words[1:], opts, name)
	}
	if len(words) == 0 {
		return nil, ""
	}
	words[0] = baseName(words[0])
	if shells[words[0]] {
		payload = shellPayload(words[1:])
	}
	return words, payload
}

func skipAssignments(words []string) []string {
	for len(words) > 0 && isAssignment(words[0]) {
		words = words[1:]
	}
	return words
}

func isAssignment(w string) bool {
	eq := strings.IndexByte(w, '=')
	if eq <= 0 {
		return false
	}
	for i := 0; i < eq; i++ {
		c := w[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// skipOptions drops a wrapper's options (and the values of the ones that
// take one), its assignments for env, and its positional operand for
// timeout, and returns the wrapped command.
func skipOptions(words []string, valued map[string]bool, wrapper string) []string {
	for len(words) > 0 {
		w := words[0]
		if w == "--" {
			return words[1:]
		}
		if wrapper == "env" && isAssignment(w) {
			words = words[1:]
			continue
		}
		if !strings.HasPrefix(w, "-") || w == "-" {
			break
		}
		words = words[1:]
		if valued[w] && len(words) > 0 {
			words = words[1:]
		}
	}
	if wrapper == "timeout" && len(words) > 0 {
		words = words[1:] // the duration
	}
	return words
}

// shellPayload finds the command string of `sh -c STRING` among a shell's
// arguments, with the -c possibly clustered (-lc, -ec).
func shellPayload(args []string) string {
	for i, a := range args {
		if !strings.HasPrefix(a, "-") || strings.HasPrefix(a, "--") {
			if strings.HasPrefix(a, "--") {
				continue
			}
			return ""
		}
		if strings.ContainsRune(a[1:], 'c') {
			for _, rest := range args[i+1:] {
				if !strings.HasPrefix(rest, "-") {
					return rest
				}
			}
			return ""
		}
	}
	return ""
}

// baseName strips a leading path from a command word: /usr/bin/rm is rm.
func baseName(w string) string {
	if i := strings.LastIndexByte(w, '/'); i >= 0 && i < len(w)-1 {
		return w[i+1:]
	}
	return w
}
