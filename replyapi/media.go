package replyapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/store"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// Media endpoints (docs/agents.md):
//
//	GET  /v1/messages/{message_key}/attachments/{n}   → the n-th attachment's bytes
//	POST /v1/reply   multipart/form-data: type=image|file|video, file=@<path>
//
// A fetch answers the decrypted bytes with Content-Type, Content-Length and, for a file,
// Content-Disposition. A media reply is staged in the store (sealed) and sent by the send
// activity, which uploads it to the iLink CDN.

// Error codes of the media endpoints.
const (
	CodeAttachmentNotFound     = string(vocab.CodeAttachmentNotFound)
	CodeWrongMessage           = string(vocab.CodeWrongMessage)
	CodeMediaNotFound          = string(vocab.CodeMediaNotFound)
	CodeMediaExpired           = activities.MediaGone
	CodeMediaTooLarge          = activities.MediaTooLarge
	CodeMediaUndecryptable     = activities.MediaUndecryptable
	CodeCDNUnavailable         = activities.MediaUnavailable
	CodeUnsupportedContentType = "unsupported_content_type"
	CodeInvalidMultipart       = "invalid_multipart"
	CodeInvalidMedia           = "invalid_media"
)

// DefaultMaxMediaBytes caps one media reply's file (20 MiB) and one fetched attachment.
const DefaultMaxMediaBytes = store.DefaultMaxMediaBytes

// multipartOverhead is what a multipart body may carry besides its file.
const multipartOverhead = 64 << 10

// Media downloads inbound media by its opened locator (an *activities.MediaFetcher).
type Media interface {
	Fetch(ctx context.Context, locator sealing.Secret) ([]byte, error)
}

func mediaStatus(code string) (int, bool) {
	switch code {
	case CodeAttachmentNotFound, CodeMediaNotFound:
		return http.StatusNotFound, true
	case CodeWrongMessage:
		return http.StatusForbidden, true
	case CodeMediaExpired:
		return http.StatusGone, true
	case CodeMediaTooLarge:
		return http.StatusRequestEntityTooLarge, true
	case CodeUnsupportedContentType:
		return http.StatusUnsupportedMediaType, true
	case CodeInvalidMultipart, CodeInvalidMedia:
		return http.StatusBadRequest, true
	case CodeMediaUndecryptable:
		return http.StatusBadGateway, true
	case CodeCDNUnavailable:
		return http.StatusServiceUnavailable, true
	case CodeTypingFailed:
		return http.StatusBadGateway, true
	}
	return 0, false
}

// attachment serves GET /v1/messages/{message_key}/attachments/{n}.
func (a *API) attachment(w http.ResponseWriter, r *http.Request) {
	const route = "attachment"
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		a.refuse(w, route, &apiError{code: CodeMethodNotAllowed, msg: "use GET"})
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/messages/"), "/")
	if len(parts) != 3 || parts[1] != "attachments" {
		a.refuse(w, route, &apiError{code: CodeNotFound, msg: "no such endpoint"})
		return
	}
	index, err := strconv.Atoi(parts[2])
	if err != nil || index < 0 || strconv.Itoa(index) != parts[2] {
		a.refuse(w, route, &apiError{code: CodeAttachmentNotFound, msg: "the attachment index must be a decimal number from 0"})
		return
	}
	token, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		a.refuse(w, route, &apiError{code: CodeInvalidSession, msg: "an agent session token is required as Authorization: Bearer <token>"})
		return
	}
	if a.cfg.Media == nil {
		a.refuse(w, route, &apiError{code: CodeCDNUnavailable, msg: "media fetching is not configured"})
		return
	}
	loc, err := a.cfg.Store.GetAttachment(r.Context(), a.cfg.Now(), store.ByToken(token), parts[0], index)
	if err != nil {
		a.refuse(w, route, a.storeRefusal(err))
		return
	}
	data, err := a.cfg.Media.Fetch(r.Context(), loc.Locator)
	if err != nil {
		var me *activities.MediaError
		code := CodeCDNUnavailable
		if errors.As(err, &me) {
			code = me.Code
		}
		a.log.Info("attachment fetch failed", "route", route, "index", index, "code", code)
		a.refuse(w, route, &apiError{code: code, msg: mediaMessage(code)})
		return
	}
	att := loc.Attachment
	h := w.Header()
	h.Set("Content-Type", contentTypeOf(att.Kind, att.Name, data))
	h.Set("Content-Length", strconv.Itoa(len(data)))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if att.Kind == "file" && att.Name != "" {
		h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": att.Name}))
	}
	a.cfg.Metrics.ReplyRequest(route, "ok")
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, bytes.NewReader(data))
}

