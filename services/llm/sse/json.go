package sse

import (
	"bytes"
	"encoding/json"
)

// DataDecoder decodes the JSON data of one event after another exactly as
// json.Unmarshal does, but keeps encoding/json's decoder state (its
// scanner stack, its error context) from event to event: json.Unmarshal
// builds them anew at every call, which was about half the allocations of
// relaying a streamed answer. The zero value is ready; a DataDecoder
// serves one stream at a time.
type DataDecoder struct {
	r   bytes.Reader
	dec *json.Decoder
}

// Decode decodes data, which must be one JSON value, into v. When data is
// not exactly one valid value, or does not fit v, the error is
// json.Unmarshal's own, so a caller's messages stay what they were.
func (d *DataDecoder) Decode(data []byte, v any) error {
	if d.dec == nil {
		d.dec = json.NewDecoder(&d.r)
	}
	d.r.Reset(data)
	if err := d.dec.Decode(v); err != nil || !d.drained(data) {
		// Start over on the next event: the decoder may hold a broken
		// value or bytes after the first one.
		d.dec = nil
		return json.Unmarshal(data, v)
	}
	return nil
}

// drained reports whether nothing but white space followed the value the
// decoder read from data, in its buffer or still unread.
func (d *DataDecoder) drained(data []byte) bool {
	if rest, ok := d.dec.Buffered().(*bytes.Reader); ok {
		for rest.Len() > 0 {
			if c, _ := rest.ReadByte(); !space(c) {
				return false
			}
		}
	} else {
		return false // not as encoding/json is today: take the slow way
	}
	for _, c := range data[len(data)-d.r.Len():] {
		if !space(c) {
			return false
		}
	}
	return true
}

// space reports whether c is JSON white space.
func space(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
