package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/webui"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// The worker's settings that say where iLink clients reach its iLink facade (served on
// its agent-facing address): the public URL when one is set, else the address itself.
const (
	envILinkPublicURL = "ILINKFLOW_ILINK_PUBLIC_URL"
	envHTTPAddr       = "ILINKFLOW_HTTP_ADDR"
)

// iLinkClientResult is what `starter ilink-client add|token|revoke` prints. Token is
// set by add and token only: it is shown once and stored as its hash. BaseURL is the
// base URL the client is given with it.
type iLinkClientResult struct {
	Client  string `json:"client"`
	Token   string `json:"token,omitempty"`
	BaseURL string `json:"base_url,omitempty"`
	Revoked bool   `json:"revoked,omitempty"`
	// Changed is false when revoke found the client revoked already.
	Changed bool `json:"changed"`
}

// Values of iLinkClientRow.Status.
const (
	iLinkClientLive    = "live"
	iLinkClientRevoked = "revoked"
)

// iLinkClientRow is one client of `starter ilink-client list`: never its token.
type iLinkClientRow struct {
	Client        string     `json:"client"`
	Status        string     `json:"status"` // live or revoked
	Bots          int64      `json:"bots"`   // the bots routed to it
	Logins        int64      `json:"logins"` // its live bot logins
	Queued        int64      `json:"queued"` // messages past its slowest cursor
	CreatedAt     time.Time  `json:"created_at"`
	CreatedBy     string     `json:"created_by"`
	TokenIssuedAt time.Time  `json:"token_issued_at"`
	RevokedAt     *time.Time `json:"revoked_at,omitempty"`
	RevokedBy     string     `json:"revoked_by,omitempty"`
}

