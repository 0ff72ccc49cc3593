package ilink_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
)

// TestSimHTTP5xxIsARetryableStatusError checks a 5xx on sendmessage and on
// getupdates.
func TestSimHTTP5xxIsARetryableStatusError(t *testing.T) {
	e := newSim(t, nil, nil)
	m := e.converse("hi")
	e.fault(ilinksim.Fault{Endpoint: "sendmessage", Kind: ilinksim.FaultStatus, Status: 503})
	_, err := e.client.SendText(e.ctx, replyOpts(m), "x")
	var ie *ilink.Error
	if !errors.As(err, &ie) || ie.Code != ilink.CodeHTTPStatus || ie.Status != 503 || !ilink.IsRetryable(err) || ilink.MayHaveTakenEffect(err) {
		t.Fatalf("got %v", err)
	}
	if len(e.sent()) != 0 {
		t.Fatal("the faulted send was processed")
	}
	e.fault(ilinksim.Fault{Endpoint: "getupdates", Kind: ilinksim.FaultStatus, Status: 502})
	if _, err := e.client.GetUpdates(e.ctx, ilink.GetUpdatesRequest{}); ilink.CodeOf(err) != ilink.CodeHTTPStatus || !ilink.IsTransient(err) {
		t.Fatalf("getupdates: %v", err)
	}
	// The retry goes through.
	if _, err := e.client.SendText(e.ctx, replyOpts(m), "x"); err != nil {
		t.Fatal(err)
	}
}

// TestSimLongPollClientTimeoutIsAnEmptyPageWithTheCursorUnchanged holds
// getupdates on the server longer than the client waits.
func TestSimLongPollClientTimeoutIsAnEmptyPageWithTheCursorUnchanged(t *testing.T) {
	e := newSim(t, func(c *ilinksim.Config) { c.LongPollHold = time.Minute }, func(c *ilink.Config) {
		c.PollTimeout = 50 * time.Millisecond
		c.PollMargin = 50 * time.Millisecond
	})
	page, err := e.client.GetUpdates(e.ctx, ilink.GetUpdatesRequest{Cursor: "Ck-previous"})
	if err != nil {
		t.Fatal(err)
	}
	if !page.TimedOut || page.Cursor != "Ck-previous" || len(page.Messages) != 0 {
		t.Fatalf("%+v", page)
	}
	// The same holds when the server delays its answer through a fault.
	e.fault(ilinksim.Fault{Endpoint: "getupdates", Kind: ilinksim.FaultDelay, Delay: ilinksim.Duration(time.Minute)})
	page, err = e.client.GetUpdates(e.ctx, ilink.GetUpdatesRequest{Cursor: "Ck-2"})
	if err != nil || !page.TimedOut || page.Cursor != "Ck-2" {
		t.Fatalf("%+v %v", page, err)
	}
}

// TestSimLongPollCancelledThroughTheContextIsAnError cancels a held poll.
func TestSimLongPollCancelledThroughTheContextIsAnError(t *testing.T) {
	e := newSim(t, func(c *ilinksim.Config) { c.LongPollHold = time.Minute }, nil)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() {
		_, err := e.client.GetUpdates(ctx, ilink.GetUpdatesRequest{})
		done <- err
	}()
	// Wait (without sleeping) until the simulator holds the poll.
	for {
		st, err := e.ctl.BotState(e.ctx, e.bot.BotID)
		if err != nil {
			t.Fatal(err)
		}
		if st.Pollers == 1 {
			break
		}
	}
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) || ilink.CodeOf(err) != ilink.CodeOutcomeUnknown {
		t.Fatalf("got %v", err)
	}
}

// TestSimConnectionDroppedAfterTheRequestWasReadIsOutcomeUnknown checks the
// one transport failure a send must never retry automatically.
func TestSimConnectionDroppedAfterTheRequestWasReadIsOutcomeUnknown(t *testing.T) {
	e := newSim(t, nil, nil)
	m := e.converse("hi")
	e.fault(ilinksim.Fault{Endpoint: "sendmessage", Kind: ilinksim.FaultDrop})
	_, err := e.client.SendText(e.ctx, replyOpts(m), "x")
	if ilink.CodeOf(err) != ilink.CodeOutcomeUnknown || !errors.Is(err, ilink.ErrOutcomeUnknown) ||
		ilink.IsRetryable(err) || !ilink.MayHaveTakenEffect(err) {
		t.Fatalf("got %v", err)
	}
	if r := e.requests("sendmessage"); len(r) != 1 || r[0].Fault != ilinksim.FaultDrop {
		t.Fatalf("the simulator did not read the request: %+v", r)
	}
}

