package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// heldRow is one held reply as `starter held list` and `starter held drop` print it:
// never its content (the store keeps it sealed and never returns it).
type heldRow struct {
	HeldID           string `json:"held_id"`
	AccountKey       string `json:"account_key"`
	PeerID           string `json:"peer_id"`
	SourceMessageKey string `json:"source_message_key"`
	ReplyWindowID    int64  `json:"reply_window_id"`
	RequestID        string `json:"request_id"`
	ContentType      string `json:"content_type"`
	Final            bool   `json:"final"`
	SizeBytes        int32  `json:"size_bytes"`
	// Status is a vocab.HeldStatuses status; Reason why the window could not carry it.
	Status     string    `json:"status"`
	Reason     string    `json:"reason"`
	AttemptID  string    `json:"attempt_id,omitempty"`
	DropReason string    `json:"drop_reason,omitempty"`
	DroppedBy  string    `json:"dropped_by,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

func heldRowOf(h store.HeldReply) heldRow {
	return heldRow{HeldID: h.HeldID, AccountKey: h.AccountKey, PeerID: h.PeerID, SourceMessageKey: h.SourceMessageKey,
		ReplyWindowID: h.ReplyWindowID, RequestID: h.RequestID, ContentType: h.ContentType, Final: h.Final, SizeBytes: h.SizeBytes,
		Status: h.Status, Reason: h.Reason, AttemptID: h.AttemptID, DropReason: h.DropReason, DroppedBy: h.DroppedBy,
		CreatedAt: h.CreatedAt, ExpiresAt: h.ExpiresAt, UpdatedAt: h.UpdatedAt}
}

// Limits of `starter held list --limit` (the store's own bounds).
const (
	heldDefaultLimit = 100
	heldMaxLimit     = 1000
)

func heldCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs, c := commandFlags("held", help{
		"held (list [--account KEY] [--status S[,S...]] [--limit N] | drop --account KEY HELD_ID [--by NAME]) [flags]",
		"Lists the replies held for a conversation's next window (a window's quota used up, its last send kept for the final answer, " +
			"or the window expired), newest first, never their content; drop drops one still waiting (status held) so that it is never sent.",
		"starter held list --status held\n" +
			"starter held list --account ilk_0123abcd --status held,sending --json\n" +
			"starter held drop --account ilk_0123abcd hr_0123456789abcdef0123456789abcdef"},
		withDB|withJSON, stderr, getenv)
	account := fs.String("account", "", "only this account (list); the held reply's account (drop: required)")
	status := fs.String("status", "", "list: only these statuses, comma-separated ("+strings.Join(vocab.HeldStatuses, ", ")+")")
	limit := fs.Int("limit", heldDefaultLimit, fmt.Sprintf("list: at most this many held replies (1..%d)", heldMaxLimit))
	by := fs.String("by", envOr(getenv, "USER", "operator"), "drop: who drops the held reply (recorded in its audit record)")
	help, rest, err := parseArgs(fs, args, stdout)
	if help || err != nil {
		return err
	}
	if len(rest) == 0 {
		return usagef("held: give list or drop --account KEY HELD_ID")
	}
	verb, rest := rest[0], rest[1:]
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var statuses []string
	switch verb {
	case "list":
		if len(rest) != 0 {
			return usagef("held list takes no argument (got %q)", rest[0])
		}
		if set["by"] {
			return usagef("held list: --by is drop's")
		}
		if statuses, err = heldStatuses(*status); err != nil {
			return err
		}
		if *limit < 1 || *limit > heldMaxLimit {
			return usagef("held list: --limit %d: must be between 1 and %d", *limit, heldMaxLimit)
		}
	case "drop":
		switch {
		case len(rest) != 1:
			return usagef("held drop takes one held reply id (hr_...)")
		case *account == "":
			return usagef("held drop: --account is required")
		case set["status"] || set["limit"]:
			return usagef("held drop: --status and --limit are list's")
		case *by == "":
			return usagef("held drop: --by must name who drops it")
		}
	default:
		return usagef("held: unknown action %q: want list or drop", verb)
	}
	st, closeFn, err := openStore(ctx, c, getenv)
	if err != nil {
		return err
	}
	defer closeFn()
	if verb == "list" {
		return listHeld(ctx, st, store.HeldFilter{AccountKey: *account, Statuses: statuses, Limit: int32(*limit)}, c.json, stdout)
	}
	h, err := st.DropHeldReply(ctx, time.Now(), *account, rest[0], *by)
	if err != nil {
		return err
	}
	if c.json {
		return printJSON(stdout, heldRowOf(h))
	}
	fmt.Fprintf(stdout, "held reply %s of %s (to %s, for message %s) is dropped by %s: it is never sent\n",
		h.HeldID, h.AccountKey, h.PeerID, h.SourceMessageKey, h.DroppedBy)
	return nil
}

// heldStatuses parses --status: held reply statuses, comma-separated (none: every
// status). An unknown one is a usage mistake that names the store's code, invalid_input.
func heldStatuses(v string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		known := false
		for _, k := range vocab.HeldStatuses {
			known = known || s == k
		}
		if !known {
			return nil, usagef("held list: %s: --status %q: must be one of %s", vocab.CodeInvalidInput, s, strings.Join(vocab.HeldStatuses, ", "))
		}
		out = append(out, s)
	}
	return out, nil
}

func listHeld(ctx context.Context, st *store.Store, f store.HeldFilter, asJSON bool, stdout io.Writer) error {
	list, err := st.ListHeldReplies(ctx, f)
	if err != nil {
		return err
	}
	rows := make([]heldRow, 0, len(list))
	for _, h := range list {
		rows = append(rows, heldRowOf(h))
	}
	if asJSON {
		return printJSON(stdout, rows)
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tACCOUNT\tPEER\tFOR MESSAGE\tSTATUS\tREASON\tFINAL\tSIZE\tCREATED\tEXPIRES\tDROPPED")
	for _, r := range rows {
		final, dropped := "-", "-"
		if r.Final {
			final = "final"
		}
		switch {
		case r.Status != vocab.HeldDropped:
		case r.DropReason == store.HeldDropOperator:
			dropped = "by " + r.DroppedBy
		default: // past its age limit
			dropped = r.DropReason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.HeldID, r.AccountKey, r.PeerID, r.SourceMessageKey,
			r.Status, r.Reason, final, r.SizeBytes, r.CreatedAt.UTC().Format(time.RFC3339), r.ExpiresAt.UTC().Format(time.RFC3339), clipLine(dropped, 80))
	}
	return tw.Flush()
}
