package handoff

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ilinkflow/ilinkflow/vocab"
)

// EchoPrefix starts every reply of the echo handler.
const EchoPrefix = "echo: "

// NULMarker stands in an echo for each U+0000 of the user's text ('␀', U+2400): inbound
// text is stored as it came, NUL included, but an outbound text may not hold one
// (vocab.CheckText).
const NULMarker = "\u2400"

// maxEchoBytes keeps an echo within the default text limit of one send.
const maxEchoBytes = vocab.MaxTextBytes

// Echo is the built-in demo agent: it answers every message with "echo: <summary>" and
// marks it handled. The echo is always sendable (vocab.CheckText): each U+0000 of the
// summary is shown as NULMarker, file names as vocab.SafeFileName makes them, and an echo
// longer than one iLink message is cut and ends with a note saying so.
type Echo struct{}

// Deliver answers the echo.
func (Echo) Deliver(_ context.Context, d Delivery) (Answer, error) {
	summary, _ := shown(d.Message.Payload)
	return Answer{Replies: []string{echoText(summary, maxEchoBytes)}, Handled: true}, nil
}

// echoText is the echo of a summary within maxBytes (more than the cut note's length).
func echoText(summary string, maxBytes int) string {
	text := EchoPrefix + strings.ReplaceAll(strings.ToValidUTF8(summary, "\uFFFD"), "\x00", NULMarker)
	if len(text) > maxBytes {
		// Never cut silently: the reply says that it was cut and why.
		note := fmt.Sprintf(" [cut: your message is %d bytes; one iLink message carries at most %d]", len(summary), maxBytes)
		cut := maxBytes - len(note)
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + note
	}
	return text
}
