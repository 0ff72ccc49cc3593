package ilink

// ItemType is MessageItem.type.
type ItemType int

// Item types (MessageItem.type).
const (
	ItemNone           ItemType = 0
	ItemText           ItemType = 1
	ItemImage          ItemType = 2
	ItemVoice          ItemType = 3
	ItemFile           ItemType = 4
	ItemVideo          ItemType = 5
	ItemToolCallStart  ItemType = 11
	ItemToolCallResult ItemType = 12
)

// MediaType is getuploadurl's media_type. It is a different enum from
// [ItemType].
type MediaType int

// Upload media types (getuploadurl.media_type).
const (
	MediaImage MediaType = 1
	MediaVideo MediaType = 2
	MediaFile  MediaType = 3
	MediaVoice MediaType = 4
)

// MessageType is WeixinMessage.message_type.
type MessageType int

// Message types.
const (
	MessageTypeNone MessageType = 0
	MessageTypeUser MessageType = 1
	MessageTypeBot  MessageType = 2
)

// MessageState is WeixinMessage.message_state.
type MessageState int

// Message states. Bots send only MessageStateFinish.
const (
	MessageStateNew        MessageState = 0
	MessageStateGenerating MessageState = 1
	MessageStateFinish     MessageState = 2
)

// EncryptType is CDNMedia.encrypt_type.
type EncryptType int

// Encrypt types; outbound media uses EncryptTypePacked.
const (
	EncryptTypeFileID EncryptType = 0
	EncryptTypePacked EncryptType = 1
)

// TypingStatus is sendtyping's status.
type TypingStatus int

// Typing statuses.
const (
	TypingStart TypingStatus = 1
	TypingStop  TypingStatus = 2
)

// BaseInfo is the base_info envelope of every authenticated POST body.
type BaseInfo struct {
	ChannelVersion string `json:"channel_version"`
	BotAgent       string `json:"bot_agent,omitempty"`
}

// Message is a WeixinMessage, inbound (from getupdates) or outbound (in
// sendmessage).
type Message struct {
	Seq          int64        `json:"seq,omitempty"`
	MessageID    ID           `json:"message_id,omitempty"`
	FromUserID   string       `json:"from_user_id"`
	ToUserID     string       `json:"to_user_id"`
	ClientID     string       `json:"client_id,omitempty"`
	CreateTimeMs int64        `json:"create_time_ms,omitempty"`
	UpdateTimeMs int64        `json:"update_time_ms,omitempty"`
	DeleteTimeMs int64        `json:"delete_time_ms,omitempty"`
	SessionID    string       `json:"session_id,omitempty"`
	GroupID      string       `json:"group_id,omitempty"`
	MessageType  MessageType  `json:"message_type,omitempty"`
	MessageState MessageState `json:"message_state,omitempty"`
	ItemList     []Item       `json:"item_list,omitempty"`
	ContextToken Secret       `json:"context_token,omitempty"`
	RunID        string       `json:"run_id,omitempty"`
}

// ID returns the message id: message_id, or else the first item's msg_id
// (the official plugin's rule). Zero means none.
func (m *Message) ID() uint64 {
	if m.MessageID != 0 {
		return uint64(m.MessageID)
	}
	if len(m.ItemList) > 0 {
		return uint64(m.ItemList[0].MsgID)
	}
	return 0
}

// Item is a MessageItem: one typed payload plus common fields.
type Item struct {
	Type               ItemType            `json:"type"`
	CreateTimeMs       int64               `json:"create_time_ms,omitempty"`
	UpdateTimeMs       int64               `json:"update_time_ms,omitempty"`
	IsCompleted        bool                `json:"is_completed,omitempty"`
	MsgID              StringID            `json:"msg_id,omitempty"`
	RefMsg             *RefMessage         `json:"ref_msg,omitempty"`
	TextItem           *TextItem           `json:"text_item,omitempty"`
	ImageItem          *ImageItem          `json:"image_item,omitempty"`
	VoiceItem          *VoiceItem          `json:"voice_item,omitempty"`
	FileItem           *FileItem           `json:"file_item,omitempty"`
	VideoItem          *VideoItem          `json:"video_item,omitempty"`
	ToolCallStartItem  *ToolCallStartItem  `json:"tool_call_start_item,omitempty"`
	ToolCallResultItem *ToolCallResultItem `json:"tool_call_result_item,omitempty"`
}

// TextItem is the payload of a text item.
type TextItem struct {
	Text string `json:"text"`
}

// RefMessage is a quote (ref_msg) on an item.
type RefMessage struct {
	Title       string       `json:"title,omitempty"`
	MessageItem *Item        `json:"message_item,omitempty"`
	SvrID       StringID     `json:"svr_id,omitempty"`
	PartialText *PartialText `json:"partial_text,omitempty"`
}

// PartialText describes a quote of part of a message.
type PartialText struct {
	Start      string `json:"start,omitempty"`
	End        string `json:"end,omitempty"`
	StartIndex int    `json:"startindex,omitempty"`
	EndIndex   int    `json:"endindex,omitempty"`
	QuoteMD5   string `json:"quotemd5,omitempty"`
}

// CDNMedia locates an encrypted object on the CDN.
type CDNMedia struct {
	EncryptQueryParam string      `json:"encrypt_query_param,omitempty"`
	AESKey            Secret      `json:"aes_key,omitempty"`
	EncryptType       EncryptType `json:"encrypt_type,omitempty"`
	FullURL           string      `json:"full_url,omitempty"`
}

