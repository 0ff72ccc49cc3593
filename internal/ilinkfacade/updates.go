package ilinkfacade

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/store"
)

// The facade's opaque strings: a cursor names a position in the client's queue, a context
// token the message it answers. Both are base64 like iLink's own; neither carries a
// secret (the caller's token authorises every use), and neither is ever the real one.
const (
	cursorPrefix  = "ilkf:"
	contextPrefix = "ilkctx:"
)

func encodeCursor(seq int64) string {
	return base64.StdEncoding.EncodeToString([]byte(cursorPrefix + strconv.FormatInt(seq, 10)))
}

// decodeCursor reads a cursor the facade issued; ok is false for "" or anything else.
func decodeCursor(s string) (int64, bool) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return 0, false
	}
	v, found := strings.CutPrefix(string(raw), cursorPrefix)
	if !found {
		return 0, false
	}
	seq, err := strconv.ParseInt(v, 10, 64)
	if err != nil || seq < 0 {
		return 0, false
	}
	return seq, true
}

// ContextToken is the context token the facade hands a client for a message.
func ContextToken(messageKey string) string {
	return base64.StdEncoding.EncodeToString([]byte(contextPrefix + messageKey))
}

// messageOfToken is the message key a facade context token names ("" when it names none).
func messageOfToken(token string) string {
	raw, err := base64.StdEncoding.DecodeString(token)
	if err != nil {
		return ""
	}
	key, found := strings.CutPrefix(string(raw), contextPrefix)
	if !found || len(key) > 200 {
		return ""
	}
	return key
}

type getUpdatesRequest struct {
	GetUpdatesBuf string `json:"get_updates_buf"`
}

type getUpdatesResponse struct {
	Ret                  int             `json:"ret"`
	Msgs                 []ilink.Message `json:"msgs"`
	GetUpdatesBuf        string          `json:"get_updates_buf"`
	LongPollingTimeoutMs int64           `json:"longpolling_timeout_ms"`
}

// getUpdates is the long poll: the client's queue past its cursor. A cursor the facade
// issued acknowledges everything up to it (the client's store moved past those messages);
// an empty or foreign one resumes from the last acknowledgement.
func (f *Facade) getUpdates(c *call) {
	var req getUpdatesRequest
	if err := json.Unmarshal(c.body, &req); err != nil {
		f.refuse(c.w, c.log, c.endpoint, CodeInvalidRequest, "body does not decode", invalidArgs())
		return
	}
	owner := c.caller.BotID // a cursor is the bot's, or ("") the client's own token's
	after, issued := decodeCursor(req.GetUpdatesBuf)
	sctx, cancel := f.storeContext(c.r.Context())
	var err error
	if issued {
		err = f.cfg.Store.AckILinkClientCursor(sctx, f.cfg.Now(), c.caller.Client, owner, after)
	} else {
		after, err = f.cfg.Store.ILinkClientCursor(sctx, c.caller.Client, owner)
	}
	cancel()
	if err != nil {
		f.storeFailed(c.w, c.log, c.endpoint, err)
		return
	}
	woken, done := f.waiter(c.caller.Client)
	defer done()
	deadline := time.NewTimer(f.cfg.LongPoll)
	defer deadline.Stop()
	tick := time.NewTicker(f.cfg.PollInterval)
	defer tick.Stop()
	for {
		msgs, last, ok := f.page(c, after)
		if !ok {
			return
		}
		if len(msgs) > 0 {
			c.log.Debug("iLink client took messages", "messages", len(msgs), "cursor", last)
			c.ok(f, getUpdatesResponse{Msgs: msgs, GetUpdatesBuf: encodeCursor(last), LongPollingTimeoutMs: f.advertised()})
			return
		}
		if last > after {
			after = last // only absorbed messages: the cursor answered later passes them
			continue
		}
		timedOut := false
		select {
		case <-c.r.Context().Done():
			return
		case <-deadline.C:
			timedOut = true
		case <-f.closing:
			timedOut = true
		case <-woken:
		case <-tick.C:
		}
		if timedOut {
			c.ok(f, getUpdatesResponse{Msgs: []ilink.Message{}, GetUpdatesBuf: encodeCursor(after), LongPollingTimeoutMs: f.advertised()})
			return
		}
		// A token revoked while the poll waits ends it at once.
		sctx, cancel := f.storeContext(c.r.Context())
		caller, found, err := f.cfg.Store.ILinkCallerByToken(sctx, c.token)
		cancel()
		switch {
		case err != nil:
			f.storeFailed(c.w, c.log, c.endpoint, err)
			return
		case !found || caller.Revoked:
			f.refuse(c.w, c.log, c.endpoint, CodeStaleToken, "token revoked during the poll", staleBody())
			return
		}
	}
}

