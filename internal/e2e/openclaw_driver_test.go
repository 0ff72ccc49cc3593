package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The official iLink client: the OpenClaw Weixin plugin's own code (npm
// @tencent-weixin/openclaw-weixin, pinned in openclaw/package.json), driven by
// openclaw/harness.mjs over JSON lines. openclawClient runs the harness; its helpers
// (loginByQR, poll, nextMessage, sendText, sendImage, download, typing, notify) take the
// iLink base URL as an argument, so that a test can point the same client at the
// simulator (openclaw_test.go) or at anything else that serves the iLink bot API, such
// as the gateway's iLink facade (openclaw_facade_test.go).

// openclawEvent is one line the harness wrote on stdout.
type openclawEvent struct {
	Ev   string `json:"ev"`
	ID   string `json:"id,omitempty"`
	Done bool   `json:"done,omitempty"`
	// Raw is the whole line.
	Raw json.RawMessage `json:"-"`
}

// decode unmarshals the whole event into v.
func (e openclawEvent) decode(v any) error {
	if err := json.Unmarshal(e.Raw, v); err != nil {
		return fmt.Errorf("decode %s event %s: %w", e.Ev, e.Raw, err)
	}
	return nil
}

// openclawProc is one run of `node harness.mjs`.
type openclawProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *openclawTail
	exited chan struct{} // closed once the process is reaped; err is set then
	err    error

	mu     sync.Mutex
	events []openclawEvent
	taken  []bool
	added  chan struct{} // closed (and replaced) whenever an event arrives
}

// openclawClient is the official iLink client as a subprocess. It runs one harness at a
// time; kill and restart keep its state directory, where the plugin keeps its accounts,
// get_updates_buf and context tokens. Its methods belong to the test's goroutine.
type openclawClient struct {
	t        *testing.T
	dir      string // the harness directory (package.json, harness.mjs)
	stateDir string
	proc     *openclawProc
	ready    openclawReady
	ids      int
}

// openclawReady is the harness's first event.
type openclawReady struct {
	Node          string `json:"node"`
	PluginVersion string `json:"plugin_version"`
	StateDir      string `json:"state_dir"`
}

// openclawDeps installs the harness's npm packages once per test binary.
var openclawDeps struct {
	once sync.Once
	err  error
}

// openclawHarnessDir returns the harness directory with its node_modules in place: it runs
// `npm ci` when the pinned plugin is not installed. Without node or npm the test fails: it
// is how the official client is run, not an optional extra.
func openclawHarnessDir(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not on PATH: the official iLink client (the OpenClaw Weixin plugin) runs on Node.js; install Node.js 20 or newer with npm: %v", tool, err)
		}
	}
	dir, err := filepath.Abs("openclaw")
	if err != nil {
		t.Fatal(err)
	}
	openclawDeps.once.Do(func() {
		want, err := openclawPinnedVersion(dir)
		if err != nil {
			openclawDeps.err = err
			return
		}
		if got, _ := openclawInstalledVersion(dir); got == want {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		// .npmrc sets legacy-peer-deps too: the plugin's peer, the OpenClaw host, is not
		// installed (harness.mjs stands in for what the client code imports from it).
		ci := exec.CommandContext(ctx, "npm", "ci", "--legacy-peer-deps", "--ignore-scripts", "--no-audit", "--no-fund")
		ci.Dir = dir
		if out, err := ci.CombinedOutput(); err != nil {
			openclawDeps.err = fmt.Errorf("npm ci in %s: %w\n%s", dir, err, out)
			return
		}
		if got, err := openclawInstalledVersion(dir); got != want {
			openclawDeps.err = fmt.Errorf("after npm ci the plugin is %q, want %q (%v)", got, want, err)
		}
	})
	if openclawDeps.err != nil {
		t.Fatal(openclawDeps.err)
	}
	return dir
}

const openclawPackage = "@tencent-weixin/openclaw-weixin"

