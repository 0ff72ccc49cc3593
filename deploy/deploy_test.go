package deploy_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// root is the repository, from this package's directory.
const root = ".."

// chartDir is the Helm chart.
const chartDir = "helm/ilinkflow"

// valuesFiles are the values the chart is checked with: the least an operator sets, and
// every optional part switched on.
var valuesFiles = []string{"ci/minimal-values.yaml", "ci/full-values.yaml"}

// readNames returns the environment variables the worker reads, learned by running its
// configuration (gateway.ConfigFromEnv, which reads the Temporal connection through
// temporalconn and the SDK's envconfig, and the sealing keys) with a getenv that records
// every name asked for. The starter's commands take the worker's settings under the same
// names (DATABASE_URL, TEMPORAL_*, ILINKFLOW_TASK_QUEUE, the sealing keys), so this one
// list is what the chart, the image and the systemd unit may set.
func readNames(t *testing.T) map[string]bool {
	t.Helper()
	spec, err := sealing.GenerateKeySpec(1)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	names := map[string]bool{}
	getenv := func(k string) string {
		mu.Lock()
		names[k] = true
		mu.Unlock()
		if k == sealing.EnvKeys {
			return spec // so that the configuration reads on past the key ring
		}
		return ""
	}
	if _, err := gateway.ConfigFromEnv(getenv, nil); err != nil {
		t.Fatalf("the worker's configuration with only a sealing key: %v", err)
	}
	for _, must := range []string{"DATABASE_URL", "TEMPORAL_ADDRESS", "TEMPORAL_TLS_CLIENT_CERT_PATH", sealing.EnvKeysFile, gateway.EnvCodecToken} {
		if !names[must] {
			t.Fatalf("recording the worker's configuration did not see %s: the recorder misses reads (saw %v)", must, sortedKeys(names))
		}
	}
	return names
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dockerInstructions returns the Dockerfile's instructions, continuation lines joined and
// comments dropped.
func dockerInstructions(t *testing.T) []string {
	t.Helper()
	var out []string
	var cur strings.Builder
	for line := range strings.SplitSeq(readFile(t, "Dockerfile"), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		out = append(out, cur.String())
		cur.Reset()
	}
	return out
}

func TestTheDockerfileBuildsTheBinariesWithTheCIBuildScript(t *testing.T) {
	var runs, viaScript []string
	for _, ins := range dockerInstructions(t) {
		if !strings.HasPrefix(ins, "RUN ") {
			continue
		}
		runs = append(runs, ins)
		if strings.Contains(ins, ".ci/build-binaries") {
			viaScript = append(viaScript, ins)
		}
		if regexp.MustCompile(`\bgo (build|install)\b`).MatchString(ins) {
			t.Errorf("the Dockerfile builds Go itself (%q): it must run .ci/build-binaries, the command CI runs", ins)
		}
	}
	if len(viaScript) != 1 {
		t.Fatalf("want exactly one RUN of .ci/build-binaries in the Dockerfile, got %d among %q", len(viaScript), runs)
	}
	for _, arg := range []string{"GOOS=$TARGETOS", "GOARCH=$TARGETARCH", "VERSION=$VERSION", "COMMIT=$COMMIT", "DATE=$DATE"} {
		if !strings.Contains(viaScript[0], arg) {
			t.Errorf("the Dockerfile's build (%q) does not pass %s", viaScript[0], arg)
		}
	}
	script := readFile(t, ".ci/build-binaries")
	var builds []string
	for line := range strings.SplitSeq(script, "\n") {
		if strings.Contains(line, "go build") && !strings.HasPrefix(strings.TrimSpace(line), "#") {
			builds = append(builds, line)
		}
	}
	if len(builds) != 1 || !strings.Contains(builds[0], "CGO_ENABLED=0") || !strings.Contains(builds[0], "-trimpath") {
		t.Fatalf(".ci/build-binaries must hold one static, trimmed go build line; got %q", builds)
	}
	for _, pkg := range []string{"./worker", "./starter", "./cmd/ilinksim"} {
		if !strings.Contains(script, pkg) {
			t.Errorf(".ci/build-binaries does not build %s", pkg)
		}
	}
}

func TestTheImageRunsTheWorkerAsANonRootUserOnAStaticBase(t *testing.T) {
	var froms []string
	var entrypoint, user string
	for _, ins := range dockerInstructions(t) {
		switch {
		case strings.HasPrefix(ins, "FROM "):
			froms = append(froms, ins)
		case strings.HasPrefix(ins, "ENTRYPOINT "):
			entrypoint = ins
		case strings.HasPrefix(ins, "USER "):
			user = ins
		}
	}
	if len(froms) < 2 {
		t.Fatalf("want a multi-stage Dockerfile, got FROM %q", froms)
	}
	final := froms[len(froms)-1]
	if !strings.Contains(final, "distroless/static") && !strings.HasSuffix(final, " scratch") {
		t.Errorf("the final stage %q is neither distroless static nor scratch", final)
	}
	if user == "" || strings.Contains(user, "root") && !strings.Contains(user, "nonroot") || strings.HasPrefix(strings.TrimPrefix(user, "USER "), "0") {
		t.Errorf("the image must run as a non-root user, got %q", user)
	}
	if entrypoint != `ENTRYPOINT ["/usr/local/bin/worker"]` {
		t.Errorf("ENTRYPOINT = %q, want the worker", entrypoint)
	}
}

func TestTheImageSetsOnlyVariablesTheWorkerReads(t *testing.T) {
	read := readNames(t)
	for _, ins := range dockerInstructions(t) {
		if !strings.HasPrefix(ins, "ENV ") {
			continue
		}
		for _, kv := range strings.Fields(strings.TrimPrefix(ins, "ENV ")) {
			name, _, _ := strings.Cut(kv, "=")
			if !read[name] {
				t.Errorf("the Dockerfile sets %s, which the worker does not read", name)
			}
		}
	}
}

// goreleaser is the part of .goreleaser.yaml the tests read.
type goreleaser struct {
	Version int `yaml:"version"`
	Builds  []struct {
		ID      string   `yaml:"id"`
		Main    string   `yaml:"main"`
		Env     []string `yaml:"env"`
		Flags   []string `yaml:"flags"`
		Ldflags []string `yaml:"ldflags"`
		Goos    []string `yaml:"goos"`
		Goarch  []string `yaml:"goarch"`
	} `yaml:"builds"`
	DockersV2 []struct {
		Dockerfile string            `yaml:"dockerfile"`
		Platforms  []string          `yaml:"platforms"`
		BuildArgs  map[string]string `yaml:"build_args"`
		ExtraFiles []string          `yaml:"extra_files"`
	} `yaml:"dockers_v2"`
}

func loadGoreleaser(t *testing.T) goreleaser {
	t.Helper()
	var g goreleaser
	if err := yaml.Unmarshal([]byte(readFile(t, ".goreleaser.yaml")), &g); err != nil {
		t.Fatalf(".goreleaser.yaml: %v", err)
	}
	return g
}

// versionVars are the variables of internal/version the linker stamps.
var versionVars = []string{"version", "commit", "date"}

func TestGoReleaserBuildsEveryBinaryAsTheBuildScriptDoes(t *testing.T) {
	g := loadGoreleaser(t)
	if g.Version != 2 {
		t.Errorf(".goreleaser.yaml version = %d, want 2", g.Version)
	}
	script := readFile(t, ".ci/build-binaries")
	mains := map[string]bool{}
	for _, b := range g.Builds {
		mains[b.Main] = true
		if !slices.Contains(b.Env, "CGO_ENABLED=0") || !slices.Contains(b.Flags, "-trimpath") {
			t.Errorf("build %s: want CGO_ENABLED=0 and -trimpath as in .ci/build-binaries, got env %q flags %q", b.ID, b.Env, b.Flags)
		}
		ld := strings.Join(b.Ldflags, " ")
		for _, v := range versionVars {
			x := "-X github.com/ilinkflow/ilinkflow/internal/version." + v + "="
			if !strings.Contains(ld, x) {
				t.Errorf("build %s: its ldflags %q do not stamp %s", b.ID, ld, v)
			}
			if !strings.Contains(script, "-X $pkg."+v+"=") {
				t.Errorf(".ci/build-binaries does not stamp %s", v)
			}
		}
		if !strings.Contains(ld, "-s -w") || !strings.Contains(script, "-s -w") {
			t.Errorf("build %s: both must strip the symbol table (-s -w)", b.ID)
		}
		slices.Sort(b.Goos)
		slices.Sort(b.Goarch)
		if !slices.Equal(b.Goos, []string{"darwin", "linux"}) || !slices.Equal(b.Goarch, []string{"amd64", "arm64"}) {
			t.Errorf("build %s: targets %v × %v, want linux and darwin × amd64 and arm64", b.ID, b.Goos, b.Goarch)
		}
	}
	for _, m := range []string{"./worker", "./starter", "./cmd/ilinksim"} {
		if !mains[m] {
			t.Errorf(".goreleaser.yaml does not build %s", m)
		}
	}
}

func TestGoReleaserBuildsTheMultiArchImageFromTheDockerfileWithTheSourcesItNeeds(t *testing.T) {
	g := loadGoreleaser(t)
	if len(g.DockersV2) != 1 {
		t.Fatalf("want one dockers_v2 image, got %d", len(g.DockersV2))
	}
	d := g.DockersV2[0]
	if d.Dockerfile != "Dockerfile" {
		t.Errorf("the image builds from %q, want the Dockerfile", d.Dockerfile)
	}
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		if !slices.Contains(d.Platforms, p) {
			t.Errorf("the image is not built for %s (platforms %v)", p, d.Platforms)
		}
	}
	for _, a := range []string{"VERSION", "COMMIT", "DATE"} {
		if d.BuildArgs[a] == "" {
			t.Errorf("the image build does not pass %s", a)
		}
	}
	// The build context is extra_files: every directory of the module a binary imports.
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if eq .Module.Path \"github.com/ilinkflow/ilinkflow\"}}{{.ImportPath}}{{end}}{{end}}",
		"../worker", "../starter", "../cmd/ilinksim").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, want := range []string{"go.mod", "go.sum", ".ci/build-binaries"} {
		if !slices.Contains(d.ExtraFiles, want) {
			t.Errorf("the image's extra_files lack %s", want)
		}
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		rel := strings.TrimPrefix(line, "github.com/ilinkflow/ilinkflow/")
		top, _, _ := strings.Cut(rel, "/")
		if !slices.Contains(d.ExtraFiles, top) {
			t.Errorf("the image's extra_files lack %s/, which %s is in", top, line)
		}
	}
}

