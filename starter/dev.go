package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/mcpserver"
	"github.com/ilinkflow/ilinkflow/internal/metrics"
	"github.com/ilinkflow/ilinkflow/internal/webui"
	"github.com/ilinkflow/ilinkflow/payloadcodec"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/temporalconn"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

var devHelp = help{"dev [flags]",
	"Runs all of ilinkflow on this machine (Temporal dev server and UI, iLink simulator, worker, echo agent, a demo bot) and lets you chat as a WeChat user; Ctrl-C stops everything.",
	"starter dev --log-level info"}

// devSystem is what `starter dev` started, for the chat and for shutdown.
type devSystem struct {
	ctl     *ilinksim.Control
	botID   string
	owner   string
	printed int
	// pool, account and installation find the reply window of the first message, whose
	// id the chat names once (windowShown) for the banner's decoded-history command.
	pool         *pgxpool.Pool
	account      string
	installation string
	windowShown  bool
}

func devCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	fs, c := commandFlags("dev", devHelp, withTemporal|withDB, stderr, getenv)
	uiPort := fs.Int("ui-port", 8233, "Temporal UI port (when dev starts the Temporal dev server)")
	simAddr := fs.String("sim-addr", "127.0.0.1:8089", "address of the iLink simulator")
	httpAddr := fs.String("http-addr", "127.0.0.1:8090", "address of the reply API, /metrics and /healthz")
	logLevel := fs.String("log-level", "warn", "worker log level (debug, info, warn, error)")
	keyFile := fs.String("dev-key-file", defaultDevKeyFile(), "sealing key file kept between dev runs, from which the payload codec's keys and the codec endpoint's token derive (used only when ILINKFLOW_SEALING_KEYS and ILINKFLOW_SEALING_KEYS_FILE are unset)")
	if help, err := parse(fs, args, stdout); help || err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usagef("dev: --log-level %q: must be one of debug, info, warn, error", *logLevel)
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	say := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }
	// Ctrl-C (or SIGTERM) cancels parent: everything started below is stopped by the
	// deferred calls and the command ends without an error.
	err := runDev(ctx, c, devSettings{uiPort: *uiPort, simAddr: *simAddr, httpAddr: *httpAddr, level: level, keyFile: *keyFile}, stdin, stdout, stderr, getenv, say)
	if err != nil && parent.Err() != nil {
		say("\nstopped.")
		return nil
	}
	return err
}

// devShutdownGrace is how long the dev worker lets its activities finish on Ctrl-C, and
// devLongPollHold the simulator's hold of an empty getupdates: shorter, so that the long
// polls end within the grace.
const (
	devShutdownGrace = 2 * time.Second
	devLongPollHold  = time.Second
)

// devSettings are dev's own flags.
type devSettings struct {
	uiPort            int
	simAddr, httpAddr string
	level             slog.Level
	keyFile           string
}

