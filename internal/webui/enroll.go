package webui

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"

	qrcode "github.com/skip2/go-qrcode"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// --- enrollments ---

// submissionPattern is the form of the start form's submission id (randomID(16)).
var submissionPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)

// startForm is what a form that starts an enrollment carries: a fresh submission id, so
// that however many times it is sent it starts one enrollment.
type startForm struct {
	Submission string
	Lifetime   string
	// Account is the bot a re-enrollment is for (shown only: a QR login of the same bot
	// gives it a new generation).
	Account string
}

func (s *server) newStartForm() startForm {
	return startForm{Submission: randomID(16), Lifetime: s.cfg.Lifetime.String()}
}

func (s *server) enrollStartPage(w http.ResponseWriter, r *http.Request, sess *session) {
	f := s.newStartForm()
	if k := r.URL.Query().Get("account"); accountKeyPattern.MatchString(k) {
		f.Account = k
	}
	s.render(w, http.StatusOK, "enroll_start", sess, f)
}

// submissionOffer is the offer id of the enrollment one submission of a start form
// starts: derived from the session's CSRF token (a secret of this login) and the form's
// submission id, so a repeated click names the same workflow, and nobody else can name it.
func submissionOffer(csrf, submission string) string {
	h := sha256.Sum256([]byte("ilinkflow/webui-enrollment\x00" + csrf + "\x00" + submission))
	return "qo_" + hex.EncodeToString(h[:16])
}

// startEnrollment starts the enrollment of one form submission: a second start of the
// same submission (a double click, a reload) finds the first one's workflow (its id is
// taken, and never reused) and goes to its page.
func (s *server) startEnrollment(w http.ResponseWriter, r *http.Request, sess *session) {
	sub := r.PostFormValue("submission")
	if !submissionPattern.MatchString(sub) {
		s.fail(w, r, http.StatusBadRequest, "The form is stale: reload the page and try again.")
		return
	}
	offer := submissionOffer(sess.csrf, sub)
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	_, err := s.cfg.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: wfapi.EnrollmentID(offer), TaskQueue: s.cfg.TaskQueue,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
	}, wfapi.EnrollmentWorkflow, wfapi.EnrollmentInput{OfferID: offer, RequestedBy: "webui",
		Lifetime: wfapi.Duration(s.cfg.Lifetime), PollGap: wfapi.Duration(s.cfg.PollGap)})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case errors.As(err, &started):
		s.log.Info("webui: the form started its enrollment already", "offer", offer)
	case err != nil:
		s.internal(w, r, "start the enrollment", err)
		return
	default:
		s.log.Info("webui: enrollment started", "offer", offer)
	}
	http.Redirect(w, r, s.url("/enroll/"+offer), http.StatusSeeOther)
}

