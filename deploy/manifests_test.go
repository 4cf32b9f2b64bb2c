// Package deploy holds the Kubernetes manifests and the image build. Its
// tests render every kustomize overlay with the pinned kustomize, decode
// each object strictly into the Kubernetes API types, and check what a
// cluster operator relies on: probes, limits, a non-root and read-only
// runtime, secrets by reference and only where needed, headless Services
// for the replicas the engine balances over, shutdowns that fit their grace
// periods, network policies that allow exactly Penguin's flows (evaluated
// with internal/netpol), and each penguin container started the way its
// pod starts it, with nothing writable but its volumes. The end-to-end
// suite on a real cluster is e2e/k8s.
package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/penguin-agent/penguin/internal/netpol"
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
	claims      map[string]*corev1.PersistentVolumeClaim
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
		claims: map[string]*corev1.PersistentVolumeClaim{},
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
			obj = keep(r.claims, name)
		case "PersistentVolume":
			obj = &corev1.PersistentVolume{}
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

// The three services, by Deployment name.
var services = []string{"penguin-llm", "penguin-environment", "penguin-engine"}

func (r *rendered) deployment(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	for _, d := range r.deployments {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("no Deployment %s", name)
	return nil
}

func TestOverlaysRenderAndDecodeStrictly(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			r := render(t, dir)
			for _, name := range services {
				r.deployment(t, name)
				if r.services[name] == nil || r.pdbs[name] == nil || r.policies[name] == nil {
					t.Errorf("%s lacks a Service, PodDisruptionBudget or NetworkPolicy", name)
				}
				if dir == "overlays/production" && r.hpas[name] == nil {
					t.Errorf("production does not autoscale %s", name)
				}
			}
			if r.policies["penguin-default-deny"] == nil {
				t.Error("no default-deny NetworkPolicy")
			}
		})
	}
}

// Agent state needs no shared volume: the engine keeps agents in its
// database and works on a copy in an emptyDir, so neither the engine nor
// the llm pods mount a PersistentVolumeClaim, and the only ReadWriteMany
// claim is the environment pods' workspaces (which a cluster without such
// storage replaces, see deploy/base/environment.yaml).
func TestAgentStateNeedsNoSharedVolume(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			r := render(t, dir)
			for _, name := range []string{"penguin-engine", "penguin-llm"} {
				for _, v := range r.deployment(t, name).Spec.Template.Spec.Volumes {
					if v.PersistentVolumeClaim != nil || v.HostPath != nil || v.NFS != nil || v.Ephemeral != nil {
						t.Errorf("%s mounts volume %s from outside the pod (%+v); agent state belongs in the database", name, v.Name, v.VolumeSource)
					}
				}
			}
			for claim, c := range r.claims {
				if !slices.Contains(c.Spec.AccessModes, corev1.ReadWriteMany) {
					continue
				}
				for _, d := range r.deployments {
					for _, v := range d.Spec.Template.Spec.Volumes {
						if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim && d.Name != "penguin-environment" {
							t.Errorf("%s mounts the ReadWriteMany claim %s; only the environment pods' workspaces may need one", d.Name, claim)
						}
					}
				}
			}
			if dir == "overlays/production" {
				var rwx []string
				for claim, c := range r.claims {
					if slices.Contains(c.Spec.AccessModes, corev1.ReadWriteMany) {
						rwx = append(rwx, claim)
					}
				}
				if !slices.Equal(rwx, []string{"penguin-workspaces"}) {
					t.Errorf("production's ReadWriteMany claims are %v, want only penguin-workspaces", rwx)
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
				if d.Name == "penguin-environment" {
					// Root, but in a user namespace of the pod's own.
					requireSandboxPod(t, d)
					continue
				}
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
					requireLimits(t, where, c)
					requireHardened(t, where, c, nil)
					if strings.Contains(c.Image, "penguin") && !strings.Contains(c.Image, "postgres") &&
						len(c.Args) > 1 && c.Args[0] == "serve" && c.ReadinessProbe != nil && c.ReadinessProbe.GRPC == nil {
						t.Errorf("%s: a penguin service must use a grpc readiness probe", where)
					}
				}
				// An init container may get back one capability it needs.
				for _, c := range pod.InitContainers {
					requireLimits(t, d.Name+"/"+c.Name, c)
					requireHardened(t, d.Name+"/"+c.Name, c, []corev1.Capability{"CHOWN"})
				}
			}
		})
	}
}

