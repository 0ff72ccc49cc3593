package store

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// mergeUnit is the text of one message taking part in a merge. A message that absorbed
// others earlier is one unit that stands for several messages.
type mergeUnit struct {
	text     string
	messages int // messages whose text is in text
	omitted  int // earlier messages this unit already left out
}

func unitOf(p Payload) mergeUnit {
	u := mergeUnit{text: p.Summary, messages: 1, omitted: p.Omitted}
	if p.Merged > 0 {
		u.text, u.messages = p.Body, p.Merged
	}
	return u
}

// merged is the result of merging units: what the agent sees and what a later merge needs.
type merged struct {
	summary  string // rendered: omission note, texts, image note
	body     string // texts only
	messages int
	omitted  int
}

// mergeTexts joins the units' texts (oldest first), keeping the newest text within
// maxBytes and saying how many earlier messages were left out, then notes how many
// images were involved when more than were kept. An agent that falls behind must not
// make every later page heavier.
func mergeTexts(units []mergeUnit, imagesInvolved, maxBytes int) merged {
	m := merged{}
	for _, u := range units {
		m.omitted += u.omitted
	}
	note := imageNote(imagesInvolved)
	render := func(from int) merged {
		out := merged{omitted: m.omitted}
		texts := make([]string, 0, len(units)-from)
		for i, u := range units {
			if i < from {
				out.omitted += u.messages
				continue
			}
			texts = append(texts, u.text)
			out.messages += u.messages
		}
		out.body = strings.Join(texts, "\n")
		parts := []string{}
		if out.omitted > 0 {
			parts = append(parts, omittedNote(out.omitted))
		}
		parts = append(parts, out.body)
		if note != "" {
			parts = append(parts, note)
		}
		out.summary = strings.Join(parts, "\n")
		return out
	}
	for from := 0; from < len(units); from++ {
		if out := render(from); len(out.summary) <= maxBytes {
			return out
		}
	}
	// Even the newest unit alone is too long: keep the tail of its text.
	out := render(len(units) - 1)
	over := len(out.summary) - maxBytes
	out.body = tailUTF8(out.body, len(out.body)-over)
	out.summary = tailUTF8(out.summary, maxBytes)
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
	if total <= maxKeptImages {
		return ""
	}
	return fmt.Sprintf("[iLink images: attached the latest %d of %d]", maxKeptImages, total)
}
