package ilink

import (
	"bytes"
	"context"
	"errors"
	"time"
)

// UpdatesPage is one getupdates answer.
type UpdatesPage struct {
	// Messages are the inbound messages, possibly none.
	Messages []Message
	// Cursor is the get_updates_buf to send next. It equals the request's
	// cursor when the server returned none or the long poll timed out, so it
	// can always be stored.
	Cursor string
	// PollTimeout is the server's longpolling_timeout_ms hint for the next
	// call (zero when absent).
	PollTimeout time.Duration
	// TimedOut is true when the client's own long-poll deadline passed
	// before an answer: an empty page with the cursor unchanged, not an error.
	TimedOut bool
}

// GetUpdatesRequest is the input of GetUpdates.
type GetUpdatesRequest struct {
	// Cursor is the get_updates_buf of the previous page ("" on first start).
	Cursor string
	// PollTimeout is the long-poll duration (the previous page's
	// PollTimeout). Zero means the last hint this client received, or
	// Config.PollTimeout. It is capped by Config.MaxPollTimeout; the HTTP
	// timeout is this plus Config.PollMargin.
	PollTimeout time.Duration
	// SendBy, when set, is the last instant the request may leave: one not completely
	// written by then is never sent (CodeNotSent). A poller whose right to poll ends at
	// SendBy (its lease) does not poll past it, even when its process was stopped between
	// checking that right and writing the request.
	SendBy time.Time
}

// GetUpdates long-polls for inbound messages. When the client's own
// deadline passes before the server answered, it returns an empty page with
// the cursor unchanged and TimedOut set, not an error. Cancelling ctx
// returns an error (CodeNotSent or CodeOutcomeUnknown wrapping ctx.Err()).
func (c *Client) GetUpdates(ctx context.Context, req GetUpdatesRequest) (*UpdatesPage, error) {
	poll := c.pollDuration(req.PollTimeout)
	resp, err := c.postBy(ctx, opGetUpdates, pathGetUpdates, poll+c.cfg.PollMargin, req.SendBy,
		getUpdatesRequest{GetUpdatesBuf: req.Cursor, BaseInfo: c.baseInfo})
	if err != nil {
		var e *Error
		// A timeout after the server began answering is not a quiet empty
		// poll: the messages of that answer may be lost, so report it.
		if isClientTimeout(err) && ctx.Err() == nil && errors.As(err, &e) && e.Status == 0 {
			return &UpdatesPage{Cursor: req.Cursor, TimedOut: true}, nil
		}
		return nil, err
	}
	page, err := parseUpdates(bytes.NewReader(resp.body), c.cfg.MaxBodyBytes, req.Cursor)
	if err != nil {
		return nil, err
	}
	if page.PollTimeout > 0 {
		c.pollHint.Store(int64(page.PollTimeout))
	}
	return page, nil
}

// pollDuration picks the long-poll duration for the next getupdates.
func (c *Client) pollDuration(requested time.Duration) time.Duration {
	d := requested
	if d <= 0 {
		d = time.Duration(c.pollHint.Load())
	}
	if d <= 0 {
		d = c.cfg.PollTimeout
	}
	if d > c.cfg.MaxPollTimeout {
		d = c.cfg.MaxPollTimeout
	}
	return d
}