// envFileNames returns the variable names an environment file sets or shows (lines
// "NAME=value", and commented "#NAME=value" examples).
func envFileNames(t *testing.T, path string) []string {
	t.Helper()
	var names []string
	sc := bufio.NewScanner(strings.NewReader(readFile(t, path)))
	re := regexp.MustCompile(`^#?\s*([A-Z][A-Z0-9_]*)=`)
	for sc.Scan() {
		if m := re.FindStringSubmatch(strings.TrimSpace(sc.Text())); m != nil {
			names = append(names, m[1])
		}
	}
	return names
}

func TestTheSystemdUnitsSetOnlyVariablesTheWorkerReads(t *testing.T) {
	read := readNames(t)
	names := envFileNames(t, "deploy/systemd/ilinkflow.env")
	if len(names) == 0 {
		t.Fatal("deploy/systemd/ilinkflow.env names no variable")
	}
	units, err := filepath.Glob(filepath.Join(root, "deploy/systemd/*.service"))
	if err != nil || len(units) < 2 {
		t.Fatalf("want the worker and migration units, got %v (%v)", units, err)
	}
	re := regexp.MustCompile(`^Environment=([A-Z][A-Z0-9_]*)=`)
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if m := re.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
				names = append(names, m[1])
			}
		}
	}
	for _, n := range names {
		if !read[n] {
			t.Errorf("deploy/systemd sets %s, which the worker does not read", n)
		}
	}
}