// storeRefusal maps a store error of a media call to a refusal.
func (a *API) storeRefusal(err error) *apiError {
	code := string(store.CodeOf(err))
	switch {
	case code == CodeAttachmentNotFound || code == CodeWrongMessage || code == CodeMediaNotFound:
		return &apiError{code: code, msg: mediaMessage(code)}
	case store.IsRuleViolation(err):
		if code == CodeInvalidInput || StatusOf(code) == http.StatusInternalServerError {
			code = CodeInvalidSession
		}
	case code == CodeStoreUnavailable:
	default:
		a.log.Error("media store call failed", "error", err)
		code = CodeInternal
	}
	return &apiError{code: code, msg: failureMessage(code)}
}

// contentTypeOf is an attachment's content type: by its file name's extension for a
// file, else sniffed from its bytes, with the kind's generic type as the fallback.
func contentTypeOf(kind, name string, data []byte) string {
	sniffed := http.DetectContentType(data)
	switch kind {
	case "file":
		if t := mime.TypeByExtension(strings.ToLower(path.Ext(name))); t != "" {
			return t
		}
		return sniffed
	case "image":
		if strings.HasPrefix(sniffed, "image/") {
			return sniffed
		}
		return "application/octet-stream"
	case "video":
		if strings.HasPrefix(sniffed, "video/") {
			return sniffed
		}
		return "video/mp4"
	case "voice":
		if bytes.HasPrefix(data, []byte("#!SILK")) || bytes.HasPrefix(data, []byte("\x02#!SILK")) {
			return "audio/silk"
		}
		if strings.HasPrefix(sniffed, "audio/") {
			return sniffed
		}
		return "application/octet-stream"
	}
	return "application/octet-stream"
}

// mediaMessage is the human text of a media code.
func mediaMessage(code string) string {
	switch code {
	case CodeAttachmentNotFound:
		return "the message has no downloadable attachment at that index"
	case CodeWrongMessage:
		return "the agent session was opened for another message"
	case CodeMediaNotFound:
		return "the staged media is unknown or expired"
	case CodeMediaExpired:
		return "the iLink CDN no longer serves this attachment (it expired or was removed)"
	case CodeMediaTooLarge:
		return "the attachment exceeds the download cap"
	case CodeMediaUndecryptable:
		return "the attachment does not decrypt with the message's key"
	case CodeCDNUnavailable:
		return "the iLink CDN is unavailable; retry"
	}
	return "internal error"
}

// mediaReply is a parsed multipart media reply.
type mediaReply struct {
	kind, fileName string
	data           []byte
	sha256         string
}

// isMultipart reports whether a request carries multipart/form-data.
func isMultipart(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "multipart/form-data"
}

// checkReplyContentType refuses a reply whose Content-Type is neither JSON nor
// multipart/form-data (none given is taken as JSON).
func checkReplyContentType(r *http.Request) *apiError {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" || mt == "multipart/form-data") {
		return nil
	}
	return &apiError{code: CodeUnsupportedContentType, msg: "send application/json (text) or multipart/form-data (media)"}
}

