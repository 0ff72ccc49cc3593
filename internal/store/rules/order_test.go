package rules_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store/rules"
)

func TestANewerMessageSupersedesTheOpenWindowsMessage(t *testing.T) {
	t.Parallel()
	key := func(s *int64, sent time.Duration, id string, idx int) rules.OrderKey {
		return rules.OrderKey{ProviderSeq: s, SentAt: t0.Add(sent), ProviderID: id, PageIndex: idx}
	}
	cases := []struct {
		name            string
		candidate, open rules.OrderKey
		samePage        bool
		want            bool
	}{
		{"higher sequence wins over an earlier sent-at", key(seq(5), -time.Minute, "1", 0), key(seq(4), 0, "2", 0), false, true},
		{"lower sequence loses over a later sent-at", key(seq(3), time.Minute, "9", 1), key(seq(4), 0, "2", 0), false, false},
		{"equal sequences fall to sent-at", key(seq(4), time.Second, "1", 0), key(seq(4), 0, "2", 0), false, true},
		{"later sent-at without sequences", key(nil, time.Second, "1", 0), key(nil, 0, "2", 0), false, true},
		{"earlier sent-at without sequences", key(nil, -time.Second, "3", 0), key(nil, 0, "2", 0), false, false},
		{"one sequence at equal sent-at: same page wins", key(seq(1), 0, "1", 1), key(nil, 0, "2", 0), true, true},
		{"one sequence at equal sent-at: another page loses", key(nil, 0, "3", 1), key(seq(1), 0, "2", 0), false, false},
		{"equal sent-at: higher numeric id wins across pages", key(nil, 0, "10", 0), key(nil, 0, "9", 0), false, true},
		{"equal sent-at: lower numeric id loses on the same page", key(nil, 0, "8", 1), key(nil, 0, "9", 0), true, false},
		{"equal sent-at, id not numeric: same page wins", key(nil, 0, "b", 1), key(nil, 0, "a", 0), true, true},
		{"equal sent-at, id not numeric: another page loses", key(nil, 0, "b", 0), key(nil, 0, "a", 0), false, false},
	}
	for _, c := range cases {
		if got := rules.Supersedes(c.candidate, c.open, c.samePage); got != c.want {
			t.Errorf("%s: Supersedes = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestMessagesOfAPageAreOrderedBySequenceThenSentAtThenIDThenPosition(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		a, b rules.OrderKey
		want int
	}{
		{"sequence first", rules.OrderKey{ProviderSeq: seq(1), SentAt: t0.Add(time.Hour)}, rules.OrderKey{ProviderSeq: seq(2), SentAt: t0}, -1},
		{"sent-at when a sequence is missing", rules.OrderKey{ProviderSeq: seq(9), SentAt: t0.Add(time.Second)}, rules.OrderKey{SentAt: t0}, 1},
		{"numeric id at equal sent-at", rules.OrderKey{SentAt: t0, ProviderID: "100"}, rules.OrderKey{SentAt: t0, ProviderID: "99"}, 1},
		{"page position when ids are not numeric", rules.OrderKey{SentAt: t0, ProviderID: "x", PageIndex: 0}, rules.OrderKey{SentAt: t0, ProviderID: "y", PageIndex: 3}, -3},
	}
	for _, c := range cases {
		if got := rules.CompareOrder(c.a, c.b); got != c.want {
			t.Errorf("%s: CompareOrder = %d, want %d", c.name, got, c.want)
		}
	}
	page := []rules.OrderKey{
		{ProviderSeq: seq(3), SentAt: t0, ProviderID: "30", PageIndex: 0},
		{ProviderSeq: seq(1), SentAt: t0, ProviderID: "10", PageIndex: 1},
		{SentAt: t0.Add(-time.Minute), ProviderID: "5", PageIndex: 2},
		{ProviderSeq: seq(2), SentAt: t0, ProviderID: "20", PageIndex: 3},
	}
	rules.SortByOrder(page, func(k rules.OrderKey) rules.OrderKey { return k })
	var got []string
	for _, k := range page {
		got = append(got, k.ProviderID)
	}
	if want := "5 10 20 30"; strings.Join(got, " ") != want {
		t.Fatalf("SortByOrder: %s, want %s", strings.Join(got, " "), want)
	}
}

func TestProviderIDsCompareAsUnsignedDecimalsOfAnyLength(t *testing.T) {
	t.Parallel()
	cases := []struct {
		a, b   string
		want   int
		wantOK bool
	}{
		{"9", "10", -1, true},
		{"18446744073709551615", "18446744073709551614", 1, true}, // uint64's largest
		{"123456789012345678901234", "99", 1, true},               // longer than any integer
		{"42", "42", 0, true},
		{"0", "0", 0, true},
		{"007", "8", 0, false}, // not canonical
		{"", "1", 0, false},
		{"-1", "1", 0, false},
		{"1e3", "1", 0, false},
	}
	for _, c := range cases {
		got, ok := rules.CompareNumericIDs(c.a, c.b)
		if got != c.want || ok != c.wantOK {
			t.Errorf("CompareNumericIDs(%q, %q) = %d, %v, want %d, %v", c.a, c.b, got, ok, c.want, c.wantOK)
		}
	}
}
