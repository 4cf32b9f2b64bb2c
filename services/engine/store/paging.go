package store

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// cursor is a position in the newest-first session listing: the last
// session of the previous page. The next page holds the sessions strictly
// after it in (created_at, id) descending order, which keeps paging stable
// while sessions are created (they sort before the cursor) or deleted (the
// cursor does not need the row to exist).
type cursor struct {
	createdAt time.Time // microsecond precision, UTC
	id        string
}

// pageTokenPrefix versions the token format, so that a token from a future
// format is refused rather than misread.
const pageTokenPrefix = "v1:"

// encode returns the opaque page token of c.
func (c cursor) encode() string {
	raw := pageTokenPrefix + strconv.FormatInt(c.createdAt.UnixMicro(), 10) + ":" + c.id
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// decodeCursor parses a page token produced by cursor.encode.
func decodeCursor(token string) (cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return cursor{}, fmt.Errorf("%w: malformed page token: %v", ErrInvalid, err)
	}
	raw, ok := strings.CutPrefix(string(b), pageTokenPrefix)
	if !ok {
		return cursor{}, fmt.Errorf("%w: malformed page token: unknown format", ErrInvalid)
	}
	micros, id, ok := strings.Cut(raw, ":")
	if !ok || id == "" {
		return cursor{}, fmt.Errorf("%w: malformed page token: no session id", ErrInvalid)
	}
	us, err := strconv.ParseInt(micros, 10, 64)
	if err != nil {
		return cursor{}, fmt.Errorf("%w: malformed page token: %v", ErrInvalid, err)
	}
	return cursor{createdAt: time.UnixMicro(us).UTC(), id: id}, nil
}

// toMicros truncates t to the microsecond precision both databases keep, in
// UTC, so that what CreateSession writes back equals what GetSession reads.
func toMicros(t time.Time) time.Time {
	return time.UnixMicro(t.UnixMicro()).UTC()
}

// pageOf cuts a result fetched with one extra row down to the page and
// derives the next page's token from the page's last session.
func pageOf(out []*Session, n int) ([]*Session, string, error) {
	if len(out) <= n {
		return out, "", nil
	}
	out = out[:n]
	last := out[n-1]
	return out, cursor{createdAt: last.CreatedAt, id: last.ID}.encode(), nil
}
