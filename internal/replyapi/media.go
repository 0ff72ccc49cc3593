package replyapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
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
	sctx, cancel := a.storeContext(r.Context())
	loc, err := a.cfg.Store.GetAttachment(sctx, a.cfg.Now(), store.ByToken(token), parts[0], index)
	cancel()
	if err != nil {
		a.refuse(w, route, a.storeFailure(sctx, a.log.With("route", route), "the attachment request", err))
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
	name := vocab.SafeFileName(att.Name)
	h := w.Header()
	h.Set("Content-Type", contentTypeOf(att.Kind, name, data))
	h.Set("Content-Length", strconv.Itoa(len(data)))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if att.Kind == "file" && att.Name != "" {
		h.Set("Content-Disposition", contentDisposition(name))
	}
	a.cfg.Metrics.ReplyRequest(route, "ok")
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, bytes.NewReader(data))
}

// contentDisposition is the Content-Disposition of a file named name (a SafeFileName):
// an attachment with an ASCII fallback name and the name itself as UTF-8 (RFC 6266 and
// RFC 8187), e.g. for 报告.pdf:
//
//	attachment; filename="__.pdf"; filename*=UTF-8''%E6%8A%A5%E5%91%8A.pdf
func contentDisposition(name string) string {
	var fallback, encoded strings.Builder
	for _, r := range name {
		switch {
		case r < 0x20 || r >= 0x7f || r == '"' || r == '\\':
			fallback.WriteByte('_')
		default:
			fallback.WriteRune(r)
		}
	}
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(name); i++ {
		c := name[i]
		if isAttrChar(c) {
			encoded.WriteByte(c)
			continue
		}
		encoded.WriteByte('%')
		encoded.WriteByte(hex[c>>4])
		encoded.WriteByte(hex[c&15])
	}
	return `attachment; filename="` + fallback.String() + `"; filename*=UTF-8''` + encoded.String()
}

