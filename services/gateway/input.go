package gateway

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// maxBodyBytes bounds a JSON request body. Prompts with inline images are
// the largest bodies; the engine's own limit on a request is close to this.
const maxBodyBytes = 64 << 20

// checkInput refuses a request whose path or query is not valid UTF-8, or
// whose query does not parse. Every string the gateway passes on ends up
// in a protobuf string field, which gRPC refuses to marshal unless it is
// valid UTF-8; checking here turns that into a 400 naming the culprit
// instead of an internal error from the client stub.
func checkInput(r *http.Request) error {
	if !utf8.ValidString(r.URL.Path) {
		return errors.New("the path is not valid UTF-8")
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return fmt.Errorf("the query does not parse: %v", err)
	}
	for k, vs := range q {
		if !utf8.ValidString(k) {
			return errors.New("a query parameter name is not valid UTF-8")
		}
		for _, v := range vs {
			if !utf8.ValidString(v) {
				return fmt.Errorf("query parameter %q is not valid UTF-8", k)
			}
		}
	}
	for _, h := range []string{"Last-Event-ID", "Authorization"} {
		if !utf8.ValidString(r.Header.Get(h)) {
			return fmt.Errorf("header %s is not valid UTF-8", h)
		}
	}
	return nil
}

// queryInt reads an optional integer query parameter in [0, max]; absent
// or empty is zero.
func queryInt(r *http.Request, name string, max int64) (int64, error) {
	raw := r.URL.Query().Get(name)
	if raw == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 0 || n > max {
		return 0, fmt.Errorf("query parameter %s=%q: want a whole number from 0 to %d", name, raw, max)
	}
	return n, nil
}

// queryInt32 is queryInt for an int32 field of a request.
func queryInt32(r *http.Request, name string) (int32, error) {
	n, err := queryInt(r, name, math.MaxInt32)
	return int32(n), err
}

// queryBool reads an optional boolean query parameter: 1, true, 0, false
// or absent (false).
func queryBool(r *http.Request, name string) (bool, error) {
	switch raw := r.URL.Query().Get(name); strings.ToLower(raw) {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	default:
		return false, fmt.Errorf("query parameter %s=%q: want 1, true, 0 or false", name, raw)
	}
}

// readProto decodes a JSON request body into m. Field names may be the
// proto names or their lowerCamelCase forms, enums their names or numbers,
// and 64-bit integers numbers or decimal strings (the proto JSON mapping);
// unknown fields are refused so a typo is reported, not ignored. An empty
// body leaves m as it is.
func readProto(r *http.Request, m proto.Message) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return fmt.Errorf("read the body: %w", err)
	}
	if len(body) > maxBodyBytes {
		return fmt.Errorf("the body is larger than %d bytes", maxBodyBytes)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	if err := protojson.Unmarshal(body, m); err != nil {
		return fmt.Errorf("malformed JSON body: %w", err)
	}
	return nil
}