// openclawPinnedVersion is the plugin version package.json pins.
func openclawPinnedVersion(dir string) (string, error) {
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err == nil {
		err = json.Unmarshal(data, &pkg)
	}
	if err != nil {
		return "", fmt.Errorf("read the harness package.json: %w", err)
	}
	v := pkg.Dependencies[openclawPackage]
	if v == "" {
		return "", fmt.Errorf("the harness package.json does not depend on %s", openclawPackage)
	}
	return v, nil
}

// openclawInstalledVersion is the version of the plugin in node_modules ("" when absent).
func openclawInstalledVersion(dir string) (string, error) {
	var pkg struct {
		Version string `json:"version"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "node_modules", openclawPackage, "package.json"))
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(data, &pkg); err != nil {
		return "", err
	}
	return pkg.Version, nil
}

// startOpenclaw starts the official client with stateDir as its OpenClaw state
// directory and waits until it has loaded the plugin.
func startOpenclaw(ctx context.Context, t *testing.T, stateDir string) *openclawClient {
	t.Helper()
	c := &openclawClient{t: t, dir: openclawHarnessDir(t), stateDir: stateDir}
	t.Cleanup(c.stop)
	c.start(ctx)
	return c
}

func (c *openclawClient) start(ctx context.Context) {
	c.t.Helper()
	cmd := exec.Command("node", "harness.mjs")
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(),
		"OPENCLAW_STATE_DIR="+c.stateDir,
		// The plugin reads routeTag and botAgent from openclaw.json: none here.
		"OPENCLAW_CONFIG="+filepath.Join(c.stateDir, "openclaw.json"))
	p := &openclawProc{cmd: cmd, stderr: &openclawTail{}, exited: make(chan struct{}), added: make(chan struct{})}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		c.t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start the official client (node harness.mjs): %v", err)
	}
	go p.read(stdout)
	c.proc = p
	ev, err := c.next(ctx, "ready", nil)
	if err != nil {
		c.t.Fatalf("the official client did not start: %v", err)
	}
	if err := ev.decode(&c.ready); err != nil {
		c.t.Fatal(err)
	}
}

// read collects the events until stdout closes, then reaps the process.
func (p *openclawProc) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		ev := openclawEvent{Raw: append(json.RawMessage(nil), line...)}
		if err := json.Unmarshal(line, &ev); err != nil {
			ev = openclawEvent{Ev: "bad_line", Raw: ev.Raw}
		}
		p.mu.Lock()
		p.events = append(p.events, ev)
		p.taken = append(p.taken, false)
		close(p.added)
		p.added = make(chan struct{})
		p.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, stdout)
	p.err = p.cmd.Wait()
	close(p.exited)
}

// next waits for the oldest event named ev (and matching match, when set) that no earlier
// call returned.
func (c *openclawClient) next(ctx context.Context, ev string, match func(openclawEvent) bool) (openclawEvent, error) {
	return c.waitFor(ctx, fmt.Sprintf("event %q", ev), func(e openclawEvent) bool {
		return e.Ev == ev && (match == nil || match(e))
	})
}

// doneEvent waits for the last event of command id.
func (c *openclawClient) doneEvent(ctx context.Context, id string) (openclawEvent, error) {
	return c.waitFor(ctx, "the answer to command "+id, func(e openclawEvent) bool { return e.ID == id && e.Done })
}

// waitFor takes the oldest event that matches and that no earlier call took, waiting for
// one until ctx ends or the harness exits.
func (c *openclawClient) waitFor(ctx context.Context, what string, match func(openclawEvent) bool) (openclawEvent, error) {
	p := c.proc
	for {
		p.mu.Lock()
		for i, e := range p.events {
			if !p.taken[i] && match(e) {
				p.taken[i] = true
				p.mu.Unlock()
				return e, nil
			}
		}
		added := p.added
		p.mu.Unlock()
		select {
		case <-added:
		case <-p.exited:
			select {
			case <-added: // a last event came with the exit
				continue
			default:
			}
			return openclawEvent{}, fmt.Errorf("waiting for %s: the official client exited (%v); its stderr ends:\n%s", what, p.err, p.stderr)
		case <-ctx.Done():
			return openclawEvent{}, fmt.Errorf("waiting for %s: %w; its stderr ends:\n%s", what, ctx.Err(), p.stderr)
		}
	}
}

// takeAll returns (and takes) the events named ev, matching match when set, that have
// arrived and no earlier call returned.
func (c *openclawClient) takeAll(ev string, match func(openclawEvent) bool) []openclawEvent {
	p := c.proc
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []openclawEvent
	for i, e := range p.events {
		if !p.taken[i] && e.Ev == ev && (match == nil || match(e)) {
			p.taken[i] = true
			out = append(out, e)
		}
	}
	return out
}

// nextEvent is next, failing the test on error.
func (c *openclawClient) nextEvent(ctx context.Context, ev string, match func(openclawEvent) bool) openclawEvent {
	c.t.Helper()
	e, err := c.next(ctx, ev, match)
	if err != nil {
		c.t.Fatal(err)
	}
	return e
}

// send writes one command (its "id" set here) and returns the id.
func (c *openclawClient) send(cmd map[string]any) string {
	c.t.Helper()
	c.ids++
	id := "c" + strconv.Itoa(c.ids)
	cmd["id"] = id
	line, err := json.Marshal(cmd)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.proc.stdin.Write(append(line, '\n')); err != nil {
		c.t.Fatalf("send %s to the official client: %v", line, err)
	}
	return id
}

// call sends cmd and returns the command's last event ("done"). A cmd_error (a command
// the harness could not run) fails the test.
func (c *openclawClient) call(ctx context.Context, cmd map[string]any) openclawEvent {
	c.t.Helper()
	id := c.send(cmd)
	ev, err := c.doneEvent(ctx, id)
	if err != nil {
		c.t.Fatalf("%s: %v", cmd["cmd"], err)
	}
	if ev.Ev == "cmd_error" {
		c.t.Fatalf("%s: the harness refused it: %s", cmd["cmd"], ev.Raw)
	}
	return ev
}

// kill SIGKILLs the harness (a crash: no notifystop, the held getupdates cut off).
func (c *openclawClient) kill(ctx context.Context) {
	c.t.Helper()
	if err := c.proc.cmd.Process.Kill(); err != nil {
		c.t.Fatalf("kill the official client: %v", err)
	}
	select {
	case <-c.proc.exited:
	case <-ctx.Done():
		c.t.Fatalf("the killed official client did not exit: %v", ctx.Err())
	}
}

// restart starts a new harness on the same state directory (after kill, or stopping the
// running one as stop does).
func (c *openclawClient) restart(ctx context.Context) {
	c.t.Helper()
	c.stop()
	c.start(ctx)
}

// stop ends the harness by closing its stdin (SIGKILL when it does not exit) and, when
// the test failed, logs the end of its stderr.
func (c *openclawClient) stop() {
	p := c.proc
	if p == nil {
		return
	}
	_ = p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	if c.t.Failed() {
		c.t.Logf("official client stderr (end):\n%s", p.stderr)
	}
}

// openclawLogin is the outcome of the plugin's QR login.
type openclawLogin struct {
	Status    string `json:"status"` // confirmed, binded_redirect or failed
	BotToken  string `json:"bot_token"`
	BotID     string `json:"ilink_bot_id"`
	BaseURL   string `json:"baseurl"`
	UserID    string `json:"ilink_user_id"`
	AccountID string `json:"account_id"` // the plugin's file-safe id of BotID
	Message   string `json:"message"`
	// QRCode is the (last) qrcode the plugin polled; Statuses every get_qrcode_status
	// answer it saw, in order.
	QRCode   string   `json:"-"`
	Statuses []string `json:"-"`
}

// openclawQR is a QR code as get_bot_qrcode showed it to the plugin: the code it polls
// (qrcode) and what the QR image encodes (qrcode_img_content, the page a phone opens).
type openclawQR struct {
	QRCode     string `json:"qrcode"`
	ImgContent string `json:"qrcode_img_content"`
}

// qrApprover plays the phone: it scans and confirms the QR code the plugin shows (and
// answers whatever the login asks for) through whatever serves the QR login.
type qrApprover func(ctx context.Context, qr openclawQR) error

// loginByQR runs the plugin's QR login against baseURL (the plugin's fixed QR host is
// routed there) and approves the QR code it shows with approve.
func (c *openclawClient) loginByQR(ctx context.Context, baseURL string, approve qrApprover) openclawLogin {
	c.t.Helper()
	id := c.send(map[string]any{"cmd": "login", "base_url": baseURL})
	isOurs := func(e openclawEvent) bool { return e.ID == id }
	qr := c.nextEvent(ctx, "qrcode", isOurs)
	var shown openclawQR
	if err := qr.decode(&shown); err != nil {
		c.t.Fatal(err)
	}
	if shown.QRCode == "" || shown.ImgContent == "" {
		c.t.Fatalf("get_bot_qrcode as the plugin saw it: %s", qr.Raw)
	}
	if err := approve(ctx, shown); err != nil {
		c.t.Fatalf("approve QR %s: %v", shown.QRCode, err)
	}
	done, err := c.doneEvent(ctx, id)
	if err != nil {
		c.t.Fatalf("login: %v", err)
	}
	var out openclawLogin
	if err := done.decode(&out); err != nil {
		c.t.Fatal(err)
	}
	out.QRCode = shown.QRCode
	// The harness reports each get_qrcode_status answer before the login's end.
	for _, st := range c.takeAll("qr_status", isOurs) {
		var s struct {
			Status string `json:"status"`
		}
		if err := st.decode(&s); err != nil {
			c.t.Fatal(err)
		}
		out.Statuses = append(out.Statuses, s.Status)
	}
	return out
}

// openclawBot names the bot the client acts for and where it reaches iLink. A field left
// empty is the harness's: the last login's or poll's, or, for a BotID alone, what the
// plugin saved in its state directory at that bot's login.
type openclawBot struct {
	BaseURL    string // the API base (the login's baseurl)
	Token      string
	BotID      string // ilink_bot_id
	CDNBaseURL string // the CDN base for media without full_url / upload_full_url
}

func (b openclawBot) fields(cmd map[string]any) map[string]any {
	for k, v := range map[string]string{"base_url": b.BaseURL, "token": b.Token, "account_id": b.BotID, "cdn_base_url": b.CDNBaseURL} {
		if v != "" {
			cmd[k] = v
		}
	}
	return cmd
}

// openclawPolling is the start of the plugin's long-poll loop.
type openclawPolling struct {
	AccountID string `json:"account_id"`
	// SyncFile is where the plugin keeps get_updates_buf; Cursor what it held at the start.
	SyncFile string `json:"sync_file"`
	Cursor   string `json:"cursor"`
}

// poll starts the plugin's monitor loop for bot.
func (c *openclawClient) poll(ctx context.Context, bot openclawBot) openclawPolling {
	c.t.Helper()
	ev := c.call(ctx, bot.fields(map[string]any{"cmd": "poll"}))
	var out openclawPolling
	if err := ev.decode(&out); err != nil {
		c.t.Fatal(err)
	}
	return out
}

// nextPollSent waits for the monitor's next getupdates to go out and returns the
// get_updates_buf it carries.
func (c *openclawClient) nextPollSent(ctx context.Context) string {
	c.t.Helper()
	var out struct {
		Buf string `json:"get_updates_buf"`
	}
	if err := c.nextEvent(ctx, "getupdates_sent", nil).decode(&out); err != nil {
		c.t.Fatal(err)
	}
	return out.Buf
}

// stopPoll aborts the monitor loop and waits for it to end.
func (c *openclawClient) stopPoll(ctx context.Context) {
	c.t.Helper()
	c.call(ctx, map[string]any{"cmd": "stop_poll"})
}

// openclawMessage is an inbound WeixinMessage as the plugin's getupdates parser returned it
// (message_id and item msg_id as decimal strings), with what the plugin passed on.
type openclawMessage struct {
	MessageID    string            `json:"message_id"`
	Seq          json.Number       `json:"seq"`
	From         string            `json:"from_user_id"`
	To           string            `json:"to_user_id"`
	ClientID     string            `json:"client_id"`
	ContextToken string            `json:"context_token"`
	MessageType  int               `json:"message_type"`
	Items        []json.RawMessage `json:"item_list"`
	// Dispatch is the plugin's inbound context for the agent: the body, and the media it
	// downloaded and decrypted itself (MediaSHA256 is the harness's digest of that file).
	Dispatch struct {
		Body         string `json:"body"`
		ContextToken string `json:"context_token"`
		MediaPath    string `json:"media_path"`
		MediaType    string `json:"media_type"`
		MediaSHA256  string `json:"media_sha256"`
		MediaBytes   int    `json:"media_bytes"`
	} `json:"dispatch"`
	Raw json.RawMessage `json:"-"`
}

// item returns the first item of type typ (nil when none).
func (m openclawMessage) item(typ int) json.RawMessage {
	for _, it := range m.Items {
		var h struct {
			Type int `json:"type"`
		}
		if json.Unmarshal(it, &h) == nil && h.Type == typ {
			return it
		}
	}
	return nil
}

// text is the first text item's text.
func (m openclawMessage) text() string {
	var it struct {
		TextItem struct {
			Text string `json:"text"`
		} `json:"text_item"`
	}
	if raw := m.item(1); raw != nil {
		_ = json.Unmarshal(raw, &it)
	}
	return it.TextItem.Text
}

// nextMessage waits for the next message the plugin's monitor handed on.
func (c *openclawClient) nextMessage(ctx context.Context) openclawMessage {
	c.t.Helper()
	ev := c.nextEvent(ctx, "message", nil)
	var m openclawMessage
	if err := ev.decode(&m); err != nil {
		c.t.Fatal(err)
	}
	m.Raw = ev.Raw
	return m
}

// openclawSend is the outcome of a send through the plugin's messaging code.
type openclawSend struct {
	Ev        string `json:"ev"` // sent or send_error
	ClientID  string `json:"client_id"`
	MessageID string `json:"message_id"`
	Message   string `json:"message"` // the error the plugin threw
	Ret       *int   `json:"ret"`
	Errcode   *int   `json:"errcode"`
	// Responses are the sendmessage answers the plugin got, parsed by its own parser.
	Responses []struct {
		Status int             `json:"status"`
		Body   json.RawMessage `json:"body"`
	} `json:"responses"`
}

func (s openclawSend) ok() bool { return s.Ev == "sent" }

func (c *openclawClient) sendCall(ctx context.Context, cmd map[string]any) openclawSend {
	c.t.Helper()
	var out openclawSend
	if err := c.call(ctx, cmd).decode(&out); err != nil {
		c.t.Fatal(err)
	}
	return out
}

// sendText sends text to user with contextToken ("" = the one the plugin stored).
func (c *openclawClient) sendText(ctx context.Context, to, contextToken, text string) openclawSend {
	c.t.Helper()
	cmd := map[string]any{"cmd": "send_text", "to": to, "text": text}
	if contextToken != "" {
		cmd["context_token"] = contextToken
	}
	return c.sendCall(ctx, cmd)
}

// sendImage uploads the image file at path and sends it (getuploadurl, AES-128-ECB, CDN
// POST, sendmessage: the plugin's sendWeixinMediaFile).
func (c *openclawClient) sendImage(ctx context.Context, to, contextToken, path string) openclawSend {
	c.t.Helper()
	cmd := map[string]any{"cmd": "send_image", "to": to, "path": path}
	if contextToken != "" {
		cmd["context_token"] = contextToken
	}
	return c.sendCall(ctx, cmd)
}

// openclawDownload is media the plugin downloaded and decrypted.
type openclawDownload struct {
	Ev      string `json:"ev"` // downloaded or download_error
	SHA256  string `json:"sha256"`
	Bytes   int    `json:"bytes"`
	Message string `json:"message"`
}

// download fetches and decrypts the media of item with the plugin's downloadMediaFromItem.
func (c *openclawClient) download(ctx context.Context, item json.RawMessage, cdnBaseURL string) openclawDownload {
	c.t.Helper()
	var out openclawDownload
	if err := c.call(ctx, map[string]any{"cmd": "download", "item": item, "cdn_base_url": cdnBaseURL}).decode(&out); err != nil {
		c.t.Fatal(err)
	}
	return out
}

// openclawTyping is the outcome of a typing indicator (getconfig, then sendtyping).
type openclawTyping struct {
	Ev     string `json:"ev"` // typing or typing_error
	Ticket string `json:"typing_ticket"`
	Status int    `json:"status"`
}

// typing shows "typing..." to user as the plugin does: the ticket from its getconfig cache.
func (c *openclawClient) typing(ctx context.Context, to, contextToken string) openclawTyping {
	c.t.Helper()
	return c.typingStatus(ctx, to, contextToken, "typing")
}

// typingStatus sends sendtyping with status "typing" or "cancel".
func (c *openclawClient) typingStatus(ctx context.Context, to, contextToken, status string) openclawTyping {
	c.t.Helper()
	var out openclawTyping
	cmd := map[string]any{"cmd": "typing", "to": to, "context_token": contextToken, "status": status}
	if err := c.call(ctx, cmd).decode(&out); err != nil {
		c.t.Fatal(err)
	}
	return out
}

// notify calls msg/notifystart ("start") or msg/notifystop ("stop") for bot and returns
// the answer's ret (nil when absent) or the error (which the plugin itself ignores).
func (c *openclawClient) notify(ctx context.Context, bot openclawBot, which string) (ret *int, errText string) {
	c.t.Helper()
	var out struct {
		Ret   *int   `json:"ret"`
		Error string `json:"error"`
	}
	if err := c.call(ctx, bot.fields(map[string]any{"cmd": "notify_" + which})).decode(&out); err != nil {
		c.t.Fatal(err)
	}
	return out.Ret, out.Error
}

// openclawSessionExpired is the plugin's errcode -14 handling: it pauses the account.
type openclawSessionExpired struct {
	AccountID string `json:"account_id"`
	Errcode   int    `json:"errcode"`
	Paused    bool   `json:"paused"`
	PauseMS   int64  `json:"pause_ms"`
}

// nextSessionExpired waits for the monitor to pause the account after errcode -14.
func (c *openclawClient) nextSessionExpired(ctx context.Context) openclawSessionExpired {
	c.t.Helper()
	var out openclawSessionExpired
	if err := c.nextEvent(ctx, "session_expired", nil).decode(&out); err != nil {
		c.t.Fatal(err)
	}
	return out
}

// openclawTail keeps the last lines of the harness's stderr.
type openclawTail struct {
	mu    sync.Mutex
	lines []string
	part  []byte
}

const openclawTailLines = 200

func (w *openclawTail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.part = append(w.part, p...)
	for {
		i := bytes.IndexByte(w.part, '\n')
		if i < 0 {
			break
		}
		w.lines = append(w.lines, string(w.part[:i]))
		w.part = w.part[i+1:]
	}
	if n := len(w.lines); n > openclawTailLines {
		w.lines = slices.Clone(w.lines[n-openclawTailLines:])
	}
	return len(p), nil
}

func (w *openclawTail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(append(slices.Clone(w.lines), string(w.part)), "\n")
}

// openclawSyncCursor reads the get_updates_buf the plugin saved in file.
func openclawSyncCursor(t *testing.T, file string) string {
	t.Helper()
	var saved struct {
		Buf string `json:"get_updates_buf"`
	}
	data, err := os.ReadFile(file)
	if err == nil {
		err = json.Unmarshal(data, &saved)
	}
	if err != nil {
		t.Fatalf("the plugin's sync file: %v", err)
	}
	return saved.Buf
}