// sandboxCaps are the capabilities an environment pod's container may
// add: in the pod's user namespace, what the sandbox needs to make each
// environment's namespaces and cgroups and to run commands as another
// user (deploy/base/environment.yaml says which does what).
var sandboxCaps = []corev1.Capability{"SYS_ADMIN", "NET_ADMIN", "SYS_PTRACE", "SYS_CHROOT", "SETUID", "SETGID", "SETPCAP",
	"CHOWN", "FOWNER", "DAC_OVERRIDE", "DAC_READ_SEARCH", "KILL"}

// requireSandboxPod checks the environment pods as the overlays ship
// them: their own user namespace (hostUsers: false), root only there,
// environments confined by default, the token readable by the service's
// root alone (no fsGroup, mode 0400), and no capability beyond the
// sandbox's.
func requireSandboxPod(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	pod := d.Spec.Template.Spec
	if pod.HostUsers == nil || *pod.HostUsers {
		t.Errorf("%s: the pod shares the node's users (hostUsers is not false)", d.Name)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("%s: pod mounts a service account token it does not need", d.Name)
	}
	if sc := pod.SecurityContext; sc == nil || sc.FSGroup != nil {
		t.Errorf("%s: an fsGroup would make the token readable by the sandbox user's group", d.Name)
	}
	for _, v := range pod.Volumes {
		if v.Secret != nil && (v.Secret.DefaultMode == nil || *v.Secret.DefaultMode != 0o400) {
			t.Errorf("%s: Secret volume %s is readable by more than its owner", d.Name, v.Name)
		}
	}
	c := pod.Containers[0]
	if c.LivenessProbe == nil || c.ReadinessProbe == nil {
		t.Errorf("%s: missing a liveness or readiness probe", d.Name)
	}
	requireLimits(t, d.Name, c)
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Errorf("%s: no securityContext", d.Name)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Errorf("%s: root filesystem is writable", d.Name)
	case sc.ProcMount == nil || *sc.ProcMount != corev1.UnmaskedProcMount:
		t.Errorf("%s: /proc is masked, so environments cannot have one of their own", d.Name)
	case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL":
		t.Errorf("%s: does not drop ALL capabilities", d.Name)
	default:
		for _, cp := range sc.Capabilities.Add {
			if !slices.Contains(sandboxCaps, cp) {
				t.Errorf("%s: adds capability %s, which the sandbox does not need", d.Name, cp)
			}
		}
	}
	if got := envValue(c, "PENGUIN_SANDBOX_DEFAULT"); got != "workspace-write" {
		t.Errorf("%s: PENGUIN_SANDBOX_DEFAULT is %q, want workspace-write (refused at start where it cannot hold)", d.Name, got)
	}
	if got := envValue(c, "PENGUIN_SANDBOX_REQUIRED"); got != "true" {
		t.Errorf("%s: PENGUIN_SANDBOX_REQUIRED is %q, want true (sandbox mode none refused)", d.Name, got)
	}
	for _, ic := range pod.InitContainers {
		requireLimits(t, d.Name+"/"+ic.Name, ic)
		requireHardened(t, d.Name+"/"+ic.Name, ic, []corev1.Capability{"CHOWN"})
	}
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// TestUnconfinedEnvironmentsComponent renders the dev overlay with the
// component for clusters without user namespaces: the environment pods
// share the node's users again, as 65532 without capabilities, and say
// that environments are unconfined (sandbox default none) rather than
// leave the service to find out.
func TestUnconfinedEnvironmentsComponent(t *testing.T) {
	dir, err := os.MkdirTemp("overlays", "unconfined-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	k := "resources:\n  - ../dev\ncomponents:\n  - ../../components/unconfined-environments\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	d := render(t, dir).deployment(t, "penguin-environment")
	pod := d.Spec.Template.Spec
	if pod.HostUsers == nil || !*pod.HostUsers {
		t.Errorf("hostUsers is not true")
	}
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
		t.Errorf("the pod does not run as 65532: %+v", sc)
	}
	c := pod.Containers[0]
	requireHardened(t, d.Name, c, nil)
	if sc := c.SecurityContext; sc != nil && sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount {
		t.Errorf("procMount %s needs hostUsers: false", *sc.ProcMount)
	}
	if got, req := envValue(c, "PENGUIN_SANDBOX_DEFAULT"), envValue(c, "PENGUIN_SANDBOX_REQUIRED"); got != "none" || req != "false" {
		t.Errorf("PENGUIN_SANDBOX_DEFAULT is %q and PENGUIN_SANDBOX_REQUIRED %q, want none and false", got, req)
	}
}