func runDev(ctx context.Context, c *conn, set devSettings, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string, say func(string, ...any)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	uiPort, simAddr, httpAddr := &set.uiPort, &set.simAddr, &set.httpAddr
	if err := c.resolve(); err != nil {
		return err
	}

	// PostgreSQL.
	pool, err := pgxpool.New(ctx, c.databaseURL)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		return fmt.Errorf("PostgreSQL at DATABASE_URL is not reachable (%w); start it, e.g. pg_ctlcluster 15 main start", err)
	}
	defer pool.Close()

	// Temporal: connect, or start the dev server (installing the CLI if needed).
	// One metrics registry for the worker's /metrics and its Temporal client, so the
	// SDK's temporal_* series are served as by a worker that dials Temporal itself.
	reg, err := metrics.New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return err
	}
	defer func() { _ = reg.Close(context.Background()) }()
	// Sealing keys: the configured ones, or the local dev key file (created on the first
	// run), so the next run can open this run's accounts. The payload codec's keys derive
	// from them: every payload this run puts in Temporal is encrypted, as a production
	// worker's, and the next run decodes this run's histories.
	keys, err := sealing.LoadKeyring(getenv)
	fromDevFile, created := false, false
	if errors.Is(err, sealing.ErrNoKey) {
		fromDevFile = true
		keys, created, err = devKeyring(set.keyFile)
	}
	if err != nil {
		return err
	}
	dc, err := payloadcodec.DataConverter(keys)
	if err != nil {
		return err
	}
	codecToken, err := devCodecToken(getenv, keys, fromDevFile)
	if err != nil {
		return err
	}

	// The worker's HTTP listener, bound before Temporal: its address is the codec endpoint
	// the dev server's UI is told about (--ui-codec-endpoint), when both are on loopback.
	httpLn, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		return fmt.Errorf("listen for the reply API on %s: %w", *httpAddr, err)
	}
	defer httpLn.Close() // gateway.Run closes it too, once it serves
	codecURL := "http://" + httpLn.Addr().String() + strings.TrimSuffix(gateway.CodecPath, "/")
	uiCodec := devUICodecEndpoint(c.temporal, httpLn.Addr(), codecURL)

	tc, uiURL, stopTemporal, err := devTemporal(ctx, c, *uiPort, uiCodec, dc, reg.TemporalHandler(), say, stderr)
	if err != nil {
		return err
	}
	defer stopTemporal()
	defer tc.Close()
	switch {
	case created:
		say("sealing: no ILINKFLOW_SEALING_KEYS set; created the dev-only key file %s (0600), reused by the next runs", set.keyFile)
	case fromDevFile:
		say("sealing: no ILINKFLOW_SEALING_KEYS set; using the dev-only key file %s", set.keyFile)
	}
	// The previous run's demo bot lived in that run's simulator: its account is retired
	// before the worker starts, so that no poller tries its dead token.
	prev, err := retirePreviousDemoAccounts(ctx, pool, keys, tc, demoOwner)
	if err != nil {
		return err
	}

	// The simulator.
	simLn, err := net.Listen("tcp", *simAddr)
	if err != nil {
		return fmt.Errorf("simulator: %w", err)
	}
	simURL := "http://" + simLn.Addr().String()
	// On real time, as iLink: the 3-sends burst limit refills (a manual clock never moves,
	// so the third reply of every chat would be throttled).
	simCfg := ilinksim.DefaultConfig()
	simCfg.RealTime = true
	// Long polls shorter than the worker's shutdown grace (below): on Ctrl-C the poll in
	// flight ends by itself and its notifystop reaches the simulator before it closes (a
	// 35 s hold was cut at the grace, and the notifystop found the simulator gone).
	simCfg.LongPollHold = devLongPollHold
	simSrv := &http.Server{Handler: ilinksim.New(simCfg).Handler(), ReadHeaderTimeout: 10 * time.Second, ConnContext: ilinksim.ConnContext}
	go func() { _ = simSrv.Serve(simLn) }()
	defer simSrv.Close()

	// The worker, with the echo agent and the reply API.
	cfg := gateway.DefaultConfig()
	cfg.TemporalAddress, cfg.TemporalNamespace, cfg.TaskQueue = c.temporal, c.namespace, c.taskQueue
	cfg.Temporal = c.tconn
	cfg.ILinkBaseURL, cfg.ILinkCDNBaseURL = simURL, simURL+"/c2c"
	cfg.HTTPAddr = *httpAddr
	cfg.Handler = "echo"
	cfg.ShutdownGrace = devShutdownGrace // Ctrl-C stops the demo within a couple of seconds
	// The enrollment web front end, with the operator token of the environment or one for
	// this run (printed below, never put in a URL).
	uiToken := strings.TrimSpace(getenv(webui.TokenEnv))
	if uiToken == "" {
		var b [12]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		uiToken = hex.EncodeToString(b[:])
	}
	cfg.UIToken = sealing.NewSecret(uiToken)
	// The payload codec endpoint (/codec/) for the Temporal CLI, behind the token printed
	// below; and, when dev started the dev server with --ui-codec-endpoint, for its UI,
	// which cannot send the token: its origin, and only it, is let through without it
	// (gateway.Options.DevUICodecOrigin, dev only; docs/payload-codec.md).
	cfg.CodecToken = sealing.NewSecret(codecToken)
	devUIOrigin := ""
	if uiURL != "" && uiCodec != "" {
		devUIOrigin = uiURL
		cfg.CodecCORSOrigin = uiURL
	}
	// The web console's accounts link each bot to its workflows in the dev server's UI.
	cfg.TemporalUIURL = uiURL
	level := set.level
	cfg.LogLevel = level
	ready, done := make(chan struct{}), make(chan error, 1)
	apiAddr := httpLn.Addr().String()
	go func() {
		done <- gateway.Run(ctx, cfg, gateway.Options{Pool: pool, Keyring: keys, Temporal: tc, Metrics: reg, Logger: cfg.NewLogger(stderr),
			TracerProvider:   tracerOf(ctx), // its client (devTemporal) has the tracing interceptor
			HTTPListener:     httpLn,
			HTTPStarted:      func(a net.Addr) { apiAddr = a.String() },
			Ready:            func(gateway.ReconcileReport) { close(ready) },
			DevUICodecOrigin: devUIOrigin})
	}()
	defer func() { cancel(); <-done }()
	select {
	case <-ready:
	case err := <-done:
		return fmt.Errorf("worker: %w", err)
	case <-ctx.Done():
		return ctx.Err()
	}

	// A demo bot, enrolled through a scripted QR scan.
	// The simulator keeps its bots in memory, so a previous run's demo bot is gone with it
	// (its account was retired above, before the worker started): the same demo owner is
	// enrolled again and the chat goes on with the same demo user.
	sys := &devSystem{ctl: ilinksim.NewControl(simURL, nil), owner: demoOwner, pool: pool}
	if len(prev) > 0 {
		say("demo bot: the previous run's demo account %s belonged to that run's simulator, which is gone: it is marked needs_relogin and the demo user is enrolled again", strings.Join(prev, ", "))
	}
	ectx, ecancel := context.WithTimeout(ctx, time.Minute)
	account, err := sys.enroll(ectx, tc, c.taskQueue)
	ecancel()
	if err != nil {
		if ctx.Err() == nil && ectx.Err() != nil {
			return fmt.Errorf("the demo enrollment did not finish within a minute (%w); run with --log-level info to see why; "+
				"if the worker cannot open earlier accounts (sealing), set ILINKFLOW_SEALING_KEYS to the key they were sealed with, or use a fresh database", err)
		}
		return err
	}
	if sys.installation, err = installationID(ctx, pool); err != nil {
		return err
	}
	sys.account = account
	say("")
	say("ilinkflow is running:")
	switch {
	case devUIOrigin != "":
		say("  Temporal UI        %s (decodes the payloads through the payload codec below)", uiURL)
	case uiURL != "":
		say("  Temporal UI        %s (payloads shown encrypted: the UI decodes only when it and --http-addr are on loopback)", uiURL)
	}
	say("  Temporal           %s (namespace %s, task queue %s)", c.temporal, c.namespace, c.taskQueue)
	say("  reply API          http://%s/v1/reply", apiAddr)
	say("  MCP server         http://%s%s (starter mcp-agent add NAME; starter route --account %s --mcp-agent NAME)", apiAddr, mcpserver.Path, account)
	say("  metrics, health    http://%s/metrics  http://%s/healthz", apiAddr, apiAddr)
	say("  web front end      http://%s%s/ (operator token: %s)", apiAddr, gateway.UIPath, uiToken)
	say("  iLink simulator    %s (control API under /_sim/)", simURL)
	say("  demo bot           %s (account %s), owner %s", sys.botID, account, sys.owner)
	say("  payload codec      %s (token: %s); every payload in Temporal is encrypted", codecURL, codecToken)
	say("  decoded history    %s", codecShowCommand(c, wfapi.AccountPollerID(sys.installation, account), codecURL, codecToken))
	say("")
	say("Type a message as the WeChat user and press Enter; the echo agent answers. Ctrl-C stops.")
	return sys.chat(ctx, stdin, stdout)
}

