package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/jsontext"
	"github.com/ilinkflow/ilinkflow/internal/replyapi"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// Tool names.
const (
	ToolWait            = "wait_for_message"
	ToolReplyText       = "reply_text"
	ToolReplyMedia      = "reply_media"
	ToolFetchAttachment = "fetch_attachment"
	ToolTyping          = "typing"
	ToolFinish          = "finish"
)

// WaitInput is the input of wait_for_message.
type WaitInput struct {
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"how long to wait for a message: 0 to 120 seconds (default 30); 0 only looks"`
	Bot            string `json:"bot,omitempty" jsonschema:"only a message of this bot (its account key, ilk_...); default: any bot routed to you"`
}

// WaitOutput is the answer of wait_for_message: a message, or none when the wait ran out.
type WaitOutput struct {
	Message  *Message `json:"message,omitempty" jsonschema:"the message, claimed for this MCP session until it ends; absent when timed_out"`
	TimedOut bool     `json:"timed_out" jsonschema:"true when no message came within the timeout"`
}

// Message is a message handed to the agent.
type Message struct {
	MessageKey string `json:"message_key" jsonschema:"the message's key: every other tool takes it"`
	Bot        string `json:"bot" jsonschema:"the account key of the bot the user wrote to"`
	// Conversation is the WeChat user (peer id) the bot talks with.
	Conversation string       `json:"conversation" jsonschema:"the WeChat user the bot talks with (its peer id); one open message per conversation"`
	SentAt       string       `json:"sent_at" jsonschema:"when the user sent it (RFC 3339)"`
	Text         string       `json:"text" jsonschema:"the message's text, with a line per attachment"`
	Attachments  []Attachment `json:"attachments" jsonschema:"the message's attachments"`
	Window       Window       `json:"window" jsonschema:"what the reply window still allows"`
	Taken        int32        `json:"taken" jsonschema:"1 the first time a session takes the message; more when a session that took it ended before finishing it: that session may have replied (repeat a reply with its idempotency_key, never a new one)"`
}

// Attachment describes one attachment of a message.
type Attachment struct {
	Index     int    `json:"index" jsonschema:"its index, for fetch_attachment and reply_media's from_attachment"`
	Kind      string `json:"kind" jsonschema:"image, file, voice or video"`
	Name      string `json:"name,omitempty" jsonschema:"the file name, if any"`
	Size      int64  `json:"size,omitempty" jsonschema:"its size in bytes, if known"`
	Text      string `json:"text,omitempty" jsonschema:"a voice message's transcript"`
	Fetchable bool   `json:"fetchable" jsonschema:"whether fetch_attachment can download its bytes"`
}

// Window is what a message's reply window allows.
type Window struct {
	ExpiresAt string `json:"expires_at" jsonschema:"until when replies are accepted (RFC 3339)"`
	SendsLeft int32  `json:"sends_left" jsonschema:"how many more replies the window allows"`
}

// ReplyTextInput is the input of reply_text.
type ReplyTextInput struct {
	MessageKey     string `json:"message_key" jsonschema:"the message to answer"`
	Text           string `json:"text" jsonschema:"the reply's text (at most 16 KiB of UTF-8, no U+0000)"`
	IdempotencyKey string `json:"idempotency_key" jsonschema:"a key of yours, new for each reply (1 to 200 visible ASCII characters): repeating a call with the same key never sends twice"`
	Final          bool   `json:"final,omitempty" jsonschema:"true for your final answer: it may use the window's last sends, which other replies leave for it"`
}

// ReplyMediaInput is the input of reply_media.
type ReplyMediaInput struct {
	MessageKey     string `json:"message_key" jsonschema:"the message to answer"`
	Type           string `json:"type" jsonschema:"image, file or video"`
	FileName       string `json:"file_name,omitempty" jsonschema:"the file's name (required for a file)"`
	DataBase64     string `json:"data_base64,omitempty" jsonschema:"the bytes, base64; or give from_attachment"`
	FromAttachment *int   `json:"from_attachment,omitempty" jsonschema:"send back the bytes of this attachment of the message (its index); or give data_base64"`
	IdempotencyKey string `json:"idempotency_key" jsonschema:"a key of yours, new for each reply: repeating a call with the same key never sends twice"`
	Final          bool   `json:"final,omitempty" jsonschema:"true for your final answer: it may use the window's last sends, which other replies leave for it"`
}

// ReplyOutput is the answer of a reply: the reply API's ReplyResponse.
type ReplyOutput struct {
	AttemptID         string `json:"attempt_id"`
	ClientMessageID   string `json:"client_message_id"`
	Status            string `json:"status" jsonschema:"sent; unknown: iLink's answer did not come, repeat the call with the same idempotency_key to learn it; or held: the window could not carry it, it is sent first when the user writes again"`
	ProviderMessageID string `json:"provider_message_id"`
	SendsLeft         int32  `json:"sends_left"`
	RequestID         string `json:"request_id"`
	HeldID            string `json:"held_id,omitempty" jsonschema:"a held reply's id"`
	Position          int32  `json:"position,omitempty" jsonschema:"a held reply's place among the conversation's replies still to send (1: the next)"`
	Reason            string `json:"reason,omitempty" jsonschema:"why a held reply's window could not carry it"`
}

// FetchInput is the input of fetch_attachment.
type FetchInput struct {
	MessageKey string `json:"message_key" jsonschema:"the message"`
	Index      int    `json:"index" jsonschema:"the attachment's index"`
}

// FetchOutput describes the fetched bytes, which come as the result's image or resource
// content.
type FetchOutput struct {
	MessageKey string `json:"message_key"`
	Index      int    `json:"index"`
	MIMEType   string `json:"mime_type"`
	Size       int    `json:"size"`
	FileName   string `json:"file_name,omitempty"`
}

// TypingInput is the input of typing.
type TypingInput struct {
	MessageKey string `json:"message_key" jsonschema:"the message whose user sees it"`
	Status     string `json:"status" jsonschema:"typing (show) or cancel"`
}

// FinishInput is the input of finish.
type FinishInput struct {
	MessageKey string `json:"message_key" jsonschema:"the message"`
	Status     string `json:"status" jsonschema:"handled (answered) or failed"`
	Reason     string `json:"reason,omitempty" jsonschema:"why it failed (shown to the operator)"`
}

// StatusOutput is the answer of typing and finish.
type StatusOutput struct {
	Status string `json:"status"`
}

func (s *Server) addTools() {
	addTool(s, ToolWait, "Wait for the next message a WeChat user sent to one of your bots, and take it: it is yours until "+
		"you finish it or this session ends (then it is offered again). Answer with reply_text or reply_media, then call finish.", s.wait)
	addTool(s, ToolReplyText, "Reply to a message with text. The reply window allows window.sends_left replies until "+
		"window.expires_at; a refusal says why (reply_quota_exhausted, reply_window_expired, throttled, ...).", s.replyText)
	addTool(s, ToolReplyMedia, "Reply to a message with an image, a file or a video: its bytes (data_base64) or an attachment "+
		"of the message (from_attachment).", s.replyMedia)
	addTool(s, ToolFetchAttachment, "Download an attachment of a message (an image comes as image content, anything else "+
		"as a resource).", s.fetchAttachment)
	addTool(s, ToolTyping, "Show the user that you are typing (status typing), or stop showing it (cancel).", s.typing)
	addTool(s, ToolFinish, "Give the message's verdict: handled (answered) or failed (with a reason). The message is then "+
		"closed: it is not offered again.", s.finish)
}

// toolFunc is a tool: its agent and decoded input in, its output (and any content besides
// the output's JSON) or a typed refusal out.
type toolFunc[In, Out any] func(ctx context.Context, req *mcp.CallToolRequest, a agent, in In) (Out, []mcp.Content, *ToolError)

// addTool registers a tool whose arguments are decoded strictly (an unknown member, a
// wrong type or invalid UTF-8 is the typed refusal invalid_argument, never a protocol
// error) and whose refusals are typed tool errors.
func addTool[In, Out any](s *Server, name, description string, h toolFunc[In, Out]) {
	in, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: input schema of %s: %v", name, err)) // a programming error, at start
	}
	out, err := jsonschema.For[Out](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: output schema of %s: %v", name, err))
	}
	s.mcp.AddTool(&mcp.Tool{Name: name, Description: description, InputSchema: in, OutputSchema: out},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			started := s.cfg.Now()
			a, terr := callerOf(req)
			var input In
			if terr == nil {
				terr = decodeArgs(req.Params.Arguments, &input)
			}
			var output Out
			var content []mcp.Content
			if terr == nil {
				output, content, terr = h(ctx, req, a, input)
			}
			if terr != nil {
				s.cfg.Metrics.MCPToolCall(name, terr.Code)
				s.log.Info("MCP tool refused", "tool", name, "agent", a.name, "code", terr.Code, "status", terr.Status)
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: terr.Error()}}}, nil
			}
			raw, err := json.Marshal(output)
			if err != nil {
				return nil, err
			}
			s.cfg.Metrics.MCPToolCall(name, "ok")
			s.log.Debug("MCP tool", "tool", name, "agent", a.name, "took", s.cfg.Now().Sub(started))
			return &mcp.CallToolResult{Content: append([]mcp.Content{&mcp.TextContent{Text: string(raw)}}, content...),
				StructuredContent: json.RawMessage(raw)}, nil
		})
}

// decodeArgs decodes a tool's arguments strictly.
func decodeArgs(raw json.RawMessage, v any) *ToolError {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
	}
	bad := func(msg string) *ToolError {
		return &ToolError{Code: CodeInvalidArgument, Status: http.StatusBadRequest, Message: msg}
	}
	if !jsontext.Valid(raw) {
		return bad("the arguments are not valid UTF-8 (or hold an unpaired surrogate escape)")
	}
	if dup, ok := jsontext.DuplicateKey(raw); ok {
		return bad(fmt.Sprintf("the argument %q is given twice", dup))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		var syntaxErr *json.SyntaxError
		switch {
		case errors.As(err, &typeErr):
			return bad(fmt.Sprintf("the argument %q must be a JSON %s", typeErr.Field, typeErr.Type.Kind()))
		case errors.As(err, &syntaxErr):
			return bad("the arguments are not a JSON object")
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return bad("unknown argument " + strings.TrimPrefix(err.Error(), "json: unknown field "))
		}
		return bad("the arguments are not a JSON object of this tool's arguments")
	}
	return nil
}

// required refuses an empty required argument.
func required(name, v string) *ToolError {
	if v == "" {
		return &ToolError{Code: CodeInvalidArgument, Status: http.StatusBadRequest, Message: "the argument " + name + " is required"}
	}
	return nil
}

// ---------------------------------------------------------------------------
// wait_for_message

func (s *Server) wait(ctx context.Context, req *mcp.CallToolRequest, a agent, in WaitInput) (WaitOutput, []mcp.Content, *ToolError) {
	timeout := DefaultWait
	if in.TimeoutSeconds != 0 {
		timeout = time.Duration(in.TimeoutSeconds) * time.Second
	}
	if in.TimeoutSeconds < 0 || timeout > MaxWait {
		return WaitOutput{}, nil, &ToolError{Code: CodeInvalidArgument, Status: http.StatusBadRequest,
			Message: fmt.Sprintf("timeout_seconds must be between 0 and %d", int(MaxWait/time.Second))}
	}
	if in.Bot != "" {
		if terr := s.checkBot(ctx, a, in.Bot); terr != nil {
			return WaitOutput{}, nil, terr
		}
	}
	session := req.Session.ID()
	if session == "" {
		return WaitOutput{}, nil, &ToolError{Code: CodeInvalidArgument, Status: http.StatusBadRequest,
			Message: "wait_for_message needs a stateful MCP session (the Mcp-Session-Id of an initialized session)"}
	}
	deadline := s.cfg.Now().Add(timeout)
	if in.TimeoutSeconds == 0 {
		deadline = s.cfg.Now() // look once
	}
	tick := time.NewTicker(s.cfg.PollInterval)
	defer tick.Stop()
	for {
		// A token revoked (or replaced) while the wait runs ends it at once.
		if name, found, err := s.cfg.Store.MCPAgentByToken(ctx, a.token); err != nil {
			return WaitOutput{}, nil, s.storeRefusal(ToolWait, err)
		} else if !found || name != a.name {
			return WaitOutput{}, nil, &ToolError{Code: CodeInvalidToken, Status: http.StatusUnauthorized, Message: "the token was revoked"}
		}
		o, found, err := s.cfg.Store.ClaimMCPOffer(ctx, s.cfg.Now(), a.name, in.Bot, session, s.cfg.Lease)
		if err != nil {
			return WaitOutput{}, nil, s.storeRefusal(ToolWait, err)
		}
		if found {
			m, terr := s.message(ctx, o)
			if terr != nil {
				return WaitOutput{}, nil, terr
			}
			s.log.Info("MCP message taken", "agent", a.name, "message_key", o.MessageKey, "taken", o.Taken, "offers", o.Offers)
			return WaitOutput{Message: &m}, nil, nil
		}
		if !s.cfg.Now().Before(deadline) {
			return WaitOutput{TimedOut: true}, nil, nil
		}
		select {
		case <-ctx.Done():
			return WaitOutput{}, nil, &ToolError{Code: CodeStoreUnavailable, Status: http.StatusServiceUnavailable, Message: "the wait was cancelled"}
		case <-tick.C:
		}
	}
}

// message is what the agent sees of an offered message.
func (s *Server) message(ctx context.Context, o store.MCPOffer) (Message, *ToolError) {
	m, err := s.cfg.Store.GetMessage(ctx, o.MessageKey)
	if err != nil {
		return Message{}, s.storeRefusal(ToolWait, err)
	}
	w, err := s.cfg.Store.GetWindow(ctx, o.ReplyWindowID)
	if err != nil {
		return Message{}, s.storeRefusal(ToolWait, err)
	}
	in := handoff.AgentInput(handoff.Delivery{Message: m, Window: w, SessionID: o.SessionID})
	out := Message{MessageKey: in.MessageKey, Bot: in.AccountKey, Conversation: in.PeerID, SentAt: in.SentAt.UTC().Format(time.RFC3339Nano),
		Text: in.Summary, Attachments: []Attachment{}, Taken: o.Taken,
		Window: Window{ExpiresAt: in.ExpiresAt.UTC().Format(time.RFC3339Nano), SendsLeft: in.SendsLeft}}
	for i, at := range in.Attachments {
		out.Attachments = append(out.Attachments, Attachment{Index: i, Kind: at.Kind, Name: at.Name, Size: at.Size, Text: at.Text,
			Fetchable: at.FetchPath != ""})
	}
	return out, nil
}

// checkBot refuses a bot that is not routed to the agent.
func (s *Server) checkBot(ctx context.Context, a agent, bot string) *ToolError {
	r, found, err := s.cfg.Store.GetRoute(ctx, bot)
	switch {
	case store.CodeOf(err) == vocab.CodeInvalidInput:
		return &ToolError{Code: CodeInvalidArgument, Status: http.StatusBadRequest, Message: "bot must be an account key (ilk_ and 32 hex digits)"}
	case err != nil && store.CodeOf(err) != vocab.CodeSealedUnreadable:
		return s.storeRefusal(ToolWait, err)
	case !found || r.Kind != vocab.RouteMCP || r.MCPAgent != a.name:
		return notRouted()
	}
	return nil
}

func notRouted() *ToolError {
	return &ToolError{Code: CodeBotNotRouted, Status: http.StatusForbidden, Message: "this bot is not routed to your MCP agent"}
}

// offerFor resolves a message the agent acts on to its offer: a message of a bot routed
// to another agent (or offered to one) is 403, an unknown one 404.
func (s *Server) offerFor(ctx context.Context, tool string, a agent, messageKey string) (store.MCPOffer, *ToolError) {
	if terr := required("message_key", messageKey); terr != nil {
		return store.MCPOffer{}, terr
	}
	o, found, err := s.cfg.Store.GetMCPOffer(ctx, messageKey)
	switch {
	case store.CodeOf(err) == vocab.CodeInvalidInput:
		return store.MCPOffer{}, &ToolError{Code: CodeInvalidArgument, Status: http.StatusBadRequest, Message: "message_key must be im_ and 32 hex digits"}
	case err != nil:
		return store.MCPOffer{}, s.storeRefusal(tool, err)
	case found && o.Agent == a.name:
		return o, nil
	case found:
		return store.MCPOffer{}, notRouted()
	}
	m, err := s.cfg.Store.GetMessage(ctx, messageKey)
	if err != nil {
		if store.IsRuleViolation(err) {
			return store.MCPOffer{}, &ToolError{Code: CodeMessageNotFound, Status: http.StatusNotFound, Message: "no such message"}
		}
		return store.MCPOffer{}, s.storeRefusal(tool, err)
	}
	if r, found, err := s.cfg.Store.GetRoute(ctx, m.AccountKey); err == nil && found && r.Kind == vocab.RouteMCP && r.MCPAgent == a.name {
		return store.MCPOffer{}, &ToolError{Code: CodeMessageNotOffered, Status: http.StatusConflict, Message: "the message was not offered to you (yet): take messages with wait_for_message"}
	}
	return store.MCPOffer{}, notRouted()
}

// ---------------------------------------------------------------------------
// The tools that act through the reply API

func (s *Server) replyText(ctx context.Context, _ *mcp.CallToolRequest, a agent, in ReplyTextInput) (ReplyOutput, []mcp.Content, *ToolError) {
	o, terr := s.offerFor(ctx, ToolReplyText, a, in.MessageKey)
	if terr != nil {
		return ReplyOutput{}, nil, terr
	}
	if terr := required("idempotency_key", in.IdempotencyKey); terr != nil {
		return ReplyOutput{}, nil, terr
	}
	body, err := json.Marshal(replyapi.ReplyRequest{Type: "text", Text: in.Text, Final: in.Final})
	if err != nil {
		return ReplyOutput{}, nil, &ToolError{Code: CodeInvalidArgument, Status: http.StatusBadRequest, Message: "text cannot be encoded"}
	}
	var out ReplyOutput
	terr = s.callAPI(ctx, http.MethodPost, "/v1/reply", o.Token, in.IdempotencyKey, "application/json", body, &out, nil)
	return out, nil, terr
}

func (s *Server) replyMedia(ctx context.Context, _ *mcp.CallToolRequest, a agent, in ReplyMediaInput) (ReplyOutput, []mcp.Content, *ToolError) {
	o, terr := s.offerFor(ctx, ToolReplyMedia, a, in.MessageKey)
	if terr != nil {
		return ReplyOutput{}, nil, terr
	}
	if terr := required("idempotency_key", in.IdempotencyKey); terr != nil {
		return ReplyOutput{}, nil, terr
	}
	if terr := required("type", in.Type); terr != nil {
		return ReplyOutput{}, nil, terr
	}
	var data []byte
	name := in.FileName
	switch {
	case (in.DataBase64 != "") == (in.FromAttachment != nil):
		return ReplyOutput{}, nil, &ToolError{Code: CodeInvalidArgument, Status: http.StatusBadRequest, Message: "give data_base64 or from_attachment, one of them"}
	case in.DataBase64 != "":
		if base64.StdEncoding.DecodedLen(len(in.DataBase64)) > s.cfg.MaxMediaBytes+3 {
			return ReplyOutput{}, nil, &ToolError{Code: replyapi.CodeMediaTooLarge, Status: http.StatusRequestEntityTooLarge,
				Message: fmt.Sprintf("the file exceeds %d bytes", s.cfg.MaxMediaBytes)}
		}
		var err error
		if data, err = base64.StdEncoding.DecodeString(in.DataBase64); err != nil {
			return ReplyOutput{}, nil, &ToolError{Code: CodeInvalidArgument, Status: http.StatusBadRequest, Message: "data_base64 is not standard base64"}
		}
	default:
		var f fetched
		if f, terr = s.fetch(ctx, o, *in.FromAttachment); terr != nil {
			return ReplyOutput{}, nil, terr
		}
		data = f.data
		if name == "" {
			name = f.fileName
		}
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("type", in.Type)
	if in.Final {
		_ = mw.WriteField("final", "true")
	}
	if name != "" {
		_ = mw.WriteField("file_name", name)
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="file"`)
	h.Set("Content-Type", "application/octet-stream")
	part, _ := mw.CreatePart(h)
	_, _ = part.Write(data)
	_ = mw.Close()
	var out ReplyOutput
	terr = s.callAPI(ctx, http.MethodPost, "/v1/reply", o.Token, in.IdempotencyKey, mw.FormDataContentType(), buf.Bytes(), &out, nil)
	return out, nil, terr
}

