package ilinkfacade

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strconv"

	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/replyapi"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

type sendMessageRequest struct {
	Msg *ilink.Message `json:"msg"`
}

// sendMessage sends a client's reply through the reply API, under the session of the
// latest offer of the message its context token names (or, without one, of the caller's
// latest message from the user). client_id is the idempotency key: a repeated request
// learns the first one's outcome and never sends twice.
//
// What the client sees (docs/ilink-facade.md#sendmessage-and-what-a-client-sees):
//   - sent: {"ret":0,"message_id":N} (N the provider's id when it is numeric);
//   - held (the window cannot carry it: quota used up or window expired; the reply goes
//     out with the user's next message, as held replies do): {"ret":0}, no message_id. An
//     accepted reply is what iLink's ret 0 means, and a client that saw an error would
//     resend a reply ilinkflow already keeps;
//   - outcome unknown (the send's answer was lost; ilinkflow never sends it again):
//     {"ret":0}, no message_id, for the same reason;
//   - refused (bad input, a media reply past the quota, a bot paused or throttled):
//     {"ret":-2,"errmsg":"<code>: <why>"}, as iLink refuses.
func (f *Facade) sendMessage(c *call) {
	var req sendMessageRequest
	if err := json.Unmarshal(c.body, &req); err != nil || req.Msg == nil {
		f.refuse(c.w, c.log, c.endpoint, CodeInvalidRequest, "no msg", invalidArgs())
		return
	}
	m := req.Msg
	if len(m.ItemList) != 1 {
		f.refuse(c.w, c.log, c.endpoint, CodeInvalidRequest, "a message carries exactly one item", invalidArgs())
		return
	}
	if m.ToUserID == "" {
		f.refuse(c.w, c.log, c.endpoint, CodeInvalidRequest, "no to_user_id", invalidArgs())
		return
	}
	o, ok := f.offerFor(c, m.ContextToken.Reveal(), m.ToUserID)
	if !ok {
		return
	}
	log := c.log.With("message_key", o.MessageKey)
	key := ""
	if m.ClientID != "" {
		if len(m.ClientID) > replyapi.MaxIdempotencyKey || !visibleASCII(m.ClientID) {
			f.refuse(c.w, log, c.endpoint, CodeInvalidRequest, "client_id is not 1 to 200 visible ASCII characters", invalidArgs())
			return
		}
		key = "ilink:" + c.caller.Client + ":" + m.ClientID
		if len(key) > replyapi.MaxIdempotencyKey {
			key = key[:replyapi.MaxIdempotencyKey]
		}
	}
	body, contentType, why := f.replyBody(c, o, m.ItemList[0])
	if why != "" {
		f.refuse(c.w, log, c.endpoint, CodeInvalidRequest, why, invalidArgs())
		return
	}
	ans, err := replyapi.InProcess(c.r.Context(), f.cfg.Replies, http.MethodPost, "/v1/reply", o.Token, key, contentType, body)
	if err != nil {
		f.refuse(c.w, log, c.endpoint, CodeReplyRefused, "the reply cannot be made", retMinus2("internal error"))
		return
	}
	var out replyapi.ReplyResponse
	_ = json.Unmarshal(ans.Body, &out)
	switch {
	case ans.Status == http.StatusOK && out.Status == vocab.AttemptSent:
		resp := map[string]any{"ret": 0}
		if id, err := strconv.ParseUint(out.ProviderMessageID, 10, 64); err == nil && id != 0 {
			resp["message_id"] = ilink.ID(id)
		}
		log.Info("iLink client reply sent", "attempt", out.AttemptID)
		f.count(c.endpoint, "sent")
		writeJSON(c.w, http.StatusOK, resp)
	case ans.Status == http.StatusAccepted:
		log.Info("iLink client reply accepted", "status", out.Status, "attempt", out.AttemptID, "held_reply", out.HeldID)
		f.count(c.endpoint, out.Status)
		writeJSON(c.w, http.StatusOK, map[string]any{"ret": 0})
	case ans.Status >= 500:
		log.Warn("iLink client reply failed", "status", ans.Status, "code", replyCode(ans.Body))
		f.count(c.endpoint, CodeReplyRefused)
		http.Error(c.w, "the gateway could not send the reply", http.StatusServiceUnavailable)
	default:
		code, msg := replyRefusal(ans.Body)
		f.refuse(c.w, log, c.endpoint, CodeReplyRefused, "reply API refused: "+code, retMinus2(code+": "+msg))
	}
}

