package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/ilinkflow/ilinkflow/internal/operator"
	"github.com/ilinkflow/ilinkflow/internal/store"
)

// forgetRow is what `starter forget` prints: counts and ids, never the user's content
// (nor the user's id, which the operator gave).
type forgetRow struct {
	DryRun                     bool     `json:"dry_run"`
	Accounts                   []string `json:"accounts"`
	Messages                   int      `json:"messages"`
	Images                     int      `json:"images"`
	ContextTokens              int      `json:"context_tokens"`
	Attempts                   int      `json:"attempts"`
	HeldReplies                int      `json:"held_replies"`
	StagedMedia                int      `json:"staged_media"`
	Sessions                   int      `json:"sessions"`
	QuarantinedPages           int      `json:"quarantined_pages"`
	UnreadableQuarantinedPages int      `json:"unreadable_quarantined_pages"`
	WindowsEnded               []int64  `json:"windows_ended"`
	Windows                    int      `json:"windows"`
	WorkflowsFound             int      `json:"workflows_found"`
	WorkflowsTerminated        int      `json:"workflows_terminated"`
	WorkflowsDeleted           int      `json:"workflows_deleted"`
	// NothingLeft: nothing was left to erase (a run after a complete one).
	NothingLeft bool `json:"nothing_left"`
}

func forgetRowOf(r operator.ForgetResult, dry bool) forgetRow {
	row := forgetRow{DryRun: dry, Accounts: r.Accounts, Messages: r.Messages, Images: r.Images, ContextTokens: r.ContextTokens,
		Attempts: r.Attempts, HeldReplies: r.HeldReplies, StagedMedia: r.StagedMedia, Sessions: r.Sessions,
		QuarantinedPages: r.QuarantinedPages, UnreadableQuarantinedPages: r.UnreadableQuarantinedPages,
		WindowsEnded: r.OpenWindows, Windows: len(r.Windows), WorkflowsFound: r.WorkflowsFound,
		WorkflowsTerminated: r.WorkflowsTerminated, WorkflowsDeleted: r.WorkflowsDeleted}
	if row.Accounts == nil {
		row.Accounts = []string{}
	}
	if row.WindowsEnded == nil {
		row.WindowsEnded = []int64{}
	}
	row.NothingLeft = !r.Erased() && (dry && r.WorkflowsFound == 0 || !dry && r.WorkflowsTerminated+r.WorkflowsDeleted == 0)
	return row
}

// forgetCmd erases one WeChat user's content (the right to be forgotten): the store
// first, then the user's workflows in Temporal (operator.Forget).
func forgetCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs, c := commandFlags("forget", help{"forget --peer ID [--account KEY] (--dry-run | --yes) [--by NAME] [flags]",
		"Erases a WeChat user's content (a request to be forgotten): their messages' text and attachments, the replies to them, " +
			"their context tokens, held replies and quarantined pages, and deletes their workflows' histories in Temporal; " +
			"the rows' keys and counters and an audit line (who asked, the counts) stay. --dry-run counts what it would erase.",
		"starter forget --peer o9cq8abc@im.wechat --dry-run\n" +
			"starter forget --peer o9cq8abc@im.wechat --account ilk_0123abcd --yes --json"},
		withTemporal|withDB|withJSON, stderr, getenv)
	peer := fs.String("peer", "", "the WeChat user's id (the peer id; required)")
	account := fs.String("account", "", "only this account (default: every account)")
	dryRun := fs.Bool("dry-run", false, "count what would be erased; change nothing")
	yes := fs.Bool("yes", false, "erase: the erasure cannot be undone")
	by := fs.String("by", envOr(getenv, "USER", "operator"), "who asks for the erasure (recorded in the audit line)")
	if help, err := parse(fs, args, stdout); help || err != nil {
		return err
	}
	switch {
	case *peer == "":
		return usagef("forget: --peer is required")
	case store.ValidPeerID(*peer) != nil:
		return usagef("forget: --peer: not a WeChat user id (1..256 bytes, no spaces around it, no control characters)")
	case *account != "" && store.ValidAccountKey(*account) != nil:
		return usagef("forget: --account %q: must be an account key (ilk_ and 32 hex digits)", *account)
	case *dryRun && *yes:
		return usagef("forget: give --dry-run or --yes, not both")
	case !*dryRun && !*yes:
		return usagef("forget: the erasure cannot be undone and needs explicit confirmation: give --yes (or --dry-run to count what it would erase)")
	case *by == "" || len(*by) > 200:
		return usagef("forget: --by must name who asks (1..200 bytes)")
	}
	st, closeFn, err := openStore(ctx, c, getenv)
	if err != nil {
		return err
	}
	defer closeFn()
	tc, err := dialTemporal(ctx, c, stderr)
	if err != nil {
		return err
	}
	defer tc.Close()
	res, err := operator.Forget(ctx, st, tc, c.namespace, store.ForgetInput{PeerID: *peer, AccountKey: *account,
		RequestedBy: *by, DryRun: *dryRun})
	if err != nil {
		return fmt.Errorf("forget: %w", err)
	}
	row := forgetRowOf(res, *dryRun)
	if c.json {
		return printJSON(stdout, row)
	}
	printForget(stdout, row)
	return nil
}

func printForget(w io.Writer, r forgetRow) {
	accounts := fmt.Sprintf("%d account(s): %s", len(r.Accounts), strings.Join(r.Accounts, ", "))
	switch {
	case r.NothingLeft:
		fmt.Fprintf(w, "nothing was left to erase of this WeChat user on %s\n", accounts)
	case r.DryRun:
		fmt.Fprintf(w, "dry run: would erase of this WeChat user on %s\n", accounts)
	default:
		fmt.Fprintf(w, "erased of this WeChat user on %s\n", accounts)
	}
	if !r.NothingLeft {
		fmt.Fprintf(w, "  messages %d, attachments %d, context tokens %d, replies %d, held replies %d, staged media %d, "+
			"agent sessions %d, quarantined pages %d\n", r.Messages, r.Images, r.ContextTokens, r.Attempts, r.HeldReplies,
			r.StagedMedia, r.Sessions, r.QuarantinedPages)
		verb := "ended"
		if r.DryRun {
			verb = "to end"
		}
		fmt.Fprintf(w, "  reply windows %d, open ones %s %d\n", r.Windows, verb, len(r.WindowsEnded))
	}
	if r.DryRun {
		fmt.Fprintf(w, "  Temporal: %d workflow(s) of the user listed, to be deleted with their histories\n", r.WorkflowsFound)
	} else {
		fmt.Fprintf(w, "  Temporal: %d workflow(s) terminated, %d deleted with their histories\n", r.WorkflowsTerminated, r.WorkflowsDeleted)
	}
	if r.UnreadableQuarantinedPages > 0 {
		fmt.Fprintf(w, "  %d quarantined page(s) no sealing key opens any more were kept (unreadable already)\n", r.UnreadableQuarantinedPages)
	}
}
