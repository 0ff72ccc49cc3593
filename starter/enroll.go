package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	qrcode "github.com/skip2/go-qrcode"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// enrollEvent is one line of `starter enroll --json`.
type enrollEvent struct {
	Event      string   `json:"event"` // qr, status, need_code, wrong_code, done
	Status     string   `json:"status,omitempty"`
	QRContent  string   `json:"qr_content,omitempty"`
	AccountKey string   `json:"account_key,omitempty"`
	Generation int32    `json:"generation,omitempty"`
	Replaced   []string `json:"replaced,omitempty"`
	Error      string   `json:"error,omitempty"`
}

func enrollCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	fs, c := commandFlags("enroll", help{"enroll [--offer-id ID] [--lifetime D] [--json] [flags]",
		"Enrolls a bot: shows the QR code to scan with WeChat, each status change and the verification-code prompt, and ends with the account key (--json: one JSON event per line, the code read from stdin).",
		"starter enroll --requested-by alice"}, withTemporal|withJSON, stderr, getenv)
	offer := fs.String("offer-id", "", "login offer id (qo_...; default: random)")
	lifetime := fs.Duration("lifetime", 5*time.Minute, "how long the QR login stays open")
	requestedBy := fs.String("requested-by", envOr(getenv, "USER", "operator"), "who asked for the enrollment (audit)")
	every := fs.Duration("refresh", 500*time.Millisecond, "how often the state is read")
	if help, err := parse(fs, args, stdout); help || err != nil {
		return err
	}
	if *lifetime <= 0 {
		return usagef("enroll: --lifetime %s: must be positive", *lifetime)
	}
	if *every <= 0 {
		return usagef("enroll: --refresh %s: must be positive", *every)
	}
	if *offer == "" {
		var raw [8]byte
		if _, err := rand.Read(raw[:]); err != nil {
			return err
		}
		*offer = "qo_" + hex.EncodeToString(raw[:])
	}
	tc, err := dialTemporal(ctx, c, stderr)
	if err != nil {
		return err
	}
	defer tc.Close()
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: wfapi.EnrollmentID(*offer), TaskQueue: c.taskQueue},
		wfapi.EnrollmentWorkflow, wfapi.EnrollmentInput{OfferID: *offer, RequestedBy: *requestedBy, Lifetime: wfapi.Duration(*lifetime)})
	if err != nil {
		return fmt.Errorf("start enrollment: %w", err)
	}
	emit := func(ev enrollEvent, text string) error {
		if c.json {
			return printJSON(stdout, ev)
		}
		_, err := fmt.Fprintln(stdout, text)
		return err
	}
	lines := bufio.NewScanner(stdin)
	done := make(chan error, 1)
	var final wfapi.EnrollmentState
	go func() { done <- run.Get(ctx, &final) }()
	tick := time.NewTicker(*every)
	defer tick.Stop()
	var lastStatus, shownQR string
	// askedAt is the count of refused codes when the code was last asked for (-1: not
	// asked): a prompt is shown once per code iLink wants.
	askedAt, hinted, started := -1, false, time.Now()
	for {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("enrollment: %w", err)
			}
			if final.Status != lastStatus && final.Status != "" {
				// The workflow ended before a query showed its last status: show it now, so
				// the statuses always end with the final one.
				if err := emit(enrollEvent{Event: "status", Status: final.Status}, "status: "+final.Status); err != nil {
					return err
				}
			}
			if err := emit(enrollEvent{Event: "done", Status: final.Status, AccountKey: final.AccountKey, Generation: final.Generation,
				Replaced: final.Replaced, Error: final.Error}, doneText(final)); err != nil {
				return err
			}
			if final.Status != vocab.EnrollmentConfirmed {
				return fmt.Errorf("enrollment ended %s", final.Status)
			}
			return nil
		case <-ctx.Done():
			_ = tc.SignalWorkflow(context.Background(), run.GetID(), run.GetRunID(), wfapi.SignalCancel, nil)
			return ctx.Err()
		case <-tick.C:
		}
		if shownQR == "" && !hinted && time.Since(started) >= enrollHintAfter {
			// Without a worker on the task queue nothing moves: say so instead of sitting silent.
			hinted = true
			fmt.Fprintf(stderr, "starter: no QR code after %s: is a worker running on task queue %q (namespace %q, Temporal at %s)? Start one with `go run ./worker` (see the README, \"Run a worker\").\n",
				enrollHintAfter, c.taskQueue, c.namespace, c.temporal)
		}
		v, err := tc.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), wfapi.QueryEnrollmentState)
		if err != nil {
			continue // the first workflow task may not have run yet
		}
		var st wfapi.EnrollmentState
		if err := v.Get(&st); err != nil {
			return err
		}
		if st.QRContent != "" && st.QRContent != shownQR {
			shownQR = st.QRContent
			if err := emit(enrollEvent{Event: "qr", QRContent: st.QRContent}, renderQR(st.QRContent)); err != nil {
				return err
			}
		}
		if st.Status != lastStatus && st.Status != vocab.EnrollmentStarting {
			lastStatus = st.Status
			if err := emit(enrollEvent{Event: "status", Status: st.Status}, "status: "+st.Status); err != nil {
				return err
			}
		}
		if st.NeedsCode && st.WrongCodes > askedAt {
			ev, text := enrollEvent{Event: "need_code"}, "WeChat shows a number: type it here and press Enter:"
			if askedAt >= 0 && st.WrongCodes > 0 {
				ev, text = enrollEvent{Event: "wrong_code"}, "That code was wrong: type the number WeChat shows now and press Enter:"
			}
			askedAt = st.WrongCodes
			if err := emit(ev, text); err != nil {
				return err
			}
			if !lines.Scan() {
				return errors.New("no verification code on standard input")
			}
			code := strings.TrimSpace(lines.Text())
			if err := tc.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), wfapi.SignalVerifyCode, wfapi.VerifyCodeSignal{Code: code}); err != nil {
				return fmt.Errorf("send the verification code: %w", err)
			}
		}
		if !st.NeedsCode && st.Status != vocab.EnrollmentNeedsCode {
			askedAt = st.WrongCodes - 1 // iLink may ask again later: prompt then
		}
	}
}

// enrollHintAfter is how long enroll waits for a QR code before it suggests that no
// worker is running.
var enrollHintAfter = 10 * time.Second

// renderQR draws the QR code of content for a terminal, with the content below it.
func renderQR(content string) string {
	q, err := qrcode.New(content, qrcode.Medium)
	if err != nil {
		return "scan this link with WeChat: " + content
	}
	return q.ToSmallString(false) + "\nscan with WeChat: " + content
}

func doneText(st wfapi.EnrollmentState) string {
	if st.Status != vocab.EnrollmentConfirmed {
		msg := "enrollment ended: " + st.Status
		if st.Error != "" {
			msg += " (" + st.Error + ")"
		}
		return msg
	}
	msg := fmt.Sprintf("enrolled: account %s (generation %d)", st.AccountKey, st.Generation)
	if len(st.Replaced) > 0 {
		msg += "; replaced " + strings.Join(st.Replaced, ", ")
	}
	return msg
}