// offerFor resolves the message a request acts on: the one its context token names, or,
// without a token, the caller's latest message from the user. It answers a refusal itself
// (ok false): a token of another client's message, or of another user, is invalid
// arguments, as iLink answers a token that is not the user's.
func (f *Facade) offerFor(c *call, contextToken, peer string) (store.ILinkOffer, bool) {
	ctx, cancel := f.storeContext(c.r.Context())
	defer cancel()
	var o store.ILinkOffer
	var found bool
	var err error
	if contextToken != "" {
		key := messageOfToken(contextToken)
		if key == "" {
			f.refuse(c.w, c.log, c.endpoint, CodeInvalidRequest, "context_token is not the facade's", invalidArgs())
			return store.ILinkOffer{}, false
		}
		o, found, err = f.cfg.Store.GetILinkClientOffer(ctx, key)
	} else {
		o, found, err = f.cfg.Store.LatestILinkClientOffer(ctx, c.caller.Client, c.caller.AccountKey, peer)
	}
	switch {
	case store.CodeOf(err) == vocab.CodeInvalidInput:
		f.refuse(c.w, c.log, c.endpoint, CodeInvalidRequest, "context_token or to_user_id malformed", invalidArgs())
		return store.ILinkOffer{}, false
	case err != nil:
		f.storeFailed(c.w, c.log, c.endpoint, err)
		return store.ILinkOffer{}, false
	case !found || o.Client != c.caller.Client || (c.caller.AccountKey != "" && o.AccountKey != c.caller.AccountKey):
		f.refuse(c.w, c.log, c.endpoint, CodeNotYours, errNotYours.Error(), invalidArgs())
		return store.ILinkOffer{}, false
	}
	m, err := f.cfg.Store.GetMessage(ctx, o.MessageKey)
	if err != nil {
		f.storeFailed(c.w, c.log, c.endpoint, err)
		return store.ILinkOffer{}, false
	}
	if m.PeerID != peer {
		f.refuse(c.w, c.log, c.endpoint, CodeNotYours, "to_user_id is not the message's user", invalidArgs())
		return store.ILinkOffer{}, false
	}
	return o, true
}

