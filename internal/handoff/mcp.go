package handoff

import (
	"context"
	"fmt"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// MCPInbox is where the mcp handler puts the messages it hands off (a *store.Store).
type MCPInbox interface {
	OfferToMCP(ctx context.Context, now time.Time, in store.MCPOfferInput) error
}

// MCP hands a message to an agent that connects to the gateway's MCP server: it puts
// the message, with the hand-off's session, in the agent's inbox, where the agent's next
// wait takes it. The answer is empty: the agent replies and gives its verdict through the
// MCP tools, which act under the session of the latest offer. A re-offer gives the offer
// the new session and keeps a live claim (store.OfferToMCP), so a message an agent
// dropped is taken again, and one an agent still answers is not given to another.
type MCP struct {
	// Agent is the MCP agent's name.
	Agent string
	Inbox MCPInbox
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Deliver puts the message in the agent's inbox.
func (h *MCP) Deliver(ctx context.Context, d Delivery) (Answer, error) {
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	err := h.Inbox.OfferToMCP(ctx, now(), store.MCPOfferInput{MessageKey: d.Message.MessageKey, AccountKey: d.Message.AccountKey,
		Agent: h.Agent, ReplyWindowID: d.Window.ReplyWindowID, SessionID: d.SessionID, Token: d.SessionToken})
	switch code := store.CodeOf(err); {
	case err == nil:
		return Answer{}, nil
	case code == vocab.CodeInvalidInput, code == vocab.CodeMCPAgentNotFound:
		return Answer{}, &PermanentError{Code: CodeDeliveryInvalid, Reason: fmt.Sprintf("the offer to MCP agent %s was refused: %s", h.Agent, code)}
	}
	return Answer{}, fmt.Errorf("offer message %s to MCP agent %s: %w", d.Message.MessageKey, h.Agent, err)
}
