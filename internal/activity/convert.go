package activity

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// Bounds of a converted entry, below the store's validation limits so that one odd
// message never fails a whole page.
const (
	maxSummaryBytes   = 60 * 1024
	maxQuoteBytes     = 2 * 1024
	maxNameBytes      = 1024
	maxAttachments    = 64
	maxContextToken   = 8192
	maxLocatorBytes   = 8192
	derivedIDPrefix   = "nomsg:"
	derivedIDHexChars = 32
)

// Reasons a message is left out of a page.
var (
	// errBotMessage: the bot's own message (message_type 2) echoed back.
	errBotMessage = errors.New("bot message")
	// errNoContextToken: without a context token the message cannot be replied to, and
	// the store refuses such an entry (invalid_input), so it is dropped from the page.
	errNoContextToken = errors.New("message has no usable context token")
)

// ImageLocator is what the sealed locator of an inbound image (or file, voice or video)
// holds: the item's CDN media reference and the key that decrypts it (everything a later
// download needs). It is a secret: it is only ever stored sealed.
type ImageLocator struct {
	// Media is the item's CDN media reference (encrypt_query_param, aes_key, full_url).
	Media ilink.CDNMedia `json:"media"`
	// AESKey is image_item.aeskey (32 hex characters) when the message carried it.
	AESKey ilink.Secret `json:"aeskey,omitempty"`
	// ItemType is the item's type (0: an image, whose locator is written without it).
	ItemType ilink.ItemType `json:"item_type,omitempty"`
}

// OpenImageLocator decodes a media locator (as returned by store.GetAttachment) into an
// inbound item that ilink.Client.DownloadItem can download and decrypt.
func OpenImageLocator(locator sealing.Secret) (*ilink.Item, error) {
	var l ImageLocator
	if err := json.Unmarshal([]byte(locator.Reveal()), &l); err != nil {
		return nil, errors.New("activities: media locator does not decode")
	}
	media := l.Media
	switch l.ItemType {
	case ilink.ItemFile:
		return &ilink.Item{Type: ilink.ItemFile, FileItem: &ilink.FileItem{Media: &media}}, nil
	case ilink.ItemVoice:
		return &ilink.Item{Type: ilink.ItemVoice, VoiceItem: &ilink.VoiceItem{Media: &media}}, nil
	case ilink.ItemVideo:
		return &ilink.Item{Type: ilink.ItemVideo, VideoItem: &ilink.VideoItem{Media: &media}}, nil
	}
	return &ilink.Item{Type: ilink.ItemImage, ImageItem: &ilink.ImageItem{Media: &media, AESKey: l.AESKey}}, nil
}

// convertMessage is the one conversion of an inbound iLink message into a page entry.
// cursor is the cursor the page was requested with; received is when the page arrived
// (the sent-at of a message without create_time_ms). It returns errBotMessage or
// errNoContextToken for a message that must be left out of the page.
func convertMessage(m *ilink.Message, cursor string, received time.Time) (store.PageEntry, error) {
	if m.MessageType == ilink.MessageTypeBot {
		return store.PageEntry{}, errBotMessage
	}
	if m.ContextToken.IsZero() || len(m.ContextToken) > maxContextToken {
		return store.PageEntry{}, errNoContextToken
	}
	e := store.PageEntry{
		ProviderMessageID: providerMessageID(m),
		PeerID:            m.FromUserID,
		SentAt:            received,
		Cursor:            cursor,
		ContextToken:      sealing.NewSecret(m.ContextToken.Reveal()),
	}
	if m.CreateTimeMs > 0 {
		e.SentAt = time.UnixMilli(m.CreateTimeMs)
	}
	if m.Seq > 0 {
		seq := m.Seq
		e.ProviderSeq = &seq
	}
	e.Payload, e.Images, e.Media = payloadOf(m.ItemList)
	return e, nil
}

// providerMessageID is the message's id in decimal (message_id, else the first item's
// msg_id as the official plugin does; both uint64 end to end). A message with neither
// gets a stable id derived from its sender, creation time and items, so a redelivery of
// it deduplicates.
func providerMessageID(m *ilink.Message) string {
	if id := m.ID(); id != 0 {
		return strconv.FormatUint(id, 10)
	}
	items, _ := json.Marshal(m.ItemList) // plain data: cannot fail
	h := sha256.New()
	h.Write([]byte(m.FromUserID))
	h.Write([]byte{0})
	h.Write([]byte(strconv.FormatInt(m.CreateTimeMs, 10)))
	h.Write([]byte{0})
	h.Write(items)
	return derivedIDPrefix + hex.EncodeToString(h.Sum(nil))[:derivedIDHexChars]
}