// replyBody is the reply API request of a client's item: JSON for text, multipart for
// media the client uploaded to the facade's CDN. why says what is wrong with the item.
func (f *Facade) replyBody(c *call, o store.ILinkOffer, it ilink.Item) (body []byte, contentType, why string) {
	switch it.Type {
	case ilink.ItemText:
		if it.TextItem == nil {
			return nil, "", "a text item without text_item"
		}
		b, err := json.Marshal(replyapi.ReplyRequest{Type: "text", Text: it.TextItem.Text, Final: true})
		if err != nil {
			return nil, "", "text cannot be encoded"
		}
		return b, "application/json", ""
	case ilink.ItemImage, ilink.ItemFile, ilink.ItemVideo:
	default:
		return nil, "", fmt.Sprintf("item type %d cannot be sent", it.Type)
	}
	var media *ilink.CDNMedia
	kind, name := "", ""
	switch {
	case it.Type == ilink.ItemImage && it.ImageItem != nil:
		media, kind = it.ImageItem.Media, "image"
	case it.Type == ilink.ItemVideo && it.VideoItem != nil:
		media, kind = it.VideoItem.Media, "video"
	case it.Type == ilink.ItemFile && it.FileItem != nil:
		media, kind, name = it.FileItem.Media, "file", it.FileItem.FileName
	}
	if media == nil || media.EncryptQueryParam == "" {
		return nil, "", "a media item without media.encrypt_query_param"
	}
	ctx, cancel := f.storeContext(c.r.Context())
	up, found, err := f.cfg.Store.GetILinkUpload(ctx, uploadIDOf(media.EncryptQueryParam))
	cancel()
	if err != nil || !found || up.Client != o.Client || up.AccountKey != o.AccountKey {
		return nil, "", "encrypt_query_param is not an upload of this bot's to the facade's CDN"
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("type", kind)
	_ = mw.WriteField("final", "true")
	if name != "" {
		_ = mw.WriteField("file_name", name)
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="file"`)
	h.Set("Content-Type", "application/octet-stream")
	part, _ := mw.CreatePart(h)
	_, _ = part.Write(up.Data)
	_ = mw.Close()
	return buf.Bytes(), mw.FormDataContentType(), ""
}

// replyRefusal reads a reply API refusal's code ("internal" when it has none) and message.
func replyRefusal(body []byte) (code, message string) {
	var eb replyapi.ErrorBody
	if json.Unmarshal(body, &eb) != nil || eb.Error.Code == "" {
		return "internal", ""
	}
	return eb.Error.Code, eb.Error.Message
}

// replyCode is a reply API refusal's code.
func replyCode(body []byte) string {
	code, _ := replyRefusal(body)
	return code
}

func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return s != ""
}

type getConfigRequest struct {
	ILinkUserID  string `json:"ilink_user_id"`
	ContextToken string `json:"context_token"`
}

// getConfig answers the typing ticket of a user: the facade's own, naming the user.
func (f *Facade) getConfig(c *call) {
	var req getConfigRequest
	if err := json.Unmarshal(c.body, &req); err != nil {
		f.refuse(c.w, c.log, c.endpoint, CodeInvalidRequest, "body does not decode", invalidArgs())
		return
	}
	if req.ILinkUserID == "" || len(req.ILinkUserID) > 256 {
		// iLink's own answer to a missing ilink_user_id.
		f.refuse(c.w, c.log, c.endpoint, CodeInvalidRequest, "no ilink_user_id", map[string]any{"ret": -2, "errcode": 0, "errmsg": "ilink_user_id required"})
		return
	}
	c.ok(f, map[string]any{"ret": 0, "typing_ticket": base64.StdEncoding.EncodeToString([]byte("ilkt:" + req.ILinkUserID))})
}

type sendTypingRequest struct {
	ILinkUserID  string `json:"ilink_user_id"`
	TypingTicket string `json:"typing_ticket"`
	Status       int    `json:"status"`
}

// sendTyping shows or cancels "typing" in the user's conversation with the bot, through
// the reply API under the latest offer of the user's messages. Like iLink, it answers
// ret 0 whether or not the indicator could be shown.
func (f *Facade) sendTyping(c *call) {
	var req sendTypingRequest
	if err := json.Unmarshal(c.body, &req); err != nil || req.ILinkUserID == "" || (req.Status != 1 && req.Status != 2) {
		f.refuse(c.w, c.log, c.endpoint, CodeInvalidRequest, "ilink_user_id and a status of 1 or 2 are required", invalidArgs())
		return
	}
	ctx, cancel := f.storeContext(c.r.Context())
	o, found, err := f.cfg.Store.LatestILinkClientOffer(ctx, c.caller.Client, c.caller.AccountKey, req.ILinkUserID)
	cancel()
	switch {
	case store.CodeOf(err) == vocab.CodeInvalidInput:
		f.refuse(c.w, c.log, c.endpoint, CodeInvalidRequest, "ilink_user_id malformed", invalidArgs())
		return
	case err != nil:
		f.storeFailed(c.w, c.log, c.endpoint, err)
		return
	case !found:
		c.log.Info("typing for a user with no message; nothing shown")
		c.ok(f, map[string]any{"ret": 0})
		return
	}
	status := "typing"
	if req.Status == 2 {
		status = "cancel"
	}
	body, _ := json.Marshal(replyapi.TypingRequest{Status: status})
	ans, err := replyapi.InProcess(c.r.Context(), f.cfg.Replies, http.MethodPost, "/v1/typing", o.Token, "", "application/json", body)
	if err != nil || ans.Status >= 300 {
		c.log.Info("typing not shown", "code", replyCode(ans.Body))
	}
	c.ok(f, map[string]any{"ret": 0})
}

// notify answers msg/notifystart and msg/notifystop as iLink does.
func (f *Facade) notify(c *call) {
	c.ok(f, map[string]any{"ret": 0, "errmsg": ""})
}

// attachment fetches an inbound attachment's bytes through the reply API.
func (f *Facade) attachment(ctx context.Context, o store.ILinkOffer, index int) ([]byte, int, error) {
	ans, err := replyapi.InProcess(ctx, f.cfg.Replies, http.MethodGet, wfapi.AttachmentPath(o.MessageKey, index), o.Token, "", "", nil)
	if err != nil {
		return nil, 0, err
	}
	return ans.Body, ans.Status, nil
}
