package deploy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/e2e/netns"
)

// TestContainersStartAsTheirPodsStartThem starts the llm, environment and
// engine containers of the dev overlay the way their pods start them: the
// same arguments and environment, the ConfigMaps and Secrets as files at
// their mount paths, every volume a fresh directory (the paths are moved
// under a temporary root) and a HOME that cannot be created, so a write
// outside the volumes fails the start, as it would on the read-only root
// filesystem. Each must become SERVING and stop cleanly on SIGTERM. The
// containers are Linux's, and so is the test (e2e/netns runs them).
func TestContainersStartAsTheirPodsStartThem(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "penguin")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../cmd/penguin").CombinedOutput(); err != nil {
		t.Fatalf("build penguin: %v\n%s", err, out)
	}
	r := render(t, "overlays/dev")
	secrets := map[string]map[string]string{
		"penguin-auth":       {"token": "test-token"},
		"penguin-providers":  {"openai-api-key": "sk-test", "anthropic-api-key": "sk-ant-test"},
		"penguin-routes-key": {"key": "0123456789abcdef0123456789abcdef-routes"},
	}
	for _, name := range services {
		t.Run(name, func(t *testing.T) {
			pod := r.deployment(t, name).Spec.Template.Spec
			c := pod.Containers[0]
			root := t.TempDir()
			// Mount paths, longest first, so /a/b moves before /a.
			var mounts []string
			for _, m := range c.VolumeMounts {
				mounts = append(mounts, m.MountPath)
			}
			slices.SortFunc(mounts, func(a, b string) int { return len(b) - len(a) })
			var pairs []string
			for _, m := range mounts {
				pairs = append(pairs, m, filepath.Join(root, m))
			}
			move := strings.NewReplacer(pairs...).Replace
			for _, m := range c.VolumeMounts {
				dir := filepath.Join(root, m.MountPath)
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				for _, v := range pod.Volumes {
					if v.Name != m.Name {
						continue
					}
					files := map[string]string{}
					switch {
					case v.ConfigMap != nil:
						files = r.configMaps[v.ConfigMap.Name].Data
					case v.Secret != nil:
						files = secrets[v.Secret.SecretName]
					}
					for f, content := range files {
						if err := os.WriteFile(filepath.Join(dir, f), []byte(move(content)), 0o600); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			notADir := filepath.Join(root, "not-a-directory")
			if err := os.WriteFile(notADir, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(notADir, "home"), "SHELL=/bin/sh"}
			for _, src := range c.EnvFrom {
				if src.ConfigMapRef != nil {
					for k, v := range r.configMaps[src.ConfigMapRef.Name].Data {
						env = append(env, k+"="+v)
					}
				}
			}
			for _, e := range c.Env {
				switch {
				case e.ValueFrom == nil:
					env = append(env, e.Name+"="+move(e.Value))
				case e.ValueFrom.FieldRef != nil:
					env = append(env, e.Name+"=127.0.0.1")
				case e.ValueFrom.SecretKeyRef != nil && e.Name == "PENGUIN_STORE":
					// SQLite on the data volume stands in for PostgreSQL.
					env = append(env, e.Name+"=sqlite:"+filepath.Join(root, "var/lib/penguin/penguin.db"))
				case e.ValueFrom.SecretKeyRef != nil && e.Name == "PENGUIN_ROUTES_STORE":
					// The llm pod has no data volume: its /tmp holds the stand-in.
					env = append(env, e.Name+"=sqlite:"+filepath.Join(root, "tmp/routes.db"))
				}
			}
			var args []string
			for _, a := range c.Args {
				a = strings.ReplaceAll(a, "$(POD_IP)", "127.0.0.1")
				if flag, _, ok := strings.Cut(a, "="); ok && (flag == "--listen" || flag == "--metrics-listen" || flag == "--http-listen") {
					a = flag + "=127.0.0.1:0"
				}
				args = append(args, move(a))
			}
			cmd := exec.Command(bin, args...)
			cmd.Env, cmd.Dir = env, root
			p := netns.Start(t, name, cmd)
			addr := p.WaitLog("gRPC server listening", nil, "addr", time.Minute)
			wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
			defer wcancel()
			if err := netns.WaitServing(wctx, addr, ""); err != nil {
				t.Fatalf("%s never became SERVING: %v", name, err)
			}
			if err := p.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := p.Wait(time.Minute); code != 0 {
				t.Fatalf("%s exited %d after SIGTERM:\n%s", name, code, p.Output())
			}
		})
	}
}
