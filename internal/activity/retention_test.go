package activity

import (
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

func TestPurgeExpiredRunsEveryClassInBatchesUntilNothingIsDueAndASecondRunPurgesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *options) {
		o.config = func(c *Config) {
			c.Retention = store.RetentionPolicy{Content: 30 * 24 * time.Hour, Rows: 90 * 24 * time.Hour}
		}
	})
	for _, text := range []string{"one", "two", "three"} { // two windows superseded, the third open
		h.deliver(text)
	}
	at := time.Now().Add(31 * 24 * time.Hour)
	out := must[activities.PurgeOutput](t)(run[activities.PurgeOutput](h, h.acts.PurgeExpired, activities.PurgeInput{Now: at, Limit: 1}))
	if !out.Done || out.Purged[store.RetentionContent] != 2 || out.Purged[store.RetentionRows] != 0 {
		t.Fatalf("first run %+v, want the content of the two closed windows' messages", out)
	}
	if n := h.count("SELECT count(*) FROM inbound_messages WHERE erased_at IS NOT NULL"); n != 2 {
		t.Fatalf("%d messages erased, want 2", n)
	}
	again := must[activities.PurgeOutput](t)(run[activities.PurgeOutput](h, h.acts.PurgeExpired, activities.PurgeInput{Now: at}))
	for class, n := range again.Purged {
		if n != 0 {
			t.Fatalf("a second run purged %d of %s", n, class)
		}
	}
	// Past the rows horizon the erased rows go.
	later := time.Now().Add(91 * 24 * time.Hour)
	out = must[activities.PurgeOutput](t)(run[activities.PurgeOutput](h, h.acts.PurgeExpired, activities.PurgeInput{Now: later}))
	if out.Purged[store.RetentionRows] != 2 || h.count("SELECT count(*) FROM inbound_messages") != 1 {
		t.Fatalf("rows run %+v", out)
	}
}

func TestPurgeExpiredStopsWhenItsBudgetIsUsedAndSaysSo(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *options) {
		o.config = func(c *Config) { c.Retention = store.RetentionPolicy{Content: time.Hour, Rows: 200 * time.Hour} }
	})
	h.deliver("one")
	h.deliver("two")
	out := must[activities.PurgeOutput](t)(run[activities.PurgeOutput](h, h.acts.PurgeExpired,
		activities.PurgeInput{Now: time.Now().Add(2 * time.Hour), Budget: wfapi.Duration(time.Nanosecond)}))
	if out.Done {
		t.Fatalf("a used-up budget reported done: %+v", out)
	}
}