// iLinkLoginRow is one QR login of `starter ilink-client logins`: it waits for an
// operator's approval (never its poll key).
type iLinkLoginRow struct {
	Code      string    `json:"code"`
	Scanned   bool      `json:"scanned"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// iLinkBot is what `starter ilink-client bot` prints: a bot of the client bound to an
// account, for a client configured by hand. BotToken is shown once (only its hash is
// stored); OpenClawAccountID is the name the OpenClaw plugin files the bot under.
type iLinkBot struct {
	Client            string `json:"client"`
	AccountKey        string `json:"account_key"`
	BotID             string `json:"bot_id"`
	BotToken          string `json:"bot_token"`
	BaseURL           string `json:"base_url"`
	OpenClawAccountID string `json:"openclaw_account_id"`
}

// iLinkApproval is what `starter ilink-client approve` prints.
type iLinkApproval struct {
	Code       string `json:"code"`
	Client     string `json:"client"`
	AccountKey string `json:"account_key"`
	// Routed is true when the approval routed the account to the client (false: it was
	// routed to it already); RouteVersion is the account's route version after it.
	Routed       bool  `json:"routed"`
	RouteVersion int64 `json:"route_version,omitempty"`
}

func iLinkClientCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs, c := commandFlags("ilink-client", help{
		"ilink-client (add NAME | token NAME | revoke NAME | list | logins | approve NAME --account KEY --code CODE | bot NAME --account KEY) [flags]",
		"Manages the iLink clients (the OpenClaw plugin, WeClaw, ...) that answer bots through the iLink facade on the agent-facing address: " +
			"add creates one and prints its token once with the base URL to give it, token issues a new one (the old one is refused at once), " +
			"revoke refuses it and its bots' tokens at once, list shows them, logins lists the QR logins waiting for approval, " +
			"approve gives one to a client for an account (routing the account to the client), " +
			"bot gives the client a bot of an account without a QR login and prints its token once, for a client configured by hand.",
		"starter ilink-client add openclaw\nstarter route --account ilk_0123abcd --ilink-client openclaw\n" +
			"starter ilink-client logins\nstarter ilink-client approve openclaw --account ilk_0123abcd --code K7QX2M9P\n" +
			"starter ilink-client revoke openclaw"},
		withDB|withJSON, stderr, getenv)
	by := fs.String("by", envOr(getenv, "USER", "operator"), "who adds, revokes or approves (recorded)")
	account := fs.String("account", "", "approve, bot: the account key of the bot")
	code := fs.String("code", "", "approve: the login's code, as its login page shows it")
	baseURL := fs.String("base-url", envOr(getenv, envILinkPublicURL, ""),
		"add, token, bot: the base URL clients reach the facade at (env "+envILinkPublicURL+"; default: http:// and the worker's "+envHTTPAddr+")")
	help, rest, err := parseArgs(fs, args, stdout)
	if help || err != nil {
		return err
	}
	if len(rest) == 0 {
		return usagef("ilink-client: give add NAME, token NAME, revoke NAME, list, logins, approve NAME or bot NAME")
	}
	verb, rest := rest[0], rest[1:]
	switch verb {
	case "list", "logins":
		if len(rest) != 0 {
			return usagef("ilink-client %s takes no argument", verb)
		}
	case "add", "token", "revoke", "approve", "bot":
		if len(rest) != 1 {
			return usagef("ilink-client %s takes one client name", verb)
		}
		if err := store.CheckILinkClientName(rest[0]); err != nil {
			return usagef("ilink-client %s: %v", verb, err)
		}
	default:
		return usagef("ilink-client: unknown action %q: want add, token, revoke, list, logins, approve or bot", verb)
	}
	if verb == "approve" {
		*code = store.NormalizeILinkLoginCode(*code)
		switch {
		case *account == "" || *code == "":
			return usagef("ilink-client approve: --account and --code are required")
		case store.CheckILinkLoginCode(*code) != nil:
			return usagef("ilink-client approve: --code %q: %v", *code, store.CheckILinkLoginCode(*code))
		}
	} else if verb == "bot" {
		switch {
		case *account == "":
			return usagef("ilink-client bot: --account is required")
		case *code != "":
			return usagef("ilink-client bot: --code is for approve only")
		}
	} else if *account != "" || *code != "" {
		return usagef("ilink-client %s: --account and --code are for approve only", verb)
	}
	base := ""
	if verb == "add" || verb == "token" || verb == "bot" {
		if base, err = iLinkBaseURL(*baseURL, getenv); err != nil {
			return err
		}
	}
	st, closeFn, err := openStore(ctx, c, getenv)
	if err != nil {
		return err
	}
	defer closeFn()
	switch verb {
	case "list":
		return listILinkClients(ctx, st, c.json, stdout)
	case "logins":
		return listILinkLogins(ctx, st, c.json, stdout)
	case "approve":
		return approveILinkLogin(ctx, st, iLinkApproval{Code: *code, Client: rest[0], AccountKey: *account}, *by, c.json, stdout)
	case "bot":
		return issueILinkBot(ctx, st, rest[0], *account, *by, base, c.json, stdout)
	}
	out := iLinkClientResult{Client: rest[0], Changed: true}
	switch verb {
	case "add":
		token, err := st.CreateILinkClient(ctx, time.Now(), out.Client, *by)
		if err != nil {
			return err
		}
		out.Token, out.BaseURL = token.Reveal(), base
	case "token":
		token, err := st.ReissueILinkClientToken(ctx, time.Now(), out.Client)
		if err != nil {
			return err
		}
		out.Token, out.BaseURL = token.Reveal(), base
	case "revoke":
		if out.Changed, err = st.RevokeILinkClient(ctx, time.Now(), out.Client, *by); err != nil {
			return err
		}
		out.Revoked = true
	}
	if c.json {
		return printJSON(stdout, out)
	}
	switch {
	case out.Token != "":
		what := "its token"
		if verb == "token" {
			what = "its new token (the old one is refused from now on; a revocation is lifted)"
		}
		fmt.Fprintf(stdout, "iLink client %s: %s, shown once (only its hash is stored):\n%s\n", out.Client, what, out.Token)
		fmt.Fprintf(stdout, "base URL: %s\n", out.BaseURL)
		fmt.Fprintf(stdout, "Give the client this base URL (the OpenClaw plugin's baseUrl) and the token as its bot token, "+
			"or let it log in by QR code there and approve the login (starter ilink-client logins).\n")
	case !out.Changed:
		fmt.Fprintf(stdout, "iLink client %s: revoked already\n", out.Client)
	default:
		fmt.Fprintf(stdout, "iLink client %s: revoked; its token and its bots' tokens are refused at once (the client gets errcode -14)\n", out.Client)
	}
	return nil
}

// iLinkBaseURL is the base URL iLink clients are given, with its trailing slash: the one
// given (--base-url, or the worker's ILINKFLOW_ILINK_PUBLIC_URL), else http:// and the
// worker's agent-facing address (ILINKFLOW_HTTP_ADDR, default 127.0.0.1:8090), a wildcard
// host replaced by this machine's name.
func iLinkBaseURL(given string, getenv func(string) string) (string, error) {
	if given != "" {
		u, err := webui.BaseURL(given)
		if err != nil {
			return "", usagef("--base-url %q: %v", given, err)
		}
		return u + "/", nil
	}
	addr := envOr(getenv, envHTTPAddr, gateway.DefaultHTTPAddr)
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("ilink-client: the worker's %s is %q: the iLink facade is served on it, so it must be host:port (or give --base-url)", envHTTPAddr, addr)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if host, err = os.Hostname(); err != nil || host == "" {
			host = "localhost"
		}
	}
	return "http://" + net.JoinHostPort(host, port) + "/", nil
}

func listILinkClients(ctx context.Context, st *store.Store, asJSON bool, stdout io.Writer) error {
	clients, err := st.ListILinkClients(ctx)
	if err != nil {
		return err
	}
	rows := make([]iLinkClientRow, 0, len(clients))
	for _, c := range clients {
		r := iLinkClientRow{Client: c.Name, Status: iLinkClientLive, Bots: c.Bots, Logins: c.Logins, Queued: c.Queued, CreatedAt: c.CreatedAt,
			CreatedBy: c.CreatedBy, TokenIssuedAt: c.TokenIssuedAt, RevokedAt: c.RevokedAt, RevokedBy: c.RevokedBy}
		if c.RevokedAt != nil {
			r.Status = iLinkClientRevoked
		}
		rows = append(rows, r)
	}
	if asJSON {
		return printJSON(stdout, rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tBOTS\tLOGINS\tQUEUED\tCREATED")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s by %s\n", r.Client, r.Status, r.Bots, r.Logins, r.Queued,
			r.CreatedAt.UTC().Format(time.RFC3339), r.CreatedBy)
	}
	return tw.Flush()
}

func listILinkLogins(ctx context.Context, st *store.Store, asJSON bool, stdout io.Writer) error {
	logins, err := st.ListILinkLogins(ctx, time.Now())
	if err != nil {
		return err
	}
	rows := make([]iLinkLoginRow, 0, len(logins))
	for _, l := range logins {
		rows = append(rows, iLinkLoginRow{Code: l.Code, Scanned: l.Scanned, CreatedAt: l.CreatedAt, ExpiresAt: l.ExpiresAt})
	}
	if asJSON {
		return printJSON(stdout, rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CODE\tSCANNED\tEXPIRES")
	for _, r := range rows {
		scanned := "no"
		if r.Scanned {
			scanned = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Code, scanned, r.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

// approveILinkLogin approves a waiting QR login for a live client and an account, which it
// routes to the client unless it is already (store.ApproveILinkLogin).
func approveILinkLogin(ctx context.Context, st *store.Store, a iLinkApproval, by string, asJSON bool, stdout io.Writer) error {
	clients, err := st.ListILinkClients(ctx)
	if err != nil {
		return err
	}
	found := false
	for _, c := range clients {
		if c.Name != a.Client {
			continue
		}
		found = true
		if c.RevokedAt != nil {
			return fmt.Errorf("ilink-client approve: iLink client %s is revoked (starter ilink-client token %s lifts it)", a.Client, a.Client)
		}
	}
	if !found {
		return fmt.Errorf("ilink-client approve: no iLink client is named %s (starter ilink-client add %s) [%s]", a.Client, a.Client, vocab.CodeILinkClientNotFound)
	}
	if _, err := st.GetAccount(ctx, a.AccountKey); err != nil {
		return err
	}
	before, routed, err := st.GetRoute(ctx, a.AccountKey)
	if err != nil && store.CodeOf(err) != vocab.CodeSealedUnreadable {
		return err
	}
	a.Routed = !routed || before.Kind != vocab.RouteILink || before.ILinkClient != a.Client
	if err := st.ApproveILinkLogin(ctx, time.Now(), a.Code, a.Client, a.AccountKey, by); err != nil {
		return err
	}
	if after, found, err := st.GetRoute(ctx, a.AccountKey); err == nil && found {
		a.RouteVersion = after.Version
	}
	if asJSON {
		return printJSON(stdout, a)
	}
	if a.Routed {
		fmt.Fprintf(stdout, "%s routes to iLink client %s from its next message (route version %d)\n", a.AccountKey, a.Client, a.RouteVersion)
	} else {
		fmt.Fprintf(stdout, "%s routes to iLink client %s already\n", a.AccountKey, a.Client)
	}
	fmt.Fprintf(stdout, "login %s approved: the client's next poll of it collects a bot of %s\n", a.Code, a.AccountKey)
	return nil
}

// issueILinkBot gives a client a bot of an account without a QR login and prints it, with
// the OpenClaw plugin's two files that configure it.
func issueILinkBot(ctx context.Context, st *store.Store, client, accountKey, by, base string, asJSON bool, stdout io.Writer) error {
	b, err := st.IssueILinkBot(ctx, time.Now(), client, accountKey, by)
	if err != nil {
		return err
	}
	out := iLinkBot{Client: client, AccountKey: accountKey, BotID: b.BotID, BotToken: b.BotToken.Reveal(), BaseURL: base,
		OpenClawAccountID: strings.NewReplacer("@", "-", ".", "-").Replace(b.BotID)}
	if asJSON {
		return printJSON(stdout, out)
	}
	fmt.Fprintf(stdout, "iLink client %s: bot %s of account %s (routed to the client); its token, shown once (only its hash is stored):\n%s\n",
		client, out.BotID, accountKey, out.BotToken)
	fmt.Fprintf(stdout, "base URL: %s\n", out.BaseURL)
	fmt.Fprintf(stdout, "For the OpenClaw plugin, in its state directory ($OPENCLAW_STATE_DIR, else ~/.openclaw):\n"+
		"  openclaw-weixin/accounts/%s.json: {\"token\": \"<the token above>\", \"baseUrl\": %q}\n"+
		"  openclaw-weixin/accounts.json: a JSON list that holds %q\n", out.OpenClawAccountID, strings.TrimSuffix(out.BaseURL, "/"), out.OpenClawAccountID)
	return nil
}