// helm returns the helm binary; under -short the test skips, otherwise a missing helm
// fails it with the install command.
func helm(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs helm (not in -short)")
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	gopath, err := exec.Command("go", "env", "GOPATH").Output()
	if err == nil {
		p := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "helm")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("helm is not installed: go install helm.sh/helm/v3/cmd/helm@v3.22.0 (.ci/deploy-checks does)")
	return ""
}

// object is one rendered Kubernetes object.
type object map[string]any

func (o object) kind() string { s, _ := o["kind"].(string); return s }
func (o object) name() string { s, _ := dig(o, "metadata", "name").(string); return s }

// dig follows map keys through a decoded YAML document.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		if o, ok := v.(object); ok {
			v = map[string]any(o)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func list(v any) []any { l, _ := v.([]any); return l }

// render runs helm template on the chart with values files (relative to the chart) and
// returns the objects; a failed render fails t.
func render(t *testing.T, values ...string) []object {
	t.Helper()
	objs, err := tryRender(t, values...)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func tryRender(t *testing.T, values ...string) ([]object, error) {
	t.Helper()
	args := []string{"template", "ilinkflow", chartDir, "--namespace", "ilinkflow"}
	for _, v := range values {
		args = append(args, "-f", filepath.Join(chartDir, v))
	}
	var stderr bytes.Buffer
	cmd := exec.Command(helm(t), args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, errors.New("helm " + strings.Join(args, " ") + ": " + err.Error() + ": " + stderr.String())
	}
	var objs []object
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		// Into a plain map: yaml.v3 gives nested maps the type of the outer one.
		var o map[string]any
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("helm template output: %v", err)
		}
		if o != nil {
			objs = append(objs, object(o))
		}
	}
	return objs, nil
}