// Status is the JSON answer of an enrollment's status endpoint (an owner's page gets it
// without the operator's details: offer, account, generation, replaced accounts).
type Status struct {
	OfferID   string `json:"offer_id,omitempty"`
	Status    string `json:"status"`
	Done      bool   `json:"done"`
	QR        bool   `json:"qr"` // a QR code to show (qr.png)
	NeedsCode bool   `json:"needs_code"`
	ExpiresAt string `json:"expires_at,omitempty"`
	// QRSerial numbers the QR codes (a new one after a refresh); QRExpiresAt is when the
	// one shown stops being scannable; QRRefreshesLeft how many more times an expired one
	// is replaced.
	QRSerial        int    `json:"qr_serial,omitempty"`
	QRExpiresAt     string `json:"qr_expires_at,omitempty"`
	QRRefreshesLeft int    `json:"qr_refreshes_left"`
	// WrongCodes counts the codes iLink refused for this QR code; CodeAttemptsLeft the
	// codes that may still be tried before iLink blocks the login.
	WrongCodes       int      `json:"wrong_codes"`
	CodeAttemptsLeft int      `json:"code_attempts_left"`
	AccountKey       string   `json:"account_key,omitempty"`
	Generation       int32    `json:"generation,omitempty"`
	Replaced         []string `json:"replaced,omitempty"`
	// Error is a short, stable message when the enrollment reported an error (never the
	// error's text, which the log has).
	Error string `json:"error,omitempty"`
	// Text is the status in plain words of the page's language; Hint what the page says
	// besides (what to do next); Problem marks a hint that says something went wrong.
	Text    string `json:"text"`
	Hint    string `json:"hint,omitempty"`
	Problem bool   `json:"problem,omitempty"`
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
// but it only ever leaves as an image). Every read is bounded by Config.Timeout.
func (s *server) state(ctx context.Context, offer string) (st Status, qrContent string, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
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
	var es wfapi.EnrollmentState
	switch info.GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		v, err := s.cfg.Temporal.QueryWorkflow(ctx, id, "", wfapi.QueryEnrollmentState)
		if err != nil {
			if b := unreachableBackend(err); b != "" {
				return st, "", err
			}
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
			st.Status, st.Error = vocab.EnrollmentExpired, msgEnrollmentTimedOut
		}
		s.log.Warn("webui: the enrollment workflow did not complete", "offer", offer, "workflow_status", info.GetStatus().String())
		return st, "", nil
	}
	if es.Status != "" {
		st.Status = es.Status
	}
	st.NeedsCode = es.NeedsCode && !st.Done
	st.AccountKey, st.Generation, st.Replaced = es.AccountKey, es.Generation, es.Replaced
	st.ExpiresAt, st.QRSerial, st.QRRefreshesLeft = stamp(es.ExpiresAt), es.QRSerial, es.QRRefreshesLeft
	st.WrongCodes, st.CodeAttemptsLeft = es.WrongCodes, es.CodeAttemptsLeft
	if es.Error != "" {
		// The workflow's error text is an activity's (it names the worker's identity) or
		// the store's: the log has it, the page a message by the status.
		st.Error = enrollmentFailure(st.Status)
		s.log.Warn("webui: the enrollment reported an error", "offer", offer, "status", st.Status, "error", es.Error)
	}
	if !st.Done && es.QRContent != "" {
		st.QR, qrContent = true, es.QRContent
		st.QRExpiresAt = stamp(es.QRExpiresAt)
	}
	return st, qrContent, nil
}

// worded fills the status's plain words for an operator's page (owner false) or an owner's.
func (st Status) worded(w words, owner bool) Status {
	st.Text = w.statusText(st.Status)
	st.Hint, st.Problem = "", false
	pick := func(operator, forOwner string) string {
		if owner {
			return forOwner
		}
		return operator
	}
	switch {
	case st.Done && st.Status == vocab.EnrollmentConfirmed && st.Error == "":
		st.Hint = pick("", w.Done)
	case st.Done && st.Status == vocab.EnrollmentExpired:
		st.Hint, st.Problem = pick(w.Expired, w.ExpiredOwner), true
	case st.Done && st.Status == vocab.EnrollmentBlocked:
		st.Hint, st.Problem = pick(w.Blocked, w.BlockedOwner), true
	case st.Done && st.Status == vocab.EnrollmentCancelled:
		st.Hint, st.Problem = pick(st.Error, w.Cancelled), true
		if st.Hint == "" {
			st.Hint = w.Cancelled
		}
	case st.Done && (st.Status == vocab.EnrollmentAlreadyBound || st.Status == vocab.EnrollmentBindedRedirect):
		st.Hint = w.Bound
	case st.Done:
		st.Hint, st.Problem = pick(st.Error, w.Failed), true
	case st.NeedsCode && st.WrongCodes > 0:
		st.Hint, st.Problem = w.wrongCode(st.WrongCodes, st.CodeAttemptsLeft), true
	case st.QR && st.QRSerial > 1 && st.Status == vocab.EnrollmentWaiting:
		st.Hint = w.QRRenewed
	}
	if owner {
		st.OfferID, st.AccountKey, st.Generation, st.Replaced, st.Error = "", "", 0, nil, ""
	}
	return st
}

