package ilinksim

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ErrConfig is wrapped by Config.Validate errors.
var ErrConfig = errors.New("ilinksim: invalid config")

// Duration is a time.Duration that travels in control-API JSON as a Go
// duration string such as "1.5s" or "24h". When decoding it also accepts a
// JSON number of milliseconds.
type Duration time.Duration

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a Go duration string or a number of milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("duration: %w", err)
		}
		if s == "" {
			*d = 0
			return nil
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	if string(b) == "null" {
		return nil
	}
	ms, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("duration %s: want a string like \"5s\" or integer milliseconds: %w", b, err)
	}
	*d = Duration(time.Duration(ms) * time.Millisecond)
	return nil
}

// BotInfo describes one bot account: what a QR confirmation hands out.
type BotInfo struct {
	// BotID is the ilink_bot_id (12 hex characters + "@im.bot").
	BotID string `json:"ilink_bot_id"`
	// Token is the bot_token used as "Authorization: Bearer <token>".
	Token string `json:"bot_token"`
	// Owner is the ilink_user_id of the WeChat user who bound the bot.
	Owner string `json:"ilink_user_id"`
	// BaseURL is the API base for the bot's calls.
	BaseURL string `json:"baseurl"`
	// Dead is true once the token answers errcode -14 (killed or re-bound).
	Dead bool `json:"dead"`
}

// CreateBotRequest asks the control API for a bot without a QR login.
type CreateBotRequest struct {
	// Owner is the owning user's ilink_user_id; "" generates one.
	Owner string `json:"owner,omitempty"`
	// KillPrevious kills the owner's other live bots, as a fresh QR binding does.
	KillPrevious bool `json:"kill_previous,omitempty"`
}

// PeerState is the simulator's bookkeeping for one (bot, peer) pair.
type PeerState struct {
	UserID             string    `json:"user_id"`
	LastInboundAt      time.Time `json:"last_inbound_at"`
	SendsSinceInbound  int       `json:"sends_since_inbound"`
	LatestContextToken string    `json:"latest_context_token"`
	SessionID          string    `json:"session_id"`
	TypingTicket       string    `json:"typing_ticket,omitempty"`
	// Typing is the last sendtyping status: 0 none, 1 typing, 2 cancelled.
	Typing int `json:"typing"`
}

// BotState is a bot with its live bookkeeping.
type BotState struct {
	BotInfo
	// Online is true between msg/notifystart and msg/notifystop.
	Online bool `json:"online"`
	// NotifyStarted is true once msg/notifystart was called.
	NotifyStarted bool `json:"notify_started"`
	// PenaltyUntil is the end of the throttle penalty (zero when none).
	PenaltyUntil time.Time `json:"penalty_until"`
	// Queued counts inbound messages not handed out yet (including delayed duplicates).
	Queued int `json:"queued"`
	// Pollers counts getupdates calls currently held open for this bot.
	Pollers int `json:"pollers"`
	// Outstanding counts getupdates calls received and not answered yet (held, or being
	// answered), their client not gone.
	Outstanding int `json:"getupdates_outstanding"`
	// Overlaps counts getupdates calls that arrived while another of this bot was
	// outstanding: iLink expects one outstanding getupdates per bot
	// (docs/simulator.md#what-it-simulates). Each is also a problem of its recorded request.
	Overlaps int `json:"getupdates_overlaps"`
	// OverlapsAt are the real times at which the overlapping calls arrived (the newest
	// 100), so that a test can tell when its pollers overlapped.
	OverlapsAt []time.Time `json:"getupdates_overlaps_at,omitempty"`
	Peers      []PeerState `json:"peers"`
}

// Stats summarises the simulator's state in one read (GET /_sim/stats), for watching many
// bots at once.
type Stats struct {
	// Bots counts every bot; LiveBots those whose token still works.
	Bots     int `json:"bots"`
	LiveBots int `json:"live_bots"`
	// HeldGetUpdates counts the getupdates calls held open now, over all bots.
	HeldGetUpdates int `json:"held_getupdates"`
	// BotsHeld counts the bots with at least one getupdates call held open now.
	BotsHeld int `json:"bots_held"`
	// Queued counts inbound messages not handed out yet (all bots).
	Queued int `json:"queued"`
	// Sent is the length of the send log (every sendmessage call, accepted or refused).
	Sent int `json:"sent"`
	// GetUpdatesOverlaps counts, over all bots, the getupdates calls that arrived while
	// another of the same bot was outstanding (BotState.Overlaps); LastGetUpdatesOverlap
	// is the real time of the latest (zero: none).
	GetUpdatesOverlaps    int       `json:"getupdates_overlaps"`
	LastGetUpdatesOverlap time.Time `json:"last_getupdates_overlap,omitzero"`
}

