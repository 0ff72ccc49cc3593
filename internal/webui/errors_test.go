package webui_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/webui"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// syncBuffer is a log sink the UI's handlers write to concurrently.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// An enrollment that failed in an activity reports the activity's error, which names the
// worker's identity (pid@host) and the store's internals. The page and the status
// endpoint show a short, stable message instead; the log has the error. A refused account
// operation is said the same way.
func TestAnEnrollmentErrorIsShownAsAStableMessageWithoutTheWorkersIdentity(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	s := start(t, func(c *webui.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	const offer = "qo_00000000000000e1"
	acc := s.enrollDirectly(offer, "o9cq8erroruser@im.wechat")

	// The offer was confirmed: an Enrollment of it again fails in its CreateOffer activity.
	run, err := s.tc.ExecuteWorkflow(s.ctx, client.StartWorkflowOptions{ID: wfapi.EnrollmentID(offer), TaskQueue: s.tq},
		wfapi.EnrollmentWorkflow, wfapi.EnrollmentInput{OfferID: offer, RequestedBy: "test", Lifetime: wfapi.Duration(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	var es wfapi.EnrollmentState
	if err := run.Get(s.ctx, &es); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if es.Status != "failed" || !strings.Contains(es.Error, "identity") {
		t.Fatalf("the second enrollment ended %q with %q: want a failure with an activity's error", es.Status, es.Error)
	}
	leaks := []string{"identity", "activity error", "scheduledEventID", "store:", "CreateOffer", "already confirmed"}
	if host != "" {
		leaks = append(leaks, "@"+host)
	}
	leaked := func(where, body string) {
		t.Helper()
		for _, l := range leaks {
			if strings.Contains(body, l) {
				t.Errorf("%s shows %q: %.300s", where, l, body)
			}
		}
	}

	b := newBrowser(t, s.ui.URL)
	b.login()
	page := b.get("/enroll/" + offer)
	if page.status != http.StatusOK || !strings.Contains(page.body, "The enrollment failed. The server log has the details.") {
		t.Fatalf("enrollment page: %d %.500s", page.status, page.body)
	}
	leaked("the enrollment page", page.body)
	r := b.get("/enroll/" + offer + "/status")
	var st webui.Status
	if err := json.Unmarshal([]byte(r.body), &st); err != nil || r.status != http.StatusOK {
		t.Fatalf("status: %d %s %v", r.status, r.body, err)
	}
	if !st.Done || st.Status != "failed" || st.Error != "The enrollment failed. The server log has the details." {
		t.Fatalf("status %+v", st)
	}
	leaked("the status endpoint", r.body)
	if !strings.Contains(logs.String(), "already confirmed") {
		t.Errorf("the log does not have the enrollment's error: %.500s", logs.String())
	}

	// Pausing a removed account is refused by the store: the page says why in its words.
	csrf := b.csrf()
	for _, verb := range []string{"remove", "pause"} {
		if r := b.do(http.MethodPost, "/accounts/"+acc.AccountKey+"/"+verb, url.Values{"csrf": {csrf}, "for": {"1h"}}, sameOrigin); r.status != http.StatusSeeOther {
			t.Fatalf("%s: %d %s", verb, r.status, r.body)
		}
	}
	accounts := b.get("/accounts")
	if !strings.Contains(accounts.body, "pause "+acc.AccountKey+" failed: the account is not active") {
		t.Fatalf("accounts page after a refused pause: %.2000s", accounts.body)
	}
	leaked("the accounts page", accounts.body)
	if strings.Contains(accounts.body, "account_not_active") {
		t.Errorf("the accounts page shows the store's code: %.2000s", accounts.body)
	}
}
