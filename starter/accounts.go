package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/operator"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// accountRow is one line of `starter accounts` (operator.Accounts).
type accountRow = operator.Account

func accountsCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs, c := commandFlags("accounts", help{"accounts [--status S] [--json]",
		"Lists accounts with status, generation, last successful poll (health), pause end, send block, open window, " +
			"route (starter route) and whether the sealing keys open the bot token (unchecked without " + sealing.EnvKeys + ").",
		"starter accounts --status active"}, withDB|withJSON, stderr, getenv)
	status := fs.String("status", "", "only accounts with this status ("+strings.Join(accountStatuses, ", ")+")")
	if help, err := parse(fs, args, stdout); help || err != nil {
		return err
	}
	if err := oneOf("status", *status, accountStatuses...); err != nil {
		return err
	}
	st, closeFn, err := openStore(ctx, c, getenv)
	if err != nil {
		return err
	}
	defer closeFn()
	// The tokens are checked with the configured sealing keys only (openStore falls back
	// to a throwaway key, which opens nothing).
	_, keysErr := sealing.LoadKeyring(getenv)
	rows, err := operator.Accounts(ctx, st, *status, keysErr == nil)
	if err != nil {
		return err
	}
	if c.json {
		return printJSON(stdout, rows)
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ACCOUNT\tBOT\tSTATUS\tGEN\tLAST POLL\tPAUSED UNTIL\tSENDS BLOCKED UNTIL\tOPEN WINDOW\tTOKEN\tROUTE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.AccountKey, r.ProviderAccountID, r.Status, r.Generation, ago(r.LastPollAt),
			timeOrDash(r.PauseUntil), timeOrDash(r.SendsBlockedUntil), idOrDash(r.OpenWindow), r.TokenState(), r.RouteState())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.Token == operator.TokenUnreadable {
			fmt.Fprintf(stdout, "%s: bot token unreadable (%s): %s\n", r.AccountKey, r.TokenProblem, r.TokenFix)
		}
	}
	return nil
}

// windowRow is one line of `starter windows`.
type windowRow struct {
	ReplyWindowID int64     `json:"reply_window_id"`
	AccountKey    string    `json:"account_key"`
	MessageKey    string    `json:"message_key"`
	State         string    `json:"state"`
	ExpiresAt     time.Time `json:"expires_at"`
	Reserved      int32     `json:"reserved"`
	Transmitted   int32     `json:"transmitted"`
	// Sent counts the sends iLink accepted (Transmitted counts refused ones too).
	Sent      int32 `json:"sent"`
	MaxSends  int32 `json:"max_sends"`
	SendsLeft int32 `json:"sends_left"`
	// Held counts the replies held for the window's conversation (its account and peer)
	// still to send: they go first when the peer's next message opens a window.
	Held int32 `json:"held"`
}

func windowsCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs, c := commandFlags("windows", help{"windows [--account KEY] [--state S] [--limit N] [--json]",
		"Lists reply windows, newest first (SENT: replies iLink accepted, of the quota; LEFT: sends the window still grants; " +
			"HELD: replies held for the window's conversation, sent first when its next message opens a window: starter held list).",
		"starter windows --account ilk_0123abcd --state open --limit 10"}, withDB|withJSON, stderr, getenv)
	account := fs.String("account", "", "only this account")
	state := fs.String("state", "", "only this state ("+strings.Join(windowStates, ", ")+")")
	limit := fs.Int("limit", 50, "at most this many windows")
	if help, err := parse(fs, args, stdout); help || err != nil {
		return err
	}
	if err := oneOf("state", *state, windowStates...); err != nil {
		return err
	}
	if *limit < 1 {
		return usagef("--limit %d: must be at least 1", *limit)
	}
	st, closeFn, err := openStore(ctx, c, getenv)
	if err != nil {
		return err
	}
	defer closeFn()
	ws, err := st.ListWindows(ctx, store.WindowFilter{AccountKey: *account, State: *state, Limit: int32(*limit)})
	if err != nil {
		return err
	}
	ids := make([]int64, 0, len(ws))
	for _, w := range ws {
		ids = append(ids, w.ReplyWindowID)
	}
	sent, err := st.SentCounts(ctx, ids)
	if err != nil {
		return err
	}
	held, err := heldByConversation(ctx, st)
	if err != nil {
		return err
	}
	rows := make([]windowRow, 0, len(ws))
	for _, w := range ws {
		rows = append(rows, windowRow{ReplyWindowID: w.ReplyWindowID, AccountKey: w.AccountKey, MessageKey: w.SourceMessageKey,
			State: w.State, ExpiresAt: w.ExpiresAt, Reserved: w.Reserved, Transmitted: w.Transmitted, Sent: sent[w.ReplyWindowID],
			MaxSends: w.MaxSends, SendsLeft: w.SendsLeft(), Held: held[conversation{w.AccountKey, w.PeerID}]})
	}
	if c.json {
		return printJSON(stdout, rows)
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WINDOW\tACCOUNT\tSTATE\tSENT\tLEFT\tHELD\tEXPIRES")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d/%d\t%d\t%d\t%s\n", r.ReplyWindowID, r.AccountKey, r.State, r.Sent, r.MaxSends, r.SendsLeft, r.Held,
			r.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

// conversation is a bot's conversation with one peer.
type conversation struct{ account, peer string }

// heldByConversation counts, per conversation, the held replies still to send.
func heldByConversation(ctx context.Context, st *store.Store) (map[conversation]int32, error) {
	counts, err := st.WaitingHeldCounts(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[conversation]int32, len(counts))
	for _, c := range counts {
		out[conversation{c.AccountKey, c.PeerID}] = c.Replies
	}
	return out, nil
}

func ago(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return time.Since(*t).Round(time.Second).String() + " ago"
}

// timeOrDash shows a future time (a pause end, a send block); a past or no time is "-".
func timeOrDash(t *time.Time) string {
	if t == nil || !t.After(time.Now()) {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

var (
	accountStatuses = []string{vocab.AccountActive, vocab.AccountPaused, vocab.AccountNeedsRelogin, vocab.AccountReplaced, vocab.AccountDisabled}
	windowStates    = []string{vocab.WindowOpen, vocab.WindowSuperseded, vocab.WindowCancelled, vocab.WindowExpired}
)

func idOrDash(id int64) string {
	if id == 0 {
		return "-"
	}
	return fmt.Sprint(id)
}

// steerCmd is pause, resume and remove: the store first (the source of truth), then the
// account's poller is told.
func steerCmd(ctx context.Context, verb string, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	what := map[string]string{
		"pause":  "Pauses an active account: its poller stops fetching until the pause ends (windows stay open).",
		"resume": "Resumes a paused account.",
		"remove": "Disables an account: its open windows are cancelled and its poller stops.",
	}[verb]
	synopsis, example := verb+" --account KEY [--reason TEXT] [flags]", "starter "+verb+" --account ilk_0123abcd"
	if verb == "pause" {
		synopsis, example = "pause --account KEY [--for DURATION] [--reason TEXT] [flags]", "starter pause --account ilk_0123abcd --for 30m --reason maintenance"
	}
	fs, c := commandFlags(verb, help{synopsis, what, example}, withTemporal|withDB|withJSON, stderr, getenv)
	account := fs.String("account", "", "account key (required)")
	var pauseFor *time.Duration
	if verb == "pause" {
		pauseFor = fs.Duration("for", time.Hour, "how long to pause (a Go duration: 90s, 30m, 2h)")
	}
	reason := fs.String("reason", "operator", "reason recorded with the change")
	if help, err := parse(fs, args, stdout); help || err != nil {
		return err
	}
	if *account == "" {
		return usagef("%s: --account is required", verb)
	}
	if pauseFor != nil && *pauseFor <= 0 {
		return usagef("pause: --for %s: must be positive", *pauseFor)
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
	var pf time.Duration
	if pauseFor != nil {
		pf = *pauseFor
	}
	out, err := operator.Steer(ctx, st, tc, operator.SteerRequest{Verb: verb, AccountKey: *account, PauseFor: pf, Reason: *reason})
	if err != nil {
		return err
	}
	if c.json {
		return printJSON(stdout, out)
	}
	fmt.Fprintf(stdout, "%s is now %s", out.AccountKey, out.Status)
	if out.Status == vocab.AccountPaused && out.PauseUntil != nil {
		fmt.Fprintf(stdout, " until %s (in %s)", out.PauseUntil.UTC().Format(time.RFC3339), time.Until(*out.PauseUntil).Round(time.Second))
	}
	if !out.PollerSignalled {
		fmt.Fprint(stdout, " (no running poller to tell)")
	}
	fmt.Fprintln(stdout)
	return nil
}