func requireLimits(t *testing.T, where string, c corev1.Container) {
	t.Helper()
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Limits[res]; !ok {
			t.Errorf("%s: no %s limit", where, res)
		}
		if _, ok := c.Resources.Requests[res]; !ok {
			t.Errorf("%s: no %s request", where, res)
		}
	}
}

func requireHardened(t *testing.T, where string, c corev1.Container, mayAdd []corev1.Capability) {
	t.Helper()
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
	default:
		for _, c := range sc.Capabilities.Add {
			if !slices.Contains(mayAdd, c) {
				t.Errorf("%s: adds capability %s", where, c)
			}
		}
	}
}

// TestSecretsByReferenceWhereNeeded checks how secrets reach the pods: no
// overlay ships a Secret (the operator creates them under fixed names),
// each service mounts only the ones it needs, as files, and the store URL
// (it holds the database password) reaches the engine and the llm service
// (its route store) through their environment, never their command line.
func TestSecretsByReferenceWhereNeeded(t *testing.T) {
	want := map[string][]string{
		"penguin-llm":         {"penguin-auth", "penguin-providers", "penguin-routes-key", "penguin-store"},
		"penguin-environment": {"penguin-auth"},
		"penguin-engine":      {"penguin-auth", "penguin-store"},
	}
	// The variables the store URL may come in, by service.
	storeVar := map[string]string{"penguin-engine": "PENGUIN_STORE", "penguin-llm": "PENGUIN_ROUTES_STORE"}
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			r := render(t, dir)
			for name := range r.secrets {
				t.Errorf("the overlay ships Secret %s; the operator must create it", name)
			}
			for _, name := range services {
				d := r.deployment(t, name)
				var got []string
				for _, v := range d.Spec.Template.Spec.Volumes {
					if v.Secret != nil {
						got = append(got, v.Secret.SecretName)
					}
				}
				c := d.Spec.Template.Spec.Containers[0]
				for _, e := range c.Env {
					if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
						got = append(got, e.ValueFrom.SecretKeyRef.Name)
						if storeVar[name] == "" || e.Name != storeVar[name] || e.ValueFrom.SecretKeyRef.Name != "penguin-store" {
							t.Errorf("%s: secret %s in variable %s; mount it as a file", name, e.ValueFrom.SecretKeyRef.Name, e.Name)
						}
					}
				}
				for _, src := range c.EnvFrom {
					if src.SecretRef != nil {
						t.Errorf("%s: takes the whole Secret %s into its environment", name, src.SecretRef.Name)
					}
				}
				slices.Sort(got)
				if !slices.Equal(got, want[name]) {
					t.Errorf("%s gets the secrets %v, want %v", name, got, want[name])
				}
				for _, a := range c.Args {
					if strings.Contains(a, "store") || strings.Contains(a, "postgres") || strings.Contains(a, "TOKEN") {
						t.Errorf("%s: argument %q puts a secret's value on the command line", name, a)
					}
				}
			}
		})
	}
}

