package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"

	"github.com/ilinkflow/ilinkflow/vocab"
)

// Attachment is a downloaded attachment of a delivered message.
type Attachment struct {
	// ContentType is the gateway's Content-Type (e.g. image/png, audio/silk, a file's type
	// by its name).
	ContentType string
	// Data is the decrypted media.
	Data []byte
}

// FetchError is a refused fetch or media reply: the HTTP status and the reply API's error code
// (attachment_not_found, wrong_message, media_expired, media_too_large,
// invalid_agent_session, ...).
type FetchError struct {
	Status int
	Code   string
}

// Error implements error.
func (e *FetchError) Error() string {
	return fmt.Sprintf("agent: attachment fetch refused: %d %s", e.Status, e.Code)
}

// DefaultMaxFetchBytes bounds what FetchAttachment reads (100 MiB).
const DefaultMaxFetchBytes = 100 << 20

// FetchAttachment downloads an attachment of the message a webhook delivered: gatewayURL
// is the gateway's reply API base (e.g. http://127.0.0.1:8090), token the delivery's
// session_token and fetchPath an attachment's fetch_path (wfapi.AgentAttachment.FetchPath
// in an agent workflow's input). hc nil uses http.DefaultClient. A refusal is a
// *FetchError; the token is never part of an error.
func FetchAttachment(ctx context.Context, hc *http.Client, gatewayURL, token, fetchPath string) (Attachment, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	if !strings.HasPrefix(fetchPath, "/v1/messages/") {
		return Attachment{}, errors.New("agent: fetch path is not an attachment path")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(gatewayURL, "/")+fetchPath, nil)
	if err != nil {
		return Attachment{}, errors.New("agent: gateway URL is invalid")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return Attachment{}, fmt.Errorf("agent: attachment fetch: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var body struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body)
		return Attachment{}, &FetchError{Status: resp.StatusCode, Code: body.Error.Code}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, DefaultMaxFetchBytes+1))
	if err != nil {
		return Attachment{}, fmt.Errorf("agent: attachment fetch: %w", err)
	}
	if len(data) > DefaultMaxFetchBytes {
		return Attachment{}, &FetchError{Status: http.StatusRequestEntityTooLarge, Code: "media_too_large"}
	}
	if resp.ContentLength >= 0 && int64(len(data)) != resp.ContentLength {
		return Attachment{}, errors.New("agent: attachment fetch: truncated body")
	}
	return Attachment{ContentType: resp.Header.Get("Content-Type"), Data: data}, nil
}

// ReplyMediaResult is the reply API's answer to a media reply (200 sent, 202 unknown).
type ReplyMediaResult struct {
	AttemptID         string `json:"attempt_id"`
	ClientMessageID   string `json:"client_message_id"`
	Status            string `json:"status"`
	ProviderMessageID string `json:"provider_message_id"`
	SendsLeft         int32  `json:"sends_left"`
	RequestID         string `json:"request_id"`
}

// ReplyMedia sends an image, a file or a video through the reply API as a webhook agent
// would with curl -F: kind is image, file or video, fileName names a file, data is the
// plaintext (at most the gateway's cap, 20 MiB by default), idempotencyKey ("" none)
// makes a retry answer the first outcome without sending twice. A file name that is not
// valid UTF-8 or holds a control character (vocab.CheckFileName) is refused before any
// request with a *TextError. A refusal by the API is a *FetchError with its code; the
// token is never part of an error. Bytes go to the gateway only, never through Temporal.
func ReplyMedia(ctx context.Context, hc *http.Client, gatewayURL, token, kind, fileName string, data []byte, idempotencyKey string) (ReplyMediaResult, error) {
	if fault := vocab.CheckFileName(fileName); fault != vocab.TextOK {
		return ReplyMediaResult{}, &TextError{Field: FieldFileName, Fault: fault, Bytes: len(fileName)}
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	_ = w.WriteField("type", kind)
	if fileName != "" {
		_ = w.WriteField("file_name", fileName)
	}
	part, err := w.CreateFormFile("file", "upload")
	if err != nil {
		return ReplyMediaResult{}, err
	}
	_, _ = part.Write(data)
	if err := w.Close(); err != nil {
		return ReplyMediaResult{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(gatewayURL, "/")+"/v1/reply", &body)
	if err != nil {
		return ReplyMediaResult{}, errors.New("agent: gateway URL is invalid")
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+token)
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return ReplyMediaResult{}, fmt.Errorf("agent: media reply: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return ReplyMediaResult{}, fmt.Errorf("agent: media reply: %w", err)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(raw, &e)
		return ReplyMediaResult{}, &FetchError{Status: resp.StatusCode, Code: e.Error.Code}
	}
	var out ReplyMediaResult
	if err := json.Unmarshal(raw, &out); err != nil {
		return ReplyMediaResult{}, errors.New("agent: media reply: the answer is not JSON")
	}
	return out, nil
}
