package rules_test

import (
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store/rules"
)

func TestRetMinus2IsTheWindowsOwnRejectionOnlyWhenOurBookkeepingExplainsIt(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		transmitted int32
		now         time.Time
		want        rules.Rejection
	}{
		{"quota left and window live", 3, t0, rules.RejectionThrottle},
		{"quota used up", 10, t0, rules.RejectionWindow},
		{"window past", 3, t0.Add(time.Hour), rules.RejectionWindow},
	}
	for _, c := range cases {
		w := openWindow()
		w.Reserved, w.Transmitted = 0, c.transmitted
		if got := rules.ClassifyRejection(w, c.now); got != c.want {
			t.Errorf("%s: ClassifyRejection = %s, want %s", c.name, got, c.want)
		}
	}
}