// payloadOf builds the summary and attachment descriptors of a message's items, the CDN
// locators of its images by position, and those of its files, voice and videos (at
// vocab.MediaPositionBase and up).
func payloadOf(items []ilink.Item) (store.Payload, []store.ImageLocator, []store.ImageLocator) {
	var p store.Payload
	var images, media []store.ImageLocator
	// withMedia gives a file, voice or video attachment its locator, when it has one.
	withMedia := func(att store.Attachment, it ilink.ItemType, m *ilink.CDNMedia) store.Attachment {
		if len(p.Attachments) >= maxAttachments {
			return att
		}
		if loc, ok := mediaLocator(it, m); ok {
			att.Position = vocab.MediaPositionBase + len(media)
			media = append(media, store.ImageLocator{Position: int32(att.Position), Locator: loc})
		}
		return att
	}
	var parts []string
	for i := range items {
		it := &items[i]
		part := ""
		switch it.Type {
		case ilink.ItemText:
			if it.TextItem != nil {
				part = it.TextItem.Text
			}
		case ilink.ItemImage:
			part = "[image]"
			if len(p.Attachments) < maxAttachments {
				if loc, ok := imageLocator(it.ImageItem); ok {
					pos := len(images)
					att := store.Attachment{Kind: "image", Position: pos}
					if it.ImageItem.MidSize > 0 {
						att.Size = it.ImageItem.MidSize
					}
					p.Attachments = append(p.Attachments, att)
					images = append(images, store.ImageLocator{Position: int32(pos), Locator: loc})
				}
			}
		case ilink.ItemVoice:
			part = "[voice]"
			att := store.Attachment{Kind: "voice"}
			if it.VoiceItem != nil && strings.TrimSpace(it.VoiceItem.Text) != "" {
				part = clean(it.VoiceItem.Text, maxSummaryBytes)
				att.Text = part
			}
			if it.VoiceItem != nil {
				att = withMedia(att, ilink.ItemVoice, it.VoiceItem.Media)
			}
			p.Attachments = appendAttachment(p.Attachments, att)
		case ilink.ItemFile:
			part = "[file]"
			att := store.Attachment{Kind: "file"}
			if it.FileItem != nil {
				if name := clean(it.FileItem.FileName, maxNameBytes); name != "" {
					part = "[file " + name + "]"
					att.Name = name
				}
				if n, err := it.FileItem.Len.Int64(); err == nil {
					att.Size = n
				}
				att = withMedia(att, ilink.ItemFile, it.FileItem.Media)
			}
			p.Attachments = appendAttachment(p.Attachments, att)
		case ilink.ItemVideo:
			part = "[video]"
			att := store.Attachment{Kind: "video"}
			if it.VideoItem != nil && it.VideoItem.VideoSize > 0 {
				att.Size = it.VideoItem.VideoSize
			}
			if it.VideoItem != nil {
				att = withMedia(att, ilink.ItemVideo, it.VideoItem.Media)
			}
			p.Attachments = appendAttachment(p.Attachments, att)
		}
		if q := quoteOf(it.RefMsg); q != "" {
			part = q + "\n" + part
		}
		if part != "" {
			parts = append(parts, part)
		}
	}
	p.Summary = clean(strings.Join(parts, "\n"), maxSummaryBytes)
	return p, images, media
}

func appendAttachment(list []store.Attachment, a store.Attachment) []store.Attachment {
	if len(list) >= maxAttachments {
		return list
	}
	return append(list, a)
}

// imageLocator seals the JSON of an image's CDN reference and key. An image without a
// CDN reference has nothing to download and gets no locator.
func imageLocator(img *ilink.ImageItem) (sealing.Secret, bool) {
	if img == nil || img.Media == nil || (img.Media.EncryptQueryParam == "" && img.Media.FullURL == "") {
		return sealing.Secret{}, false
	}
	data, err := json.Marshal(ImageLocator{Media: *img.Media, AESKey: img.AESKey})
	if err != nil || len(data) > maxLocatorBytes {
		return sealing.Secret{}, false
	}
	return sealing.NewSecret(string(data)), true
}

// mediaLocator is the locator of a file, voice or video item's CDN object; an item
// without a CDN reference has nothing to download and gets none.
func mediaLocator(it ilink.ItemType, m *ilink.CDNMedia) (sealing.Secret, bool) {
	if m == nil || (m.EncryptQueryParam == "" && m.FullURL == "") {
		return sealing.Secret{}, false
	}
	data, err := json.Marshal(ImageLocator{Media: *m, ItemType: it})
	if err != nil || len(data) > maxLocatorBytes {
		return sealing.Secret{}, false
	}
	return sealing.NewSecret(string(data)), true
}

// quoteOf renders a quote (ref_msg) as "> quoted text" lines, or "" when it has nothing
// to show.
func quoteOf(ref *ilink.RefMessage) string {
	if ref == nil {
		return ""
	}
	q := ""
	if it := ref.MessageItem; it != nil {
		switch {
		case it.TextItem != nil && it.TextItem.Text != "":
			q = it.TextItem.Text
		case it.VoiceItem != nil && it.VoiceItem.Text != "":
			q = it.VoiceItem.Text
		case it.Type == ilink.ItemImage:
			q = "[image]"
		case it.Type == ilink.ItemVoice:
			q = "[voice]"
		case it.Type == ilink.ItemFile:
			q = "[file]"
			if it.FileItem != nil && it.FileItem.FileName != "" {
				q = "[file " + it.FileItem.FileName + "]"
			}
		case it.Type == ilink.ItemVideo:
			q = "[video]"
		}
	}
	if q == "" {
		q = ref.Title
	}
	if q == "" {
		return ""
	}
	q = clean(q, maxQuoteBytes)
	return "> " + strings.ReplaceAll(q, "\n", "\n> ")
}

// clean makes s valid UTF-8 and cuts it to at most max bytes on a rune boundary.
func clean(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
