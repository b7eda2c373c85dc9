package check

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/lint/support"
)

const chartDir = "../helm/iwf-server"

// TestHelmLint: helm lint finds nothing to report at warning level or
// above, with the default values and with every option on.
func TestHelmLint(t *testing.T) {
	for name, vals := range valueSets {
		t.Run(name, func(t *testing.T) {
			lint := action.NewLint()
			lint.Namespace = "iwf"
			result := lint.Run([]string{chartDir}, copyValues(t, vals))
			for _, err := range result.Errors {
				t.Errorf("lint error: %v", err)
			}
			for _, m := range result.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("lint: %s", m)
				}
			}
		})
	}
}

// valueSets are the values the chart is rendered with.
var valueSets = map[string]map[string]any{
	"defaults with an inline URL": {
		"database": map[string]any{"url": "postgres://iwf:pw@db:5432/iwf?sslmode=require"},
	},
	"secrets, auth, monitor, job": {
		"replicaCount": 3,
		"database":     map[string]any{"existingSecret": "iwf-db", "secretKey": "dsn"},
		"auth":         map[string]any{"existingSecret": "iwf-tokens", "secretKey": "file", "metrics": true},
		"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"},
			"bearerTokenSecret": map[string]any{"name": "iwf-tokens", "key": "scrape"}},
		// job alone: the init container, on by default, must give way to it.
		"migration":                     map[string]any{"job": true},
		"shutdownGraceSeconds":          60,
		"preStopSleepSeconds":           0,
		"terminationGracePeriodSeconds": 90,
		"config": map[string]any{"concurrency": "2000", "retention": "720h", "archiveUrl": "s3://bucket?region=eu-west-1",
			"workerUrlAllow": []any{"http://workers.apps.svc:8803"}, "ui": false},
		"extraArgs": []any{"--max-wait=30s"},
	},
	"no migration step": {
		"database":  map[string]any{"existingSecret": "iwf-db"},
		"migration": map[string]any{"initContainer": false},
	},
	"inline tokens": {
		"database":            map[string]any{"existingSecret": "iwf-db"},
		"auth":                map[string]any{"tokens": []any{"token-one-aaaaaaaaaaaaaaaa", "token-two-bbbbbbbbbbbbbbbb"}},
		"podDisruptionBudget": map[string]any{"enabled": true, "maxUnavailable": 2},
	},
}

// render runs helm template (an install dry run, client side only).
func render(t *testing.T, vals map[string]any) (string, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = "iwf", "iwf"
	install.IncludeCRDs = true
	// Helm merges the chart's defaults into the map it is given: keep the
	// test's values as written.
	rel, err := install.Run(ch, copyValues(t, vals))
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(rel.Manifest)
	for _, h := range rel.Hooks {
		fmt.Fprintf(&b, "\n---\n# Source: %s\n%s\n", h.Path, h.Manifest)
	}
	return b.String(), nil
}

// objects are the rendered objects, strictly decoded.
type objects struct {
	deployments     []*appsv1.Deployment
	services        []*corev1.Service
	secrets         []*corev1.Secret
	pdbs            []*policyv1.PodDisruptionBudget
	jobs            []*batchv1.Job
	serviceMonitors []*serviceMonitor
}

