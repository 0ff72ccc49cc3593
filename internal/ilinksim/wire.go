package ilinksim

// The wire types of this file mirror package ilink's on purpose: the simulator is held to
// the protocol (docs/simulator.md) independently of the client, so that a client bug is
// not also the simulator's. The two are written separately and must not share code.

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"
)

// wireID is an id written either as a decimal JSON string (the protocol
// doc's type for item msg_id and ref_msg.svr_id) or as a JSON number, always
// from the uint64 digits, never through a float.
type wireID struct {
	v       uint64
	numeric bool
}

func (w wireID) MarshalJSON() ([]byte, error) {
	s := strconv.FormatUint(w.v, 10)
	if w.numeric {
		return []byte(s), nil
	}
	return []byte(`"` + s + `"`), nil
}

// Inbound WeixinMessage, as getupdates hands it out (docs/simulator.md#what-it-simulates),
// marshalled only.
type wireMessage struct {
	Seq          uint64     `json:"seq"`
	MessageID    uint64     `json:"message_id,omitempty"`
	FromUserID   string     `json:"from_user_id"`
	ToUserID     string     `json:"to_user_id"`
	ClientID     string     `json:"client_id"`
	CreateTimeMS int64      `json:"create_time_ms"`
	UpdateTimeMS int64      `json:"update_time_ms"`
	SessionID    string     `json:"session_id"`
	GroupID      string     `json:"group_id,omitempty"`
	MessageType  int        `json:"message_type"`
	MessageState int        `json:"message_state"`
	ItemList     []wireItem `json:"item_list"`
	ContextToken string     `json:"context_token"`
}

type wireItem struct {
	Type         int            `json:"type"`
	CreateTimeMS int64          `json:"create_time_ms,omitempty"`
	UpdateTimeMS int64          `json:"update_time_ms,omitempty"`
	IsCompleted  bool           `json:"is_completed,omitempty"`
	MsgID        *wireID        `json:"msg_id,omitempty"`
	RefMsg       *wireRef       `json:"ref_msg,omitempty"`
	TextItem     *wireText      `json:"text_item,omitempty"`
	ImageItem    *wireImageItem `json:"image_item,omitempty"`
	VoiceItem    *wireVoiceItem `json:"voice_item,omitempty"`
	FileItem     *wireFileItem  `json:"file_item,omitempty"`
	VideoItem    *wireVideoItem `json:"video_item,omitempty"`
}

type wireText struct {
	Text string `json:"text"`
}

type wireRef struct {
	Title       string       `json:"title,omitempty"`
	MessageItem *wireItem    `json:"message_item,omitempty"`
	SvrID       *wireID      `json:"svr_id,omitempty"`
	PartialText *PartialText `json:"partial_text,omitempty"`
}

type wireMedia struct {
	EncryptQueryParam string `json:"encrypt_query_param"`
	AESKey            string `json:"aes_key,omitempty"`
	EncryptType       int    `json:"encrypt_type"`
	FullURL           string `json:"full_url,omitempty"`
}

type wireImageItem struct {
	Media   *wireMedia `json:"media"`
	AESKey  string     `json:"aeskey,omitempty"`
	MidSize int        `json:"mid_size"`
	HDSize  int        `json:"hd_size,omitempty"`
}

type wireVoiceItem struct {
	Media         *wireMedia `json:"media"`
	EncodeType    int        `json:"encode_type"`
	BitsPerSample int        `json:"bits_per_sample"`
	SampleRate    int        `json:"sample_rate"`
	Playtime      int        `json:"playtime"`
	Text          string     `json:"text,omitempty"`
}

type wireFileItem struct {
	Media    *wireMedia `json:"media"`
	FileName string     `json:"file_name"`
	MD5      string     `json:"md5"`
	Len      string     `json:"len"`
}

type wireVideoItem struct {
	Media      *wireMedia `json:"media"`
	VideoSize  int        `json:"video_size"`
	PlayLength int        `json:"play_length"`
	VideoMD5   string     `json:"video_md5"`
}

// Item types: the type of an iLink message item (text, image, voice, file, video, and the
// tool items a bot must not send).
const (
	itemText       = 1
	itemImage      = 2
	itemVoice      = 3
	itemFile       = 4
	itemVideo      = 5
	itemToolStart  = 11
	itemToolResult = 12
)

func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go >= 1.24)
	return b
}

func randHex(n int) string { return hex.EncodeToString(randBytes(n)) }

// newBotID returns 12 hex characters + "@im.bot".
func newBotID() string { return randHex(6) + "@im.bot" }

// newBotToken returns "<bot id>:<long hex>".
func newBotToken(botID string) string { return botID + ":" + randHex(32) }

// newUserID returns an openid-like id of 28 characters + "@im.wechat".
func newUserID() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	b := randBytes(23)
	var sb strings.Builder
	sb.WriteString("o9cq8")
	for _, c := range b {
		sb.WriteByte(alphabet[int(c)%len(alphabet)])
	}
	sb.WriteString("@im.wechat")
	return sb.String()
}

// newContextToken looks like the observed "CK…" base64 protobuf tokens.
func newContextToken() string {
	b := append([]byte{0x08, 0xA0 | randBytes(1)[0]&0x0f}, randBytes(46)...)
	return base64.StdEncoding.EncodeToString(b)
}

// newCursor looks like the observed "Ck…" get_updates_buf values and
// encodes the bot's delivery offset (the simulator never decodes it).
func newCursor(nonce []byte, offset uint64) string {
	b := make([]byte, 0, 66)
	b = append(b, 0x0a, 0x40)
	b = append(b, nonce...)
	b = strconv.AppendUint(b, offset, 16)
	for len(b) < 66 {
		b = append(b, randBytes(1)[0])
	}
	return base64.StdEncoding.EncodeToString(b[:66])
}

// newTypingTicket looks like the observed "AARTBK8F…" tickets.
func newTypingTicket() string {
	b := append([]byte{0x00, 0x04, 0x53, 0x04, 0xaf, 0x05}, randBytes(42)...)
	return base64.StdEncoding.EncodeToString(b)
}

// newOpaqueParam is an opaque CDN/upload parameter (URL-safe enough once escaped).
func newOpaqueParam() string { return base64.StdEncoding.EncodeToString(randBytes(60)) }