// devTemporal connects to Temporal, or starts the dev server with its UI (told to decode
// payloads through uiCodec, the codec endpoint, when set) and returns the UI's URL, its
// origin (empty when it connected to a running server). Its client encrypts payloads
// with dc, the worker's data converter.
func devTemporal(ctx context.Context, c *conn, uiPort int, uiCodec string, dc converter.DataConverter, mh client.MetricsHandler, say func(string, ...any), stderr io.Writer) (client.Client, string, func(), error) {
	icpt, err := clientInterceptors(ctx)
	if err != nil {
		return nil, "", nil, err
	}
	dial := func() (client.Client, error) {
		dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		return temporalconn.Dial(dctx, c.tconn, client.Options{
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), DataConverter: dc, MetricsHandler: mh,
			Interceptors: icpt})
	}
	tc, err := dial()
	if err == nil {
		say("Temporal: using the server at %s", c.tconn)
		if err := wfapi.RegisterSearchAttributes(ctx, tc, c.namespace); err != nil {
			say("Temporal: could not create the search attributes: %v", err)
		}
		return tc, "", func() {}, nil
	}
	// A server that answers but refuses (TLS, credentials, namespace), or one configured
	// with TLS or credentials, is not replaced by a local dev server: its error stands.
	if code := temporalconn.CodeOf(err); (code != temporalconn.CodeUnreachable && code != "") || c.tconn.TLS || c.tconn.APIKey {
		return nil, "", nil, err
	}
	// Without a CLI, EnsureCLI says what building it costs (devserver.MissingCLINotice).
	cli, err := devserver.EnsureCLI(ctx, stderr)
	if err != nil {
		return nil, "", nil, err
	}
	host, port, err := net.SplitHostPort(c.temporal)
	if err != nil {
		return nil, "", nil, fmt.Errorf("--temporal-address: %w", err)
	}
	say("Temporal: starting the dev server (%s) on %s with its UI on port %d", cli, c.temporal, uiPort)
	cmd := exec.Command(cli, devServerArgs(host, port, uiPort, c.namespace, uiCodec)...)
	// Its errors reach stderr while it serves; those of its own shutdown (shards closing
	// under requests in flight) are not problems and are dropped.
	serverErr := &switchWriter{w: stderr}
	cmd.Stdout, cmd.Stderr = io.Discard, serverErr
	ownProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		return nil, "", nil, fmt.Errorf("start the Temporal dev server: %w", err)
	}
	stop := func() {
		serverErr.off()
		_ = cmd.Process.Signal(os.Interrupt)
		waited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-waited
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		tc, err := dial()
		if err == nil {
			return tc, devUIOrigin(host, uiPort), stop, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			stop()
			return nil, "", nil, fmt.Errorf("the Temporal dev server did not come up: %w", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// enroll enrolls the demo bot: an Enrollment workflow whose QR code the simulator scans.
func (d *devSystem) enroll(ctx context.Context, tc client.Client, taskQueue string) (string, error) {
	var raw [6]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	offer := "qo_demo_" + hex.EncodeToString(raw[:])
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: wfapi.EnrollmentID(offer), TaskQueue: taskQueue},
		wfapi.EnrollmentWorkflow, wfapi.EnrollmentInput{OfferID: offer, RequestedBy: "starter dev", PollGap: wfapi.Duration(200 * time.Millisecond)})
	if err != nil {
		return "", fmt.Errorf("start the demo enrollment: %w", err)
	}
	var qrcode string
	for qrcode == "" {
		sessions, err := d.ctl.QRSessions(ctx)
		if err != nil {
			return "", err
		}
		for _, q := range sessions {
			if q.Status == vocab.EnrollmentWaiting {
				qrcode = q.QRCode
			}
		}
		if qrcode == "" {
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	if _, err := d.ctl.ScanQR(ctx, qrcode, d.owner); err != nil {
		return "", err
	}
	if _, err := d.ctl.ConfirmQR(ctx, qrcode); err != nil {
		return "", err
	}
	var st wfapi.EnrollmentState
	if err := run.Get(ctx, &st); err != nil {
		return "", fmt.Errorf("demo enrollment: %w", err)
	}
	if st.Status != vocab.EnrollmentConfirmed {
		return "", fmt.Errorf("demo enrollment ended %s %s", st.Status, st.Error)
	}
	bots, err := d.ctl.Bots(ctx)
	if err != nil {
		return "", err
	}
	for _, b := range bots {
		if b.Owner == d.owner && !b.Dead {
			d.botID = b.BotID
		}
	}
	return st.AccountKey, nil
}

// chat sends each input line as a user message and prints the bot's replies. Standard
// input is read by its own goroutine, so a cancelled ctx (Ctrl-C) ends the chat at once,
// even while it waits at the prompt. A line the terminal may have cut is still sent, with
// a warning (warnIfCut).
func (d *devSystem) chat(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	terminal := isTerminal(stdin)
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		fmt.Fprint(stdout, "you> ")
		var line string
		var ok bool
		select {
		case <-ctx.Done():
			fmt.Fprintln(stdout)
			return ctx.Err()
		case line, ok = <-lines:
		}
		if !ok {
			fmt.Fprintln(stdout)
			return nil
		}
		warnIfCut(stdout, line, terminal)
		text := strings.TrimSpace(line)
		if text == "" {
			continue
		}
		if len(text) > vocab.MaxTextBytes {
			fmt.Fprintf(stdout, "(your message is %d bytes; one iLink message carries at most %d, so the echo is cut and says so)\n", len(text), vocab.MaxTextBytes)
		}
		if _, err := d.ctl.InjectText(ctx, d.botID, "", text); err != nil {
			return err
		}
		if err := d.awaitReply(ctx, stdout); err != nil {
			return err
		}
		d.showWindow(ctx, stdout)
	}
}

// showWindow names, once per run, the ReplyWindow workflow of the message just answered:
// its history holds the reply (with the user's text) encrypted, and the banner's
// decoded-history command shows it decoded with that workflow id.
func (d *devSystem) showWindow(ctx context.Context, stdout io.Writer) {
	if d.windowShown || d.pool == nil {
		return
	}
	if id := latestWindow(ctx, d.pool, d.account); id > 0 {
		d.windowShown = true
		wf := wfapi.ReplyWindowID(d.installation, id)
		fmt.Fprintf(stdout, "(in Temporal this message is the ReplyWindow %s, its text encrypted: to read it, run the \"decoded history\" command above with --workflow-id %s)\n", wf, wf)
	}
}

// awaitReply prints the bot's new sends, waiting up to a minute for the first one.
func (d *devSystem) awaitReply(ctx context.Context, stdout io.Writer) error {
	deadline := time.Now().Add(time.Minute)
	for {
		sent, err := d.ctl.Sent(ctx, d.botID)
		if err != nil {
			return err
		}
		if len(sent) > d.printed {
			for _, m := range sent[d.printed:] {
				if m.Outcome == "accepted" {
					fmt.Fprintf(stdout, "bot> %s\n", m.Text)
				} else {
					fmt.Fprintf(stdout, "bot (refused by iLink: %s)> %s\n", m.Reason, m.Text)
				}
			}
			d.printed = len(sent)
			return nil
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(stdout, "(no reply within a minute)")
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// switchWriter writes to w until off is called, then drops everything.
type switchWriter struct {
	mu      sync.Mutex
	w       io.Writer
	dropped bool
}

// Write writes p to w, or drops it once the writer is off.
func (s *switchWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dropped {
		return len(p), nil
	}
	return s.w.Write(p)
}

// off drops every later write.
func (s *switchWriter) off() {
	s.mu.Lock()
	s.dropped = true
	s.mu.Unlock()
}