// advertised is the longpolling_timeout_ms a poll's answer suggests: the facade's hold
// and a margin, since the official plugin aborts its next poll at exactly that time, and
// a page answered as it aborts would be lost to it (it is not acknowledged, so it comes
// again, but later).
func (f *Facade) advertised() int64 { return (f.cfg.LongPoll + pollMargin).Milliseconds() }

// page reads the caller's queue past after and builds the messages, and returns the
// cursor past them; ok false means the request was answered (a store failure). A message
// absorbed into a later one (the user wrote again before it was answered: the later one
// carries both texts) is passed over, as every route passes it over.
func (f *Facade) page(c *call, after int64) (msgs []ilink.Message, last int64, ok bool) {
	ctx, cancel := f.storeContext(c.r.Context())
	defer cancel()
	offers, err := f.cfg.Store.ILinkClientOffers(ctx, c.caller.Client, c.caller.AccountKey, after, MaxPage)
	if err != nil {
		f.storeFailed(c.w, c.log, c.endpoint, err)
		return nil, 0, false
	}
	msgs = []ilink.Message{}
	last = after
	for _, o := range offers {
		last = o.Seq
		m, absorbed, err := f.message(ctx, c, o)
		if err != nil {
			f.storeFailed(c.w, c.log, c.endpoint, err)
			return nil, 0, false
		}
		if !absorbed {
			msgs = append(msgs, m)
		}
	}
	return msgs, last, true
}

// message is an offered message as iLink's getupdates shows it: from the user, to the
// bot (the caller's bot id, or the account key for a client's own token), with
// the facade's context token, its text as a text item and its images as image items whose
// media the facade's CDN serves.
func (f *Facade) message(ctx context.Context, c *call, o store.ILinkOffer) (msg ilink.Message, absorbed bool, err error) {
	m, err := f.cfg.Store.GetMessage(ctx, o.MessageKey)
	if err != nil {
		return ilink.Message{}, false, err
	}
	if m.Payload == nil {
		return ilink.Message{}, true, nil
	}
	w, err := f.cfg.Store.GetWindow(ctx, o.ReplyWindowID)
	if err != nil {
		return ilink.Message{}, false, err
	}
	in := handoff.AgentInput(handoff.Delivery{Message: m, Window: w, SessionID: o.SessionID})
	to := c.caller.BotID
	if to == "" {
		to = o.AccountKey
	}
	id, perr := strconv.ParseUint(m.ProviderMessageID, 10, 64)
	if perr != nil || id == 0 {
		id = uint64(o.Seq)
	}
	created := m.SentAt.UnixMilli()
	out := ilink.Message{Seq: o.Seq, MessageID: ilink.ID(id), FromUserID: m.PeerID, ToUserID: to, CreateTimeMs: created,
		MessageType: ilink.MessageTypeUser, MessageState: ilink.MessageStateFinish, ContextToken: ilink.Secret(ContextToken(o.MessageKey))}
	if in.Summary != "" {
		out.ItemList = append(out.ItemList, ilink.Item{Type: ilink.ItemText, CreateTimeMs: created, TextItem: &ilink.TextItem{Text: in.Summary}})
	}
	for i, a := range in.Attachments {
		if a.Kind != "image" || a.FetchPath == "" {
			continue
		}
		media, err := f.downloadRef(c.r, o.MessageKey, i)
		if err != nil {
			return ilink.Message{}, false, err
		}
		out.ItemList = append(out.ItemList, ilink.Item{Type: ilink.ItemImage, CreateTimeMs: created, ImageItem: &ilink.ImageItem{Media: media}})
	}
	return out, false, nil
}
