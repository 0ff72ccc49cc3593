package ilink

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// decodeBody reads at most limit bytes from r, decodes a JSON object into
// out and checks its envelope. status is recorded in errors.
func decodeBody(op string, status int, r io.Reader, limit int64, out enveloped) error {
	data, err := readLimited(r, -1, limit)
	if err != nil {
		if errors.Is(err, errTooLarge) {
			return &Error{Code: CodeBodyTooLarge, Op: op, Status: status,
				Err: fmt.Errorf("%w (%d bytes)", errTooLarge, limit)}
		}
		return &Error{Code: CodeOutcomeUnknown, Op: op, Status: status, Err: err}
	}
	return decodeJSON(op, status, data, out)
}

// decodeJSON decodes a JSON object into out (unknown fields ignored) and
// maps its ret/errcode/errmsg envelope to an error.
func decodeJSON(op string, status int, data []byte, out enveloped) error {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return &Error{Code: CodeMalformedBody, Op: op, Status: status,
			Err: errors.New("response is not a JSON object")}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &Error{Code: CodeMalformedBody, Op: op, Status: status, Err: jsonCause(err)}
	}
	e := out.env()
	return envelopeError(op, status, e.Ret, e.Errcode, e.Errmsg)
}

// jsonCause keeps the JSON error's kind and position but never echoes the
// offending value (which could be a secret).
func jsonCause(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("invalid JSON at offset %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Errorf("field %q: cannot decode a JSON %s into %s", te.Field, te.Value, te.Type)
	case errors.Is(err, errBadID):
		return errBadID
	}
	return errors.New("invalid JSON")
}

// parseUpdates parses a getupdates response body.
func parseUpdates(r io.Reader, limit int64, cursor string) (*UpdatesPage, error) {
	var resp getUpdatesResponse
	if err := decodeBody(opGetUpdates, http.StatusOK, r, limit, &resp); err != nil {
		return nil, err
	}
	page := &UpdatesPage{Messages: resp.Msgs, Cursor: cursor}
	if resp.GetUpdatesBuf != "" {
		page.Cursor = resp.GetUpdatesBuf
	}
	if ms := resp.LongPollingTimeoutMs; ms > 0 && ms < int64(24*time.Hour/time.Millisecond) {
		page.PollTimeout = time.Duration(ms) * time.Millisecond
	}
	return page, nil
}

// parseSend parses a sendmessage response body.
func parseSend(r io.Reader, limit int64) (ID, error) {
	var resp sendMessageResponse
	if err := decodeBody(opSendMessage, http.StatusOK, r, limit, &resp); err != nil {
		return 0, err
	}
	return resp.MessageID, nil
}

// parseUploadURL parses a getuploadurl response body.
func parseUploadURL(r io.Reader, limit int64) (*UploadURL, error) {
	var resp getUploadURLResponse
	if err := decodeBody(opGetUploadURL, http.StatusOK, r, limit, &resp); err != nil {
		return nil, err
	}
	if resp.UploadFullURL == "" && resp.UploadParam == "" {
		return nil, &Error{Code: CodeMalformedBody, Op: opGetUploadURL, Status: http.StatusOK,
			Err: errors.New("neither upload_full_url nor upload_param is set")}
	}
	return &UploadURL{UploadParam: resp.UploadParam, ThumbUploadParam: resp.ThumbUploadParam,
		UploadFullURL: resp.UploadFullURL}, nil
}

// parseConfig parses a getconfig response body.
func parseConfig(r io.Reader, limit int64) (*BotConfig, error) {
	var resp getConfigResponse
	if err := decodeBody(opGetConfig, http.StatusOK, r, limit, &resp); err != nil {
		return nil, err
	}
	return &BotConfig{TypingTicket: resp.TypingTicket}, nil
}

// parsePlain parses a response whose only content is the envelope
// (sendtyping, notifystart, notifystop).
func parsePlain(op string, r io.Reader, limit int64) error {
	var resp plainResponse
	return decodeBody(op, http.StatusOK, r, limit, &resp)
}

// parseBotQRCode parses a get_bot_qrcode response body.
func parseBotQRCode(r io.Reader, limit int64) (*QRCode, error) {
	var resp getBotQRCodeResponse
	if err := decodeBody(opGetBotQRCode, http.StatusOK, r, limit, &resp); err != nil {
		return nil, err
	}
	if resp.QRCode == "" {
		return nil, &Error{Code: CodeMalformedBody, Op: opGetBotQRCode, Status: http.StatusOK,
			Err: errors.New("qrcode is missing")}
	}
	return &QRCode{QRCode: resp.QRCode, ImageContent: resp.QRCodeImgContent}, nil
}

// parseQRStatus parses a get_qrcode_status response body.
func parseQRStatus(r io.Reader, limit int64) (*QRCodeStatus, error) {
	var resp getQRCodeStatusResponse
	if err := decodeBody(opGetQRCodeStatus, http.StatusOK, r, limit, &resp); err != nil {
		return nil, err
	}
	st := &QRCodeStatus{
		Status:       QRStatus(resp.Status),
		RedirectHost: resp.RedirectHost,
		BotToken:     resp.BotToken,
		ILinkBotID:   resp.ILinkBotID,
		BaseURL:      resp.BaseURL,
		ILinkUserID:  resp.ILinkUserID,
	}
	malformed := func(msg string) error {
		return &Error{Code: CodeMalformedBody, Op: opGetQRCodeStatus, Status: http.StatusOK, Err: errors.New(msg)}
	}
	switch {
	case st.Status == "":
		return nil, malformed("status is missing")
	case st.Status == QRConfirmed && st.ILinkBotID == "":
		return nil, malformed("confirmed without ilink_bot_id")
	case st.Status == QRConfirmed && st.BotToken == "":
		return nil, malformed("confirmed without bot_token")
	}
	return st, nil
}

// parseUploadResponse reads the download reference from a successful CDN
// upload answer.
func parseUploadResponse(h http.Header) (string, error) {
	p := h.Get(hdrEncryptedParam)
	if p == "" {
		return "", &Error{Code: CodeMalformedBody, Op: opCDNUpload, Status: http.StatusOK,
			Err: errors.New("x-encrypted-param header is missing")}
	}
	return p, nil
}
