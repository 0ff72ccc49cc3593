package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/operator"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// iLinkEnv is a migrated schema with a store on it and starter run against it in
// process (--database-url of the schema, the test key ring, env overrides).
type iLinkEnv struct {
	t      *testing.T
	ctx    context.Context
	pool   *pgxpool.Pool
	st     *store.Store
	schema string
	env    map[string]string
}

func newILinkEnv(t *testing.T) *iLinkEnv {
	t.Helper()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	var schema string
	if err := pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	st, err := store.New(pool, testkit.Keyring, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return &iLinkEnv{t: t, ctx: ctx, pool: pool, st: st, schema: schema, env: map[string]string{sealing.EnvKeys: testkit.KeySpec}}
}

// starter runs a command with the schema's --database-url after its name.
func (e *iLinkEnv) starter(args ...string) (int, string, string) {
	e.t.Helper()
	var out, errOut bytes.Buffer
	args = append(args[:1:1], append([]string{"--database-url", dbtest.SchemaURL(e.schema)}, args[1:]...)...)
	code := runMain(e.ctx, args, strings.NewReader(""), &out, &errOut, func(k string) string { return e.env[k] })
	return code, out.String(), errOut.String()
}

// account registers a bot and returns its account key.
func (e *iLinkEnv) account(bot string) string {
	e.t.Helper()
	a, err := storetest.RegisterAccount(e.ctx, e.st, time.Now(), store.ConfirmInput{ProviderAccountID: bot + "@im.bot",
		OwnerPeerID: "o9-" + bot + "@im.wechat", BaseURL: "https://ilinkai.weixin.qq.com", BotToken: sealing.NewSecret(bot + ":token")})
	if err != nil {
		e.t.Fatal(err)
	}
	return a.AccountKey
}

// add adds a client with --json and returns its token.
func (e *iLinkEnv) add(name string) string {
	e.t.Helper()
	code, out, errOut := e.starter("ilink-client", "add", name, "--json")
	var res iLinkClientResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Client != name || !strings.HasPrefix(res.Token, store.ILinkClientTokenPrefix) {
		e.t.Fatalf("ilink-client add %s: exit %d, %q, stderr %q", name, code, out, errOut)
	}
	return res.Token
}

func (e *iLinkEnv) login() store.ILinkLoginStart {
	e.t.Helper()
	l, err := e.st.StartILinkLogin(e.ctx, time.Now(), 5*time.Minute)
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

func TestILinkClientAndRouteHelpShowExamples(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cmd  string
		want []string
	}{
		{"ilink-client", []string{"\nexample:\n  starter ilink-client add openclaw", "token", "revoke", "list", "logins",
			"starter ilink-client approve openclaw --account ilk_0123abcd --code ", "-base-url", "-account", "-code"}},
		{"route", []string{"--ilink-client NAME", "starter route --account ilk_0123abcd --ilink-client openclaw", "an iLink client"}},
	} {
		code, out, errOut := cliRun(t, c.cmd, "--help")
		if code != 0 || errOut != "" {
			t.Fatalf("%s --help: exit %d, stderr %q", c.cmd, code, errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Fatalf("%s --help lacks %q:\n%s", c.cmd, w, out)
			}
		}
	}
	if code, out, _ := cliRun(t, "help"); code != 0 || !strings.Contains(out, "\n  ilink-client ") {
		t.Fatalf("starter help does not list ilink-client:\n%s", out)
	}
}

// add prints the token once, with the line saying only its hash is stored and the base
// URL; the store holds the SHA-256 of the token and nothing else of it, and token
// replaces it at once. No later output shows a token again.
func TestILinkClientTokenIsPrintedOnceAndOnlyItsHashIsStored(t *testing.T) {
	t.Parallel()
	e := newILinkEnv(t)
	e.env[envHTTPAddr] = "127.0.0.1:9107"
	code, out, errOut := e.starter("ilink-client", "add", "openclaw", "--by", "alice")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || errOut != "" || len(lines) != 4 {
		t.Fatalf("ilink-client add: exit %d, %q, stderr %q", code, out, errOut)
	}
	token := lines[1]
	if !strings.HasPrefix(token, store.ILinkClientTokenPrefix) || strings.Count(out, token) != 1 ||
		!strings.Contains(lines[0], "shown once (only its hash is stored)") || lines[2] != "base URL: http://127.0.0.1:9107/" ||
		!strings.Contains(lines[3], "baseUrl") {
		t.Fatalf("ilink-client add printed:\n%s", out)
	}
	var hash []byte
	var rowText string
	if err := e.pool.QueryRow(e.ctx, "SELECT token_hash, row_to_json(c)::text FROM ilink_clients c WHERE client_name = 'openclaw'").
		Scan(&hash, &rowText); err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256([]byte(token)); !bytes.Equal(hash, sum[:]) || strings.Contains(rowText, token) ||
		strings.Contains(rowText, store.ILinkClientTokenPrefix) {
		t.Fatalf("the stored row is not the token's SHA-256 only: %s", rowText)
	}
	if c, found, err := e.st.ILinkCallerByToken(e.ctx, sealing.NewSecret(token)); err != nil || !found || c.Client != "openclaw" || c.Revoked {
		t.Fatalf("the printed token resolves to %+v %v %v", c, found, err)
	}

	code, out, errOut = e.starter("ilink-client", "token", "openclaw", "--json")
	var res iLinkClientResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || !strings.HasPrefix(res.Token, store.ILinkClientTokenPrefix) ||
		res.Token == token || res.BaseURL != "http://127.0.0.1:9107/" || strings.Contains(out, token) {
		t.Fatalf("ilink-client token: exit %d, %q, stderr %q", code, out, errOut)
	}
	if _, found, _ := e.st.ILinkCallerByToken(e.ctx, sealing.NewSecret(token)); found {
		t.Fatal("the replaced token still resolves")
	}
	for _, args := range [][]string{{"ilink-client", "list"}, {"ilink-client", "list", "--json"}, {"ilink-client", "logins"}} {
		code, out, errOut := e.starter(args...)
		if code != 0 || strings.Contains(out+errOut, store.ILinkClientTokenPrefix) {
			t.Fatalf("starter %v: exit %d, shows a token: %q %q", args, code, out, errOut)
		}
	}
	_, out, _ = e.starter("ilink-client", "list")
	if !strings.Contains(out, "NAME") || !strings.Contains(out, "QUEUED") || !strings.Contains(out, "openclaw") ||
		!strings.Contains(out, "live") || !strings.Contains(out, "by alice") {
		t.Fatalf("ilink-client list:\n%s", out)
	}
}

// The base URL printed is the one given (--base-url, else the worker's public URL for
// iLink clients), else http:// and the worker's agent-facing address, by default the
// worker's default one; a wildcard host is replaced by this machine's name.
func TestTheBaseURLIsTheWorkersAgentFacingAddressUnlessAPublicOneIsGiven(t *testing.T) {
	t.Parallel()
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	for _, c := range []struct {
		given string
		env   map[string]string
		want  string
	}{
		{"", nil, "http://127.0.0.1:8090/"},
		{"", map[string]string{envHTTPAddr: "10.0.0.7:9000"}, "http://10.0.0.7:9000/"},
		{"", map[string]string{envHTTPAddr: "0.0.0.0:9000"}, "http://" + host + ":9000/"},
		{"", map[string]string{envHTTPAddr: ":9000"}, "http://" + host + ":9000/"},
		{"https://bots.example.com/gw/", nil, "https://bots.example.com/gw/"},
	} {
		got, err := iLinkBaseURL(c.given, func(k string) string { return c.env[k] })
		if err != nil || got != c.want {
			t.Errorf("base URL of %q with %v: %q %v, want %q", c.given, c.env, got, err, c.want)
		}
	}
	if _, err := iLinkBaseURL("", func(k string) string { return map[string]string{envHTTPAddr: "off"}[k] }); err == nil {
		t.Error("an agent-facing address that is off gives a base URL")
	}

	e := newILinkEnv(t)
	e.env[envILinkPublicURL] = "https://bots.example.com"
	code, out, errOut := e.starter("ilink-client", "add", "weclaw")
	if code != 0 || !strings.Contains(out, "\nbase URL: https://bots.example.com/\n") {
		t.Fatalf("add with %s: exit %d, %q, stderr %q", envILinkPublicURL, code, out, errOut)
	}
	code, out, errOut = e.starter("ilink-client", "add", "other", "--base-url", "ftp://x.example")
	assertUsageMistake(t, "a bad --base-url", code, out, errOut, `--base-url "ftp://x.example"`)
}

// revoke refuses the client's token and its bots' tokens at once and says so; a second
// revoke says it was revoked already; token lifts the revocation.
func TestRevokingAnILinkClientRefusesItsTokensAtOnce(t *testing.T) {
	t.Parallel()
	e := newILinkEnv(t)
	token := e.add("openclaw")
	key := e.account("000000ilk0a1")
	l := e.login()
	if code, out, errOut := e.starter("ilink-client", "approve", "openclaw", "--account", key, "--code", l.Code); code != 0 {
		t.Fatalf("approve: exit %d, %q, stderr %q", code, out, errOut)
	}
	bot, err := e.st.PollILinkLogin(e.ctx, time.Now(), l.QRCode)
	if err != nil || bot.Status != store.ILinkLoginConfirmed {
		t.Fatalf("poll of the approved login: %+v %v", bot, err)
	}

	code, out, errOut := e.starter("ilink-client", "revoke", "openclaw")
	if code != 0 || !strings.Contains(out, "revoked") || !strings.Contains(out, "at once") || !strings.Contains(out, "errcode -14") {
		t.Fatalf("ilink-client revoke: exit %d, %q, stderr %q", code, out, errOut)
	}
	for what, tok := range map[string]sealing.Secret{"client": sealing.NewSecret(token), "bot": bot.BotToken} {
		if c, found, err := e.st.ILinkCallerByToken(e.ctx, tok); err != nil || !found || !c.Revoked {
			t.Errorf("the %s token after the revocation: %+v %v %v", what, c, found, err)
		}
	}
	code, out, errOut = e.starter("ilink-client", "revoke", "openclaw", "--json")
	var res iLinkClientResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || !res.Revoked || res.Changed {
		t.Fatalf("a second revoke: exit %d, %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = e.starter("ilink-client", "list", "--json")
	var rows []iLinkClientRow
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || rows[0].Status != iLinkClientRevoked ||
		rows[0].RevokedAt == nil || rows[0].Bots != 1 || rows[0].Logins != 1 {
		t.Fatalf("ilink-client list --json: exit %d, %q, stderr %q", code, out, errOut)
	}
	// A revoked client is given no login.
	code, _, errOut = e.starter("ilink-client", "approve", "openclaw", "--account", key, "--code", e.login().Code)
	if code != 1 || !strings.Contains(errOut, "revoked") {
		t.Fatalf("approve for a revoked client: exit %d, stderr %q", code, errOut)
	}

	code, out, errOut = e.starter("ilink-client", "token", "openclaw", "--json")
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("token: exit %d, %q, stderr %q", code, out, errOut)
	}
	if c, found, err := e.st.ILinkCallerByToken(e.ctx, sealing.NewSecret(res.Token)); err != nil || !found || c.Revoked {
		t.Fatalf("the new token after the revocation: %+v %v %v", c, found, err)
	}
}

// approve gives a waiting login (its code typed in any case) to a client for an account,
// and routes the account to the client when it is not already: the route shows in
// accounts and in the route audit, the login leaves the waiting list and the client's
// next poll of it collects a bot of the account.
func TestApprovingALoginRoutesTheAccountToTheClient(t *testing.T) {
	t.Parallel()
	e := newILinkEnv(t)
	e.add("openclaw")
	key := e.account("000000ilk0b1")
	first, second := e.login(), e.login()
	if ok, err := e.st.ScanILinkLogin(e.ctx, time.Now(), first.Code); err != nil || !ok {
		t.Fatalf("scan: %v %v", ok, err)
	}

	code, out, errOut := e.starter("ilink-client", "logins", "--json")
	var logins []iLinkLoginRow
	if code != 0 || json.Unmarshal([]byte(out), &logins) != nil || len(logins) != 2 || logins[0].Code != first.Code ||
		!logins[0].Scanned || logins[1].Code != second.Code || logins[1].Scanned || !logins[0].ExpiresAt.After(time.Now()) {
		t.Fatalf("ilink-client logins --json: exit %d, %q, stderr %q", code, out, errOut)
	}
	_, out, _ = e.starter("ilink-client", "logins")
	if !strings.Contains(out, "CODE") || !strings.Contains(out, "SCANNED") || !strings.Contains(out, "EXPIRES") ||
		!strings.Contains(out, first.Code+"  yes") || !strings.Contains(out, second.Code+"  no") {
		t.Fatalf("ilink-client logins:\n%s", out)
	}

	code, out, errOut = e.starter("ilink-client", "approve", "openclaw", "--account", key, "--code", strings.ToLower(first.Code), "--json")
	var a iLinkApproval
	if code != 0 || json.Unmarshal([]byte(out), &a) != nil || !a.Routed || a.Code != first.Code || a.AccountKey != key || a.RouteVersion == 0 {
		t.Fatalf("approve: exit %d, %q, stderr %q", code, out, errOut)
	}
	if r, found, err := e.st.GetRoute(e.ctx, key); err != nil || !found || r.Kind != vocab.RouteILink || r.ILinkClient != "openclaw" {
		t.Fatalf("route after the approval: %+v %v %v", r, found, err)
	}
	if bot, err := e.st.PollILinkLogin(e.ctx, time.Now(), first.QRCode); err != nil || bot.Status != store.ILinkLoginConfirmed ||
		bot.AccountKey != key || bot.Client != "openclaw" {
		t.Fatalf("the client's poll of the approved login: %+v %v", bot, err)
	}
	if code, out, _ = e.starter("ilink-client", "logins"); code != 0 || strings.Contains(out, first.Code) || !strings.Contains(out, second.Code) {
		t.Fatalf("logins after the approval:\n%s", out)
	}
	// A second login for the same bot leaves its route alone and says so.
	code, out, errOut = e.starter("ilink-client", "approve", "openclaw", "--account", key, "--code", second.Code)
	if code != 0 || !strings.Contains(out, key+" routes to iLink client openclaw already") || !strings.Contains(out, "login "+second.Code+" approved") {
		t.Fatalf("a second approval: exit %d, %q, stderr %q", code, out, errOut)
	}
	if _, text, _ := e.starter("accounts"); !strings.Contains(text, "ilink (openclaw)") {
		t.Fatalf("accounts text:\n%s", text)
	}
	code, out, errOut = e.starter("accounts", "--json")
	var accounts []operator.Account
	if code != 0 || json.Unmarshal([]byte(out), &accounts) != nil || len(accounts) != 1 || accounts[0].Route != vocab.RouteILink ||
		accounts[0].RouteILinkClient != "openclaw" {
		t.Fatalf("accounts --json: exit %d, %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = e.starter("route", "--changes", "--account", key, "--json")
	var changes []routeChangeRow
	if code != 0 || json.Unmarshal([]byte(out), &changes) != nil || len(changes) != 1 || changes[0].To != vocab.RouteILink ||
		changes[0].Detail != "ilink client openclaw" {
		t.Fatalf("route --changes: exit %d, %q, stderr %q", code, out, errOut)
	}
	_, out, _ = e.starter("ilink-client", "list", "--json")
	var rows []iLinkClientRow
	if json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || rows[0].Bots != 1 || rows[0].Logins != 1 || rows[0].Status != iLinkClientLive {
		t.Fatalf("ilink-client list --json: %s", out)
	}
}

// route --ilink-client routes a bot to a client (kind ilink), shown as "iLink client NAME"
// and in the JSON's ilink_client.
func TestRouteToAnILinkClient(t *testing.T) {
	t.Parallel()
	e := newILinkEnv(t)
	e.add("openclaw")
	key := e.account("000000ilk0c1")
	code, out, errOut := e.starter("route", "--account", key, "--ilink-client", "openclaw")
	if code != 0 || !strings.Contains(out, key+" routes to iLink client openclaw from its next message") {
		t.Fatalf("route --ilink-client: exit %d, %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = e.starter("route", "--account", key, "--ilink-client", "openclaw", "--json")
	var res routeResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Route != vocab.RouteILink || res.ILinkClient != "openclaw" ||
		!strings.Contains(out, `"ilink_client":"openclaw"`) || res.Version == 0 {
		t.Fatalf("route --ilink-client --json: exit %d, %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = e.starter("route", "--account", key, "--ilink-client", "openclaw", "--echo")
	assertUsageMistake(t, "two routes", code, out, errOut, "route: give one route only (webhook, workflow, --mcp-agent, --ilink-client, --echo or --default)")
	code, out, errOut = e.starter("route", "--account", key, "--ilink-client", "Not A Name")
	if code != 1 || !strings.Contains(errOut, "invalid_input") {
		t.Fatalf("route to a malformed client name: exit %d, %q, stderr %q", code, out, errOut)
	}
}

// An unknown client, login or account exits 1 with the store's typed code; a taken name
// too.
func TestAnUnknownILinkClientExitsOne(t *testing.T) {
	t.Parallel()
	e := newILinkEnv(t)
	e.add("openclaw")
	key := e.account("000000ilk0d1")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ilink-client", "add", "openclaw"}, string(vocab.CodeILinkClientExists)},
		{[]string{"ilink-client", "token", "ghost"}, string(vocab.CodeILinkClientNotFound)},
		{[]string{"ilink-client", "revoke", "ghost"}, string(vocab.CodeILinkClientNotFound)},
		{[]string{"route", "--account", key, "--ilink-client", "ghost"}, string(vocab.CodeILinkClientNotFound)},
		{[]string{"ilink-client", "approve", "ghost", "--account", key, "--code", e.login().Code}, string(vocab.CodeILinkClientNotFound)},
		{[]string{"ilink-client", "approve", "openclaw", "--account", key, "--code", "ABCDEFGH"}, string(vocab.CodeILinkLoginNotFound)},
		{[]string{"ilink-client", "approve", "openclaw", "--account", "ilk_" + strings.Repeat("0", 32), "--code", e.login().Code},
			string(vocab.CodeAccountNotFound)},
	} {
		code, out, errOut := e.starter(c.args...)
		if code != 1 || out != "" || strings.Count(errOut, c.want) != 1 || strings.Count(errOut, "\n") != 1 {
			t.Errorf("starter %v: exit %d, stdout %q, stderr %q; want exit 1 naming %s", c.args, code, out, errOut, c.want)
		}
	}
	if r, found, err := e.st.GetRoute(e.ctx, key); err != nil || found {
		t.Fatalf("a refused command routed the bot: %+v %v %v", r, found, err)
	}
	if logins, err := e.st.ListILinkLogins(e.ctx, time.Now()); err != nil || len(logins) != 2 {
		t.Fatalf("a refused approval took a login: %+v %v", logins, err)
	}
}

// Usage mistakes exit 2 before any database is opened, named once.
func TestILinkClientUsageMistakesExitTwo(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ilink-client"}, "ilink-client: give add NAME"},
		{[]string{"ilink-client", "add"}, "ilink-client add takes one client name"},
		{[]string{"ilink-client", "add", "Bad Name"}, "ilink-client add: store: invalid_input: an iLink client name is"},
		{[]string{"ilink-client", "list", "extra"}, "ilink-client list takes no argument"},
		{[]string{"ilink-client", "logins", "extra"}, "ilink-client logins takes no argument"},
		{[]string{"ilink-client", "approve", "openclaw", "--account", "ilk_x"}, "ilink-client approve: --account and --code are required"},
		{[]string{"ilink-client", "approve", "openclaw", "--code", "ABCDEFGH"}, "ilink-client approve: --account and --code are required"},
		{[]string{"ilink-client", "approve", "openclaw", "--account", "ilk_x", "--code", "0000"}, `--code "0000"`},
		{[]string{"ilink-client", "list", "--account", "ilk_x"}, "ilink-client list: --account and --code are for approve only"},
		{[]string{"ilink-client", "rotate", "openclaw"}, `ilink-client: unknown action "rotate"`},
	} {
		code, out, errOut := cliRun(t, c.args...)
		assertUsageMistake(t, strings.Join(c.args, " "), code, out, errOut, c.want)
	}
}

// bot gives a client a bot of an account without a QR login: the account is routed to the
// client, the token (printed once) resolves to the client and the account, and the
// OpenClaw plugin's files are named as the plugin names them.
func TestABotIssuedWithoutALoginRoutesTheAccountAndItsTokenIsTheClients(t *testing.T) {
	t.Parallel()
	e := newILinkEnv(t)
	e.env[envHTTPAddr] = "127.0.0.1:9107"
	e.add("openclaw")
	key := e.account("000000ilk0b9")
	code, out, errOut := e.starter("ilink-client", "bot", "openclaw", "--account", key, "--json")
	var b iLinkBot
	if code != 0 || json.Unmarshal([]byte(out), &b) != nil || b.BaseURL != "http://127.0.0.1:9107/" ||
		b.OpenClawAccountID != strings.NewReplacer("@", "-", ".", "-").Replace(b.BotID) || !strings.HasPrefix(b.BotToken, b.BotID+":") {
		t.Fatalf("ilink-client bot: exit %d, %q, stderr %q", code, out, errOut)
	}
	if r, found, err := e.st.GetRoute(e.ctx, key); err != nil || !found || r.Kind != vocab.RouteILink || r.ILinkClient != "openclaw" {
		t.Fatalf("route after bot: %+v %v %v", r, found, err)
	}
	c, found, err := e.st.ILinkCallerByToken(e.ctx, sealing.NewSecret(b.BotToken))
	if err != nil || !found || c.Client != "openclaw" || c.AccountKey != key || c.BotID != b.BotID || c.Revoked {
		t.Fatalf("the bot token resolves to %+v %v %v", c, found, err)
	}
	code, out, _ = e.starter("ilink-client", "bot", "openclaw", "--account", key)
	if code != 0 || !strings.Contains(out, "openclaw-weixin/accounts/") || !strings.Contains(out, `"baseUrl": "http://127.0.0.1:9107"`) {
		t.Fatalf("ilink-client bot:\n%s", out)
	}
	if code, _, errOut = e.starter("ilink-client", "bot", "nobody", "--account", key); code != 1 || !strings.Contains(errOut, "ilink_client_not_found") {
		t.Fatalf("a bot of an unknown client: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut = e.starter("ilink-client", "bot", "openclaw"); code != 2 || !strings.Contains(errOut, "--account is required") {
		t.Fatalf("a bot without an account: exit %d, stderr %q", code, errOut)
	}
}
