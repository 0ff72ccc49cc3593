package webui

import (
	qrcode "github.com/skip2/go-qrcode"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"

	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// --- enrollments ---

func (s *server) enrollStartPage(w http.ResponseWriter, r *http.Request, sess *session) {
	s.render(w, http.StatusOK, "enroll_start", sess, map[string]any{"Lifetime": s.cfg.Lifetime.String()})
}

func (s *server) startEnrollment(w http.ResponseWriter, r *http.Request, _ *session) {
	var raw [8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		s.internal(w, r, "start the enrollment", err)
		return
	}
	offer := "qo_" + hex.EncodeToString(raw[:])
	expires := time.Now().Add(s.cfg.Lifetime)
	_, err := s.cfg.Temporal.ExecuteWorkflow(r.Context(), client.StartWorkflowOptions{
		ID: wfapi.EnrollmentID(offer), TaskQueue: s.cfg.TaskQueue, Memo: map[string]any{"expires_at": expires},
	}, wfapi.EnrollmentWorkflow, wfapi.EnrollmentInput{OfferID: offer, RequestedBy: "webui", Lifetime: wfapi.Duration(s.cfg.Lifetime), PollGap: wfapi.Duration(s.cfg.PollGap)})
	if err != nil {
		s.internal(w, r, "start the enrollment", err)
		return
	}
	s.mu.Lock()
	for o, t := range s.expiries { // forget the enrollments long over
		if time.Since(t) > time.Hour {
			delete(s.expiries, o)
		}
	}
	s.expiries[offer] = expires
	s.mu.Unlock()
	http.Redirect(w, r, s.url("/enroll/"+offer), http.StatusSeeOther)
}

// Status is the JSON answer of an enrollment's status endpoint.
type Status struct {
	OfferID    string   `json:"offer_id"`
	Status     string   `json:"status"`
	Done       bool     `json:"done"`
	QR         bool     `json:"qr"` // a QR code to show (qr.png)
	NeedsCode  bool     `json:"needs_code"`
	ExpiresAt  string   `json:"expires_at,omitempty"`
	AccountKey string   `json:"account_key,omitempty"`
	Generation int32    `json:"generation,omitempty"`
	Replaced   []string `json:"replaced,omitempty"`
	// Error is a short, stable message when the enrollment reported an error (never the
	// error's text, which the log has).
	Error string `json:"error,omitempty"`
}

var errNoEnrollment = errors.New("no such enrollment")

// What an enrollment's page says about its error, by how it ended.
const (
	msgEnrollmentFailed   = "The enrollment failed. The server log has the details."
	msgEnrollmentStopped  = "The enrollment was stopped before it finished."
	msgEnrollmentTimedOut = "The enrollment ran out of time."
	msgPollerNotStarted   = "The bot is enrolled, but its poller did not start: it starts when a worker starts. The server log has the details."
	msgTooManyCodes       = "Too many wrong verification codes."
)

// enrollmentFailure is the page's message for an enrollment that reported an error, by
// its status: never the error's text.
func enrollmentFailure(status string) string {
	switch status {
	case vocab.EnrollmentConfirmed:
		return msgPollerNotStarted
	case vocab.EnrollmentBlocked:
		return msgTooManyCodes
	}
	return msgEnrollmentFailed
}

// state reads an enrollment: its workflow's query while it runs, its result once done.
// qrContent is the QR code's content while it may be scanned (it is no secret of ours,
// but it only ever leaves as an image).
func (s *server) state(ctx context.Context, offer string) (st Status, qrContent string, err error) {
	id := wfapi.EnrollmentID(offer)
	d, err := s.cfg.Temporal.DescribeWorkflow(ctx, id, "")
	if err != nil {
		if isNotFound(err) {
			return st, "", errNoEnrollment
		}
		return st, "", err
	}
	info := d.RawResponse.GetWorkflowExecutionInfo()
	if info.GetType().GetName() != wfapi.EnrollmentWorkflow {
		return st, "", errNoEnrollment
	}
	st = Status{OfferID: offer, Status: vocab.EnrollmentStarting}
	if exp, ok := s.expiry(offer, info.GetMemo().GetFields()["expires_at"]); ok {
		st.ExpiresAt = exp.UTC().Format(time.RFC3339)
	}
	var es wfapi.EnrollmentState
	switch info.GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		v, err := s.cfg.Temporal.QueryWorkflow(ctx, id, "", wfapi.QueryEnrollmentState)
		if err != nil {
			return st, "", nil // its first workflow task has not run yet
		}
		if err := v.Get(&es); err != nil {
			return st, "", err
		}
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		st.Done = true
		if err := s.cfg.Temporal.GetWorkflow(ctx, id, "").Get(ctx, &es); err != nil {
			return st, "", err
		}
	default:
		st.Done, st.Status, st.Error = true, vocab.EnrollmentFailed, msgEnrollmentFailed
		switch info.GetStatus() {
		case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
			st.Status, st.Error = vocab.EnrollmentCancelled, msgEnrollmentStopped
		case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
			st.Error = msgEnrollmentTimedOut
		}
		s.log.Warn("webui: the enrollment workflow did not complete", "offer", offer, "workflow_status", info.GetStatus().String())
		return st, "", nil
	}
	if es.Status != "" {
		st.Status = es.Status
	}
	st.NeedsCode = es.NeedsCode && !st.Done
	st.AccountKey, st.Generation, st.Replaced = es.AccountKey, es.Generation, es.Replaced
	if es.Error != "" {
		// The workflow's error text is an activity's (it names the worker's identity) or
		// the store's: the log has it, the page a message by the status.
		st.Error = enrollmentFailure(st.Status)
		s.log.Warn("webui: the enrollment reported an error", "offer", offer, "status", st.Status, "error", es.Error)
	}
	if !st.Done && es.QRContent != "" {
		st.QR, qrContent = true, es.QRContent
	}
	return st, qrContent, nil
}

