package cmdpolicy

import (
	"encoding/json"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

func factory(t *testing.T) *Policy {
	t.Helper()
	p, err := Compile(&penguinv1.CommandPolicy{UseDefaults: true})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFactoryRulesForbid(t *testing.T) {
	p := factory(t)
	cases := map[string]string{
		"rm -rf /":                          "rm-recursive-force",
		"rm -fr build":                      "rm-recursive-force",
		"rm -r -f build":                    "rm-recursive-force",
		"rm -f x -R build":                  "rm-recursive-force",
		"rm --recursive --force build":      "rm-recursive-force",
		"sudo rm -rf /":                     "rm-recursive-force",
		"sudo -u root /bin/rm -rf /":        "rm-recursive-force",
		`"rm" -rf /`:                        "rm-recursive-force",
		`r''m -rf /`:                        "rm-recursive-force",
		`\rm -rf /`:                         "rm-recursive-force",
		`sh -c 'rm -rf /'`:                  "rm-recursive-force",
		`bash -lc "cd /tmp && rm -rf ~"`:    "rm-recursive-force",
		"find . -name x | xargs rm -rf":     "rm-recursive-force",
		"find . | xargs -0 -n 1 rm -rf":     "rm-recursive-force",
		"env FOO=1 rm -rf x":                "rm-recursive-force",
		"nice -n 5 rm -rf x":                "rm-recursive-force",
		"command rm -rf x":                  "rm-recursive-force",
		"timeout 5 rm -rf x":                "rm-recursive-force",
		"echo hi;rm -rf x":                  "rm-recursive-force",
		"X=1 rm -rf x":                      "rm-recursive-force",
		"mkfs.ext4 /dev/sda1":               "mkfs",
		"sudo mkfs /dev/sdb":                "mkfs",
		"dd if=/dev/zero of=/dev/sda bs=1M": "dd-to-block-device",
		":(){ :|:& };:":                     "fork-bomb",
		"echo x > /dev/sda":                 "redirect-to-block-device",
		"cat img >/dev/nvme0n1":             "redirect-to-block-device",
		"Remove-Item -Recurse -Force C:\\":  "windows-recursive-force-delete",
		"rd /s /q C:\\":                     "windows-recursive-force-delete",
		"format c: /q":                      "windows-format-volume",
		`dd if=x of=\\.\PhysicalDrive0`:     "windows-raw-disk-write",
		"%0|%0":                             "windows-cmd-fork-bomb",
	}
	for cmd, want := range cases {
		forbidden, rule := p.Check(cmd)
		if !forbidden || rule != want {
			t.Errorf("Check(%q) = %v, %q; want forbidden by %q (candidates %q)", cmd, forbidden, rule, want, Candidates(cmd))
		}
	}
}

func TestFactoryRulesAllow(t *testing.T) {
	p := factory(t)
	for _, cmd := range []string{
		"rm -r build", "rm -f x", "ls -rf", "echo rm -rf /", `git commit -m "rm -rf is bad"`,
		"farm -rf", "echo x > /dev/null", "dd if=/dev/zero of=./disk.img", "format-code src",
		"grep -rf patterns .", "go test ./...",
	} {
		if forbidden, rule := p.Check(cmd); forbidden {
			t.Errorf("Check(%q) forbidden by %q; want allowed", cmd, rule)
		}
	}
}

func TestEvaluateReadsTheShellArguments(t *testing.T) {
	p := factory(t)
	args := func(k, v string) string { b, _ := json.Marshal(map[string]string{k: v}); return string(b) }
	if f, _ := p.Evaluate("exec_command", args("cmd", "rm -rf /")); !f {
		t.Error("exec_command cmd not checked")
	}
	if f, _ := p.Evaluate("input_command", args("chars", "sudo rm -rf /\n")); !f {
		t.Error("input_command chars not checked")
	}
	if f, _ := p.Evaluate("write_file", args("content", "rm -rf /")); f {
		t.Error("write_file must not be checked")
	}
	if f, _ := p.Evaluate("exec_command", "not json"); f {
		t.Error("bad JSON is the tool's to refuse")
	}
}

func TestCompile(t *testing.T) {
	if _, err := Compile(&penguinv1.CommandPolicy{Rules: []*penguinv1.CommandRule{{Name: "bad", Pattern: "("}}}); err == nil {
		t.Fatal("invalid pattern accepted")
	}
	p, err := Compile(&penguinv1.CommandPolicy{Disabled: true, UseDefaults: true})
	if err != nil || len(p.Rules()) != 0 {
		t.Fatalf("disabled policy: %v, %d rules", err, len(p.Rules()))
	}
	p, err = Compile(&penguinv1.CommandPolicy{Rules: []*penguinv1.CommandRule{{Name: "no-force-push", Pattern: `git push [^;|&]*--force`}}})
	if err != nil {
		t.Fatal(err)
	}
	if f, r := p.Check("git push origin main --force"); !f || r != "no-force-push" {
		t.Fatalf("custom rule: %v %q", f, r)
	}
	if f, _ := p.Check("rm -rf /"); f {
		t.Fatal("factory rules apply only with use_defaults")
	}
	var nilPolicy *Policy
	if f, _ := nilPolicy.Evaluate("exec_command", `{"cmd":"rm -rf /"}`); f {
		t.Fatal("nil policy forbids nothing")
	}
}