// Key encodings for inbound media (InjectRequest.KeyEncoding).
const (
	// KeyRawBase64 puts base64 of the 16 raw key bytes in media.aes_key (typical for images).
	KeyRawBase64 = "raw-base64"
	// KeyHexBase64 puts base64 of the 32-character hex key in media.aes_key (typical for file, voice, video).
	KeyHexBase64 = "hex-base64"
	// KeyImageHex puts the 32-character hex key in image_item.aeskey and leaves media.aes_key out (images only).
	KeyImageHex = "aeskey-hex"
	// KeyNone stores the object unencrypted and sends no key (images only).
	KeyNone = "none"
)

// Message kinds for InjectRequest.Kind.
const (
	KindText  = "text"
	KindImage = "image"
	KindFile  = "file"
	KindVoice = "voice"
	KindVideo = "video"
)

// Duplicate modes for DuplicateSpec.Mode.
const (
	// DupSame re-queues an identical copy.
	DupSame = "same"
	// DupNewToken re-queues a copy with a new context_token.
	DupNewToken = "new_token"
	// DupNoID re-queues a copy without message_id and item msg_id.
	DupNoID = "no_id"
)

// RefSpec describes a quote (ref_msg) on an injected message.
type RefSpec struct {
	// SvrID is the quoted message's id (ref_msg.svr_id); 0 leaves it out.
	SvrID uint64 `json:"svr_id,omitempty"`
	// Title is ref_msg.title.
	Title string `json:"title,omitempty"`
	// Text, when set, includes the quoted content as ref_msg.message_item (a TEXT item).
	Text string `json:"text,omitempty"`
	// PartialText is ref_msg.partial_text.
	PartialText *PartialText `json:"partial_text,omitempty"`
}

// PartialText is ref_msg.partial_text: the user quoted part of a message.
type PartialText struct {
	Start      string `json:"start"`
	End        string `json:"end"`
	StartIndex int    `json:"startindex"`
	EndIndex   int    `json:"endindex"`
	QuoteMD5   string `json:"quotemd5"`
}

// DuplicateSpec asks for a duplicate delivery of an injected message.
type DuplicateSpec struct {
	// Mode is DupSame, DupNewToken or DupNoID.
	Mode string `json:"mode"`
	// Delay (sim) hides the copy until the clock has advanced this much.
	Delay Duration `json:"delay,omitempty"`
}

// InjectRequest is an inbound user message to queue for a bot.
type InjectRequest struct {
	// From is the sender's ilink_user_id; "" means the bot's owner.
	From string `json:"from,omitempty"`
	// Kind is KindText (default), KindImage, KindFile, KindVoice or KindVideo.
	Kind string `json:"kind,omitempty"`
	// Text is the text of a text message, or the transcript of a voice message.
	Text string `json:"text,omitempty"`
	// Data is the media plaintext (base64 in JSON); empty generates 1000 bytes.
	Data []byte `json:"data,omitempty"`
	// FileName is file_item.file_name (default "file.bin").
	FileName string `json:"file_name,omitempty"`
	// KeyEncoding is one of the Key* constants; "" means KeyRawBase64 for
	// images and KeyHexBase64 for the other media.
	KeyEncoding string `json:"key_encoding,omitempty"`
	// FullURL also sets media.full_url (a complete CDN download URL).
	FullURL bool `json:"full_url,omitempty"`
	// MessageID is the message_id to use; 0 assigns the next server id.
	MessageID uint64 `json:"message_id,omitempty"`
	// NoMessageID leaves message_id (and item msg_id) out.
	NoMessageID bool `json:"no_message_id,omitempty"`
	// Ref adds a quote (ref_msg) to the first item.
	Ref *RefSpec `json:"ref,omitempty"`
	// Duplicates queues extra copies of the message.
	Duplicates []DuplicateSpec `json:"duplicates,omitempty"`
}

// MediaRef tells a test where an injected media object lives.
type MediaRef struct {
	EncryptQueryParam string `json:"encrypt_query_param"`
	// AESKeyHex is the raw key as 32 hex characters ("" for KeyNone).
	AESKeyHex string `json:"aes_key_hex,omitempty"`
	// AESKey is media.aes_key as sent on the wire ("" when left out).
	AESKey string `json:"aes_key,omitempty"`
	// FullURL is media.full_url when set.
	FullURL        string `json:"full_url,omitempty"`
	CiphertextSize int    `json:"ciphertext_size"`
	PlaintextMD5   string `json:"plaintext_md5"`
}

