package rules_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ilinkflow/ilinkflow/internal/store/rules"
)

func TestAMergedMessageTakesPartInALaterMergeAsItsBody(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   rules.MergeText
		want rules.MergeUnit
	}{
		{rules.MergeText{Summary: "hi"}, rules.MergeUnit{Text: "hi", Messages: 1}},
		{rules.MergeText{Summary: "[note]\na\nb", Body: "a\nb", Merged: 2, Omitted: 3}, rules.MergeUnit{Text: "a\nb", Messages: 2, Omitted: 3}},
	}
	for _, c := range cases {
		if got := rules.UnitOf(c.in); got != c.want {
			t.Errorf("UnitOf(%+v) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestAMergeKeepsTheNewestTextWithinTheCap(t *testing.T) {
	t.Parallel()
	unit := func(text string) rules.MergeUnit { return rules.MergeUnit{Text: text, Messages: 1} }
	cases := []struct {
		name     string
		units    []rules.MergeUnit
		images   int
		max      int
		want     rules.Merged
		summary  string
		checkLen bool
	}{
		{name: "everything fits", units: []rules.MergeUnit{unit("a"), unit("b")}, max: 100,
			want: rules.Merged{Summary: "a\nb", Body: "a\nb", Messages: 2}},
		{name: "the oldest is left out and said so", units: []rules.MergeUnit{unit(strings.Repeat("a", 50)), unit("bb")}, max: 45,
			want: rules.Merged{Summary: "[ilinkflow: 1 earlier message left out]\nbb", Body: "bb", Messages: 1, Omitted: 1}},
		{name: "omissions of earlier merges add up", units: []rules.MergeUnit{{Text: "a", Messages: 2, Omitted: 4}, unit("b")}, max: 100,
			want: rules.Merged{Summary: "[ilinkflow: 4 earlier messages left out]\na\nb", Body: "a\nb", Messages: 3, Omitted: 4}},
		{name: "more images than kept are noted", units: []rules.MergeUnit{unit("a")}, images: 6, max: 100,
			want: rules.Merged{Summary: "a\n[iLink images: attached the latest 4 of 6]", Body: "a", Messages: 1}},
		{name: "kept images are not noted", units: []rules.MergeUnit{unit("a")}, images: 4, max: 100,
			want: rules.Merged{Summary: "a", Body: "a", Messages: 1}},
	}
	for _, c := range cases {
		if got := rules.MergeTexts(c.units, c.images, c.max); got != c.want {
			t.Errorf("%s: MergeTexts = %+v, want %+v", c.name, got, c.want)
		}
	}
	// Even the newest text alone is too long: its tail is kept, cut on a rune.
	long := strings.Repeat("é", 50) // 100 bytes
	got := rules.MergeTexts([]rules.MergeUnit{unit("old"), unit(long)}, 0, 51)
	if len(got.Summary) > 51 || !utf8.ValidString(got.Summary) || !utf8.ValidString(got.Body) ||
		!strings.HasSuffix(long, got.Body) || got.Omitted != 1 || got.Messages != 1 {
		t.Fatalf("a text longer than the cap: %+v (summary %d bytes)", got, len(got.Summary))
	}
}

func TestAPageMergesItsBacklogAndKeepsTheLatestImages(t *testing.T) {
	t.Parallel()
	page := func(id string, sent time.Duration, idx int, images ...int32) rules.PageMessage {
		return rules.PageMessage{Order: rules.OrderKey{SentAt: t0.Add(sent), ProviderID: id, PageIndex: idx},
			Text: rules.MergeText{Summary: "text " + id}, ImagePositions: images}
	}
	type want struct {
		merged               bool
		summary              string
		messages, involved   int
		absorb, dropImagesOf string
		kept                 string
	}
	cases := []struct {
		name string
		in   rules.MergeInput
		want want
	}{
		{name: "one message, no image: nothing to merge",
			in:   rules.MergeInput{Page: []rules.PageMessage{page("1", 0, 0)}, MaxSummaryBytes: 1000},
			want: want{absorb: "[]", dropImagesOf: "[]", kept: "[]"}},
		{name: "one message with images: its own, by position",
			in:   rules.MergeInput{Page: []rules.PageMessage{page("1", 0, 0, 1, 0)}, MaxSummaryBytes: 1000},
			want: want{merged: true, summary: "text 1", messages: 1, absorb: "[]", dropImagesOf: "[]", kept: "[{true 0 0} {true 0 1}]"}},
		{name: "the backlog first, then the page in provider order",
			in: rules.MergeInput{
				Backlog: []rules.BacklogMessage{{Key: "b1", Text: rules.MergeText{Summary: "old"}}},
				Page:    []rules.PageMessage{page("3", time.Second, 0), page("2", 0, 1)}, Deliverable: 0, MaxSummaryBytes: 1000},
			want: want{merged: true, summary: "old\ntext 2\ntext 3", messages: 3, absorb: "[b1]", dropImagesOf: "[]", kept: "[]"}},
		{name: "the deliverable's images, then the page's from its end, then the backlog's: four kept",
			in: rules.MergeInput{
				Backlog:       []rules.BacklogMessage{{Key: "b1", Text: rules.MergeText{Summary: "old"}, ImagesInvolved: 3}},
				BacklogImages: []string{"b1", "b1"},
				Page:          []rules.PageMessage{page("1", 0, 0, 0), page("2", time.Second, 1, 0), page("3", 2*time.Second, 2, 0, 1)},
				Deliverable:   2, MaxSummaryBytes: 1000},
			want: want{merged: true, summary: "old\ntext 1\ntext 2\ntext 3\n[iLink images: attached the latest 4 of 7]",
				messages: 4, involved: 7, absorb: "[b1]", dropImagesOf: "[b1]",
				kept: "[{true 2 0} {true 2 1} {true 1 0} {true 0 0}]"}},
		{name: "a backlog message holding media has its rows dropped",
			in: rules.MergeInput{
				Backlog: []rules.BacklogMessage{{Key: "b1", Text: rules.MergeText{Summary: "file"}, HoldsMedia: true},
					{Key: "b2", Text: rules.MergeText{Summary: "plain"}}},
				Page: []rules.PageMessage{page("1", 0, 0)}, MaxSummaryBytes: 1000},
			want: want{merged: true, summary: "file\nplain\ntext 1", messages: 3, absorb: "[b1 b2]", dropImagesOf: "[b1]", kept: "[]"}},
	}
	for _, c := range cases {
		got := rules.PlanMerge(c.in)
		g := want{merged: got.Merged, summary: got.Summary, messages: got.Messages, involved: got.ImagesInvolved,
			absorb: fmt.Sprint(got.AbsorbKeys), dropImagesOf: fmt.Sprint(got.DropImagesOf), kept: fmt.Sprint(got.Kept)}
		if g != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, g, c.want)
		}
	}
}
