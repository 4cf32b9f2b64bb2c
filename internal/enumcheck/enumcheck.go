// Package enumcheck refuses requests that carry enum values their contract
// does not declare. Proto3 enums are open: a client may send any number,
// and the generated code keeps it, so an approval_mode of 42 would reach a
// handler, and be stored, unless every handler checked every enum field
// itself. One gRPC interceptor (unary and stream) walks each request
// message with protoreflect instead, nested messages, lists and maps
// included, and answers INVALID_ARGUMENT naming the field path of the
// first undeclared value; the declared values in proto/ are then the
// whole rule, at every entry point of every service.
//
// protovalidate would let the proto state richer rules, but its runtime
// needs the buf.validate definitions from the Buf Schema Registry, which
// this project's build cannot reach; the declared enum values are the one
// rule the contract already states.
package enumcheck

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Check returns an error naming the first enum field of m, at any depth,
// whose value is not declared by its enum, or nil.
//
// Every request of every service passes here, the model requests with
// their whole history included: the walk skips the messages that cannot
// hold an enum (see holdsEnums), and the path of a field is spelled out
// only for the error, on the way back up.
func Check(m proto.Message) error {
	if m == nil {
		return nil
	}
	if bad := check(m.ProtoReflect()); bad != nil {
		return bad
	}
	return nil
}

// badEnum is an undeclared enum value, and where it was found.
type badEnum struct {
	fd    protoreflect.FieldDescriptor // the enum field (a map's value, for a map)
	value protoreflect.EnumNumber
	// where is the path's parts, innermost first: ".name", "[i]".
	where []string
}

func (e *badEnum) Error() string {
	var b strings.Builder
	for i := len(e.where) - 1; i >= 0; i-- {
		b.WriteString(e.where[i])
	}
	ed := e.fd.Enum()
	path := strings.TrimPrefix(b.String(), ".")
	return fmt.Sprintf("%s: %d is not a value of %s (want one of %s)", path, e.value, ed.FullName(), names(ed))
}

func check(m protoreflect.Message) *badEnum {
	md := m.Descriptor()
	if !holdsEnums(md) {
		return nil
	}
	// The fields are gone through by their descriptors, not with Range,
	// whose callback would be an allocation per message.
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !m.Has(fd) {
			continue
		}
		bad := field(fd, m.Get(fd))
		if bad != nil {
			bad.where = append(bad.where, "."+string(fd.Name()))
			return bad
		}
	}
	return nil
}

// field checks the value v of the field fd, a list's or a map's elements
// each.
func field(fd protoreflect.FieldDescriptor, v protoreflect.Value) *badEnum {
	switch {
	case fd.IsList():
		l := v.List()
		for i := range l.Len() {
			if bad := value(fd, l.Get(i)); bad != nil {
				bad.where = append(bad.where, fmt.Sprintf("[%d]", i))
				return bad
			}
		}
		return nil
	case fd.IsMap():
		return mapField(fd, v.Map())
	}
	return value(fd, v)
}

// mapField checks the values of the map field fd. (Apart from field, so
// that the variable its callback sets is not an allocation for every
// field.)
func mapField(fd protoreflect.FieldDescriptor, m protoreflect.Map) *badEnum {
	var bad *badEnum
	m.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
		if bad = value(fd.MapValue(), mv); bad != nil {
			bad.where = append(bad.where, fmt.Sprintf("[%q]", k.String()))
		}
		return bad == nil
	})
	return bad
}

// value checks one value of field fd (an element, for a list or map).
func value(fd protoreflect.FieldDescriptor, v protoreflect.Value) *badEnum {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		if fd.Enum().Values().ByNumber(v.Enum()) == nil {
			return &badEnum{fd: fd, value: v.Enum()}
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return check(v.Message())
	}
	return nil
}

// enumHolders caches holdsEnums by message descriptor.
var enumHolders sync.Map // protoreflect.MessageDescriptor → bool

// holdsEnums reports whether a message of descriptor md can hold an enum
// value: in a field of its own, or of a message it can hold, at any
// depth. Most of a model request (its history's text and tool calls)
// cannot, and is not walked.
func holdsEnums(md protoreflect.MessageDescriptor) bool {
	if v, ok := enumHolders.Load(md); ok {
		return v.(bool)
	}
	seen := map[protoreflect.FullName]bool{}
	var reach func(protoreflect.MessageDescriptor) bool
	reach = func(md protoreflect.MessageDescriptor) bool {
		if seen[md.FullName()] {
			return false
		}
		seen[md.FullName()] = true
		fields := md.Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			if fd.IsMap() {
				fd = fd.MapValue()
			}
			switch fd.Kind() {
			case protoreflect.EnumKind:
				return true
			case protoreflect.MessageKind, protoreflect.GroupKind:
				if reach(fd.Message()) {
					return true
				}
			}
		}
		return false
	}
	holds := reach(md)
	enumHolders.Store(md, holds)
	return holds
}

func names(ed protoreflect.EnumDescriptor) string {
	vs := ed.Values()
	out := make([]string, vs.Len())
	for i := range vs.Len() {
		out[i] = string(vs.Get(i).Name())
	}
	return strings.Join(out, ", ")
}

// refuse turns a Check failure into the status the caller gets.
func refuse(req any) error {
	m, ok := req.(proto.Message)
	if !ok {
		return nil
	}
	if err := Check(m); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return nil
}

// UnaryServerInterceptor refuses a unary request with an undeclared enum
// value before the handler sees it.
func UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := refuse(req); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamServerInterceptor checks every message a stream receives: the
// request of a server stream, and each message of a client stream, which
// the handler's RecvMsg then fails with.
func StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return handler(srv, checkedStream{ss})
	}
}

type checkedStream struct{ grpc.ServerStream }

func (s checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return refuse(m)
}
