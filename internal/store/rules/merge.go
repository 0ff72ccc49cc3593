package rules

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxKeptImages is how many images a merged message keeps: the latest ones.
const MaxKeptImages = 4

// MergeText is what a merge reads of a message's payload.
type MergeText struct {
	// Summary is what the agent sees; Body, for a message that absorbed others, the
	// texts without the gateway's notes.
	Summary, Body string
	// Merged counts the messages whose text Body holds (0: not merged); Omitted the
	// earlier messages a capped merge left out.
	Merged, Omitted int
}

// MergeUnit is the text of one message taking part in a merge. A message that absorbed
// others earlier is one unit that stands for several messages.
type MergeUnit struct {
	Text     string
	Messages int // messages whose text is in Text
	Omitted  int // earlier messages this unit already left out
}

// UnitOf is the unit a message's payload takes part in a merge with: its summary, or
// the body of the messages it merged earlier (so notes are never merged twice).
func UnitOf(t MergeText) MergeUnit {
	u := MergeUnit{Text: t.Summary, Messages: 1, Omitted: t.Omitted}
	if t.Merged > 0 {
		u.Text, u.Messages = t.Body, t.Merged
	}
	return u
}

// Merged is the result of merging units: what the agent sees and what a later merge needs.
type Merged struct {
	Summary  string // rendered: omission note, texts, image note
	Body     string // texts only
	Messages int
	Omitted  int
}

// MergeTexts joins the units' texts (oldest first), keeping the newest text within
// maxBytes and saying how many earlier messages were left out, then notes how many
// images were involved when more than were kept. An agent that falls behind must not
// make every later page heavier.
func MergeTexts(units []MergeUnit, imagesInvolved, maxBytes int) Merged {
	m := Merged{}
	for _, u := range units {
		m.Omitted += u.Omitted
	}
	note := imageNote(imagesInvolved)
	render := func(from int) Merged {
		out := Merged{Omitted: m.Omitted}
		texts := make([]string, 0, len(units)-from)
		for i, u := range units {
			if i < from {
				out.Omitted += u.Messages
				continue
			}
			texts = append(texts, u.Text)
			out.Messages += u.Messages
		}
		out.Body = strings.Join(texts, "\n")
		parts := []string{}
		if out.Omitted > 0 {
			parts = append(parts, omittedNote(out.Omitted))
		}
		parts = append(parts, out.Body)
		if note != "" {
			parts = append(parts, note)
		}
		out.Summary = strings.Join(parts, "\n")
		return out
	}
	for from := 0; from < len(units); from++ {
		if out := render(from); len(out.Summary) <= maxBytes {
			return out
		}
	}
	// Even the newest unit alone is too long: keep the tail of its text.
	out := render(len(units) - 1)
	over := len(out.Summary) - maxBytes
	out.Body = tailUTF8(out.Body, len(out.Body)-over)
	out.Summary = tailUTF8(out.Summary, maxBytes)
	return out
}

func omittedNote(n int) string {
	if n == 1 {
		return "[ilinkflow: 1 earlier message left out]"
	}
	return fmt.Sprintf("[ilinkflow: %d earlier messages left out]", n)
}