// fetched is an attachment's bytes.
type fetched struct {
	data               []byte
	mimeType, fileName string
}

func (s *Server) fetch(ctx context.Context, o store.MCPOffer, index int) (fetched, *ToolError) {
	if index < 0 || index > 999 {
		return fetched{}, &ToolError{Code: CodeInvalidArgument, Status: http.StatusBadRequest, Message: "index must be between 0 and 999"}
	}
	var f fetched
	hdr := http.Header{}
	terr := s.callAPI(ctx, http.MethodGet, wfapi.AttachmentPath(o.MessageKey, index), o.Token, "", "", nil, &f.data, hdr)
	if terr != nil {
		return fetched{}, terr
	}
	f.mimeType = hdr.Get("Content-Type")
	if _, params, err := mime.ParseMediaType(hdr.Get("Content-Disposition")); err == nil {
		f.fileName = params["filename"]
	}
	return f, nil
}

func (s *Server) fetchAttachment(ctx context.Context, _ *mcp.CallToolRequest, a agent, in FetchInput) (FetchOutput, []mcp.Content, *ToolError) {
	o, terr := s.offerFor(ctx, ToolFetchAttachment, a, in.MessageKey)
	if terr != nil {
		return FetchOutput{}, nil, terr
	}
	f, terr := s.fetch(ctx, o, in.Index)
	if terr != nil {
		return FetchOutput{}, nil, terr
	}
	out := FetchOutput{MessageKey: o.MessageKey, Index: in.Index, MIMEType: f.mimeType, Size: len(f.data), FileName: f.fileName}
	var c mcp.Content
	if strings.HasPrefix(f.mimeType, "image/") {
		c = &mcp.ImageContent{Data: f.data, MIMEType: f.mimeType}
	} else {
		c = &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
			URI: "ilinkflow://messages/" + o.MessageKey + "/attachments/" + strconv.Itoa(in.Index), MIMEType: f.mimeType, Blob: f.data}}
	}
	return out, []mcp.Content{c}, nil
}