// Injected is what the simulator queued for an InjectRequest.
type Injected struct {
	// MessageID is the message_id (0 when left out).
	MessageID    uint64 `json:"message_id"`
	Seq          uint64 `json:"seq"`
	ContextToken string `json:"context_token"`
	ClientID     string `json:"client_id"`
	From         string `json:"from"`
	// Media is set for media kinds.
	Media *MediaRef `json:"media,omitempty"`
	// Message is the WeixinMessage JSON exactly as getupdates will return it.
	Message json.RawMessage `json:"message"`
	// Duplicates describes the queued copies, in order.
	Duplicates []Injected `json:"duplicates,omitempty"`
}

// DuplicateRequest re-queues an earlier inbound message (looked up by message_id).
type DuplicateRequest struct {
	MessageID uint64 `json:"message_id"`
	DuplicateSpec
}

// Send outcomes and reasons in SentMessage.
const (
	OutcomeAccepted = "accepted"
	OutcomeRefused  = "refused"

	ReasonQuota        = "quota"         // reply quota used up since the last inbound message
	ReasonWindow       = "window"        // reply window since the last inbound message has passed
	ReasonNoInbound    = "no_inbound"    // the peer never sent the bot a message
	ReasonThrottle     = "throttle"      // burst detector fired or penalty running
	ReasonTextTooLong  = "text_too_long" // text_item.text over MaxTextBytes
	ReasonStaleToken   = "stale_token"   // bot token killed or unknown (-14)
	ReasonIdle         = "idle"          // peer idle for IdleStaleAfter (-14)
	ReasonContextToken = "context_token" // context_token missing or not acceptable under ContextTokenMode
	ReasonInvalid      = "invalid"       // malformed request (not exactly one item, missing fields, reused GENERATING client_id, ...)
)

// SentMessage is one sendmessage call as the simulator judged it.
type SentMessage struct {
	// Index is the position in the simulator's send log (from 1).
	Index        int       `json:"index"`
	BotID        string    `json:"bot_id"`
	ToUserID     string    `json:"to_user_id"`
	ClientID     string    `json:"client_id"`
	ContextToken string    `json:"context_token"`
	MessageState int       `json:"message_state"`
	ItemTypes    []int     `json:"item_types"`
	Text         string    `json:"text,omitempty"`
	At           time.Time `json:"at"`
	// Received is the real time (not the sim clock) at which the simulator judged the
	// call, for measuring delivery latency.
	Received time.Time `json:"received"`
	// Outcome is OutcomeAccepted or OutcomeRefused.
	Outcome string `json:"outcome"`
	// Reason is one of the Reason* constants when refused.
	Reason string `json:"reason,omitempty"`
	// Rendered tells whether the user would see the message (accepted only).
	Rendered bool `json:"rendered"`
	// RenderNote explains why an accepted message would not render.
	RenderNote string `json:"render_note,omitempty"`
	// MessageID is the server id issued on acceptance.
	MessageID uint64 `json:"message_id,omitempty"`
	// Response is the JSON body the simulator answered.
	Response json.RawMessage `json:"response"`
	// Msg is the request's msg object as received.
	Msg json.RawMessage `json:"msg,omitempty"`
}

// QR login statuses (get_qrcode_status "status").
const (
	QRWait           = "wait"
	QRScaned         = "scaned"
	QRNeedVerifyCode = "need_verifycode"
	QRVerifyBlocked  = "verify_code_blocked"
	QRExpired        = "expired"
	QRRedirect       = "scaned_but_redirect"
	QRBindedRedirect = "binded_redirect"
	QRConfirmed      = "confirmed"
)

// QRInfo is the simulator's view of one QR login session.
type QRInfo struct {
	QRCode          string    `json:"qrcode"`
	ImgContent      string    `json:"qrcode_img_content"`
	CreatedAt       time.Time `json:"created_at"`
	ExpiresAt       time.Time `json:"expires_at"`
	Status          string    `json:"status"`
	UserID          string    `json:"user_id,omitempty"`
	VerifyCode      string    `json:"verify_code,omitempty"`
	WrongCodes      int       `json:"wrong_codes"`
	RedirectHost    string    `json:"redirect_host,omitempty"`
	RedirectPending bool      `json:"redirect_pending"`
	LocalTokens     int       `json:"local_tokens"`
	// Bot is set once confirmed (new bot) or binded_redirect (existing bot).
	Bot *BotInfo `json:"bot,omitempty"`
}