// isAttrChar reports whether c may stand unencoded in an RFC 8187 ext-value.
func isAttrChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$&+-.^_`|~", c) >= 0
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
	// final: the "final" field was "true" (the reply is the agent's final answer).
	final bool
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

// maxFieldBytes bounds a multipart form field other than the file.
const maxFieldBytes = 1024

// parseMediaReply reads a multipart media reply from body (cut at limit plus the
// multipart overhead by the caller): a "type" field (image, file or video), one "file"
// part with 1..limit bytes and, for a file, its name: a "file_name" field or else the
// part's file name; an optional "final" field ("true" or "false"). A field given twice, an unknown field, a name with a control
// character (U+0000 included) or invalid UTF-8 (vocab.CheckFileName) are refused; the
// name kept is vocab.SafeFileName's (no path, bounded). sizeHint (the declared body
// size, or -1) sizes the file's buffer. It reads nothing else.
func parseMediaReply(body io.Reader, boundary string, limit, sizeHint int64) (mediaReply, *apiError) {
	if boundary == "" {
		return mediaReply{}, &apiError{code: CodeInvalidMultipart, msg: "multipart body has no boundary"}
	}
	mr := multipart.NewReader(body, boundary)
	var out mediaReply
	var gotFile, gotType, gotName, gotFinal bool
	partName := ""
	tooLarge := func(err error) bool {
		var mbe *http.MaxBytesError
		return errors.As(err, &mbe)
	}
	malformed := func(err error) *apiError {
		if tooLarge(err) {
			return &apiError{code: CodeMediaTooLarge, msg: fmt.Sprintf("the file exceeds %d bytes", limit)}
		}
		return &apiError{code: CodeInvalidMultipart, msg: "multipart body is malformed or truncated"}
	}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return mediaReply{}, malformed(err)
		}
		switch field := p.FormName(); field {
		case "type", "file_name":
			if (field == "type" && gotType) || (field == "file_name" && gotName) {
				return mediaReply{}, &apiError{code: CodeInvalidMedia, msg: fmt.Sprintf("the form field %q is given twice", field)}
			}
			v, err := io.ReadAll(io.LimitReader(p, maxFieldBytes+1))
			if err != nil {
				return mediaReply{}, malformed(err)
			}
			if field == "type" {
				if len(v) > maxFieldBytes || !utf8.Valid(v) {
					return mediaReply{}, &apiError{code: CodeInvalidMedia, msg: fmt.Sprintf("the type field is over %d bytes or not UTF-8", maxFieldBytes)}
				}
				out.kind, gotType = string(v), true
				continue
			}
			if e := checkFileName(string(v), "the file_name field"); e != nil {
				return mediaReply{}, e
			}
			out.fileName, gotName = string(v), true
		case "final":
			v, err := io.ReadAll(io.LimitReader(p, maxFieldBytes+1))
			if err != nil {
				return mediaReply{}, malformed(err)
			}
			if gotFinal || (string(v) != "true" && string(v) != "false") {
				return mediaReply{}, &apiError{code: CodeInvalidMedia, msg: `the final field is given once, as "true" or "false"`}
			}
			out.final, gotFinal = string(v) == "true", true
		case "file":
			if gotFile {
				return mediaReply{}, &apiError{code: CodeInvalidMedia, msg: "a media reply carries exactly one file"}
			}
			gotFile = true
			partName = p.FileName()
			data, err := readFile(p, limit, sizeHint)
			if err != nil {
				return mediaReply{}, malformed(err)
			}
			if int64(len(data)) > limit {
				return mediaReply{}, &apiError{code: CodeMediaTooLarge, msg: fmt.Sprintf("the file exceeds %d bytes", limit)}
			}
			out.data = data
		default:
			return mediaReply{}, &apiError{code: CodeInvalidMedia, msg: fmt.Sprintf("unknown form field %q", clip(field, 32))}
		}
	}
	switch {
	case out.kind != "image" && out.kind != "file" && out.kind != "video":
		return mediaReply{}, &apiError{code: CodeUnsupportedType, msg: `a multipart reply's type must be "image", "file" or "video"`}
	case !gotFile || len(out.data) == 0:
		return mediaReply{}, &apiError{code: CodeInvalidMedia, msg: "the file part is missing or empty"}
	}
	if out.kind != "file" {
		out.fileName = ""
	} else {
		if !gotName {
			if e := checkFileName(partName, "the file part's filename"); e != nil {
				return mediaReply{}, e
			}
			out.fileName = partName
		}
		if strings.TrimSpace(out.fileName) == "" {
			return mediaReply{}, &apiError{code: CodeInvalidMedia, msg: "a file needs a name (the part's filename or a file_name field)"}
		}
		out.fileName = vocab.SafeFileName(out.fileName)
	}
	sniffed := http.DetectContentType(out.data)
	switch {
	case out.kind == "image" && !strings.HasPrefix(sniffed, "image/"):
		return mediaReply{}, &apiError{code: CodeUnsupportedContentType, msg: "the image is not in a recognised image format (PNG, JPEG, GIF, WebP, BMP)"}
	case out.kind == "video" && !strings.HasPrefix(sniffed, "video/"):
		return mediaReply{}, &apiError{code: CodeUnsupportedContentType, msg: "the video is not in a recognised video format (MP4, WebM, AVI)"}
	}
	sum := sha256.Sum256(out.data)
	out.sha256 = hex.EncodeToString(sum[:])
	return out, nil
}

// checkFileName refuses a file name an agent gave (what names where it came from) that
// vocab.CheckFileName refuses, or that is over maxFieldBytes.
func checkFileName(name, what string) *apiError {
	switch fault := vocab.CheckFileName(name); {
	case fault == vocab.TextNotUTF8:
		return &apiError{code: CodeInvalidFileName, msg: what + " is not valid UTF-8"}
	case fault != vocab.TextOK:
		return &apiError{code: CodeInvalidFileName, msg: what + " contains a control character (U+0000 included)"}
	case len(name) > maxFieldBytes:
		return &apiError{code: CodeInvalidFileName, msg: fmt.Sprintf("%s is over %d bytes", what, maxFieldBytes)}
	}
	return nil
}

