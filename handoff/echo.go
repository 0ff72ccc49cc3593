package handoff

import (
	"context"
	"unicode/utf8"

	"github.com/ilinkflow/ilinkflow/activities"
)

// EchoPrefix starts every reply of the echo handler.
const EchoPrefix = "echo: "

// maxEchoBytes keeps an echo within the default text limit of one send.
const maxEchoBytes = 16 * 1024

// Echo is the built-in demo agent: it answers every message with "echo: <summary>" and
// marks it handled.
type Echo struct{}

// Deliver answers the echo.
func (Echo) Deliver(_ context.Context, d activities.Delivery) (activities.Answer, error) {
	summary := ""
	if d.Message.Payload != nil {
		summary = d.Message.Payload.Summary
	}
	text := EchoPrefix + summary
	if len(text) > maxEchoBytes {
		cut := maxEchoBytes
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
	}
	return activities.Answer{Replies: []string{text}, Handled: true}, nil
}
