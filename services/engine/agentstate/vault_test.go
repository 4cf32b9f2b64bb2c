package agentstate

import (
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

func TestVaultRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := Init(dir)
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]string{
		"PLAIN":     "abc",
		"NUMBERISH": "0123",
		"BOOLISH":   "yes",
		"MULTILINE": "line1\nline2\n",
		"QUOTES":    `he said "hi" and 'bye': # not a comment`,
		"EMPTY":     "",
		"_UNDER":    "  padded  ",
	}
	for k, v := range values {
		if err := st.SetVault(k, v); err != nil {
			t.Fatalf("SetVault(%s): %v", k, err)
		}
	}
	again, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again.Vault, values) {
		t.Errorf("vault round trip:\n got %q\nwant %q", again.Vault, values)
	}
	if runtime.GOOS != "windows" {
		if m := fileMode(t, filepath.Join(dir, VaultFile)).Perm(); m != 0o600 {
			t.Errorf("vault mode after SetVault = %04o", m)
		}
	}
	if ok, err := again.RemoveVault("PLAIN"); !ok || err != nil {
		t.Fatalf("RemoveVault = %v, %v", ok, err)
	}
	if ok, err := again.RemoveVault("PLAIN"); ok || err != nil {
		t.Fatalf("second RemoveVault = %v, %v", ok, err)
	}
	third, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := third.Vault["PLAIN"]; ok || len(third.Vault) != len(values)-1 {
		t.Errorf("after remove: %v", third.VaultKeys())
	}
}

func TestVaultKeyNames(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"A", "_", "_A1", "GITHUB_TOKEN", "a_b"} {
		if err := ValidVaultKey(k); err != nil {
			t.Errorf("%q rejected: %v", k, err)
		}
	}
	st, err := Init(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"", "1A", "A-B", "A B", "A=B", "É", "A.B"} {
		if err := ValidVaultKey(k); err == nil {
			t.Errorf("%q accepted", k)
		}
		if err := st.SetVault(k, "v"); err == nil {
			t.Errorf("SetVault(%q) accepted", k)
		}
	}
}

func TestVaultPermissionsEnforced(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("no POSIX modes")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, VaultFile)
	if err := os.WriteFile(path, []byte("A: secret-value\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), "chmod 600 "+path) {
		t.Fatalf("a world-readable vault was accepted: %v", err)
	}
	if strings.Contains(err.Error(), "secret-value") {
		t.Error("the error shows a vault value")
	}
}

func TestVaultErrorsHideValues(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, VaultFile)
	if err := os.WriteFile(path, []byte("GOOD: secret-one\nbad-key: secret-two\nLIST: [secret-three]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir)
	if err == nil {
		t.Fatal("bad vault accepted")
	}
	for _, v := range []string{"secret-one", "secret-two", "secret-three"} {
		if strings.Contains(err.Error(), v) {
			t.Errorf("the error %q shows a value", err)
		}
	}
	for _, want := range []string{path + ":2:", path + ":3:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestVaultEmptyForms(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"", "# only comments\n", "---\n", "{}\n", "EMPTY:\n"} {
		v, err := parseVault("v.yaml", []byte(src))
		if err != nil {
			t.Errorf("parseVault(%q): %v", src, err)
		}
		if src == "EMPTY:\n" {
			if val, ok := v["EMPTY"]; !ok || val != "" {
				t.Errorf("EMPTY: = %q, %v", val, ok)
			}
		} else if len(v) != 0 {
			t.Errorf("parseVault(%q) = %v", src, v)
		}
	}
}

// An agent directory PenguinHarness wrote keeps its vault in .vault.toml:
// the agent runs with it, Init adds no second vault beside it, and changes
// are written back to it.
func TestReferenceVaultIsReadAndKept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := "GITHUB_TOKEN = \"ghp_x\"\nDB_URL = 'postgres://u:p@h/db'\n"
	if err := os.WriteFile(filepath.Join(dir, ".vault.toml"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := Init(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"GITHUB_TOKEN": "ghp_x", "DB_URL": "postgres://u:p@h/db"}; !reflect.DeepEqual(st.Vault, want) {
		t.Fatalf("vault = %q, want %q", st.Vault, want)
	}
	if _, err := os.Stat(filepath.Join(dir, VaultFile)); !os.IsNotExist(err) {
		t.Fatalf("Init wrote a second vault beside .vault.toml: %v", err)
	}
	if err := st.SetVault("NEW", "n\"ew"); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.RemoveVault("DB_URL"); !ok || err != nil {
		t.Fatalf("RemoveVault = %v, %v", ok, err)
	}
	again, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"GITHUB_TOKEN": "ghp_x", "NEW": "n\"ew"}; !reflect.DeepEqual(again.Vault, want) {
		t.Fatalf("vault after changes = %q, want %q", again.Vault, want)
	}
	if runtime.GOOS != "windows" {
		if m := fileMode(t, filepath.Join(dir, ".vault.toml")).Perm(); m != 0o600 {
			t.Errorf("vault mode after SetVault = %04o", m)
		}
	}
}

func TestReferenceVaultProblems(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, toml, yaml string
		mode             os.FileMode
		want             string
	}{
		{"not a string", "PORT = 8080\n", "", 0o600, "PORT: the value must be a string"},
		{"bad name", "\"1BAD\" = \"secret-value\"\n", "", 0o600, `invalid vault key "1BAD"`},
		{"syntax", "A = \"secret-value\nB = 1\n", "", 0o600, "not a TOML table"},
		{"readable by others", "A = \"secret-value\"\n", "", 0o644, "readable by others"},
		{"two vaults", "A = \"secret-value\"\n", "B: other\n", 0o600, "holds a vault too: keep one"},
	} {
		if c.mode&0o077 != 0 && runtime.GOOS == "windows" {
			continue
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, ".vault.toml"), []byte(c.toml), c.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, ".vault.toml"), c.mode); err != nil {
			t.Fatal(err)
		}
		if c.yaml != "" {
			if err := os.WriteFile(filepath.Join(dir, VaultFile), []byte(c.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		_, err := Load(dir)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret-value") {
			t.Errorf("%s: the error quotes a value: %v", c.name, err)
		}
	}
	// An empty .vault.yaml (what Init writes) beside .vault.toml is no
	// second vault.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".vault.toml"), []byte("A = \"a\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, VaultFile), []byte(vaultHeader), 0o600); err != nil {
		t.Fatal(err)
	}
	if st, err := Load(dir); err != nil || st.Vault["A"] != "a" {
		t.Fatalf("Load = %v, %v", st, err)
	}
}