// readFile reads a file part of at most limit bytes (limit+1 are read to tell a larger
// one), into one buffer sized by sizeHint when that is known and within the cap.
func readFile(p io.Reader, limit, sizeHint int64) ([]byte, error) {
	var buf bytes.Buffer
	if sizeHint > 0 {
		buf.Grow(int(min(sizeHint, limit+1)) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(io.LimitReader(p, limit+1))
	return buf.Bytes(), err
}

// uploadSlot takes one of the MaxUploads slots of media replies reading and staging
// their bytes, waiting up to UploadWait; release gives it back (more than once is safe).
func (a *API) uploadSlot(ctx context.Context) (release func(), e *apiError) {
	t := time.NewTimer(a.cfg.UploadWait)
	defer t.Stop()
	select {
	case a.uploads <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-a.uploads }) }, nil
	case <-t.C:
		return nil, &apiError{code: CodeUploadsBusy, msg: failureMessage(CodeUploadsBusy)}
	case <-ctx.Done():
		return nil, &apiError{code: CodeUploadsBusy, msg: failureMessage(CodeUploadsBusy)}
	}
}

// replyMedia serves a multipart POST /v1/reply: the headers (a declared size over the
// cap is refused unread), the session (an unauthenticated body is never read), an upload
// slot, then the body is parsed and checked (nothing written on a refusal), a repeated
// Idempotency-Key answers its first outcome, the media is staged, and the window's send
// Update runs with the staged media's id.
func (a *API) replyMedia(w http.ResponseWriter, r *http.Request, token sealing.Secret) (int, any, *apiError) {
	key, kerr := idempotencyKey(r)
	if kerr != nil {
		return 0, nil, kerr
	}
	_, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if params["boundary"] == "" {
		return 0, nil, &apiError{code: CodeInvalidMultipart, msg: "multipart body has no boundary"}
	}
	limit := a.cfg.MaxMediaBytes
	if r.ContentLength > limit+multipartOverhead {
		return 0, nil, &apiError{code: CodeMediaTooLarge, msg: fmt.Sprintf("the request body exceeds %d bytes (the file exceeds %d bytes)", limit+multipartOverhead, limit)}
	}
	log := a.log.With("route", "reply")
	// The session is checked here (an unauthenticated body is never read) and again as
	// the media is staged, whose session is the one the Update runs under.
	_, serr := a.session(r.Context(), token)
	var prior *store.SendOutcome
	if serr != nil {
		if prior, serr = a.repeated(r.Context(), log, token, key, serr); serr != nil {
			return 0, nil, serr
		}
	}
	release, e := a.uploadSlot(r.Context())
	if e != nil {
		return 0, nil, e
	}
	defer release()
	m, e := parseMediaReply(http.MaxBytesReader(w, r.Body, limit+multipartOverhead), params["boundary"], limit, r.ContentLength)
	if e != nil {
		return 0, nil, e
	}
	kind, fileName, sum := m.kind, m.fileName, m.sha256
	match := func(att store.Attempt) bool {
		return att.Content.Type == kind && att.Content.Media != nil && att.Content.Media.SHA256 == sum &&
			att.Content.Media.FileName == fileName
	}
	if key != "" {
		log = log.With("request_id", key)
		if prior == nil {
			p, ok, e := a.findReply(r.Context(), log, token, key)
			if e != nil {
				return 0, nil, e
			}
			if ok {
				prior = &p
			}
		}
		if prior != nil {
			return a.priorAnswer(log, key, *prior, match)
		}
	}
	sctx, cancel := a.storeContext(r.Context())
	staged, err := a.cfg.Store.StageMedia(sctx, a.cfg.Now(), store.StageMediaInput{Session: store.ByToken(token),
		Kind: kind, FileName: fileName, Data: m.data})
	cancel()
	m.data = nil
	release() // the bytes are staged: the slot's memory is free
	if err != nil {
		return 0, nil, a.storeFailure(sctx, log, "the media reply (type, file_name, file)", err)
	}
	sess := store.Session{SessionID: staged.SessionID, ReplyWindowID: staged.ReplyWindowID}
	ref := &wfapi.MediaRef{MediaID: staged.MediaID, FileName: staged.FileName, Size: staged.Size, SHA256: staged.SHA256}
	return a.sendUpdate(r, log, token, key, sess, ReplyRequest{Type: kind, Final: m.final}, ref, match)
}
