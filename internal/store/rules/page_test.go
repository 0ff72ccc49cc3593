package rules_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store/rules"
	"github.com/ilinkflow/ilinkflow/vocab"
)

func TestThePagesNewestMessageOwnsTheOpenWindow(t *testing.T) {
	t.Parallel()
	msg := func(sent time.Duration, id string, idx int) rules.OrderKey {
		return rules.OrderKey{SentAt: t0.Add(sent), ProviderID: id, PageIndex: idx}
	}
	open, super, reason := vocab.WindowOpen, vocab.WindowSuperseded, rules.ReasonSuperseded
	cases := []struct {
		name       string
		open       *rules.OrderKey
		news       []rules.OrderKey
		want       []rules.WindowPlace
		retireOpen bool
		owner      int
	}{
		{name: "no open window: the message opens one", news: []rules.OrderKey{msg(0, "1", 0)},
			want: []rules.WindowPlace{{State: open}}, owner: 0},
		{name: "newer than the open window: it is retired", open: ptr(msg(-time.Minute, "1", 0)),
			news: []rules.OrderKey{msg(0, "2", 0)}, want: []rules.WindowPlace{{State: open}}, retireOpen: true, owner: 0},
		{name: "older than the open window: born superseded, no reason", open: ptr(msg(time.Minute, "9", 0)),
			news: []rules.OrderKey{msg(0, "2", 0)}, want: []rules.WindowPlace{{State: super}}, owner: -1},
		{name: "in growing order: each replaces the one before",
			news: []rules.OrderKey{msg(0, "1", 0), msg(time.Second, "2", 1), msg(2*time.Second, "3", 2)},
			want: []rules.WindowPlace{{super, reason}, {super, reason}, {State: open}}, owner: 2},
		{name: "in falling order: the first keeps it, the others are born superseded",
			news: []rules.OrderKey{msg(2*time.Second, "3", 0), msg(time.Second, "2", 1), msg(0, "1", 2)},
			want: []rules.WindowPlace{{State: open}, {State: super}, {State: super}}, owner: 0},
		{name: "the newest in the middle of the page, an older open window retired",
			open: ptr(msg(-time.Hour, "0", 0)),
			news: []rules.OrderKey{msg(0, "1", 0), msg(time.Minute, "5", 1), msg(time.Second, "2", 2)},
			want: []rules.WindowPlace{{super, reason}, {State: open}, {State: super}}, retireOpen: true, owner: 1},
	}
	for _, c := range cases {
		got := rules.PlaceWindows(c.open, c.news)
		if fmt.Sprint(got.Windows) != fmt.Sprint(c.want) || got.RetireOpen != c.retireOpen || got.Owner != c.owner {
			t.Errorf("%s: PlaceWindows = %+v, want windows %v, retire open %v, owner %d", c.name, got, c.want, c.retireOpen, c.owner)
		}
	}
}

func ptr[T any](v T) *T { return &v }
