// Package deploy holds the Dockerfile and the Kubernetes manifests. Its test
// renders every kustomize overlay with the pinned kustomize, decodes each
// object strictly into the Kubernetes API types, and checks what a cluster
// operator relies on: probes, limits, a non-root and read-only runtime, a
// headless environment Service, network policies, and container arguments
// that the penguin binary really accepts.
package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// rendered is one overlay's objects, decoded into their API types.
type rendered struct {
	deployments []*appsv1.Deployment
	services    map[string]*corev1.Service
	configMaps  map[string]*corev1.ConfigMap
	secrets     map[string]*corev1.Secret
	pdbs        map[string]*policyv1.PodDisruptionBudget
	hpas        map[string]*autoscalingv2.HorizontalPodAutoscaler
	policies    map[string]*networkingv1.NetworkPolicy
}

var overlays = []string{"overlays/dev", "overlays/production"}

func kustomizeBuild(t *testing.T, dir string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "tool", "-modfile=../tools/go.mod", "kustomize", "build", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kustomize build %s: %v\n%s", dir, err, stderr.String())
	}
	return out
}

// decodeStrict decodes one YAML object into v, refusing unknown fields so a
// misspelt key fails the test instead of being ignored by the cluster.
func decodeStrict(doc []byte, v any) error {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// keep files a new, empty object under name in byName and returns it for
// decoding into.
func keep[T any](byName map[string]*T, name string) *T {
	v := new(T)
	byName[name] = v
	return v
}

func render(t *testing.T, dir string) *rendered {
	t.Helper()
	r := &rendered{
		services: map[string]*corev1.Service{}, configMaps: map[string]*corev1.ConfigMap{},
		secrets: map[string]*corev1.Secret{}, pdbs: map[string]*policyv1.PodDisruptionBudget{},
		hpas: map[string]*autoscalingv2.HorizontalPodAutoscaler{}, policies: map[string]*networkingv1.NetworkPolicy{},
	}
	for i, doc := range bytes.Split(kustomizeBuild(t, dir), []byte("\n---\n")) {
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatalf("%s: document %d: %v", dir, i, err)
		}
		var obj any
		name := head.Metadata.Name
		switch head.Kind {
		case "Deployment":
			d := &appsv1.Deployment{}
			r.deployments = append(r.deployments, d)
			obj = d
		case "Service":
			obj = keep(r.services, name)
		case "ConfigMap":
			obj = keep(r.configMaps, name)
		case "Secret":
			obj = keep(r.secrets, name)
		case "PodDisruptionBudget":
			obj = keep(r.pdbs, name)
		case "HorizontalPodAutoscaler":
			obj = keep(r.hpas, name)
		case "NetworkPolicy":
			obj = keep(r.policies, name)
		case "ServiceAccount":
			obj = &corev1.ServiceAccount{}
		case "Namespace":
			obj = &corev1.Namespace{}
		case "PersistentVolumeClaim":
			obj = &corev1.PersistentVolumeClaim{}
		default:
			t.Fatalf("%s: document %d: unexpected kind %q (add it to the test)", dir, i, head.Kind)
		}
		if err := decodeStrict(doc, obj); err != nil {
			t.Fatalf("%s: %s %s does not decode strictly: %v", dir, head.Kind, head.Metadata.Name, err)
		}
	}
	if len(r.deployments) == 0 {
		t.Fatalf("%s rendered no Deployment", dir)
	}
	return r
}

func TestOverlaysRenderAndDecodeStrictly(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			r := render(t, dir)
			for _, want := range []string{"penguin-llm", "penguin-environment", "penguin-engine"} {
				found := false
				for _, d := range r.deployments {
					found = found || d.Name == want
				}
				if !found {
					t.Errorf("no Deployment %s", want)
				}
				if r.services[want] == nil || r.pdbs[want] == nil || r.hpas[want] == nil || r.policies[want] == nil {
					t.Errorf("%s lacks a Service, PodDisruptionBudget, HorizontalPodAutoscaler or NetworkPolicy", want)
				}
			}
		})
	}
}

func TestContainersAreHardened(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			for _, d := range render(t, dir).deployments {
				pod := d.Spec.Template.Spec
				if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
					t.Errorf("%s: pod does not set runAsNonRoot", d.Name)
				}
				if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
					t.Errorf("%s: pod mounts a service account token it does not need", d.Name)
				}
				for _, c := range pod.Containers {
					where := d.Name + "/" + c.Name
					if c.LivenessProbe == nil || c.ReadinessProbe == nil {
						t.Errorf("%s: missing a liveness or readiness probe", where)
					}
					for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
						if _, ok := c.Resources.Limits[res]; !ok {
							t.Errorf("%s: no %s limit", where, res)
						}
						if _, ok := c.Resources.Requests[res]; !ok {
							t.Errorf("%s: no %s request", where, res)
						}
					}
					sc := c.SecurityContext
					switch {
					case sc == nil:
						t.Errorf("%s: no securityContext", where)
					case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
						t.Errorf("%s: allows privilege escalation", where)
					case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
						t.Errorf("%s: root filesystem is writable", where)
					case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL":
						t.Errorf("%s: does not drop ALL capabilities", where)
					}
					if strings.HasPrefix(c.Image, "penguin") || strings.Contains(c.Image, "/penguin") {
						if c.ReadinessProbe != nil && c.ReadinessProbe.GRPC == nil {
							t.Errorf("%s: a penguin service must use a grpc readiness probe", where)
						}
					}
				}
			}
		})
	}
}

