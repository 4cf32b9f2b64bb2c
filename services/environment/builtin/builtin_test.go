package builtin

import "testing"

// TestDefinitionsMadeOnce checks that a builtin's definition is made once
// and shared: every CreateEnvironment asks each tool's several times, and
// on the code before each call made one (some 3 KiB an environment).
func TestDefinitionsMadeOnce(t *testing.T) {
	for _, s := range Tools(Deps{}) {
		d := s.Tool.Definition()
		if d.GetName() == "" || d.GetParameters() == "" {
			t.Errorf("a builtin's definition lacks its name or parameters: %v", d)
		}
		if allocs := testing.AllocsPerRun(10, func() { _ = s.Tool.Definition() }); allocs != 0 || s.Tool.Definition() != d {
			t.Errorf("%s: its definition is made at each call (%.0f allocations)", d.GetName(), allocs)
		}
	}
}