func (s *server) offer(w http.ResponseWriter, r *http.Request) (string, bool) {
	offer := r.PathValue("offer")
	if !offerIDPattern.MatchString(offer) {
		s.fail(w, r, http.StatusNotFound, "No such enrollment.")
		return "", false
	}
	return offer, true
}

// enrollment reads an enrollment's state for a page, or answers the failure (404 for an
// unknown enrollment, 503 when Temporal cannot be reached) and reports false.
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
	return st.worded(wordsFor(langEN), false), true
}

// enrollmentView is what the enrollment page's template gets.
type enrollmentView struct {
	Status
	W words
	// Retry starts a new enrollment once this one ended.
	Retry startForm
	// OwnerLink is the link just made for the bot's owner (shown once, on the answer to
	// the form that made it).
	OwnerLink string
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
	s.render(w, http.StatusOK, "enrollment", sess, enrollmentView{Status: st, W: wordsFor(langEN), Retry: s.newStartForm()})
}

// writeStatus answers a status read for a page's script: the status, 404 for an unknown
// enrollment, 503 (JSON) when Temporal cannot be reached, 502 otherwise.
func (s *server) writeStatus(w http.ResponseWriter, offer string, st Status, err error) {
	switch {
	case errors.Is(err, errNoEnrollment):
		http.Error(w, "no such enrollment", http.StatusNotFound)
		return
	case err != nil:
		if b := unreachableBackend(err); b != "" {
			s.log.Warn("webui: enrollment status", "offer", offer, "error", err)
			s.unreachableJSON(w, b)
			return
		}
		s.log.Error("webui: enrollment status", "offer", offer, "error", err)
		http.Error(w, "could not read the enrollment", http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(st)
}

func (s *server) enrollmentStatus(w http.ResponseWriter, r *http.Request, _ *session) {
	offer, ok := s.offer(w, r)
	if !ok {
		return
	}
	st, _, err := s.state(r.Context(), offer)
	s.writeStatus(w, offer, st.worded(wordsFor(langEN), false), err)
}

func (s *server) qrPNG(w http.ResponseWriter, r *http.Request, _ *session) {
	offer, ok := s.offer(w, r)
	if !ok {
		return
	}
	s.writeQR(w, r, offer)
}

// writeQR draws the enrollment's current QR code.
func (s *server) writeQR(w http.ResponseWriter, r *http.Request, offer string) {
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
		s.setFailure(sess, "The verification code is the number WeChat shows: type it again.")
		http.Redirect(w, r, s.url("/enroll/"+offer), http.StatusSeeOther)
		return
	}
	st, ok := s.enrollment(w, r, offer)
	if !ok {
		return
	}
	if !st.NeedsCode {
		s.setFailure(sess, "iLink is not asking for a verification code now.")
		http.Redirect(w, r, s.url("/enroll/"+offer), http.StatusSeeOther)
		return
	}
	s.signal(w, r, sess, offer, wfapi.SignalVerifyCode, wfapi.VerifyCodeSignal{Code: code},
		"Verification code sent: the page says whether iLink took it.")
}

func (s *server) cancel(w http.ResponseWriter, r *http.Request, sess *session) {
	offer, ok := s.offer(w, r)
	if !ok {
		return
	}
	s.signal(w, r, sess, offer, wfapi.SignalCancel, nil, "Cancelling the enrollment.")
}

func (s *server) signal(w http.ResponseWriter, r *http.Request, sess *session, offer, name string, arg any, done string) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	err := s.cfg.Temporal.SignalWorkflow(ctx, wfapi.EnrollmentID(offer), "", name, arg)
	switch {
	case isNotFound(err):
		s.setFailure(sess, "The enrollment has already ended.")
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
