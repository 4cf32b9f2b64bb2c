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
// One request is let through unwalked: the one a caller in the same
// process vouches for (Vouch), which the server's in-process channel
// marks so when the engine's loop sends its model request to the llm
// service shared (grpcserver.ShareRequest). That request carries the
// session's whole history at every turn, and its walk, about 0.5 µs a
// message, was three quarters of the turn's CPU at 200 messages in
// process, a cost that grew with the session. Its enum values are not a
// caller's from outside: the loop builds the request from the session's
// settings and history, and every enum value there was either checked
// here where it entered (the thinking level and approval mode of Run,
// CreateSession, UpdateSession), or set by the process's own code: the
// user's prompts and steers arrive as text and the engine makes the
// messages, the model's messages are the llm service's frames, tool
// outputs are made by the engine from the environment's answers, and
// what a session holds in the store was recorded from these. Answers (a
// model frame, a tool's output) were never checked on their way back;
// the walk of the history only saw them again a turn later. Every other
// request is walked as before: gRPC over the network, the HTTP gateway
// (which calls through the in-process channel without ShareRequest), and
// the in-process channel when tracing is on (a copy is made then, see
// grpcserver.ShareRequest), so an undeclared value from outside the
// process is refused on every route.
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
	r := m.ProtoReflect()
	if bad := check(r, planOf(r.Descriptor())); bad != nil {
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

// plan is what check walks in a message of one descriptor: the fields
// that can hold an enum value, each with the plan of its messages, so
// that a walk neither looks at the other fields nor looks a nested
// message's descriptor up. A nil plan is a message that cannot hold an
// enum (see holdsEnums): most of a model request, its history's text and
// tool calls, is not walked. The members of a oneof are found by asking
// which is set, once, instead of asking each whether it is (a history's
// message is a oneof of some thirty kinds).
type plan struct {
	fields []planField
	oneofs []planOneof
}

// planOneof is a oneof with members that can hold an enum value.
type planOneof struct {
	od      protoreflect.OneofDescriptor
	members []planField
}

// add adds pf to p, as a member of its oneof if it has one.
func (p *plan) add(pf planField) {
	od := pf.fd.ContainingOneof()
	if od == nil || od.IsSynthetic() {
		p.fields = append(p.fields, pf)
		return
	}
	for i := range p.oneofs {
		if p.oneofs[i].od == od {
			p.oneofs[i].members = append(p.oneofs[i].members, pf)
			return
		}
	}
	p.oneofs = append(p.oneofs, planOneof{od: od, members: []planField{pf}})
}

type planField struct {
	fd protoreflect.FieldDescriptor
	// elem is fd, or the descriptor of its values for a map.
	elem protoreflect.FieldDescriptor
	// msg is the plan of elem's messages; nil for an enum.
	msg *plan
}

// plans caches planOf by message descriptor.
var plans sync.Map // protoreflect.MessageDescriptor → *plan

// planOf returns the plan of messages of descriptor md, made once.
func planOf(md protoreflect.MessageDescriptor) *plan {
	if v, ok := plans.Load(md); ok {
		return v.(*plan)
	}
	p := makePlan(md, map[protoreflect.FullName]*plan{})
	v, _ := plans.LoadOrStore(md, p)
	return v.(*plan)
}

// makePlan makes the plan of md; made holds the plans begun, by name, so
// that a recursive type's plan refers to itself.
func makePlan(md protoreflect.MessageDescriptor, made map[protoreflect.FullName]*plan) *plan {
	if !holdsEnums(md) {
		return nil
	}
	if p, ok := made[md.FullName()]; ok {
		return p
	}
	p := &plan{}
	made[md.FullName()] = p
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		elem := fd
		if fd.IsMap() {
			elem = fd.MapValue()
		}
		switch elem.Kind() {
		case protoreflect.EnumKind:
			p.add(planField{fd: fd, elem: elem})
		case protoreflect.MessageKind, protoreflect.GroupKind:
			if mp := makePlan(elem.Message(), made); mp != nil {
				p.add(planField{fd: fd, elem: elem, msg: mp})
			}
		}
	}
	return p
}

func check(m protoreflect.Message, p *plan) *badEnum {
	if p == nil {
		return nil
	}
	for _, pf := range p.fields {
		if bad := present(m, pf); bad != nil {
			return bad
		}
	}
	for _, o := range p.oneofs {
		set := m.WhichOneof(o.od)
		if set == nil {
			continue
		}
		for _, pf := range o.members {
			if pf.fd.Number() == set.Number() {
				if bad := present(m, pf); bad != nil {
					return bad
				}
				break
			}
		}
	}
	return nil
}

// present checks the field pf of m, when m has it.
func present(m protoreflect.Message, pf planField) *badEnum {
	if !m.Has(pf.fd) {
		return nil
	}
	bad := field(pf, m.Get(pf.fd))
	if bad != nil {
		bad.where = append(bad.where, "."+string(pf.fd.Name()))
	}
	return bad
}

// field checks the value v of the field pf, a list's or a map's elements
// each.
func field(pf planField, v protoreflect.Value) *badEnum {
	switch {
	case pf.fd.IsList():
		l := v.List()
		for i := range l.Len() {
			if bad := value(pf, l.Get(i)); bad != nil {
				bad.where = append(bad.where, fmt.Sprintf("[%d]", i))
				return bad
			}
		}
		return nil
	case pf.fd.IsMap():
		return mapField(pf, v.Map())
	}
	return value(pf, v)
}

// mapField checks the values of the map field pf. (Apart from field, so
// that the variable its callback sets is not an allocation for every
// field.)
func mapField(pf planField, m protoreflect.Map) *badEnum {
	var bad *badEnum
	m.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
		if bad = value(pf, mv); bad != nil {
			bad.where = append(bad.where, fmt.Sprintf("[%q]", k.String()))
		}
		return bad == nil
	})
	return bad
}

// value checks one value of field pf (an element, for a list or map).
func value(pf planField, v protoreflect.Value) *badEnum {
	if pf.msg != nil {
		return check(v.Message(), pf.msg)
	}
	if pf.elem.Enum().Values().ByNumber(v.Enum()) == nil {
		return &badEnum{fd: pf.elem, value: v.Enum()}
	}
	return nil
}

// holdsEnums reports whether a message of descriptor md can hold an enum
// value: in a field of its own, or of a message it can hold, at any
// depth. It is asked only while a plan is made.
func holdsEnums(md protoreflect.MessageDescriptor) bool {
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
	return reach(md)
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
// the handler's RecvMsg then fails with; a stream whose context is
// vouched for (Vouch) is not checked.
func StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if ss.Context().Value(vouchedKey{}) != nil {
			return handler(srv, ss)
		}
		return handler(srv, checkedStream{ss})
	}
}

// vouchedKey is the context key of Vouch's mark.
type vouchedKey struct{}

// Vouch returns ctx marked as the context of a stream whose requests the
// stream interceptor lets through unwalked, because the caller, in the
// same process, vouches that every enum value in them was checked where
// it entered the process or was set by the process's own code (see the
// package doc). Only the server's in-process channel calls it, on the
// handler's context it makes for a request shared by its caller
// (grpcserver.ShareRequest); nothing from outside the process can reach
// a handler's context with the mark.
func Vouch(ctx context.Context) context.Context {
	return context.WithValue(ctx, vouchedKey{}, true)
}

type checkedStream struct{ grpc.ServerStream }

func (s checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return refuse(m)
}
