package failure

import (
	"encoding/json"
	"html"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Detail returns the readable part of a provider's error body, for
// [HTTP]: the message with its type and code in parentheses, from any of
// the usual JSON shapes ({"error":{"message","type","code"}}, Anthropic's
// {"type":"error","error":{…}}, Gemini's {"error":{"code","message",
// "status"}}, {"error":"text"}, {"message":…}); for an HTML page, its
// title or a short excerpt of its text; else the body itself, clipped. An
// empty, null or zero code is left out, so a message never ends with a
// stray "null" or "0".
func Detail(body []byte) string {
	text := strings.TrimSpace(string(body))
	if text == "" {
		return ""
	}
	if text[0] == '{' || text[0] == '[' {
		if d, ok := jsonDetail([]byte(text)); ok {
			return d
		}
	}
	if looksHTML(text) {
		return htmlExcerpt(text)
	}
	return clip(collapse(text), 300)
}

type errorObject struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
	Status  string          `json:"status"`
	Param   string          `json:"param"`
}

func jsonDetail(body []byte) (string, bool) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		var list []json.RawMessage // Gemini wraps some errors in a list
		if json.Unmarshal(body, &list) != nil || len(list) == 0 {
			return "", false
		}
		return jsonDetail(list[0])
	}
	raw, ok := top["error"]
	if !ok {
		raw = body
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return clip(s, 500), s != ""
	}
	var e errorObject
	if json.Unmarshal(raw, &e) != nil || e.Message == "" {
		return "", false
	}
	var kinds []string
	for _, k := range []string{e.Type, e.Status, codeText(e.Code)} {
		if k != "" && !containsWord(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	msg := strings.TrimSpace(e.Message)
	if len(kinds) > 0 {
		msg += " (" + strings.Join(kinds, " ") + ")"
	}
	return clip(msg, 500), true
}

// Kind returns "type code" of an in-stream error object, without empty,
// null or zero parts.
func Kind(typ string, code json.RawMessage) string {
	parts := []string{}
	if typ = strings.TrimSpace(typ); typ != "" {
		parts = append(parts, typ)
	}
	if c := codeText(code); c != "" && c != typ {
		parts = append(parts, c)
	}
	return strings.Join(parts, " ")
}

// codeText renders a JSON code (string or number) or "" for none.
func codeText(raw json.RawMessage) string {
	s := strings.TrimSpace(string(raw))
	switch s {
	case "", "null", "0", `""`:
		return ""
	}
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}

func containsWord(list []string, w string) bool {
	for _, x := range list {
		if x == w {
			return true
		}
	}
	return false
}

var (
	htmlTitle = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?is)<title[^>]*>(.*?)</title>`) })
	htmlDrop  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?is)<(script|style)[^>]*>.*?</(script|style)>`) })
	htmlTag   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?s)<[^>]*>`) })
)

func looksHTML(s string) bool {
	head := strings.ToLower(s[:min(len(s), 512)])
	return strings.HasPrefix(head, "<!doctype html") || strings.Contains(head, "<html") || strings.Contains(head, "<head") || strings.Contains(head, "<body")
}

// htmlExcerpt returns an HTML page's title, or its text without tags, in
// at most 200 characters: a gateway's error page says what happened in a
// line, and its markup means nothing to a person reading a log.
func htmlExcerpt(s string) string {
	if m := htmlTitle().FindStringSubmatch(s); m != nil {
		if t := collapse(html.UnescapeString(m[1])); t != "" {
			return "an HTML page: " + clip(t, 200)
		}
	}
	text := htmlTag().ReplaceAllString(htmlDrop().ReplaceAllString(s, " "), " ")
	return "an HTML page: " + clip(collapse(html.UnescapeString(text)), 200)
}

func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }
