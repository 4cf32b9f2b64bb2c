package store

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Shared payloads.
//
// Every session of an agent logs the same tool list (tool_list_ready,
// some 10 KiB) and the same system prompt (in its session_meta, some 5
// KiB). Stored inline they were most of a task's disk growth and of the
// pages it wrote, twice (to the WAL, then by the checkpoint to the
// database file). So the store keeps such a part once per project, in the
// table shared_payloads, keyed by the SHA-256 of the project's id and its
// bytes, and the event's row holds the rest of the event (its body) and
// that key.
//
// The split is made on the event's protobuf encoding, not on the message:
// the body is the encoding without the shared field, and the shared part
// is the encoding of an OmniMessage holding only that field inside the
// same payload. Protobuf decodes a concatenation as a merge, so decoding
// the body and then merging the shared part gives the message back, field
// for field; fields unknown to this binary travel in the body. Nothing but
// the store sees the split: ReadEvents returns whole events.
//
// A row refers to a shared part of its own session's project only: the
// key is made from the project's id as well, so two projects never share
// a row (nor can one learn whether another stored the same bytes), and
// the read joins shared_payloads on the session's project too. No call
// reads a shared part by its key: who may read the session's events may
// read them whole, as before.
//
// A shared part no record refers to any more is deleted by the
// transaction that deleted the last session referring to it
// (DeleteSession collects its project's unreferenced parts), so nothing
// is left behind and nothing in use is taken. Quarantined records keep
// their reference too.

// sharedMin is the smallest shared part worth a row of its own: below
// it a part fits in the event's row, within a 1 KiB page, and a reference
// (32 bytes and a join) buys nothing.
const sharedMin = 512

// sharedFields maps the OmniMessage payload fields whose large part is
// kept once to the field of that payload which is the part: the system
// prompt of a session_meta and the tools of a tool_list_ready. Only
// these are the same from session to session of an agent; everything
// else in them (the session's id, paths, timestamps) stays in the body.
// It is made at first use: reading the descriptors would build the whole
// message file's descriptors at package init, in every process.
var sharedFields = sync.OnceValue(func() map[protowire.Number]protowire.Number {
	om := (&penguinv1.OmniMessage{}).ProtoReflect().Descriptor().Fields()
	meta := (&penguinv1.SessionMeta{}).ProtoReflect().Descriptor().Fields()
	tools := (&penguinv1.ToolListReady{}).ProtoReflect().Descriptor().Fields()
	return map[protowire.Number]protowire.Number{
		om.ByName("session_meta").Number():    meta.ByName("system_prompt").Number(),
		om.ByName("tool_list_ready").Number(): tools.ByName("tools").Number(),
	}
})

// splitShared splits the encoding full of one event into its body and
// its shared part, both appended to dst, and returns dst grown and the
// two slices of it. shared is nil, and body full itself, when the event
// has no shared field of at least sharedMin bytes, or when full is not
// a well-formed encoding (which proto.Marshal never makes).
func splitShared(dst, full []byte) (out, body, shared []byte) {
	field, inner, before, after, ok := sharedPayloadField(full)
	if !ok {
		return dst, full, nil
	}
	part := sharedFields()[field]
	moved := 0
	for b := inner; len(b) > 0; {
		num, _, n := protowire.ConsumeField(b)
		if n < 0 {
			return dst, full, nil
		}
		if num == part {
			moved += n
		}
		b = b[n:]
	}
	if moved < sharedMin {
		return dst, full, nil
	}
	start := len(dst)
	dst = append(dst, before...)
	dst = protowire.AppendTag(dst, field, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(len(inner)-moved))
	dst = appendFields(dst, inner, part, false)
	dst = append(dst, after...)
	mid := len(dst)
	dst = protowire.AppendTag(dst, field, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(moved))
	dst = appendFields(dst, inner, part, true)
	return dst, dst[start:mid:mid], dst[mid:len(dst):len(dst)]
}

// sharedPayloadField finds the payload field of full that has a shared
// part: its number, its contents, and the encoding before and after it.
func sharedPayloadField(full []byte) (field protowire.Number, inner, before, after []byte, ok bool) {
	fields := sharedFields()
	for off := 0; off < len(full); {
		num, typ, n := protowire.ConsumeTag(full[off:])
		if n < 0 {
			return 0, nil, nil, nil, false
		}
		if _, shared := fields[num]; shared && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(full[off+n:])
			if m < 0 {
				return 0, nil, nil, nil, false
			}
			return num, v, full[:off], full[off+n+m:], true
		}
		m := protowire.ConsumeFieldValue(num, typ, full[off+n:])
		if m < 0 {
			return 0, nil, nil, nil, false
		}
		off += n + m
	}
	return 0, nil, nil, nil, false
}

// appendFields appends to dst the fields of inner numbered part (when
// want is set) or all the others (when it is not), in their order.
func appendFields(dst, inner []byte, part protowire.Number, want bool) []byte {
	for len(inner) > 0 {
		num, _, n := protowire.ConsumeField(inner)
		if (num == part) == want {
			dst = append(dst, inner[:n]...)
		}
		inner = inner[n:]
	}
	return dst
}

// sharedKey is the key of a shared part of the project's events: the
// SHA-256 of the project's id, a zero byte and the part's bytes.
func sharedKey(project string, shared []byte) []byte {
	h := sha256.New()
	h.Write([]byte(project))
	h.Write([]byte{0})
	h.Write(shared)
	return h.Sum(make([]byte, 0, sha256.Size))
}

// keyShared sets the keys of enc's shared parts, which are the project's.
func keyShared(enc []encodedEvent, project string) {
	for i := range enc {
		if enc[i].shared != nil {
			enc[i].key = sharedKey(project, enc[i].shared)
		}
	}
}

// hasShared reports whether one of enc's events has a shared part.
func hasShared(enc []encodedEvent) bool {
	for _, e := range enc {
		if e.shared != nil {
			return true
		}
	}
	return false
}

// decodeStored decodes a stored event: its body, merged with its shared
// part when the row refers to one. hasShared says that it does, and
// shared is then the part found (nil when it is missing). A part that is
// missing, does not decode, or changes the event's kind makes the record
// one that does not decode, as a damaged body does.
func decodeStored(kind string, body []byte, hasShared bool, shared []byte) (*penguinv1.OmniMessage, error) {
	m := new(penguinv1.OmniMessage)
	if err := proto.Unmarshal(body, m); err != nil {
		return nil, err
	}
	if hasShared {
		if shared == nil {
			return nil, errors.New("its shared payload is missing")
		}
		if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(shared, m); err != nil {
			return nil, fmt.Errorf("its shared payload does not decode: %w", err)
		}
		if got := PayloadKind(m); got != kind {
			return nil, fmt.Errorf("its shared payload makes a %s of a %s", got, kind)
		}
	}
	if omni.KindOf(m) == omni.KindUnknown {
		return nil, errors.New("decoded message has no payload")
	}
	return m, nil
}

// encodeBuffers keeps the buffers that events are encoded into. The
// drivers copy a statement's arguments before it runs (modernc's SQLite
// into memory of its own at bind, pgx into its write buffer), so an
// encoding is free again once the write that carried it returned; the
// encode path then allocates nothing for the events' bytes, which
// proto.Marshal's fresh slices were the store's largest share of.
var encodeBuffers = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledBuffer is the largest buffer put back: a batch with a huge
// tool output should not keep its buffer alive in the pool.
const maxPooledBuffer = 256 << 10

// releaseBuffer puts an encoding buffer back into the pool.
func releaseBuffer(b *[]byte) {
	if b == nil || cap(*b) > maxPooledBuffer {
		return
	}
	*b = (*b)[:0]
	encodeBuffers.Put(b)
}
