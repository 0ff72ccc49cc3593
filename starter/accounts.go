package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/store"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// accountRow is one line of `starter accounts`.
type accountRow struct {
	AccountKey        string     `json:"account_key"`
	ProviderAccountID string     `json:"provider_account_id"`
	Owner             string     `json:"owner_peer_id"`
	Status            string     `json:"status"`
	Reason            string     `json:"status_reason,omitempty"`
	Generation        int32      `json:"generation"`
	LastPollAt        *time.Time `json:"last_poll_at,omitempty"`
	PauseUntil        *time.Time `json:"pause_until,omitempty"`
	SendsBlockedUntil *time.Time `json:"sends_blocked_until,omitempty"`
	OpenWindow        int64      `json:"open_window,omitempty"`
	ReplacedBy        string     `json:"replaced_by,omitempty"`
}

func accountsCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs, c := commandFlags("accounts", help{"accounts [--status S] [--json]",
		"Lists accounts with status, generation, last successful poll (health), pause end, send block and open window.",
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
	accounts, err := st.ListAccounts(ctx, *status)
	if err != nil {
		return err
	}
	open, err := st.ListWindows(ctx, store.WindowFilter{State: store.WindowOpen, Limit: 10000})
	if err != nil {
		return err
	}
	openOf := map[string]int64{}
	for _, w := range open {
		openOf[w.AccountKey] = w.ReplyWindowID
	}
	rows := make([]accountRow, 0, len(accounts))
	for _, a := range accounts {
		rows = append(rows, accountRow{AccountKey: a.AccountKey, ProviderAccountID: a.ProviderAccountID, Owner: a.OwnerPeerID,
			Status: a.Status, Reason: a.StatusReason, Generation: a.Generation, LastPollAt: a.LastPollAt, PauseUntil: a.PauseUntil,
			SendsBlockedUntil: a.SendsBlockedUntil, OpenWindow: openOf[a.AccountKey], ReplacedBy: a.ReplacedBy})
	}
	if c.json {
		return printJSON(stdout, rows)
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ACCOUNT\tBOT\tSTATUS\tGEN\tLAST POLL\tPAUSED UNTIL\tSENDS BLOCKED UNTIL\tOPEN WINDOW")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.AccountKey, r.ProviderAccountID, r.Status, r.Generation, ago(r.LastPollAt),
			timeOrDash(r.PauseUntil), timeOrDash(r.SendsBlockedUntil), idOrDash(r.OpenWindow))
	}
	return tw.Flush()
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
	MaxSends      int32     `json:"max_sends"`
	SendsLeft     int32     `json:"sends_left"`
}

func windowsCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs, c := commandFlags("windows", help{"windows [--account KEY] [--state S] [--limit N] [--json]",
		"Lists reply windows, newest first.",
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
	rows := make([]windowRow, 0, len(ws))
	for _, w := range ws {
		rows = append(rows, windowRow{ReplyWindowID: w.ReplyWindowID, AccountKey: w.AccountKey, MessageKey: w.SourceMessageKey,
			State: w.State, ExpiresAt: w.ExpiresAt, Reserved: w.Reserved, Transmitted: w.Transmitted, MaxSends: w.MaxSends, SendsLeft: w.SendsLeft()})
	}
	if c.json {
		return printJSON(stdout, rows)
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WINDOW\tACCOUNT\tSTATE\tSENT\tLEFT\tEXPIRES")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d/%d\t%d\t%s\n", r.ReplyWindowID, r.AccountKey, r.State, r.Transmitted, r.MaxSends, r.SendsLeft, r.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
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
	accountStatuses = []string{store.AccountActive, store.AccountPaused, store.AccountNeedsRelogin, store.AccountReplaced, store.AccountDisabled}
	windowStates    = []string{store.WindowOpen, store.WindowSuperseded, store.WindowCancelled, store.WindowExpired}
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
	a, err := st.GetAccount(ctx, *account)
	if err != nil {
		return err
	}
	tc, err := dialTemporal(ctx, c, stderr)
	if err != nil {
		return err
	}
	defer tc.Close()
	inst, err := st.Installation(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	var signalName string
	var signalArg any
	var cancelled []int64
	switch verb {
	case "pause":
		until := now.Add(*pauseFor)
		if a, err = st.PauseAccount(ctx, now, a.AccountKey, a.Generation, until, *reason); err != nil {
			return err
		}
		signalName, signalArg = wfapi.SignalPause, wfapi.PauseSignal{Until: until, Reason: *reason}
	case "resume":
		if a, err = st.ResumeAccount(ctx, now, a.AccountKey, a.Generation); err != nil {
			return err
		}
		signalName = wfapi.SignalResume
	case "remove":
		ch, err := st.DisableAccount(ctx, now, a.AccountKey, a.Generation, *reason)
		if err != nil {
			return err
		}
		a, cancelled = ch.Account, ch.CancelledWindowIDs
		signalName, signalArg = wfapi.SignalStop, wfapi.StopSignal{Reason: *reason}
	}
	// The poller runs under the installation's id, or under its legacy id when it was
	// started before installation ids (wfapi.Installation.PollerIDs).
	signalled := true
	if _, err := activities.SignalPoller(ctx, tc, inst, a.AccountKey, signalName, signalArg); err != nil {
		var nf *serviceerror.NotFound
		if !asNotFound(err, &nf) {
			return fmt.Errorf("signal the poller: %w", err)
		}
		signalled = false
	}
	for _, id := range cancelled {
		_ = tc.SignalWorkflow(ctx, inst.WindowWorkflowID(id), "", wfapi.SignalRetired, nil)
	}
	out := struct {
		AccountKey       string  `json:"account_key"`
		Status           string  `json:"status"`
		PollerSignalled  bool    `json:"poller_signalled"`
		CancelledWindows []int64 `json:"cancelled_windows,omitempty"`
	}{a.AccountKey, a.Status, signalled, cancelled}
	if c.json {
		return printJSON(stdout, out)
	}
	fmt.Fprintf(stdout, "%s is now %s", a.AccountKey, a.Status)
	if a.Status == store.AccountPaused && a.PauseUntil != nil {
		fmt.Fprintf(stdout, " until %s (in %s)", a.PauseUntil.UTC().Format(time.RFC3339), time.Until(*a.PauseUntil).Round(time.Second))
	}
	if !signalled {
		fmt.Fprint(stdout, " (no running poller to tell)")
	}
	fmt.Fprintln(stdout)
	return nil
}