// serviceMonitor is the part of prometheus-operator's ServiceMonitor
// (monitoring.coreos.com/v1) the chart writes; decoding is strict, so a
// field that is not in this subset of the CRD's schema fails the test.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port              string                    `json:"port"`
			Path              string                    `json:"path"`
			Interval          string                    `json:"interval"`
			ScrapeTimeout     string                    `json:"scrapeTimeout"`
			BearerTokenSecret *corev1.SecretKeySelector `json:"bearerTokenSecret,omitempty"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// decode splits the manifest and decodes each document into its API type,
// refusing unknown fields and wrong types.
func decode(t *testing.T, manifest string) objects {
	t.Helper()
	var out objects
	r := utilyaml.NewYAMLReader(bufioReader(manifest))
	for {
		doc, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		strict := func(v any) {
			if err := yaml.UnmarshalStrict(doc, v); err != nil {
				t.Fatalf("%s %s does not decode strictly: %v\n%s", tm.APIVersion, tm.Kind, err, doc)
			}
		}
		switch tm.APIVersion + " " + tm.Kind {
		case "apps/v1 Deployment":
			v := &appsv1.Deployment{}
			strict(v)
			out.deployments = append(out.deployments, v)
		case "v1 Service":
			v := &corev1.Service{}
			strict(v)
			out.services = append(out.services, v)
		case "v1 Secret":
			v := &corev1.Secret{}
			strict(v)
			out.secrets = append(out.secrets, v)
		case "policy/v1 PodDisruptionBudget":
			v := &policyv1.PodDisruptionBudget{}
			strict(v)
			out.pdbs = append(out.pdbs, v)
		case "batch/v1 Job":
			v := &batchv1.Job{}
			strict(v)
			out.jobs = append(out.jobs, v)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			v := &serviceMonitor{}
			strict(v)
			out.serviceMonitors = append(out.serviceMonitors, v)
		default:
			t.Fatalf("the chart renders an object this test does not know: %s %s", tm.APIVersion, tm.Kind)
		}
	}
	return out
}

// TestHelmTemplate renders the chart with each set of values and checks
// what the server needs: the replicas, the database URL and tokens from
// Secrets only, probes on the real health endpoint and port, a
// termination grace longer than the preStop sleep and --shutdown-grace,
// migrations before the server (an init container or a hook Job, never
// both), selectors of the Service, PodDisruptionBudget and ServiceMonitor
// that match the pods, and flags that the server knows
// (docs/configuration.md).
func TestHelmTemplate(t *testing.T) {
	flags := knownFlags(t)
	for name, vals := range valueSets {
		t.Run(name, func(t *testing.T) {
			manifest, err := render(t, vals)
			if err != nil {
				t.Fatal(err)
			}
			objs := decode(t, manifest)
			if len(objs.deployments) != 1 || len(objs.services) != 1 {
				t.Fatalf("want one Deployment and one Service, got %d and %d", len(objs.deployments), len(objs.services))
			}
			d := objs.deployments[0]
			pod := d.Spec.Template
			want := int32(2)
			if n, ok := vals["replicaCount"].(int); ok {
				want = int32(n)
			}
			if d.Spec.Replicas == nil || *d.Spec.Replicas != want {
				t.Errorf("replicas %v, want %d", d.Spec.Replicas, want)
			}
			sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
			if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
				t.Errorf("the Deployment's selector %v does not match its pods' labels %v", d.Spec.Selector, pod.Labels)
			}
			if len(pod.Spec.Containers) != 1 {
				t.Fatalf("want one container, got %d", len(pod.Spec.Containers))
			}
			c := pod.Spec.Containers[0]
			port := containerPort(t, c, "http")
			if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/info/healthcheck" ||
				c.ReadinessProbe.HTTPGet.Port.String() != "http" {
				t.Errorf("readiness probe %+v, want GET /info/healthcheck on port http", c.ReadinessProbe)
			}
			for probeName, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "startup": c.StartupProbe} {
				if p == nil || p.TCPSocket == nil || p.TCPSocket.Port.String() != "http" {
					t.Errorf("%s probe %+v, want a TCP check of port http", probeName, p)
				}
			}
			args := append([]string(nil), c.Args...)
			if len(args) == 0 || args[0] != "serve" {
				t.Fatalf("args %v, want serve first", args)
			}
			if !slices.Contains(args, fmt.Sprintf("--addr=:%d", port)) {
				t.Errorf("args %v do not listen on the container port %d", args, port)
			}
			for _, a := range args[1:] {
				name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
				if !strings.HasPrefix(a, "--") || !flags[name] {
					t.Errorf("argument %q: no such flag in docs/configuration.md", a)
				}
			}
			grace := flagSeconds(t, args, "--shutdown-grace")
			sleep := int64(0)
			if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
				if c.Lifecycle.PreStop.Sleep == nil {
					t.Fatalf("preStop %+v, want a sleep (the image has no shell)", c.Lifecycle.PreStop)
				}
				sleep = c.Lifecycle.PreStop.Sleep.Seconds
			}
			if tg := pod.Spec.TerminationGracePeriodSeconds; tg == nil || *tg <= grace+sleep {
				t.Errorf("terminationGracePeriodSeconds %v, want more than the preStop sleep %d s + --shutdown-grace %d s", tg, sleep, grace)
			}

			// Secrets: the URL and the tokens never appear as plain values.
			secretNames := map[string]map[string]bool{}
			for _, s := range objs.secrets {
				keys := map[string]bool{}
				for k := range s.StringData {
					keys[k] = true
				}
				secretNames[s.Name] = keys
			}
			checkDBEnv := func(where string, env []corev1.EnvVar) {
				t.Helper()
				for _, e := range env {
					if strings.Contains(e.Value, "postgres://") {
						t.Errorf("%s: %s holds the database URL in plain text", where, e.Name)
					}
					if e.Name != "IWF_DB" {
						continue
					}
					ref := e.ValueFrom
					if ref == nil || ref.SecretKeyRef == nil {
						t.Fatalf("%s: IWF_DB is not from a Secret: %+v", where, e)
					}
					wantName, wantKey := "iwf-db", "dsn"
					if db, _ := vals["database"].(map[string]any); db["existingSecret"] == nil {
						wantName, wantKey = "iwf-iwf-server-db", "url"
					} else if db["secretKey"] == nil {
						wantKey = "url"
					}
					if ref.SecretKeyRef.Name != wantName || ref.SecretKeyRef.Key != wantKey {
						t.Errorf("%s: IWF_DB from %s/%s, want %s/%s", where, ref.SecretKeyRef.Name, ref.SecretKeyRef.Key, wantName, wantKey)
					}
					if keys, ours := secretNames[wantName]; wantName == "iwf-iwf-server-db" && (!ours || !keys[wantKey]) {
						t.Errorf("%s: the chart's Secret %s with key %s is not rendered", where, wantName, wantKey)
					}
					return
				}
				t.Errorf("%s: no IWF_DB", where)
			}
			checkDBEnv("server", c.Env)
			tokens := slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--auth-token-file=") })
			if auth, _ := vals["auth"].(map[string]any); (auth["existingSecret"] != nil || auth["tokens"] != nil) != tokens {
				t.Errorf("auth values %v but --auth-token-file given: %v", auth, tokens)
			}
			if tokens {
				var vol *corev1.Volume
				for i := range pod.Spec.Volumes {
					if pod.Spec.Volumes[i].Name == "auth" {
						vol = &pod.Spec.Volumes[i]
					}
				}
				if vol == nil || vol.Secret == nil || len(vol.Secret.Items) != 1 || vol.Secret.Items[0].Path != "tokens" {
					t.Errorf("the token file is not mounted from a Secret: %+v", vol)
				}
			}
			if strings.Contains(manifest, "token-one") && len(objs.secrets) == 0 {
				t.Error("inline tokens are rendered outside a Secret")
			}
			for _, s := range objs.secrets {
				if s.Name == "iwf-iwf-server-auth" && !strings.Contains(s.StringData["tokens"], "token-one-aaaaaaaaaaaaaaaa\n") {
					t.Errorf("token Secret %q", s.StringData["tokens"])
				}
			}

			// Migrations run before the server: an init container, or a hook
			// Job, never both.
			migration, _ := vals["migration"].(map[string]any)
			if len(pod.Spec.InitContainers) > 0 && len(objs.jobs) > 0 {
				t.Fatalf("migrations in %d init containers and %d Jobs: want one of the two", len(pod.Spec.InitContainers), len(objs.jobs))
			}
			if migration["job"] == true {
				if len(pod.Spec.InitContainers) != 0 || len(objs.jobs) != 1 {
					t.Fatalf("migration job: %d init containers, %d jobs", len(pod.Spec.InitContainers), len(objs.jobs))
				}
				j := objs.jobs[0]
				if h := j.Annotations["helm.sh/hook"]; h != "pre-install,pre-upgrade" {
					t.Errorf("migration Job hook %q", h)
				}
				jc := j.Spec.Template.Spec.Containers[0]
				if !slices.Equal(jc.Args, []string{"migrate"}) {
					t.Errorf("migration Job args %v", jc.Args)
				}
				checkDBEnv("migration job", jc.Env)
			} else if migration["initContainer"] == false {
				if len(pod.Spec.InitContainers) != 0 || len(objs.jobs) != 0 {
					t.Fatalf("no migration step asked for: %d init containers, %d jobs", len(pod.Spec.InitContainers), len(objs.jobs))
				}
			} else {
				if len(pod.Spec.InitContainers) != 1 || !slices.Equal(pod.Spec.InitContainers[0].Args, []string{"migrate"}) {
					t.Fatalf("init containers %+v, want one running migrate", pod.Spec.InitContainers)
				}
				checkDBEnv("init container", pod.Spec.InitContainers[0].Env)
			}

			svc := objs.services[0]
			if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
				t.Errorf("the Service's selector %v does not match the pods %v", svc.Spec.Selector, pod.Labels)
			}
			if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != "http" || svc.Spec.Ports[0].Name != "http" {
				t.Errorf("service ports %+v", svc.Spec.Ports)
			}
			if len(objs.pdbs) != 1 {
				t.Fatalf("%d PodDisruptionBudgets", len(objs.pdbs))
			}
			pdbSel, err := metav1.LabelSelectorAsSelector(objs.pdbs[0].Spec.Selector)
			if err != nil || !pdbSel.Matches(labels.Set(pod.Labels)) || objs.pdbs[0].Spec.MaxUnavailable == nil {
				t.Errorf("PodDisruptionBudget %+v does not cover the pods", objs.pdbs[0].Spec)
			}
			sm, _ := vals["serviceMonitor"].(map[string]any)
			if want := sm["enabled"] == true; want != (len(objs.serviceMonitors) == 1) {
				t.Fatalf("serviceMonitor.enabled %v, %d rendered", want, len(objs.serviceMonitors))
			}
			for _, m := range objs.serviceMonitors {
				s, err := metav1.LabelSelectorAsSelector(&m.Spec.Selector)
				if err != nil || !s.Matches(labels.Set(svc.Labels)) {
					t.Errorf("the ServiceMonitor's selector does not match the Service's labels %v", svc.Labels)
				}
				if len(m.Spec.Endpoints) != 1 || m.Spec.Endpoints[0].Port != "http" || m.Spec.Endpoints[0].Path != "/metrics" {
					t.Errorf("ServiceMonitor endpoints %+v", m.Spec.Endpoints)
				}
				if m.Labels["release"] != "prom" {
					t.Errorf("ServiceMonitor labels %v lack the extra label", m.Labels)
				}
			}
		})
	}
}

// TestHelmTemplateRefusals: values that cannot work stop the rendering
// with a message saying why.
func TestHelmTemplateRefusals(t *testing.T) {
	for _, c := range []struct {
		name string
		vals map[string]any
		want string
	}{
		{"no database", map[string]any{}, "database.existingSecret"},
		{"grace too short", map[string]any{"database": map[string]any{"existingSecret": "db"},
			"shutdownGraceSeconds": 30, "preStopSleepSeconds": 5, "terminationGracePeriodSeconds": 35}, "must exceed"},
		{"hook job without a Secret", map[string]any{"database": map[string]any{"url": "postgres://x@db/iwf"},
			"migration": map[string]any{"job": true}}, "migration.job needs database.existingSecret"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := render(t, c.vals)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one containing %q", err, c.want)
			}
		})
	}
}

// copyValues deep-copies values (through JSON, as Helm reads them from
// files).
func copyValues(t *testing.T, vals map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(vals)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func containerPort(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port %q", c.Name, name)
	return 0
}

func flagSeconds(t *testing.T, args []string, flag string) int64 {
	t.Helper()
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(v, "s"), 10, 64)
			if err != nil || !strings.HasSuffix(v, "s") {
				t.Fatalf("%s: want whole seconds", a)
			}
			return n
		}
	}
	t.Fatalf("no %s in %v", flag, args)
	return 0
}

// knownFlags are the flags docs/configuration.md lists.
func knownFlags(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile("`--([a-z-]+)").FindAllStringSubmatch(string(b), -1) {
		flags[m[1]] = true
	}
	if len(flags) < 20 {
		t.Fatalf("found only %d flags in docs/configuration.md", len(flags))
	}
	return flags
}