// parseMediaReply reads a multipart media reply: a "type" field (image, file or video),
// a "file" part with the bytes and, optionally, a "file_name" field (default: the part's
// file name). It reads at most the media cap and refuses anything else.
func (a *API) parseMediaReply(w http.ResponseWriter, r *http.Request) (mediaReply, *apiError) {
	limit := a.cfg.MaxMediaBytes
	body := http.MaxBytesReader(w, r.Body, limit+multipartOverhead)
	_, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if params["boundary"] == "" {
		return mediaReply{}, &apiError{code: CodeInvalidMultipart, msg: "multipart body has no boundary"}
	}
	mr := multipart.NewReader(body, params["boundary"])
	var out mediaReply
	var gotFile bool
	partName := ""
	tooLarge := func(err error) bool {
		var mbe *http.MaxBytesError
		return errors.As(err, &mbe)
	}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			if tooLarge(err) {
				return out, &apiError{code: CodeMediaTooLarge, msg: fmt.Sprintf("the file exceeds %d bytes", limit)}
			}
			return out, &apiError{code: CodeInvalidMultipart, msg: "multipart body is malformed or truncated"}
		}
		switch p.FormName() {
		case "type", "file_name":
			v, err := io.ReadAll(io.LimitReader(p, 1025))
			if err != nil {
				return out, &apiError{code: CodeInvalidMultipart, msg: "multipart body is malformed or truncated"}
			}
			if len(v) > 1024 || !utf8.Valid(v) {
				return out, &apiError{code: CodeInvalidMedia, msg: "a form field is over 1024 bytes or not UTF-8"}
			}
			if p.FormName() == "type" {
				out.kind = string(v)
			} else {
				out.fileName = string(v)
			}
		case "file":
			if gotFile {
				return out, &apiError{code: CodeInvalidMedia, msg: "a media reply carries exactly one file"}
			}
			gotFile = true
			partName = p.FileName()
			data, err := io.ReadAll(io.LimitReader(p, limit+1))
			if err != nil {
				if tooLarge(err) {
					return out, &apiError{code: CodeMediaTooLarge, msg: fmt.Sprintf("the file exceeds %d bytes", limit)}
				}
				return out, &apiError{code: CodeInvalidMultipart, msg: "multipart body is malformed or truncated"}
			}
			if int64(len(data)) > limit {
				return out, &apiError{code: CodeMediaTooLarge, msg: fmt.Sprintf("the file exceeds %d bytes", limit)}
			}
			out.data = data
		default:
			return out, &apiError{code: CodeInvalidMedia, msg: fmt.Sprintf("unknown form field %q", clip(p.FormName(), 32))}
		}
	}
	if out.fileName == "" {
		out.fileName = path.Base(strings.ReplaceAll(partName, "\\", "/"))
		if out.fileName == "." || out.fileName == "/" {
			out.fileName = ""
		}
	}
	switch {
	case out.kind != "image" && out.kind != "file" && out.kind != "video":
		return out, &apiError{code: CodeUnsupportedType, msg: `a multipart reply's type must be "image", "file" or "video"`}
	case !gotFile || len(out.data) == 0:
		return out, &apiError{code: CodeInvalidMedia, msg: "the file part is missing or empty"}
	case out.kind == "file" && out.fileName == "":
		return out, &apiError{code: CodeInvalidMedia, msg: "a file needs a name (the part's filename or a file_name field)"}
	case len(out.fileName) > 1024 || !utf8.ValidString(out.fileName):
		return out, &apiError{code: CodeInvalidMedia, msg: "the file name must be at most 1024 bytes of UTF-8"}
	}
	sniffed := http.DetectContentType(out.data)
	switch {
	case out.kind == "image" && !strings.HasPrefix(sniffed, "image/"):
		return out, &apiError{code: CodeUnsupportedContentType, msg: "the image is not in a recognised image format (PNG, JPEG, GIF, WebP, BMP)"}
	case out.kind == "video" && !strings.HasPrefix(sniffed, "video/"):
		return out, &apiError{code: CodeUnsupportedContentType, msg: "the video is not in a recognised video format (MP4, WebM, AVI)"}
	}
	if out.kind != "file" {
		out.fileName = ""
	}
	sum := sha256.Sum256(out.data)
	out.sha256 = hex.EncodeToString(sum[:])
	return out, nil
}

// replyMedia serves a multipart POST /v1/reply: parse and check (nothing written on a
// refusal), answer a repeated Idempotency-Key from its first outcome, stage the media
// (checking the session), then run the window's send Update with the staged media's id.
func (a *API) replyMedia(w http.ResponseWriter, r *http.Request, token sealing.Secret) (int, any, *apiError) {
	key, kerr := idempotencyKey(r)
	if kerr != nil {
		return 0, nil, kerr
	}
	m, aerr := a.parseMediaReply(w, r)
	if aerr != nil {
		return 0, nil, aerr
	}
	req := ReplyRequest{Type: m.kind}
	match := func(att store.Attempt) bool {
		return att.Content.Type == m.kind && att.Content.Media != nil && att.Content.Media.SHA256 == m.sha256 &&
			att.Content.Media.FileName == m.fileName
	}
	log := a.log.With("route", "reply", "request_id", key)
	if key != "" {
		if status, out, e, ok := a.firstOutcomeMatching(r.Context(), log, token, key, match); ok {
			return status, out, e
		}
	}
	staged, err := a.cfg.Store.StageMedia(r.Context(), a.cfg.Now(), store.StageMediaInput{Session: store.ByToken(token),
		Kind: m.kind, FileName: m.fileName, Data: m.data})
	if err != nil {
		return 0, nil, a.storeRefusal(err)
	}
	sess := store.Session{SessionID: staged.SessionID, ReplyWindowID: staged.ReplyWindowID}
	ref := &wfapi.MediaRef{MediaID: staged.MediaID, FileName: staged.FileName, Size: staged.Size, SHA256: staged.SHA256}
	return a.sendUpdate(r, log, token, key, sess, req, ref, match)
}

// firstOutcomeMatching is firstOutcome with a reply comparison of its own.
func (a *API) firstOutcomeMatching(ctx context.Context, log *slog.Logger, token sealing.Secret, key string, match func(store.Attempt) bool) (int, any, *apiError, bool) {
	prior, ok, err := a.cfg.Store.FindReply(context.WithoutCancel(ctx), store.ByToken(token), UpdateID(key))
	if err != nil || !ok {
		return 0, nil, nil, false
	}
	if !match(prior.Attempt) {
		return 0, nil, reusedKey(), true
	}
	att := prior.Attempt
	status, out, e := a.answer(log, key, wfapi.SendResult{AttemptID: att.AttemptID, ClientMessageID: att.ClientMessageID,
		Status: att.Status, ProviderMessageID: att.ProviderMessageID, ErrorCode: att.OutcomeCode(), SendsLeft: prior.Window.SendsLeft()})
	return status, out, e, true
}
