package handoff

import (
	"context"
	"fmt"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// ILinkInbox is where the ilink handler queues the messages it hands off (a *store.Store).
type ILinkInbox interface {
	OfferToILinkClient(ctx context.Context, now time.Time, in store.ILinkOfferInput) error
}

// Inbox is where the handlers that hand off by queueing (mcp, ilink) put messages.
type Inbox interface {
	MCPInbox
	ILinkInbox
}

// ILink hands a message to an iLink client that polls the gateway's iLink facade: it
// queues the message, with the hand-off's session, for the client, whose next getupdates
// takes it. The answer is empty: the client replies through the facade's sendmessage
// under the session of the latest offer, and the message is settled when its window
// closes (handled if the client answered it, failed otherwise), since iLink clients give
// no verdict. A re-offer keeps the message's place in the queue (store.OfferToILinkClient).
type ILink struct {
	// Client is the iLink client's name.
	Client string
	Inbox  ILinkInbox
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Deliver queues the message for the client.
func (h *ILink) Deliver(ctx context.Context, d Delivery) (Answer, error) {
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	err := h.Inbox.OfferToILinkClient(ctx, now(), store.ILinkOfferInput{MessageKey: d.Message.MessageKey, AccountKey: d.Message.AccountKey,
		Client: h.Client, ReplyWindowID: d.Window.ReplyWindowID, SessionID: d.SessionID, Token: d.SessionToken})
	switch code := store.CodeOf(err); {
	case err == nil:
		return Answer{}, nil
	case code == vocab.CodeInvalidInput, code == vocab.CodeILinkClientNotFound:
		return Answer{}, &PermanentError{Code: CodeDeliveryInvalid, Reason: fmt.Sprintf("the offer to iLink client %s was refused: %s", h.Client, code)}
	}
	return Answer{}, fmt.Errorf("queue message %s for iLink client %s: %w", d.Message.MessageKey, h.Client, err)
}
