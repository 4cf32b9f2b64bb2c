package store

import (
	"fmt"
	"strings"
)

// A SessionPatch is one UPDATE, whose text both dialects build here alike
// (the columns, their order, the checks) but for their placeholders and
// the expression of the config's new value, which is JSON arithmetic in
// each database's own functions.

// patchStatement collects a statement's arguments as its text is built.
type patchStatement struct {
	args  []any
	param func(n int) string
}

// arg adds v to the arguments and returns its placeholder, which may be
// written more than once (both dialects' placeholders are numbered).
func (b *patchStatement) arg(v any) string {
	b.args = append(b.args, v)
	return b.param(len(b.args))
}

// patchSession returns the UPDATE that makes p on session id, and its
// arguments. param writes the nth argument's placeholder; config writes
// the config's new value after changes, reading the row's own config and
// last_sequence columns.
func patchSession(id string, p *SessionPatch, param func(n int) string,
	config func(changes []ConfigChange, arg func(any) string) string,
) (string, []any, error) {
	if err := checkConfigChanges(p.Config); err != nil {
		return "", nil, err
	}
	b := patchStatement{param: param, args: make([]any, 0, 8)}
	var q strings.Builder
	q.WriteString(`UPDATE sessions SET `)
	where := `id = ` + b.arg(id)
	sep := ""
	set := func(format string, args ...any) {
		q.WriteString(sep)
		fmt.Fprintf(&q, format, args...)
		sep = ", "
	}
	if p.Title != "" {
		set(`title = CASE WHEN title = '' THEN %s ELSE title END`, b.arg(p.Title))
	}
	if p.ApprovalMode != 0 {
		set(`approval_mode = %s`, b.arg(int32(p.ApprovalMode)))
	}
	if e := p.Environment; e != nil {
		set(`environment_id = %s, environment_addr = %s`, b.arg(e.ID), b.arg(e.Addr))
	}
	if u := p.Usage; u != nil {
		set(`usage_cache_read = %s, usage_cache_write = %s, usage_output = %s, usage_total = %s, usage_reasoning = %s, usage_cost_usd = %s, usage_unreported = %s`,
			b.arg(u.GetCacheRead()), b.arg(u.GetCacheWrite()), b.arg(u.GetOutput()), b.arg(u.GetTotal()),
			b.arg(u.GetReasoning()), b.arg(costOf(u)), b.arg(u.GetUnreported()))
	}
	if len(p.Config) > 0 {
		set(`config = %s`, config(p.Config, b.arg))
	}
	if sep == "" {
		// Nothing to change: the statement still finds the row, or
		// says that there is none.
		set(`title = title`)
	}
	q.WriteString(` WHERE `)
	q.WriteString(where)
	return q.String(), b.args, nil
}

// checkConfigChanges refuses a config change whose key is not a plain
// name, which both dialects would read alike (SQLite's JSON paths give
// dots, brackets and quotes a meaning), or that changes a member another
// change of the patch changes too (the changes read the row's config as
// it was before the patch).
func checkConfigChanges(changes []ConfigChange) error {
	for i, c := range changes {
		if c.Key == "" || strings.TrimLeft(c.Key, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
			return fmt.Errorf("%w: config key %q is not a plain name", ErrInvalid, c.Key)
		}
		if c.Rule > ConfigLastSequence {
			return fmt.Errorf("%w: config key %q has an unknown rule %d", ErrInvalid, c.Key, c.Rule)
		}
		for _, d := range changes[:i] {
			if d.Key == c.Key {
				return fmt.Errorf("%w: config key %q changed twice in one patch", ErrInvalid, c.Key)
			}
		}
	}
	return nil
}

// sqliteConfigPatch is the config's new value after changes in SQLite:
// the stored BLOB read as JSON text, its members removed (json_remove)
// and set (json_set), stored as a BLOB again.
func sqliteConfigPatch(changes []ConfigChange, arg func(any) string) string {
	var removes, sets strings.Builder
	for _, c := range changes {
		path := arg("$." + c.Key)
		switch {
		case c.Rule == ConfigSet && len(c.Value) == 0:
			removes.WriteString(", " + path)
		case c.Rule == ConfigSet:
			sets.WriteString(", " + path + ", json(" + arg(string(c.Value)) + ")")
		case c.Rule == ConfigRaise:
			sets.WriteString(", " + path + ", max(COALESCE(json_extract(CAST(config AS TEXT), " + path + "), 0), " + arg(c.N) + ")")
		case c.Rule == ConfigLastSequence:
			sets.WriteString(", " + path + ", last_sequence")
		}
	}
	doc := `COALESCE(CAST(config AS TEXT), '{}')`
	if removes.Len() > 0 {
		doc = `json_remove(` + doc + removes.String() + `)`
	}
	if sets.Len() > 0 {
		doc = `json_set(` + doc + sets.String() + `)`
	}
	return `CAST(` + doc + ` AS BLOB)`
}

// pgConfigPatch is the config's new value after changes in PostgreSQL:
// the stored bytea read as jsonb, its members removed (-) and set (||
// of an object of them), stored as bytea again.
func pgConfigPatch(changes []ConfigChange, arg func(any) string) string {
	doc := `COALESCE(convert_from(config, 'UTF8'), '{}')::jsonb`
	var sets strings.Builder
	for _, c := range changes {
		key := arg(c.Key) + `::text`
		switch {
		case c.Rule == ConfigSet && len(c.Value) == 0:
			doc = `(` + doc + ` - ` + key + `)`
		case c.Rule == ConfigSet:
			sets.WriteString(", " + key + ", " + arg(string(c.Value)) + "::jsonb")
		case c.Rule == ConfigRaise:
			sets.WriteString(", " + key + ", GREATEST(COALESCE((convert_from(config, 'UTF8')::jsonb ->> " + key + ")::bigint, 0), " + arg(c.N) + "::bigint)")
		case c.Rule == ConfigLastSequence:
			sets.WriteString(", " + key + ", last_sequence")
		}
	}
	if sets.Len() > 0 {
		doc = `(` + doc + ` || jsonb_build_object(` + sets.String()[2:] + `))`
	}
	return `convert_to(` + doc + `::text, 'UTF8')`
}
