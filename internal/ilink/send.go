package ilink

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"time"
)

// SendResult is a successful sendmessage answer: the message was accepted by
// the API (which does not mean delivered).
type SendResult struct {
	// ClientID is the client_id the message was sent with.
	ClientID string
	// MessageID is the server's message_id, or zero when the answer had none.
	MessageID ID
}

// SendOptions addresses one outbound message.
type SendOptions struct {
	// ToUserID is the recipient (…@im.wechat). Required.
	ToUserID string
	// ContextToken is the latest context token received from the recipient;
	// left out of the request when empty.
	ContextToken Secret
	// ClientID is the request's client_id. Empty means a new one from
	// NewClientID; set it to track the attempt (for example when the outcome
	// turns out unknown).
	ClientID string
	// RunID optionally links tool-progress messages to one agent run.
	RunID string
}

// NewClientID returns a fresh client_id: "<prefix>:<epoch ms>-<8 hex>".
func (c *Client) NewClientID() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥1.24)
	return c.cfg.ClientIDPrefix + ":" + strconv.FormatInt(time.Now().UnixMilli(), 10) + "-" + hex.EncodeToString(b[:])
}

// SendItem sends one message carrying exactly one item (the only shape the
// official plugin sends): from_user_id "", message_type BOT, message_state
// FINISH. Success means accepted by the API, not delivered.
func (c *Client) SendItem(ctx context.Context, opts SendOptions, item Item) (*SendResult, error) {
	if opts.ToUserID == "" {
		return nil, &Error{Code: CodeInvalidInput, Op: opSendMessage, Err: errors.New("recipient is empty")}
	}
	if item.Type == ItemNone {
		return nil, &Error{Code: CodeInvalidInput, Op: opSendMessage, Err: errors.New("item has no type")}
	}
	clientID := opts.ClientID
	if clientID == "" {
		clientID = c.NewClientID()
	}
	msg := Message{
		FromUserID:   "",
		ToUserID:     opts.ToUserID,
		ClientID:     clientID,
		MessageType:  MessageTypeBot,
		MessageState: MessageStateFinish,
		ItemList:     []Item{item},
		ContextToken: opts.ContextToken,
		RunID:        opts.RunID,
	}
	resp, err := c.post(ctx, opSendMessage, pathSendMessage, c.cfg.SendTimeout,
		sendMessageRequest{Msg: msg, BaseInfo: c.baseInfo})
	if err != nil {
		return nil, err
	}
	id, err := parseSend(bytes.NewReader(resp.body), c.cfg.MaxBodyBytes)
	if err != nil {
		return nil, err
	}
	return &SendResult{ClientID: clientID, MessageID: id}, nil
}

// errNoMedia is returned when a media send is given no uploaded media.
var errNoMedia = &Error{Code: CodeInvalidInput, Op: opSendMessage, Err: errors.New("no uploaded media")}

// SendText sends one text message.
func (c *Client) SendText(ctx context.Context, opts SendOptions, text string) (*SendResult, error) {
	return c.SendItem(ctx, opts, NewTextItem(text))
}

// SendImage sends an uploaded image (upload it with MediaImage).
func (c *Client) SendImage(ctx context.Context, opts SendOptions, m *UploadedMedia) (*SendResult, error) {
	if m == nil {
		return nil, errNoMedia
	}
	return c.SendItem(ctx, opts, m.ImageItem())
}

// SendFile sends an uploaded file (upload it with MediaFile) under fileName.
func (c *Client) SendFile(ctx context.Context, opts SendOptions, m *UploadedMedia, fileName string) (*SendResult, error) {
	if m == nil {
		return nil, errNoMedia
	}
	return c.SendItem(ctx, opts, m.FileItem(fileName))
}

// SendVideo sends an uploaded video (upload it with MediaVideo).
func (c *Client) SendVideo(ctx context.Context, opts SendOptions, m *UploadedMedia) (*SendResult, error) {
	if m == nil {
		return nil, errNoMedia
	}
	return c.SendItem(ctx, opts, m.VideoItem())
}

// SendWithCaption sends caption as its own text message first (when not
// empty) and then item, as the official plugin does: two requests, two reply
// slots. When opts.ClientID is set, the caption uses opts.ClientID+"-caption".
// It stops at the first failure and returns the results of the sends that
// succeeded.
func (c *Client) SendWithCaption(ctx context.Context, opts SendOptions, caption string, item Item) ([]SendResult, error) {
	var out []SendResult
	if caption != "" {
		co := opts
		if co.ClientID != "" {
			co.ClientID += "-caption"
		}
		r, err := c.SendText(ctx, co, caption)
		if err != nil {
			return out, err
		}
		out = append(out, *r)
	}
	r, err := c.SendItem(ctx, opts, item)
	if err != nil {
		return out, err
	}
	return append(out, *r), nil
}

// NewTextItem returns a text item.
func NewTextItem(text string) Item {
	return Item{Type: ItemText, TextItem: &TextItem{Text: text}}
}