func find(objs []object, kind, name string) object {
	for _, o := range objs {
		if o.kind() == kind && o.name() == name {
			return o
		}
	}
	return nil
}

// container is one container of a workload with the environment the chart gives it.
type container struct {
	workload string
	spec     map[string]any
	env      map[string]string // name -> value ("" from a Secret the chart does not render)
}

// containers returns every container of the Deployments and Jobs, with their env resolved
// through envFrom ConfigMaps; an envFrom Secret fails t (its keys are not the chart's to
// name, so nothing could check them).
func containers(t *testing.T, objs []object) []container {
	t.Helper()
	var out []container
	for _, o := range objs {
		if o.kind() != "Deployment" && o.kind() != "Job" {
			continue
		}
		pod := dig(o, "spec", "template", "spec")
		for _, c := range append(list(dig(pod, "initContainers")), list(dig(pod, "containers"))...) {
			spec, _ := c.(map[string]any)
			ct := container{workload: o.kind() + "/" + o.name(), spec: spec, env: map[string]string{}}
			for _, ef := range list(spec["envFrom"]) {
				if name, ok := dig(ef, "configMapRef", "name").(string); ok {
					cm := find(objs, "ConfigMap", name)
					if cm == nil {
						t.Fatalf("%s: envFrom names the ConfigMap %s, which the chart does not render", ct.workload, name)
					}
					data, _ := cm["data"].(map[string]any)
					for k, v := range data {
						ct.env[k], _ = v.(string)
					}
				}
				if dig(ef, "secretRef") != nil {
					t.Errorf("%s: envFrom a Secret sets variables the chart does not name; list them in env with secretKeyRef", ct.workload)
				}
			}
			for _, e := range list(spec["env"]) {
				name, _ := dig(e, "name").(string)
				value, _ := dig(e, "value").(string)
				if ref := dig(e, "valueFrom", "secretKeyRef"); ref != nil {
					// The chart's own Secret gives the value; an operator's gives "".
					secretName, _ := dig(ref, "name").(string)
					key, _ := dig(ref, "key").(string)
					if sec := find(objs, "Secret", secretName); sec != nil {
						value, _ = dig(sec, "stringData", key).(string)
					}
				}
				ct.env[name] = value
			}
			out = append(out, ct)
		}
	}
	return out
}