// TestReplicasAreFoundThroughHeadlessServices checks the balancing path:
// the engine resolves one address per llm and environment pod (headless
// Services, dns:/// targets) and the servers close aged connections, so
// engines find pods that start later.
func TestReplicasAreFoundThroughHeadlessServices(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			r := render(t, dir)
			for _, name := range []string{"penguin-llm", "penguin-environment"} {
				if svc := r.services[name]; svc.Spec.ClusterIP != corev1.ClusterIPNone {
					t.Errorf("the %s Service must be headless so the engine reaches every pod", name)
				}
			}
			args := strings.Join(r.deployment(t, "penguin-engine").Spec.Template.Spec.Containers[0].Args, " ")
			for _, want := range []string{"--llm=dns:///penguin-llm:", "--environment=dns:///penguin-environment:"} {
				if !strings.Contains(args, want) {
					t.Errorf("the engine's arguments lack %s: %s", want, args)
				}
			}
			var setting string
			for _, src := range r.deployment(t, "penguin-environment").Spec.Template.Spec.Containers[0].EnvFrom {
				if src.ConfigMapRef != nil {
					setting = r.configMaps[src.ConfigMapRef.Name].Data["PENGUIN_MAX_CONNECTION_AGE"]
				}
			}
			if age, err := time.ParseDuration(setting); err != nil || age <= 0 || age > 10*time.Minute {
				t.Errorf("PENGUIN_MAX_CONNECTION_AGE is %q (%v); want a positive age of at most 10m", setting, err)
			}
		})
	}
}

// TestShutdownFitsTheGracePeriod checks that each service's stop ends
// before the kubelet's SIGKILL: --shutdown-timeout, after a preStop pause
// for the engine only (its clients come through kube-proxy, which needs a
// moment to drop the pod; engines reach llm and environment pods by their
// own addresses and hear of a stop from the pod itself).
func TestShutdownFitsTheGracePeriod(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			r := render(t, dir)
			for _, name := range services {
				pod := r.deployment(t, name).Spec.Template.Spec
				c := pod.Containers[0]
				var pause time.Duration
				if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
					pause = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
				}
				if (pause > 0) != (name == "penguin-engine") {
					t.Errorf("%s: preStop pause %s; want one for the engine only", name, pause)
				}
				var timeout time.Duration
				for _, a := range c.Args {
					if v, ok := strings.CutPrefix(a, "--shutdown-timeout="); ok {
						timeout, _ = time.ParseDuration(v)
					}
				}
				grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
				if used := pause + timeout; timeout < grace/2 || used >= grace {
					t.Errorf("%s: preStop + --shutdown-timeout = %s of a %s grace period; want more than half of it and less than all", name, used, grace)
				}
			}
		})
	}
}

