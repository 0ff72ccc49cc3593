package gateway

import (
	"testing"
	"time"
)

// The activities read a zero send gap as "the default"; the configuration's zero means
// "no gap", which the activities spell as a negative gap.
func TestActivitiesConfigMapsTheConfiguration(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	c.TaskQueue = "q"
	c.SendGap = 0
	c.SessionTTL = time.Hour
	deferred := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	c.DeferredBefore = &deferred
	a := c.activitiesConfig()
	if a.Poller.StalePause.D() != c.StalePause || a.LeaseTTL != c.PollLeaseTTL {
		t.Fatalf("poller config %+v from %+v", a.Poller, c)
	}
	if a.SendGap >= 0 {
		t.Fatalf("send gap 0 became %v for the activities", a.SendGap)
	}
	if a.TaskQueue != "q" || a.PollSession != c.PollSession || a.HeartbeatEvery != c.Heartbeat ||
		a.ThrottlePenalty != c.ThrottlePenalty || a.MaxAccounts != c.MaxAccounts || a.SessionTTL != time.Hour ||
		a.DeferredBefore != &deferred || a.Client.BaseURL != c.ILinkBaseURL || a.Client.CDNBaseURL != c.ILinkCDNBaseURL {
		t.Fatalf("activities config %+v from %+v", a, c)
	}
	c.SendGap = 3 * time.Second
	if got := c.activitiesConfig().SendGap; got != 3*time.Second {
		t.Fatalf("send gap 3s became %v", got)
	}
	// Likewise the re-offer interval: the configuration's 0 is "never", a negative one for
	// the workflow.
	if got := c.activitiesConfig().ReofferAfter; got != c.ReofferAfter || got <= 0 {
		t.Fatalf("re-offer interval %v became %v", c.ReofferAfter, got)
	}
	c.ReofferAfter = 0
	if got := c.activitiesConfig().ReofferAfter; got >= 0 {
		t.Fatalf("re-offer interval 0 became %v for the workflows", got)
	}
}

func TestShortDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		24 * time.Hour: "24h", time.Hour: "1h", 10 * time.Minute: "10m", 90 * time.Second: "1m30s",
		2 * time.Second: "2s", 0: "0s", time.Hour + time.Second: "1h0m1s",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