func TestTheChartSetsOnlyVariablesTheWorkerAndStarterRead(t *testing.T) {
	read := readNames(t)
	for _, vf := range valuesFiles {
		t.Run(filepath.Base(vf), func(t *testing.T) {
			cs := containers(t, render(t, vf))
			if len(cs) < 2 {
				t.Fatalf("want the worker and the migration containers, got %d", len(cs))
			}
			for _, c := range cs {
				if _, ok := c.env["DATABASE_URL"]; !ok {
					t.Errorf("%s: no DATABASE_URL among %v: the test does not see the container's environment", c.workload, sortedKeys(c.env))
				}
				for _, n := range sortedKeys(c.env) {
					if !read[n] {
						t.Errorf("%s sets %s, which neither the worker nor the starter reads", c.workload, n)
					}
				}
			}
		})
	}
}

func TestTheChartRefusesToRenderWithoutTheSettingsAnOperatorMustGive(t *testing.T) {
	_, err := tryRender(t)
	if err == nil || !strings.Contains(err.Error(), "temporal.address is required") {
		t.Fatalf("render with the default values: %v, want it refused naming temporal.address", err)
	}
}

// seconds parses the seconds of a Go duration such as "30s" or "1m30s".
func seconds(t *testing.T, d string) int {
	t.Helper()
	var total, n int
	for _, r := range d {
		switch {
		case r >= '0' && r <= '9':
			n = n*10 + int(r-'0')
		case r == 'h':
			total, n = total+n*3600, 0
		case r == 'm':
			total, n = total+n*60, 0
		case r == 's':
			total, n = total+n, 0
		default:
			t.Fatalf("duration %q: unexpected %q", d, r)
		}
	}
	return total
}

func TestTheWorkerPodOutlivesItsShutdownGraceAndProbesTheAdminPort(t *testing.T) {
	for _, vf := range valuesFiles {
		t.Run(filepath.Base(vf), func(t *testing.T) {
			objs := render(t, vf)
			var worker *container
			for _, c := range containers(t, objs) {
				if strings.HasPrefix(c.workload, "Deployment/") {
					worker = &c
				}
			}
			if worker == nil {
				t.Fatal("no worker Deployment")
			}
			var dep object
			for _, o := range objs {
				if o.kind() == "Deployment" {
					dep = o
				}
			}
			tgp, _ := dig(dep, "spec", "template", "spec", "terminationGracePeriodSeconds").(int)
			grace := seconds(t, worker.env["ILINKFLOW_SHUTDOWN_GRACE"])
			if grace == 0 || tgp <= grace {
				t.Errorf("terminationGracePeriodSeconds %d must exceed the shutdown grace %ds", tgp, grace)
			}
			adminPort := portOf(worker.env["ILINKFLOW_ADMIN_ADDR"])
			for _, probe := range []string{"startupProbe", "livenessProbe", "readinessProbe"} {
				port := dig(worker.spec, probe, "httpGet", "port")
				if !portNamed(worker.spec, port, adminPort) {
					t.Errorf("%s probes port %v, want the admin listener's (%s)", probe, port, adminPort)
				}
			}
			if worker.env["ILINKFLOW_MIGRATE"] != "false" {
				t.Errorf("the workers migrate themselves (ILINKFLOW_MIGRATE=%q) although the Job does", worker.env["ILINKFLOW_MIGRATE"])
			}
		})
	}
}