func TestEnvironmentServiceIsHeadlessAndFenced(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			r := render(t, dir)
			if svc := r.services["penguin-environment"]; svc == nil || svc.Spec.ClusterIP != corev1.ClusterIPNone {
				t.Errorf("the environment Service must be headless so environments are addressed per pod")
			}
			for _, name := range []string{"penguin-llm", "penguin-environment"} {
				np := r.policies[name]
				if np == nil {
					t.Fatalf("no NetworkPolicy for %s", name)
				}
				for _, rule := range np.Spec.Ingress {
					grpcPort := false
					for _, p := range rule.Ports {
						grpcPort = grpcPort || (p.Port != nil && p.Port.IntValue() != 9090)
					}
					if !grpcPort {
						continue
					}
					if len(rule.From) != 1 || rule.From[0].PodSelector == nil ||
						rule.From[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "penguin-engine" {
						t.Errorf("%s: its gRPC port is reachable from more than the engine", name)
					}
				}
			}
		})
	}
}

// envRef matches a Kubernetes $(VAR) reference in container arguments.
var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// TestEntrypointsAreRealSubcommands runs the real penguin binary with each
// penguin container's arguments plus -h: the flag parser fails on an unknown
// subcommand or flag before it reaches -h, so an exit status of zero proves
// the manifest's command line is one the binary accepts.
func TestEntrypointsAreRealSubcommands(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "penguin")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../cmd/penguin").CombinedOutput(); err != nil {
		t.Fatalf("build penguin: %v\n%s", err, out)
	}
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			r := render(t, dir)
			for _, d := range r.deployments {
				for _, c := range d.Spec.Template.Spec.Containers {
					if !strings.Contains(c.Image, "penguin") {
						continue
					}
					defined := definedEnv(r, c)
					args := make([]string, 0, len(c.Args)+1)
					for _, a := range c.Args {
						for _, m := range envRef.FindAllStringSubmatch(a, -1) {
							if !defined[m[1]] {
								t.Errorf("%s: argument %q refers to $(%s), which the container does not define", d.Name, a, m[1])
							}
						}
						args = append(args, envRef.ReplaceAllString(a, "x"))
					}
					args = append(args, "-h")
					cmd := exec.CommandContext(ctx, bin, args...)
					cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
					if out, err := cmd.CombinedOutput(); err != nil {
						t.Errorf("%s: `penguin %s` is not accepted by the binary: %v\n%s", d.Name, strings.Join(args, " "), err, out)
					}
				}
			}
		})
	}
}

// definedEnv lists the variables a container defines, directly or through
// the ConfigMaps and Secrets it takes whole.
func definedEnv(r *rendered, c corev1.Container) map[string]bool {
	defined := map[string]bool{}
	for _, e := range c.Env {
		defined[e.Name] = true
	}
	for _, src := range c.EnvFrom {
		switch {
		case src.ConfigMapRef != nil:
			for k := range r.configMaps[src.ConfigMapRef.Name].Data {
				defined[k] = true
			}
		case src.SecretRef != nil:
			s := r.secrets[src.SecretRef.Name]
			for k := range s.Data {
				defined[k] = true
			}
			for k := range s.StringData {
				defined[k] = true
			}
		}
	}
	return defined
}

// TestProductionStoreIsPostgres checks that the production overlay points
// engine replicas at PostgreSQL: the Secret is read after the ConfigMap, so
// its PENGUIN_STORE wins.
func TestProductionStoreIsPostgres(t *testing.T) {
	r := render(t, "overlays/production")
	for _, d := range r.deployments {
		if d.Name != "penguin-engine" {
			continue
		}
		if *d.Spec.Replicas < 2 {
			t.Errorf("production runs %d engine replicas, want at least 2", *d.Spec.Replicas)
		}
		c := d.Spec.Template.Spec.Containers[0]
		store := ""
		for _, src := range c.EnvFrom {
			if src.ConfigMapRef != nil {
				if v, ok := r.configMaps[src.ConfigMapRef.Name].Data["PENGUIN_STORE"]; ok {
					store = v
				}
			}
			if src.SecretRef != nil {
				if v, ok := r.secrets[src.SecretRef.Name].Data["PENGUIN_STORE"]; ok {
					store = string(v)
				}
			}
		}
		if !strings.HasPrefix(store, "postgres://") {
			t.Errorf("engine store is %q, want a PostgreSQL URL", store)
		}
		return
	}
	t.Fatal(fmt.Errorf("no engine Deployment in production"))
}