// ImageItem is the payload of an image item. AESKey (aeskey) is the raw key
// as 32 hex characters, inbound only.
type ImageItem struct {
	Media       *CDNMedia `json:"media,omitempty"`
	ThumbMedia  *CDNMedia `json:"thumb_media,omitempty"`
	AESKey      Secret    `json:"aeskey,omitempty"`
	URL         string    `json:"url,omitempty"`
	MidSize     int64     `json:"mid_size,omitempty"`
	ThumbSize   int64     `json:"thumb_size,omitempty"`
	ThumbHeight int64     `json:"thumb_height,omitempty"`
	ThumbWidth  int64     `json:"thumb_width,omitempty"`
	HDSize      int64     `json:"hd_size,omitempty"`
}

// VoiceItem is the payload of a voice item. Text is WeChat's transcript.
type VoiceItem struct {
	Media         *CDNMedia `json:"media,omitempty"`
	EncodeType    int       `json:"encode_type,omitempty"`
	BitsPerSample int       `json:"bits_per_sample,omitempty"`
	SampleRate    int       `json:"sample_rate,omitempty"`
	Playtime      int64     `json:"playtime,omitempty"`
	Text          string    `json:"text,omitempty"`
}

// FileItem is the payload of a file item. Len is the plaintext size as a
// decimal string.
type FileItem struct {
	Media    *CDNMedia     `json:"media,omitempty"`
	FileName string        `json:"file_name,omitempty"`
	MD5      string        `json:"md5,omitempty"`
	Len      DecimalString `json:"len,omitempty"`
}

// VideoItem is the payload of a video item.
type VideoItem struct {
	Media       *CDNMedia `json:"media,omitempty"`
	VideoSize   int64     `json:"video_size,omitempty"`
	PlayLength  int64     `json:"play_length,omitempty"`
	VideoMD5    string    `json:"video_md5,omitempty"`
	ThumbMedia  *CDNMedia `json:"thumb_media,omitempty"`
	ThumbSize   int64     `json:"thumb_size,omitempty"`
	ThumbHeight int64     `json:"thumb_height,omitempty"`
	ThumbWidth  int64     `json:"thumb_width,omitempty"`
}

// ToolCallStartItem is the payload of an outbound tool-call-start item.
type ToolCallStartItem struct {
	ToolName   string `json:"tool_name,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// ToolCallResultItem is the payload of an outbound tool-call-result item.
type ToolCallResultItem struct {
	ToolName   string `json:"tool_name,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
	Status     string `json:"status,omitempty"`
}

// envelope holds the optional ret/errcode/errmsg fields every response may
// carry. A missing ret or errcode means success.
type envelope struct {
	Ret     *int   `json:"ret,omitempty"`
	Errcode *int   `json:"errcode,omitempty"`
	Errmsg  string `json:"errmsg,omitempty"`
}

func (e *envelope) env() *envelope { return e }

// enveloped is implemented by every response struct.
type enveloped interface{ env() *envelope }

// Request bodies.

type getUpdatesRequest struct {
	GetUpdatesBuf string   `json:"get_updates_buf"`
	BaseInfo      BaseInfo `json:"base_info"`
}

type sendMessageRequest struct {
	Msg      Message  `json:"msg"`
	BaseInfo BaseInfo `json:"base_info"`
}

type getUploadURLRequest struct {
	FileKey     string    `json:"filekey"`
	MediaType   MediaType `json:"media_type"`
	ToUserID    string    `json:"to_user_id"`
	RawSize     int64     `json:"rawsize"`
	RawFileMD5  string    `json:"rawfilemd5"`
	FileSize    int64     `json:"filesize"`
	NoNeedThumb bool      `json:"no_need_thumb"`
	AESKey      Secret    `json:"aeskey"`
	BaseInfo    BaseInfo  `json:"base_info"`
}

type getConfigRequest struct {
	ILinkUserID  string   `json:"ilink_user_id"`
	ContextToken Secret   `json:"context_token,omitempty"`
	BaseInfo     BaseInfo `json:"base_info"`
}

type sendTypingRequest struct {
	ILinkUserID  string       `json:"ilink_user_id"`
	TypingTicket Secret       `json:"typing_ticket"`
	Status       TypingStatus `json:"status"`
	BaseInfo     BaseInfo     `json:"base_info"`
}

type baseOnlyRequest struct {
	BaseInfo BaseInfo `json:"base_info"`
}

type getBotQRCodeRequest struct {
	LocalTokenList []Secret `json:"local_token_list"`
}

// Response bodies.

type getUpdatesResponse struct {
	envelope
	Msgs                 []Message `json:"msgs"`
	GetUpdatesBuf        string    `json:"get_updates_buf"`
	LongPollingTimeoutMs int64     `json:"longpolling_timeout_ms"`
}

type sendMessageResponse struct {
	envelope
	MessageID ID `json:"message_id"`
}

type getUploadURLResponse struct {
	envelope
	UploadParam      string `json:"upload_param"`
	ThumbUploadParam string `json:"thumb_upload_param"`
	UploadFullURL    string `json:"upload_full_url"`
}

type getConfigResponse struct {
	envelope
	TypingTicket Secret `json:"typing_ticket"`
}

type plainResponse struct {
	envelope
}

type getBotQRCodeResponse struct {
	envelope
	QRCode           string `json:"qrcode"`
	QRCodeImgContent string `json:"qrcode_img_content"`
}

type getQRCodeStatusResponse struct {
	envelope
	Status       string `json:"status"`
	RedirectHost string `json:"redirect_host"`
	BotToken     Secret `json:"bot_token"`
	ILinkBotID   string `json:"ilink_bot_id"`
	BaseURL      string `json:"baseurl"`
	ILinkUserID  string `json:"ilink_user_id"`
}