func portOf(addr string) string {
	if i := strings.LastIndex(addr, ":"); i >= 0 {
		return addr[i+1:]
	}
	return ""
}

// portNamed reports whether port (a number or a port name of the container) is want.
func portNamed(spec map[string]any, port any, want string) bool {
	for _, p := range list(spec["ports"]) {
		name, _ := dig(p, "name").(string)
		num := dig(p, "containerPort")
		if (port == name || port == num) && toString(num) == want {
			return true
		}
	}
	return false
}

func toString(v any) string {
	switch x := v.(type) {
	case int:
		return strconv.Itoa(x)
	case string:
		return x
	}
	return ""
}

func TestTheMigrationJobRunsStarterMigrateBeforeInstallAndUpgrade(t *testing.T) {
	for _, vf := range valuesFiles {
		t.Run(filepath.Base(vf), func(t *testing.T) {
			var job object
			for _, o := range render(t, vf) {
				if o.kind() == "Job" {
					job = o
				}
			}
			if job == nil {
				t.Fatal("no migration Job")
			}
			if hook, _ := dig(job, "metadata", "annotations", "helm.sh/hook").(string); hook != "pre-install,pre-upgrade" {
				t.Errorf("the Job's hook is %q, want pre-install,pre-upgrade", hook)
			}
			cs := list(dig(job, "spec", "template", "spec", "containers"))
			if len(cs) != 1 {
				t.Fatalf("the Job has %d containers, want 1", len(cs))
			}
			c, _ := cs[0].(map[string]any)
			cmd := append(list(c["command"]), list(c["args"])...)
			if len(cmd) < 2 || !strings.HasSuffix(toString(cmd[0]), "/starter") || cmd[1] != "migrate" {
				t.Errorf("the Job runs %v, want starter migrate", cmd)
			}
		})
	}
}

func TestTheChartsSettingsAreValidWorkerSettings(t *testing.T) {
	// The chart mounts the Temporal client certificate and CA under /etc/ilinkflow; here
	// they are files of a test CA.
	dir := t.TempDir()
	ca := testkit.NewCA(t, "temporal-test-ca")
	certPath, keyPath := ca.Client(t, "ilinkflow").WriteFiles(t, dir, "client")
	caPath := ca.WriteCert(t, dir, "ca")
	mounted := map[string]string{
		"/etc/ilinkflow/temporal-client/tls.crt": certPath,
		"/etc/ilinkflow/temporal-client/tls.key": keyPath,
		"/etc/ilinkflow/temporal-ca/ca.crt":      caPath,
	}
	for _, vf := range valuesFiles {
		t.Run(filepath.Base(vf), func(t *testing.T) {
			for _, c := range containers(t, render(t, vf)) {
				if !strings.HasPrefix(c.workload, "Deployment/") {
					continue
				}
				getenv := func(k string) string {
					v := c.env[k]
					if p, ok := mounted[v]; ok {
						return p
					}
					if strings.HasPrefix(v, "/etc/ilinkflow/") {
						t.Errorf("%s=%s: a mounted file this test does not stand in for", k, v)
					}
					return v
				}
				var args []string
				for _, a := range list(c.spec["args"]) {
					args = append(args, toString(a))
				}
				cfg, err := gateway.ConfigFromEnv(getenv, args)
				if err != nil {
					t.Fatalf("%s: the worker refuses the chart's settings: %v", c.workload, err)
				}
				if cfg.Migrate || cfg.AdminAddr == "" || cfg.HTTPAddr == cfg.AdminAddr {
					t.Errorf("%s: migrate=%v http=%q admin=%q, want no migration and two listeners", c.workload, cfg.Migrate, cfg.HTTPAddr, cfg.AdminAddr)
				}
			}
		})
	}
}