// QRAction is the body of the /_sim/qr/* control calls.
type QRAction struct {
	// QRCode names the session; "" means the newest one.
	QRCode string `json:"qrcode,omitempty"`
	// UserID is the scanning user for scan (and for redirect/verify when not
	// scanned yet); "" generates a new user.
	UserID string `json:"user_id,omitempty"`
	// Code is the verification code for verify; "" generates a 6-digit one.
	Code string `json:"code,omitempty"`
	// Host is the redirect_host for redirect; "" uses Config.RedirectHost or the poll's Host.
	Host string `json:"host,omitempty"`
}

// Fault kinds.
const (
	// FaultStatus answers HTTP Status (default 500) with Body.
	FaultStatus = "status"
	// FaultDelay waits Delay (real time) and then serves the request normally.
	FaultDelay = "delay"
	// FaultDrop reads the request, then closes the connection without answering.
	FaultDrop = "drop"
	// FaultStale answers the stale-token body (errcode -14).
	FaultStale = "stale"
	// FaultInvalidJSON answers HTTP 200 with a truncated JSON body.
	FaultInvalidJSON = "invalid_json"
	// FaultOversized answers HTTP 200 with a valid JSON body of Size bytes (default 8 MiB).
	FaultOversized = "oversized"
	// FaultBody answers HTTP Status (default 200) with Body verbatim.
	FaultBody = "body"
)

// Fault makes the next Count requests to Endpoint misbehave.
type Fault struct {
	// Endpoint is the path after /ilink/bot/ ("getupdates", "sendmessage",
	// "msg/notifystart", "get_bot_qrcode", ...), "c2c/upload", "c2c/download", or "*".
	Endpoint string `json:"endpoint"`
	// Kind is one of the Fault* constants.
	Kind string `json:"kind"`
	// Count is how many requests are affected (default 1).
	Count  int      `json:"count,omitempty"`
	Status int      `json:"status,omitempty"`
	Delay  Duration `json:"delay,omitempty"`
	Body   string   `json:"body,omitempty"`
	Size   int      `json:"size,omitempty"`
}

// RecordedRequest is one request the simulator received (control calls excluded).
type RecordedRequest struct {
	Seq        int                 `json:"seq"`
	Received   time.Time           `json:"received"`
	SimTime    time.Time           `json:"sim_time"`
	Method     string              `json:"method"`
	Path       string              `json:"path"`
	RawQuery   string              `json:"raw_query,omitempty"`
	Host       string              `json:"host"`
	RemoteAddr string              `json:"remote_addr"`
	Endpoint   string              `json:"endpoint"`
	Header     map[string][]string `json:"header"`
	// Body is the raw request body (base64 in JSON), cut at MaxBodyBytes
	// (CDN uploads can be longer; BodyLen is the full length).
	Body    []byte `json:"body"`
	BodyLen int64  `json:"body_len"`
	// Problems lists deviations from what the official plugin sends.
	Problems []string `json:"problems,omitempty"`
	// Fault names the fault applied, if any.
	Fault string `json:"fault,omitempty"`
}

// CDNObject is one object stored in the simulated CDN.
type CDNObject struct {
	EncryptQueryParam string `json:"encrypt_query_param"`
	// Ciphertext is the stored bytes, exactly as served by /c2c/download.
	Ciphertext []byte `json:"ciphertext"`
	// Plaintext is the decrypted content when the key is known and valid.
	Plaintext []byte `json:"plaintext,omitempty"`
	AESKeyHex string `json:"aes_key_hex,omitempty"`
	FileKey   string `json:"filekey,omitempty"`
	MediaType int    `json:"media_type,omitempty"`
	ToUserID  string `json:"to_user_id,omitempty"`
	BotID     string `json:"bot_id,omitempty"`
	// Source is "upload" (bot upload) or "inject" (inbound media).
	Source string `json:"source"`
}

// ClockInfo is the sim clock.
type ClockInfo struct {
	Now   time.Time `json:"now"`
	NowMS int64     `json:"now_ms"`
}

// AdvanceRequest moves the sim clock forward.
type AdvanceRequest struct {
	By Duration `json:"by"`
}

func (d Duration) std() time.Duration { return time.Duration(d) }