// TestNetworkPoliciesAllowExactlyTheNeededFlows evaluates each overlay's
// policies on the flows Penguin needs and on those it must not have.
func TestNetworkPoliciesAllowExactlyTheNeededFlows(t *testing.T) {
	for _, tc := range []struct {
		dir, ns string
	}{{"overlays/dev", "penguin-dev"}, {"overlays/production", "penguin"}} {
		t.Run(tc.dir, func(t *testing.T) {
			r := render(t, tc.dir)
			var policies []networkingv1.NetworkPolicy
			for _, p := range r.policies {
				policies = append(policies, *p)
			}
			nsLabels := map[string]string{"kubernetes.io/metadata.name": tc.ns}
			ip := 10
			pod := func(name string) netpol.Peer {
				ip++
				for _, d := range r.deployments {
					if d.Name == name {
						return netpol.Peer{Namespace: tc.ns, NamespaceLabels: nsLabels, Labels: d.Spec.Template.Labels,
							IP: netip.AddrFrom4([4]byte{10, 244, 0, byte(ip)})}
					}
				}
				// A pod of another install: the store or the collector.
				return netpol.Peer{Namespace: tc.ns, NamespaceLabels: nsLabels, Labels: map[string]string{"app.kubernetes.io/name": name},
					IP: netip.AddrFrom4([4]byte{10, 244, 0, byte(ip)})}
			}
			addr := func(s string) netpol.Peer { return netpol.Peer{IP: netip.MustParseAddr(s)} }
			engine, engine2, llm, env := pod("penguin-engine"), pod("penguin-engine"), pod("penguin-llm"), pod("penguin-environment")
			collector := pod("otel-collector")
			dns := netpol.Peer{Namespace: "kube-system", NamespaceLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"},
				Labels: map[string]string{"k8s-app": "kube-dns"}, IP: netip.MustParseAddr("10.244.0.2")}
			internet, client := addr("203.0.113.10"), addr("198.51.100.7")
			store := pod("penguin-postgres")
			if tc.ns == "penguin" {
				store = addr("10.20.0.5") // a managed database
			}
			type flow struct {
				what string
				f    netpol.Flow
			}
			allowed := []flow{
				{"a client -> engine", netpol.Flow{From: client, To: engine, Port: 7420}},
				{"a client -> engine's HTTP gateway", netpol.Flow{From: client, To: engine, Port: 7480}},
				{"engine -> another engine", netpol.Flow{From: engine, To: engine2, Port: 7420}},
				{"engine -> llm", netpol.Flow{From: engine, To: llm, Port: 7421}},
				{"engine -> environment", netpol.Flow{From: engine, To: env, Port: 7422}},
				{"engine -> the store", netpol.Flow{From: engine, To: store, Port: 5432}},
				{"llm -> the store (its route store)", netpol.Flow{From: llm, To: store, Port: 5432}},
				{"llm -> a provider", netpol.Flow{From: llm, To: internet, Port: 443}},
				{"environment -> the internet (https)", netpol.Flow{From: env, To: internet, Port: 443}},
				{"environment -> the internet (http)", netpol.Flow{From: env, To: internet, Port: 80}},
			}
			for _, p := range []netpol.Peer{engine, llm, env} {
				allowed = append(allowed, flow{"a service -> DNS", netpol.Flow{From: p, To: dns, Port: 53, Protocol: "UDP"}},
					flow{"monitoring -> metrics", netpol.Flow{From: client, To: p, Port: 9090}})
				if tc.ns == "penguin" {
					allowed = append(allowed, flow{"a service -> the collector", netpol.Flow{From: p, To: collector, Port: 4317}})
				}
			}
			denied := []flow{
				{"environment -> llm", netpol.Flow{From: env, To: llm, Port: 7421}},
				{"environment -> engine", netpol.Flow{From: env, To: engine, Port: 7420}},
				{"environment -> the store", netpol.Flow{From: env, To: store, Port: 5432}},
				{"environment -> the API server", netpol.Flow{From: env, To: addr("10.99.0.1"), Port: 6443}},
				{"environment -> the kubernetes Service", netpol.Flow{From: env, To: addr("10.96.0.1"), Port: 443}},
				{"environment -> cloud metadata", netpol.Flow{From: env, To: addr("169.254.169.254"), Port: 80}},
				{"environment -> another environment", netpol.Flow{From: env, To: pod("penguin-environment"), Port: 7422}},
				{"environment -> the internet on another port", netpol.Flow{From: env, To: internet, Port: 22}},
				{"llm -> environment", netpol.Flow{From: llm, To: env, Port: 7422}},
				{"llm -> cloud metadata", netpol.Flow{From: llm, To: addr("169.254.169.254"), Port: 443}},
				{"llm -> the cluster", netpol.Flow{From: llm, To: addr("10.96.0.1"), Port: 443}},
				{"a client -> llm", netpol.Flow{From: client, To: llm, Port: 7421}},
				{"a client -> environment", netpol.Flow{From: client, To: env, Port: 7422}},
				{"engine -> the internet", netpol.Flow{From: engine, To: internet, Port: 443}},
			}
			if tc.ns == "penguin-dev" {
				denied = append(denied, flow{"a client -> the store", netpol.Flow{From: client, To: store, Port: 5432}})
			}
			for _, f := range allowed {
				if !netpol.Allowed(policies, f.f) {
					t.Errorf("denied, but needed: %s", f.what)
				}
			}
			for _, f := range denied {
				if netpol.Allowed(policies, f.f) {
					t.Errorf("allowed, but must not be: %s", f.what)
				}
			}
		})
	}
}