func (s *Server) typing(ctx context.Context, _ *mcp.CallToolRequest, a agent, in TypingInput) (StatusOutput, []mcp.Content, *ToolError) {
	o, terr := s.offerFor(ctx, ToolTyping, a, in.MessageKey)
	if terr != nil {
		return StatusOutput{}, nil, terr
	}
	body, _ := json.Marshal(replyapi.TypingRequest{Status: in.Status})
	var out StatusOutput
	return out, nil, s.callAPI(ctx, http.MethodPost, "/v1/typing", o.Token, "", "application/json", body, &out, nil)
}

func (s *Server) finish(ctx context.Context, _ *mcp.CallToolRequest, a agent, in FinishInput) (StatusOutput, []mcp.Content, *ToolError) {
	o, terr := s.offerFor(ctx, ToolFinish, a, in.MessageKey)
	if terr != nil {
		return StatusOutput{}, nil, terr
	}
	body, err := json.Marshal(replyapi.DoneRequest{Status: in.Status, Reason: in.Reason})
	if err != nil {
		return StatusOutput{}, nil, &ToolError{Code: CodeInvalidArgument, Status: http.StatusBadRequest, Message: "reason cannot be encoded"}
	}
	var out StatusOutput
	if terr := s.callAPI(ctx, http.MethodPost, "/v1/done", o.Token, "", "application/json", body, &out, nil); terr != nil {
		return out, nil, terr
	}
	s.log.Info("MCP message finished", "agent", a.name, "message_key", o.MessageKey, "status", out.Status)
	return out, nil, nil
}

