// Command ilinksim runs the iLink bot API simulator (see docs/simulator.md).
//
//	go run ./cmd/ilinksim --addr 127.0.0.1:8089
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ilinksim:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg := ilinksim.DefaultConfig()
	fs := flag.NewFlagSet("ilinksim", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8089", "listen address")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")

	fs.IntVar(&cfg.ReplyQuota, "reply-quota", cfg.ReplyQuota, "accepted sends per (bot, peer) after each inbound message (0 = unlimited)")
	fs.DurationVar(&cfg.ReplyWindow, "reply-window", cfg.ReplyWindow, "sim time after the peer's last inbound message during which the bot may send (0 = unlimited)")
	fs.DurationVar(&cfg.IdleStaleAfter, "idle-stale-after", cfg.IdleStaleAfter, "sim time after the peer's last inbound message from which sends answer errcode -14 (0 = never)")
	fs.StringVar(&cfg.ContextTokenMode, "context-token-mode", cfg.ContextTokenMode, "context_token check: ignore, present, latest")
	fs.BoolVar(&cfg.RealTime, "real-time", cfg.RealTime, "run the sim clock on real time (plus /_sim/clock/advance), so limits refill as on iLink")
	fs.IntVar(&cfg.ThrottleBurst, "throttle-burst", cfg.ThrottleBurst, "send attempts per bot within --throttle-interval that start a penalty (0 = off)")
	fs.DurationVar(&cfg.ThrottleInterval, "throttle-interval", cfg.ThrottleInterval, "sliding window of the burst detector (sim time)")
	fs.DurationVar(&cfg.ThrottlePenalty, "throttle-penalty", cfg.ThrottlePenalty, "penalty during which every send answers ret -2 \"prepare failed\" (sim time)")
	fs.BoolVar(&cfg.ThrottleExtendOnAttempt, "throttle-extend", cfg.ThrottleExtendOnAttempt, "restart the penalty on every send attempt during it")
	fs.IntVar(&cfg.MaxTextBytes, "max-text-bytes", cfg.MaxTextBytes, "largest text item in UTF-8 bytes")
	fs.DurationVar(&cfg.LongPollHold, "longpoll-hold", cfg.LongPollHold, "how long getupdates is held when nothing is queued (real time)")
	fs.IntVar(&cfg.LongPollTimeoutMS, "longpoll-timeout-ms", cfg.LongPollTimeoutMS, "longpolling_timeout_ms returned (0 = --longpoll-hold)")
	fs.IntVar(&cfg.MaxBatch, "max-batch", cfg.MaxBatch, "most messages per getupdates")
	fs.IntVar(&cfg.ReplayOnEmptyCursor, "replay-on-empty-cursor", cfg.ReplayOnEmptyCursor, "delivered messages an empty get_updates_buf brings back again")
	fs.DurationVar(&cfg.ReplayMaxAge, "replay-max-age", cfg.ReplayMaxAge, "age limit of that replay (sim time)")
	fs.DurationVar(&cfg.QRTTL, "qr-ttl", cfg.QRTTL, "QR code lifetime (sim time; 0 = never expires)")
	fs.DurationVar(&cfg.QRPollHold, "qr-poll-hold", cfg.QRPollHold, "hold get_qrcode_status until the status changes (real time; 0 = answer at once)")
	fs.IntVar(&cfg.VerifyMaxWrong, "verify-max-wrong", cfg.VerifyMaxWrong, "wrong verify codes that answer verify_code_blocked")
	fs.StringVar(&cfg.RedirectHost, "redirect-host", cfg.RedirectHost, "default redirect_host of scaned_but_redirect (\"\" = the poll's Host)")
	fs.StringVar(&cfg.QRImageBase, "qr-image-base", cfg.QRImageBase, "prefix of qrcode_img_content")
	fs.StringVar(&cfg.SendSuccessStyle, "send-success", cfg.SendSuccessStyle, "sendmessage success body: message_id, ret0, empty")
	fs.StringVar(&cfg.StaleTokenStyle, "stale-style", cfg.StaleTokenStyle, "stale token body: errcode, ret, both")
	fs.StringVar(&cfg.UploadURLStyle, "upload-url-style", cfg.UploadURLStyle, "getuploadurl answer: both, full, param")
	fs.BoolVar(&cfg.NumericItemIDs, "numeric-item-ids", cfg.NumericItemIDs, "write item msg_id and ref_msg.svr_id as JSON numbers instead of strings")
	fs.Uint64Var(&cfg.MessageIDBase, "message-id-base", cfg.MessageIDBase, "first server message_id")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", cfg.MaxBodyBytes, "largest JSON request body (HTTP 413 above)")
	fs.Int64Var(&cfg.MaxUploadBytes, "max-upload-bytes", cfg.MaxUploadBytes, "largest CDN upload (HTTP 413 above)")
	fs.BoolVar(&cfg.CDNStrict, "cdn-strict", cfg.CDNStrict, "check upload size, padding and MD5 against getuploadurl")
	fs.BoolVar(&cfg.StrictClient, "strict-client", cfg.StrictClient, "reject requests missing the official plugin's headers or base_info")
	fs.BoolVar(&cfg.RequireNotifyStart, "require-notifystart", cfg.RequireNotifyStart, "without msg/notifystart only the first reply per connection renders")
	fs.StringVar(&cfg.BaseURL, "base-url", cfg.BaseURL, "baseurl handed to bots (\"\" = http://<request Host>)")
	fs.StringVar(&cfg.CDNBaseURL, "cdn-base-url", cfg.CDNBaseURL, "CDN base in upload_full_url/full_url (\"\" = http://<request Host>/c2c)")
	fs.IntVar(&cfg.MaxRecordedRequests, "max-recorded-requests", cfg.MaxRecordedRequests, "request log size")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg.Logger = log
	if err := cfg.Validate(); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	sim := ilinksim.New(cfg)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{
		Handler:           sim.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		// Held long polls end (without an answer) when shutdown starts.
		BaseContext: func(net.Listener) context.Context { return ctx },
		// A poll whose client is gone does not count as outstanding (overlaps).
		ConnContext: ilinksim.ConnContext,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("ilinksim listening", "addr", ln.Addr().String(), "base_url", "http://"+ln.Addr().String(),
		"control", "http://"+ln.Addr().String()+"/_sim/")
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("ilinksim shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
