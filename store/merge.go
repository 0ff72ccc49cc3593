package store

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// mergedSummary joins the summaries of merged messages (oldest first) and the image
// note, keeping the newest text within maxBytes and saying how many earlier messages were
// left out. An agent that falls behind must not make every later page heavier.
func mergedSummary(parts []string, imageNote string, maxBytes int) string {
	join := func(ps []string) string {
		all := ps
		if imageNote != "" {
			all = append(append([]string(nil), ps...), imageNote)
		}
		return strings.Join(all, "\n")
	}
	if s := join(parts); len(s) <= maxBytes {
		return s
	}
	for dropped := 1; dropped < len(parts); dropped++ {
		s := omittedNote(dropped) + "\n" + join(parts[dropped:])
		if len(s) <= maxBytes {
			return s
		}
	}
	// Even the newest message alone is too long: keep its tail.
	head := omittedNote(len(parts)-1) + "\n"
	tail := join(parts[len(parts)-1:])
	return head + tailUTF8(tail, maxBytes-len(head))
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
