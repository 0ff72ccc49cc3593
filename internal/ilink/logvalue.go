package ilink

import "log/slog"

// The wire types must encode their secrets in JSON, which log/slog's JSON
// handler would use. These LogValue methods give slog a redacted view.

// LogValue logs a message without its context token or media keys.
func (m Message) LogValue() slog.Value {
	types := make([]int, 0, len(m.ItemList))
	for _, it := range m.ItemList {
		types = append(types, int(it.Type))
	}
	return slog.GroupValue(
		slog.String("message_id", m.MessageID.String()),
		slog.String("from_user_id", m.FromUserID),
		slog.String("to_user_id", m.ToUserID),
		slog.String("client_id", m.ClientID),
		slog.Int("message_type", int(m.MessageType)),
		slog.Any("item_types", types),
		slog.Bool("has_context_token", m.ContextToken != ""),
	)
}

// LogValue logs an item's type and ids only.
func (it Item) LogValue() slog.Value {
	return slog.GroupValue(slog.Int("type", int(it.Type)), slog.String("msg_id", it.MsgID.String()))
}

// LogValue logs CDN media without its key or locator.
func (m CDNMedia) LogValue() slog.Value {
	return slog.GroupValue(slog.Bool("has_key", m.AESKey != ""), slog.Bool("has_full_url", m.FullURL != ""))
}

// LogValue logs a QR status without the bot token.
func (s QRCodeStatus) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("status", string(s.Status)),
		slog.String("redirect_host", s.RedirectHost),
		slog.String("ilink_bot_id", s.ILinkBotID),
		slog.String("ilink_user_id", s.ILinkUserID),
		slog.String("baseurl", s.BaseURL),
		slog.Bool("timed_out", s.TimedOut),
	)
}

// LogValue logs uploaded media without its key or locator.
func (m UploadedMedia) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int("media_type", int(m.MediaType)),
		slog.String("filekey", m.FileKey),
		slog.Int64("rawsize", m.RawSize),
		slog.Int64("filesize", m.CipherSize),
		slog.String("rawfilemd5", m.RawMD5),
	)
}

// LogValue logs send options without the context token.
func (o SendOptions) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("to_user_id", o.ToUserID),
		slog.String("client_id", o.ClientID),
		slog.Bool("has_context_token", o.ContextToken != ""),
	)
}

// LogValue logs a bot config without its ticket.
func (b BotConfig) LogValue() slog.Value {
	return slog.GroupValue(slog.Bool("has_typing_ticket", b.TypingTicket != ""))
}