// expiry is the enrollment's expiry: the one this server started it with, or the one in
// its workflow's memo (an enrollment started elsewhere may have none).
func (s *server) expiry(offer string, memo *commonpb.Payload) (time.Time, bool) {
	s.mu.Lock()
	t, ok := s.expiries[offer]
	s.mu.Unlock()
	if ok {
		return t, true
	}
	if memo == nil {
		return time.Time{}, false
	}
	if err := converter.GetDefaultDataConverter().FromPayload(memo, &t); err != nil || t.IsZero() {
		return time.Time{}, false
	}
	s.mu.Lock()
	s.expiries[offer] = t
	s.mu.Unlock()
	return t, true
}

func (s *server) offer(w http.ResponseWriter, r *http.Request) (string, bool) {
	offer := r.PathValue("offer")
	if !offerIDPattern.MatchString(offer) {
		http.NotFound(w, r)
		return "", false
	}
	return offer, true
}

// enrollment reads an enrollment's state for a page, or answers the failure (404 for an
// unknown enrollment) and reports false.
func (s *server) enrollment(w http.ResponseWriter, r *http.Request, offer string) (Status, bool) {
	st, _, err := s.state(r.Context(), offer)
	if errors.Is(err, errNoEnrollment) {
		s.fail(w, r, http.StatusNotFound, "No such enrollment.")
		return Status{}, false
	}
	if err != nil {
		s.internal(w, r, "read the enrollment", err)
		return Status{}, false
	}
	return st, true
}

func (s *server) enrollmentPage(w http.ResponseWriter, r *http.Request, sess *session) {
	offer, ok := s.offer(w, r)
	if !ok {
		return
	}
	st, ok := s.enrollment(w, r, offer)
	if !ok {
		return
	}
	s.render(w, http.StatusOK, "enrollment", sess, st)
}

func (s *server) enrollmentStatus(w http.ResponseWriter, r *http.Request, _ *session) {
	offer, ok := s.offer(w, r)
	if !ok {
		return
	}
	st, _, err := s.state(r.Context(), offer)
	if errors.Is(err, errNoEnrollment) {
		http.Error(w, "no such enrollment", http.StatusNotFound)
		return
	}
	if err != nil {
		s.log.Error("webui: enrollment status", "offer", offer, "error", err)
		http.Error(w, "could not read the enrollment", http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(st)
}

func (s *server) qrPNG(w http.ResponseWriter, r *http.Request, _ *session) {
	offer, ok := s.offer(w, r)
	if !ok {
		return
	}
	_, content, err := s.state(r.Context(), offer)
	if err != nil || content == "" {
		http.Error(w, "no QR code to show", http.StatusNotFound)
		return
	}
	png, err := qrcode.Encode(content, qrcode.Medium, 320)
	if err != nil {
		s.log.Error("webui: QR code", "error", err)
		http.Error(w, "could not draw the QR code", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	_, _ = w.Write(png)
}

func (s *server) verifyCode(w http.ResponseWriter, r *http.Request, sess *session) {
	offer, ok := s.offer(w, r)
	if !ok {
		return
	}
	code := strings.TrimSpace(r.PostFormValue("code"))
	if !codePattern.MatchString(code) {
		s.setFlash(sess, "The verification code is the number WeChat shows: type it again.")
		http.Redirect(w, r, s.url("/enroll/"+offer), http.StatusSeeOther)
		return
	}
	// A code is only sent while iLink asks for one: the workflow would keep a stray one
	// for the next time it asks.
	st, ok := s.enrollment(w, r, offer)
	if !ok {
		return
	}
	if !st.NeedsCode {
		s.setFlash(sess, "iLink is not asking for a verification code now.")
		http.Redirect(w, r, s.url("/enroll/"+offer), http.StatusSeeOther)
		return
	}
	s.signal(w, r, sess, offer, wfapi.SignalVerifyCode, wfapi.VerifyCodeSignal{Code: code}, "Verification code sent.")
}

func (s *server) cancel(w http.ResponseWriter, r *http.Request, sess *session) {
	offer, ok := s.offer(w, r)
	if !ok {
		return
	}
	s.signal(w, r, sess, offer, wfapi.SignalCancel, nil, "Cancelling the enrollment.")
}

func (s *server) signal(w http.ResponseWriter, r *http.Request, sess *session, offer, name string, arg any, done string) {
	err := s.cfg.Temporal.SignalWorkflow(r.Context(), wfapi.EnrollmentID(offer), "", name, arg)
	switch {
	case isNotFound(err):
		s.setFlash(sess, "The enrollment has already ended.")
	case err != nil:
		s.internal(w, r, "signal the enrollment", err)
		return
	default:
		s.setFlash(sess, done)
	}
	http.Redirect(w, r, s.url("/enroll/"+offer), http.StatusSeeOther)
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}