// TestSimTimeoutAwaitingTheResponseIsOutcomeUnknown delays sendmessage past
// the client's send timeout.
func TestSimTimeoutAwaitingTheResponseIsOutcomeUnknown(t *testing.T) {
	e := newSim(t, nil, func(c *ilink.Config) { c.SendTimeout = 50 * time.Millisecond })
	m := e.converse("hi")
	e.fault(ilinksim.Fault{Endpoint: "sendmessage", Kind: ilinksim.FaultDelay, Delay: ilinksim.Duration(time.Minute)})
	_, err := e.client.SendText(e.ctx, replyOpts(m), "x")
	if ilink.CodeOf(err) != ilink.CodeOutcomeUnknown || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
}

// TestSimOversizedBodyIsBodyTooLarge answers getupdates with a body over the
// client's cap.
func TestSimOversizedBodyIsBodyTooLarge(t *testing.T) {
	e := newSim(t, nil, func(c *ilink.Config) { c.MaxBodyBytes = 4096 })
	e.fault(ilinksim.Fault{Endpoint: "getupdates", Kind: ilinksim.FaultOversized, Size: 1 << 20})
	_, err := e.client.GetUpdates(e.ctx, ilink.GetUpdatesRequest{})
	if ilink.CodeOf(err) != ilink.CodeBodyTooLarge || !errors.Is(err, ilink.ErrBodyTooLarge) {
		t.Fatalf("got %v", err)
	}
	// A body just under the cap is fine.
	e.fault(ilinksim.Fault{Endpoint: "getupdates", Kind: ilinksim.FaultOversized, Size: 4000})
	if _, err := e.client.GetUpdates(e.ctx, ilink.GetUpdatesRequest{}); err != nil {
		t.Fatalf("under the cap: %v", err)
	}
}

// TestSimInvalidBodyIsMalformed answers with truncated JSON and with a body
// of the wrong shape.
func TestSimInvalidBodyIsMalformed(t *testing.T) {
	e := newSim(t, nil, nil)
	e.fault(ilinksim.Fault{Endpoint: "getupdates", Kind: ilinksim.FaultInvalidJSON})
	if _, err := e.client.GetUpdates(e.ctx, ilink.GetUpdatesRequest{}); ilink.CodeOf(err) != ilink.CodeMalformedBody {
		t.Fatalf("truncated: %v", err)
	}
	e.fault(ilinksim.Fault{Endpoint: "getupdates", Kind: ilinksim.FaultBody, Body: `{"msgs":[{"message_id":1.5}]}`})
	if _, err := e.client.GetUpdates(e.ctx, ilink.GetUpdatesRequest{}); ilink.CodeOf(err) != ilink.CodeMalformedBody {
		t.Fatalf("fractional id: %v", err)
	}
	e.fault(ilinksim.Fault{Endpoint: "msg/notifystart", Kind: ilinksim.FaultBody, Body: `<html>gateway</html>`})
	if err := e.client.NotifyStart(e.ctx); ilink.CodeOf(err) != ilink.CodeMalformedBody {
		t.Fatalf("html: %v", err)
	}
}

// TestSimStaleTokenOnGetUpdatesAndSendMessage checks -14 from a killed bot
// and from the fault, in both envelope styles.
func TestSimStaleTokenOnGetUpdatesAndSendMessage(t *testing.T) {
	for _, style := range []string{ilinksim.StaleErrcode, ilinksim.StaleRet, ilinksim.StaleBoth} {
		e := newSim(t, func(c *ilinksim.Config) { c.StaleTokenStyle = style }, nil)
		m := e.converse("hi")
		e.fault(ilinksim.Fault{Endpoint: "getupdates", Kind: ilinksim.FaultStale})
		if _, err := e.client.GetUpdates(e.ctx, ilink.GetUpdatesRequest{}); !errors.Is(err, ilink.ErrStaleToken) {
			t.Fatalf("%s: fault on getupdates: %v", style, err)
		}
		if err := e.ctl.KillBot(e.ctx, e.bot.BotID); err != nil {
			t.Fatal(err)
		}
		_, err := e.client.GetUpdates(e.ctx, ilink.GetUpdatesRequest{})
		if !ilink.IsStaleToken(err) || ilink.IsRetryable(err) {
			t.Fatalf("%s: getupdates: %v", style, err)
		}
		_, err = e.client.SendText(e.ctx, replyOpts(m), "x")
		var ie *ilink.Error
		if !errors.As(err, &ie) || ie.Code != ilink.CodeStaleToken || ie.Errmsg != "session timeout" {
			t.Fatalf("%s: sendmessage: %v", style, err)
		}
		if s := e.sent(); len(s) != 1 || s[0].Reason != ilinksim.ReasonStaleToken {
			t.Fatalf("%s: sent log %+v", style, s)
		}
		for _, call := range []func() error{
			func() error { return e.client.NotifyStart(e.ctx) },
			func() error { _, err := e.client.GetConfig(e.ctx, m.FromUserID, ""); return err },
		} {
			if err := call(); !ilink.IsStaleToken(err) {
				t.Fatalf("%s: other endpoint: %v", style, err)
			}
		}
	}
}
