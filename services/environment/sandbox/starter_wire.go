//go:build linux

package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// A start request on the wire is a list of NUL-terminated strings: the
// flags, the program's path, its working directory, the number of
// arguments, the arguments and then the environment. None of these can
// hold a NUL (execve takes C strings), so no escaping is needed, and the
// init or the spawner decodes a request in a few microseconds where JSON
// took some 30 on every command.
const (
	flagCtty   = 'c' // Ctty
	flagCgroup = 'g' // Cgroup
)

// encode returns r in its wire form, or an error when a string holds a
// NUL.
func (r startRequest) encode() ([]byte, error) {
	var flags []byte
	if r.Ctty {
		flags = append(flags, flagCtty)
	}
	if r.Cgroup {
		flags = append(flags, flagCgroup)
	}
	fields := append([]string{string(flags), r.Path, r.Dir, strconv.Itoa(len(r.Args))}, r.Args...)
	fields = append(fields, r.Env...)
	size := 0
	for _, f := range fields {
		size += len(f) + 1
	}
	b := make([]byte, 0, size)
	for _, f := range fields {
		if strings.IndexByte(f, 0) >= 0 {
			return nil, fmt.Errorf("the command line or environment holds a NUL byte: %q", f)
		}
		b = append(append(b, f...), 0)
	}
	return b, nil
}

// decodeStartRequest parses a request's wire form.
func decodeStartRequest(b []byte) (startRequest, error) {
	var r startRequest
	if len(b) == 0 || b[len(b)-1] != 0 {
		return r, errors.New("the request does not end with a NUL")
	}
	fields := bytes.Split(b[:len(b)-1], []byte{0})
	if len(fields) < 4 {
		return r, fmt.Errorf("the request has %d fields, fewer than 4", len(fields))
	}
	n, err := strconv.Atoi(string(fields[3]))
	if err != nil || n < 0 || n > len(fields)-4 {
		return r, fmt.Errorf("the request's argument count %q does not fit it", fields[3])
	}
	r.Ctty = bytes.IndexByte(fields[0], flagCtty) >= 0
	r.Cgroup = bytes.IndexByte(fields[0], flagCgroup) >= 0
	r.Path, r.Dir = string(fields[1]), string(fields[2])
	r.Args = make([]string, n)
	for i := range n {
		r.Args[i] = string(fields[4+i])
	}
	r.Env = make([]string, 0, len(fields)-4-n)
	for _, f := range fields[4+n:] {
		r.Env = append(r.Env, string(f))
	}
	return r, nil
}
