package e2e_test

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ilinkflow/ilinkflow/internal/store"
)

// metricName is how the documents name one of ilinkflow's own metrics.
var metricName = regexp.MustCompile(`ilinkflow_[a-z0-9_]+`)

// documentedMetrics returns every ilinkflow_ metric name README.md and docs/*.md mention,
// with the documents that mention it.
func documentedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md")
	names := map[string][]string{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range metricName.FindAllString(string(raw), -1) {
			n = strings.TrimRight(n, "_") // a name cut by markup: ilinkflow_*_
			if !slices.Contains(names[n], f) {
				names[n] = append(names[n], strings.TrimPrefix(f, "../../"))
			}
		}
	}
	if len(names) == 0 {
		t.Fatal("the documents name no ilinkflow_ metric: the pattern or the paths are wrong")
	}
	return names
}

// exposedAs reports whether a metric documented as name is one of the exposed families:
// Prometheus exposes a counter as name_total, a histogram or summary as name_bucket,
// name_sum and name_count, and the documents may use either form.
func exposedAs(name string, exposed map[string]bool) bool {
	if exposed[name] || exposed[name+"_total"] {
		return true
	}
	for _, suffix := range []string{"_total", "_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && exposed[base] {
			return true
		}
	}
	return false
}

// Every metric named in the docs exists: a worker runs a normal path (an enrolled bot is
// polled, a user message opens a window, the agent's reply goes out through the reply
// API), then /metrics is scraped, and every ilinkflow_ metric that README.md or
// docs/*.md names is there; and every ilinkflow_ metric /metrics exposes is named in
// the docs.
func TestEveryMetricNamedInTheDocsIsExposedAfterARun(t *testing.T) {
	t.Parallel()
	documented := documentedMetrics(t)
	a := startAPI(t, store.DefaultLimits(), nil)
	const owner = "o9cq8metricsdocs000000001@im.wechat"
	acct := a.enroll("qo_metricsdocs", owner)
	bot := a.botOf(owner)
	if _, err := a.ctl.InjectText(a.ctx, bot.BotID, "", "hello"); err != nil {
		t.Fatal(err)
	}
	w, _ := a.openWindow(acct.AccountKey, 0)
	if got := a.reply(a.tokenOf(w.ReplyWindowID), "hello to you", ""); got.status != http.StatusOK {
		t.Fatalf("reply: %d %s", got.status, got.body)
	}
	if sent := a.sentTexts(bot.BotID); len(sent) != 1 {
		t.Fatalf("the simulator got %q, want the one reply", sent)
	}

	exposed := map[string]bool{}
	for name := range a.scrape() {
		if strings.HasPrefix(name, "ilinkflow_") {
			exposed[name] = true
		}
	}
	var names []string
	for n := range documented {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if !exposedAs(n, exposed) {
			t.Errorf("%s names %s, which /metrics does not expose after a run", strings.Join(documented[n], ", "), n)
		}
	}
	for name := range exposed {
		found := false
		for n := range documented {
			if exposedAs(n, map[string]bool{name: true}) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("/metrics exposes %s, which neither README.md nor docs/*.md names", name)
		}
	}
	if !t.Failed() {
		t.Logf("%d documented ilinkflow_ metrics, all exposed: %s", len(names), strings.Join(names, " "))
	}
}
