package handoff

import (
	"strings"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// shown is a stored message's summary and attachments as every handler shows them to an
// agent: each file name as vocab.SafeFileName makes it (no path parts, control or bidi
// characters, bounded, never empty), also where the summary names it ("[file <name>]").
// The stored payload keeps the name as the user's client sent it.
func shown(p *store.Payload) (summary string, attachments []store.Attachment) {
	if p == nil {
		return "", nil
	}
	summary = p.Summary
	for _, a := range p.Attachments {
		if a.Name != "" {
			safe := vocab.SafeFileName(a.Name)
			if safe != a.Name {
				summary = strings.ReplaceAll(summary, "[file "+a.Name+"]", "[file "+safe+"]")
			}
			a.Name = safe
		}
		attachments = append(attachments, a)
	}
	return summary, attachments
}
