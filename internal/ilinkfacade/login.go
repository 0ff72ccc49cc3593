package ilinkfacade

import (
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// getBotQRCode opens a QR login (GET, or POST with local_token_list, as clients send it;
// no token). The QR code's content is the login page's URL, which shows the code an
// operator approves (`starter ilink-client approve NAME --account K --code CODE`).
func (f *Facade) getBotQRCode(w http.ResponseWriter, r *http.Request) {
	const endpoint = "get_bot_qrcode"
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	ctx, cancel := f.storeContext(r.Context())
	l, err := f.cfg.Store.StartILinkLogin(ctx, f.cfg.Now(), f.cfg.LoginTTL)
	cancel()
	if err != nil {
		f.storeFailed(w, f.log, endpoint, err)
		return
	}
	f.log.Info("iLink client login opened", "code", l.Code, "expires_at", l.ExpiresAt)
	f.count(endpoint, "ok")
	writeJSON(w, http.StatusOK, map[string]any{"qrcode": l.QRCode.Reveal(), "qrcode_img_content": f.publicURL(r) + LoginPath + l.Code})
}

// getQRCodeStatus answers a login's status: wait, scaned (its page was opened), expired,
// or confirmed with the bot the approval made (once: the poll that collects it).
func (f *Facade) getQRCodeStatus(w http.ResponseWriter, r *http.Request) {
	const endpoint = "get_qrcode_status"
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	ctx, cancel := f.storeContext(r.Context())
	st, err := f.cfg.Store.PollILinkLogin(ctx, f.cfg.Now(), sealing.NewSecret(r.URL.Query().Get("qrcode")))
	if err != nil {
		cancel()
		f.storeFailed(w, f.log, endpoint, err)
		return
	}
	if st.Status != store.ILinkLoginConfirmed {
		cancel()
		f.count(endpoint, st.Status)
		writeJSON(w, http.StatusOK, map[string]any{"status": st.Status})
		return
	}
	acct, err := f.cfg.Store.GetAccount(ctx, st.AccountKey)
	cancel()
	if err != nil {
		f.storeFailed(w, f.log, endpoint, err)
		return
	}
	f.log.Info("iLink client login confirmed", "client", st.Client, "bot_id", st.BotID, "account", st.AccountKey)
	f.count(endpoint, st.Status)
	writeJSON(w, http.StatusOK, map[string]any{"status": st.Status, "bot_token": st.BotToken.Reveal(), "ilink_bot_id": st.BotID,
		"baseurl": f.publicURL(r), "ilink_user_id": acct.OwnerPeerID})
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>ilinkflow: iLink client login</title></head>
<body style="font-family: sans-serif; max-width: 36em; margin: 2em auto; padding: 0 1em">
{{if .Found}}
<h1>Login code <code>{{.Code}}</code></h1>
<p>An iLink client asks to log in to a bot of this gateway. The gateway's operator approves it with:</p>
<pre>starter ilink-client approve CLIENT --account ACCOUNT_KEY --code {{.Code}}</pre>
<p>or from the console. The client then logs in on its own.</p>
{{else}}
<h1>No login waits under this code</h1>
<p>It expired or was approved already. Ask the client for a new QR code.</p>
{{end}}
</body></html>`))

// loginPage is what a login's QR code opens: the code to approve. Opening it marks the
// login scanned.
func (f *Facade) loginPage(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	code := store.NormalizeILinkLoginCode(r.PathValue("code"))
	found := false
	if store.CheckILinkLoginCode(code) == nil {
		ctx, cancel := f.storeContext(r.Context())
		ok, err := f.cfg.Store.ScanILinkLogin(ctx, f.cfg.Now(), code)
		cancel()
		if err != nil && store.CodeOf(err) != vocab.CodeInvalidInput {
			f.storeFailed(w, f.log, "login_page", err)
			return
		}
		found = ok
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = loginPage.Execute(w, struct {
		Found bool
		Code  string
	}{found, url.PathEscape(strings.ToUpper(code))})
}
