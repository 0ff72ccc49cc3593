package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
)

// quarantineRow is one quarantined page as listed.
type quarantineRow struct {
	QuarantineID string    `json:"quarantine_id"`
	AccountKey   string    `json:"account_key"`
	Generation   int32     `json:"generation"`
	Scope        string    `json:"scope"`
	Messages     int32     `json:"messages"`
	ErrorCode    string    `json:"error_code"`
	ErrorMessage string    `json:"error_message"`
	CursorMoved  bool      `json:"cursor_moved"`
	CreatedAt    time.Time `json:"created_at"`
}

func quarantineRowOf(q store.QuarantinedPage) quarantineRow {
	return quarantineRow{QuarantineID: q.QuarantineID, AccountKey: q.AccountKey, Generation: q.Generation, Scope: q.Scope,
		Messages: q.Messages, ErrorCode: q.ErrorCode, ErrorMessage: q.ErrorMessage, CursorMoved: q.CursorMoved, CreatedAt: q.CreatedAt}
}

func quarantineCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs, c := commandFlags("quarantine", help{"quarantine [--account KEY] [--show ID] [--json]",
		"Lists the pages (or messages of a page) the store could not take as iLink handed them out, oldest first, " +
			"with the error; each is kept sealed and its bot went on. --show prints one's messages as iLink handed " +
			"them out (context tokens included: it needs ILINKFLOW_SEALING_KEYS).",
		"starter quarantine --account ilk_0123abcd"}, withDB|withJSON, stderr, getenv)
	account := fs.String("account", "", "only this account")
	show := fs.String("show", "", "print the messages of this quarantined page (qp_...)")
	if help, err := parse(fs, args, stdout); help || err != nil {
		return err
	}
	if *show != "" && store.ValidQuarantineID(*show) != nil {
		return usagef("--show %q: must be a quarantine id (qp_ and 32 hex digits)", *show)
	}
	st, closeFn, err := openStore(ctx, c, getenv)
	if err != nil {
		return err
	}
	defer closeFn()
	if *show != "" {
		q, content, err := st.OpenQuarantinedPage(ctx, *show)
		if err != nil {
			return err
		}
		return printJSON(stdout, struct {
			quarantineRow
			Content json.RawMessage `json:"content"`
		}{quarantineRowOf(q), json.RawMessage(content.Reveal())})
	}
	list, err := st.ListQuarantinedPages(ctx, *account)
	if err != nil {
		return err
	}
	rows := make([]quarantineRow, 0, len(list))
	for _, q := range list {
		rows = append(rows, quarantineRowOf(q))
	}
	if c.json {
		return printJSON(stdout, rows)
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUARANTINE\tACCOUNT\tSCOPE\tMESSAGES\tWHEN\tERROR")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s: %s\n", r.QuarantineID, r.AccountKey, r.Scope, r.Messages,
			r.CreatedAt.UTC().Format(time.RFC3339), r.ErrorCode, clipLine(r.ErrorMessage, 120))
	}
	return tw.Flush()
}

// clipLine shows s on one line of at most n runes.
func clipLine(s string, n int) string {
	r := []rune(s)
	for i, c := range r {
		if c == '\n' || c == '\r' || c == '\t' {
			r[i] = ' '
		}
	}
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return string(r)
}
