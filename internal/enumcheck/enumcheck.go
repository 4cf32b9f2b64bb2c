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

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Check returns an error naming the first enum field of m, at any depth,
// whose value is not declared by its enum, or nil.
func Check(m proto.Message) error {
	if m == nil {
		return nil
	}
	return check(m.ProtoReflect(), "")
}

func check(m protoreflect.Message, path string) error {
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := join(path, string(fd.Name()))
		switch {
		case fd.IsList():
			l := v.List()
			for i := range l.Len() {
				if err = value(fd, l.Get(i), fmt.Sprintf("%s[%d]", name, i)); err != nil {
					return false
				}
			}
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				err = value(fd.MapValue(), mv, fmt.Sprintf("%s[%q]", name, k.String()))
				return err == nil
			})
		default:
			err = value(fd, v, name)
		}
		return err == nil
	})
	return err
}

// value checks one value of field fd (an element, for a list or map).
func value(fd protoreflect.FieldDescriptor, v protoreflect.Value, path string) error {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		ed := fd.Enum()
		if ed.Values().ByNumber(v.Enum()) == nil {
			return fmt.Errorf("%s: %d is not a value of %s (want one of %s)", path, v.Enum(), ed.FullName(), names(ed))
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return check(v.Message(), path)
	}
	return nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
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