// tailUTF8 returns the longest suffix of s of at most n bytes that starts on a rune.
func tailUTF8(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// imageNote is appended to a merged summary when more images were involved than kept.
func imageNote(total int) string {
	if total <= MaxKeptImages {
		return ""
	}
	return fmt.Sprintf("[iLink images: attached the latest %d of %d]", MaxKeptImages, total)
}

// BacklogMessage is one message of the conversation's undelivered backlog.
type BacklogMessage struct {
	Key  string
	Text MergeText
	// ImagesInvolved is how many images its payload says were merged into it, kept or not.
	ImagesInvolved int
	// HoldsMedia: it has a file, voice or video locator row (which goes with its images
	// when it is absorbed: the merge drops its descriptor).
	HoldsMedia bool
}

// PageMessage is one new message of a page.
type PageMessage struct {
	Order OrderKey
	Text  MergeText
	// ImagePositions are the positions of its image locators.
	ImagePositions []int32
}

// MergeInput is what merging a page into its deliverable message is decided on.
type MergeInput struct {
	// Backlog is the conversation's undelivered backlog, in inbox order.
	Backlog []BacklogMessage
	// BacklogImages names, for each stored image row of the backlog in the order read
	// (newest message first), the message that holds it.
	BacklogImages []string
	// Page is the page's new messages, in page order; Deliverable the index of the one
	// that owns the open window.
	Page        []PageMessage
	Deliverable int
	// MaxSummaryBytes caps the merged summary.
	MaxSummaryBytes int
}

// MergeImage is one image a merge keeps: a page message's (FromPage, Index into
// MergeInput.Page, its Position) or a stored backlog image (Index into
// MergeInput.BacklogImages).
type MergeImage struct {
	FromPage bool
	Index    int
	Position int32
}

// MergePlan is what merging into the deliverable message decides.
type MergePlan struct {
	// AbsorbKeys are the backlog messages absorbed into the deliverable one.
	AbsorbKeys []string
	// DropImagesOf are the backlog messages whose image (and media) rows go.
	DropImagesOf []string
	// Merged is false when there is nothing to merge: the deliverable's payload stands.
	Merged bool
	// The merged payload: summary and body (MergeTexts), messages and omitted counts,
	// and ImagesInvolved when more images were involved than kept (0 otherwise).
	Summary, Body     string
	Messages, Omitted int
	ImagesInvolved    int
	// Kept are the images the merged message keeps, in their new positions 0, 1, ...
	Kept []MergeImage
}

// PlanMerge merges the page's other new messages and the conversation's earlier
// undelivered backlog into the deliverable message: texts (backlog in inbox order, then
// the page in provider order, capped by MergeTexts), and the latest images — the
// deliverable's own by position, then the other page messages' from the page's end, then
// the backlog's newest first — of which MaxKeptImages are kept, renumbered from 0. Every
// backlog message is absorbed; one that holds image or media rows has them dropped.
func PlanMerge(in MergeInput) MergePlan {
	var plan MergePlan
	var units []MergeUnit
	droppedImages := 0 // images earlier merges involved but did not keep
	stored := map[string]int{}
	for _, key := range in.BacklogImages {
		stored[key]++
	}
	for _, b := range in.Backlog {
		plan.AbsorbKeys = append(plan.AbsorbKeys, b.Key)
		units = append(units, UnitOf(b.Text))
		if b.ImagesInvolved > stored[b.Key] {
			droppedImages += b.ImagesInvolved - stored[b.Key]
		}
		if stored[b.Key] > 0 || b.HoldsMedia {
			plan.DropImagesOf = append(plan.DropImagesOf, b.Key)
		}
	}
	page := slices.Clone(in.Page)
	SortByOrder(page, func(m PageMessage) OrderKey { return m.Order })
	for _, m := range page {
		units = append(units, UnitOf(m.Text))
	}
	var images []MergeImage
	appendOwn := func(i int) {
		own := slices.Clone(in.Page[i].ImagePositions)
		slices.Sort(own)
		for _, pos := range own {
			images = append(images, MergeImage{FromPage: true, Index: i, Position: pos})
		}
	}
	appendOwn(in.Deliverable)
	for i := len(in.Page) - 1; i >= 0; i-- {
		if i != in.Deliverable {
			appendOwn(i)
		}
	}
	for i := range in.BacklogImages {
		images = append(images, MergeImage{Index: i})
	}
	if len(units) <= 1 && len(images) == 0 {
		return plan
	}
	plan.Merged = true
	plan.Kept = images[:min(len(images), MaxKeptImages)]
	involved := len(images) + droppedImages
	mt := MergeTexts(units, involved, in.MaxSummaryBytes)
	plan.Summary, plan.Body, plan.Messages, plan.Omitted = mt.Summary, mt.Body, mt.Messages, mt.Omitted
	if involved > len(plan.Kept) {
		plan.ImagesInvolved = involved
	}
	return plan
}
