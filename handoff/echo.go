package handoff

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/ilinkflow/ilinkflow/vocab"
)

// EchoPrefix starts every reply of the echo handler.
const EchoPrefix = "echo: "

// maxEchoBytes keeps an echo within the default text limit of one send.
const maxEchoBytes = vocab.MaxTextBytes

// Echo is the built-in demo agent: it answers every message with "echo: <summary>" and
// marks it handled. An echo longer than one iLink message is cut and ends with a note
// saying so.
type Echo struct{}

// Deliver answers the echo.
func (Echo) Deliver(_ context.Context, d Delivery) (Answer, error) {
	summary := ""
	if d.Message.Payload != nil {
		summary = d.Message.Payload.Summary
	}
	text := EchoPrefix + summary
	if len(text) > maxEchoBytes {
		// Never cut silently: the reply says that it was cut and why.
		note := fmt.Sprintf(" [cut: your message is %d bytes; one iLink message carries at most %d]", len(summary), maxEchoBytes)
		cut := maxEchoBytes - len(note)
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + note
	}
	return Answer{Replies: []string{text}, Handled: true}, nil
}