// callAPI makes one request of the reply API in process, under a session token, and
// decodes its answer into out (a *[]byte takes the body as it is; hdr, when not nil,
// receives the answer's headers). A refusal is the reply API's code, status and message.
func (s *Server) callAPI(ctx context.Context, method, path string, token sealing.Secret, idempotencyKey, contentType string,
	body []byte, out any, hdr http.Header) *ToolError {
	rec, err := replyapi.InProcess(ctx, s.cfg.Replies, method, path, token, idempotencyKey, contentType, body)
	if err != nil {
		return &ToolError{Code: CodeInternal, Status: http.StatusInternalServerError, Message: "the request cannot be made"}
	}
	if rec.Status >= 300 {
		var eb struct {
			Error struct {
				Code              string          `json:"code"`
				Message           string          `json:"message"`
				RetryAfterSeconds int64           `json:"retry_after_seconds"`
				Attempt           json.RawMessage `json:"attempt"`
			} `json:"error"`
		}
		if err := json.Unmarshal(rec.Body, &eb); err != nil || eb.Error.Code == "" {
			return &ToolError{Code: CodeInternal, Status: rec.Status, Message: "the reply API answered without a code"}
		}
		return &ToolError{Code: eb.Error.Code, Status: rec.Status, Message: eb.Error.Message,
			RetryAfterSeconds: eb.Error.RetryAfterSeconds, Attempt: eb.Error.Attempt}
	}
	if rec.Status == http.StatusAccepted {
		// A reply whose outcome is unknown: the body is the attempt with status unknown.
		s.log.Info("MCP reply outcome unknown", "path", path)
	}
	for k, v := range rec.Header {
		if hdr != nil {
			hdr[k] = v
		}
	}
	if b, ok := out.(*[]byte); ok {
		*b = rec.Body
		return nil
	}
	if err := json.Unmarshal(rec.Body, out); err != nil {
		return &ToolError{Code: CodeInternal, Status: http.StatusInternalServerError, Message: "the reply API's answer does not decode"}
	}
	return nil
}
