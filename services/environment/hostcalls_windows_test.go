package environment_test

import "errors"

// errNoUnixCalls is why the attacks that need Unix calls cannot be made
// on Windows; the tests that make them run commands in a Linux sandbox.
var errNoUnixCalls = errors.New("ptrace, file owners and device nodes are Unix's")

func ptraceAttach(int) error { return errNoUnixCalls }

func fileUID(string) (uint32, error) { return 0, errNoUnixCalls }

func mknodChar(string, uint32, uint32) error { return errNoUnixCalls }
