// Package enumword names the values of the contract's enums by lower-case
// words: STOP_REASON_COMPLETED is "completed", SESSION_STATE_AWAITING_APPROVAL
// is "awaiting_approval". These words are the ones the trace format, the
// agent configuration, metric labels, the CLI and the texts the model reads
// use, so one package derives them and every other package asks it.
//
// The word is the value's name without the enum's prefix, which every enum
// of the contract shares with its zero value (buf lint holds the proto to
// ENUM_ZERO_VALUE_SUFFIX and ENUM_VALUE_PREFIX): the prefix is read from
// the zero value's name, so a new enum or value needs no table here.
package enumword

import (
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Enum is a generated proto enum type.
type Enum interface {
	~int32
	protoreflect.Enum
}

// table is the words of one enum, both ways.
type table struct {
	words  map[protoreflect.EnumNumber]string
	values map[string]protoreflect.EnumNumber
}

// tables caches one table per enum, keyed by its full name.
var tables sync.Map // protoreflect.FullName -> *table

func tableOf(d protoreflect.EnumDescriptor) *table {
	if t, ok := tables.Load(d.FullName()); ok {
		return t.(*table)
	}
	vals := d.Values()
	prefix := ""
	if zero := vals.ByNumber(0); zero != nil {
		prefix = strings.TrimSuffix(string(zero.Name()), "UNSPECIFIED")
	}
	t := &table{words: make(map[protoreflect.EnumNumber]string, vals.Len()), values: make(map[string]protoreflect.EnumNumber, vals.Len())}
	for i := range vals.Len() {
		v := vals.Get(i)
		w := strings.ToLower(strings.TrimPrefix(string(v.Name()), prefix))
		t.words[v.Number()] = w
		if v.Number() != 0 {
			t.values[w] = v.Number()
		}
	}
	actual, _ := tables.LoadOrStore(d.FullName(), t)
	return actual.(*table)
}

// Word returns the word of v: "unspecified" for the zero value, and for a
// number the enum does not define (a newer peer's value) the number in
// decimal, so that a label or a message never comes out empty.
func Word[E Enum](v E) string {
	if w, ok := Lookup(v); ok {
		return w
	}
	return strconv.Itoa(int(v))
}

// Lookup returns the word of v and whether the enum defines v.
func Lookup[E Enum](v E) (string, bool) {
	w, ok := tableOf(v.Descriptor()).words[protoreflect.EnumNumber(v)]
	return w, ok
}

// Parse returns the value whose word is w. Only the defined values other
// than the zero value have words here: the zero value means "not given",
// which callers spell as they need (an absent key, an empty string).
func Parse[E Enum](w string) (E, bool) {
	var zero E
	n, ok := tableOf(zero.Descriptor()).values[w]
	return E(n), ok
}

// Words returns the words of the enum's defined values other than the
// zero value, in the order the contract declares them, for messages that list what is accepted.
func Words[E Enum]() []string {
	var zero E
	vals := zero.Descriptor().Values()
	t := tableOf(zero.Descriptor())
	out := make([]string, 0, vals.Len())
	for i := range vals.Len() {
		if n := vals.Get(i).Number(); n != 0 {
			out = append(out, t.words[n])
		}
	}
	return out
}
