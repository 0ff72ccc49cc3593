package activity

import (
	"context"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// Typing defaults (Typer.After, Typer.Every, Typer.For).
const (
	// DefaultTypingAfter is how long an agent may work before "typing" is shown: an agent
	// that answers sooner costs iLink no typing call at all (neither the show nor its
	// cancel), and the user sees the reply without a flicker of "typing" before it.
	DefaultTypingAfter = time.Second
	// DefaultTypingEvery is how often "typing" is shown again while an agent works.
	DefaultTypingEvery = 5 * time.Second
	// DefaultTypingFor bounds how long "typing" is kept alive after a hand-off.
	DefaultTypingFor = 2 * time.Minute
	// typingCallTimeout bounds one getconfig or sendtyping call.
	typingCallTimeout = 5 * time.Second
	// typingFirstTimeout bounds one show of a keep-alive.
	typingFirstTimeout = 3 * time.Second
	// typingTicketTTL is how long a typing ticket is reused before getconfig is asked again.
	typingTicketTTL = 10 * time.Minute
)

// TyperStore is what a Typer reads in the store (a *store.Store).
type TyperStore interface {
	GetAccountWithSecret(ctx context.Context, accountKey string) (store.AccountWithSecret, error)
	GetWindow(ctx context.Context, windowID int64) (store.Window, error)
	GetMessage(ctx context.Context, messageKey string) (store.Message, error)
}

// Typer shows and cancels "typing" to a bot's peer: getconfig for the peer's typing
// ticket (cached), then sendtyping. It is not an activity: the hand-off, the sends, the
// verdict and the window's end use it, and the reply API's POST /v1/typing. Typing never
// costs reply quota and its failures are only logged by the gateway's own callers.
type Typer struct {
	Store TyperStore
	// Client is the iLink client configuration; NewClient builds clients (nil: ilink.New).
	Client    ilink.Config
	NewClient func(cfg ilink.Config, token ilink.Secret) (*ilink.Client, error)
	Logger    *slog.Logger
	// After, Every and For are the keep-alive's delay before its first show, its period
	// and its bound (0: the defaults).
	After, Every, For time.Duration

	mu      sync.Mutex
	tickets map[string]typingTicket
	alive   map[string]*keepAliveRun // keep-alives in progress, by conversation
	stripes [64]sync.Mutex
}

// keepAliveRun is one keep-alive in progress. shown (under Typer.mu) is set before its
// first show leaves, and kept by a keep-alive that replaces it: while it is false, the
// user sees no "typing" that this Typer made, so a cancel has nothing to end.
type keepAliveRun struct {
	cancel context.CancelFunc
	shown  bool
}

type typingTicket struct {
	ticket ilink.Secret
	until  time.Time
}

func conversation(accountKey, peerID string) string { return accountKey + "\x00" + peerID }

func (t *Typer) log() *slog.Logger {
	if t.Logger != nil {
		return t.Logger
	}
	return slog.Default()
}

// Typing shows (on) or cancels "typing" to peerID on the account's bot. Cancelling also
// ends a keep-alive this Typer runs for the conversation, and calls nothing when that
// keep-alive never showed "typing" (the agent answered within After); without a
// keep-alive here (another worker's hand-off, a restart) the cancel is always sent.
// Calls for one conversation are made one at a time, so a cancel is never overtaken by a
// keep-alive's show.
func (t *Typer) Typing(ctx context.Context, accountKey, peerID string, on bool) error {
	key := conversation(accountKey, peerID)
	t.mu.Lock()
	k := t.alive[key]
	if k != nil && on {
		k.shown = true
	}
	if k != nil && !on {
		k.cancel()
		delete(t.alive, key)
	}
	t.mu.Unlock()
	if k != nil && !on && !k.shown {
		return nil // nothing shown to end
	}
	mu := t.lockOf(key)
	mu.Lock()
	defer mu.Unlock()
	return t.send(ctx, accountKey, peerID, on)
}

// lockOf is the lock that orders the typing calls of a conversation (striped).
func (t *Typer) lockOf(key string) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(key))
	return &t.stripes[h.Sum32()%uint32(len(t.stripes))]
}

func (t *Typer) send(ctx context.Context, accountKey, peerID string, on bool) error {
	ctx, cancel := context.WithTimeout(ctx, 2*typingCallTimeout)
	defer cancel()
	acct, err := t.Store.GetAccountWithSecret(ctx, accountKey)
	if err != nil {
		return &activities.TypingError{Code: string(store.CodeOf(err))}
	}
	if !on && acct.Status != vocab.AccountActive && acct.Status != vocab.AccountPaused {
		// Needs a relogin, replaced or disabled: the bot token is dead or another binding
		// owns the bot, so there is nothing this account can cancel (iLink drops a typing
		// status by itself); a call would only fail.
		return nil
	}
	cfg := t.Client
	cfg.BaseURL = acct.BaseURL
	var cl *ilink.Client
	if t.NewClient != nil {
		cl, err = t.NewClient(cfg, ilink.Secret(acct.BotToken.Reveal()))
	} else {
		cl, err = ilink.New(cfg, ilink.Secret(acct.BotToken.Reveal()))
	}
	if err != nil {
		return &activities.TypingError{Code: string(ilink.CodeOf(err))}
	}
	status := ilink.TypingStop
	if on {
		status = ilink.TypingStart
	}
	for try := 0; try < 2; try++ {
		ticket, err := t.ticket(ctx, cl, accountKey, peerID, try > 0)
		if err != nil {
			return &activities.TypingError{Code: string(ilink.CodeOf(err))}
		}
		if err = cl.SendTyping(ctx, peerID, ticket, status); err == nil {
			return nil
		}
		if try > 0 {
			return &activities.TypingError{Code: string(ilink.CodeOf(err))}
		}
		// The ticket may have changed: ask getconfig again once.
	}
	return nil
}

// ticket returns the conversation's typing ticket, from the cache unless fresh is set.
func (t *Typer) ticket(ctx context.Context, cl *ilink.Client, accountKey, peerID string, fresh bool) (ilink.Secret, error) {
	key := conversation(accountKey, peerID)
	t.mu.Lock()
	cached, ok := t.tickets[key]
	t.mu.Unlock()
	if ok && !fresh && time.Now().Before(cached.until) {
		return cached.ticket, nil
	}
	cfg, err := cl.GetConfig(ctx, peerID, "")
	if err != nil {
		return "", err
	}
	t.mu.Lock()
	if t.tickets == nil {
		t.tickets = map[string]typingTicket{}
	}
	t.tickets[key] = typingTicket{ticket: cfg.TypingTicket, until: time.Now().Add(typingTicketTTL)}
	t.mu.Unlock()
	return cfg.TypingTicket, nil
}

// keepAlive shows "typing" for a window's message once After has passed (in the
// background: a hand-off never waits for it) and again every Every until the window has
// a reply sent or reserved, its message is finished, the window is no longer open,
// Typing(off) is called for the conversation, or For has passed. Each show after the
// first wait checks the store first, since the reply may have been sent by another
// worker. Failures are logged.
func (t *Typer) keepAlive(ctx context.Context, w store.Window) {
	after, every, bound := t.After, t.Every, t.For
	if after <= 0 {
		after = DefaultTypingAfter
	}
	if every <= 0 {
		every = DefaultTypingEvery
	}
	if bound <= 0 {
		bound = DefaultTypingFor
	}
	log := t.log().With("account", w.AccountKey, "reply_window_id", w.ReplyWindowID)
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	key := conversation(w.AccountKey, w.PeerID)
	run := &keepAliveRun{cancel: cancel}
	t.mu.Lock()
	if t.alive == nil {
		t.alive = map[string]*keepAliveRun{}
	}
	if prev := t.alive[key]; prev != nil {
		prev.cancel()
		run.shown = prev.shown // still on the user's screen
	}
	t.alive[key] = run
	t.mu.Unlock()
	show := func(what string) {
		mu := t.lockOf(key)
		mu.Lock()
		defer mu.Unlock()
		t.mu.Lock()
		if kctx.Err() != nil {
			t.mu.Unlock()
			return // cancelled meanwhile: never show after a cancel
		}
		run.shown = true // before the call: it may reach iLink even if it fails
		t.mu.Unlock()
		sctx, scancel := context.WithTimeout(kctx, typingFirstTimeout)
		defer scancel()
		if err := t.send(sctx, w.AccountKey, w.PeerID, true); err != nil {
			// "Typing" is a courtesy: a show that failed or did not answer in time loses
			// nothing, and a busy iLink or machine makes it common, so it is no warning.
			log.Info("typing could not be "+what, "error", err)
		}
	}
	go func() {
		defer func() {
			cancel()
			t.mu.Lock()
			if t.alive[key] == run {
				delete(t.alive, key)
			}
			t.mu.Unlock()
		}()
		wait := time.NewTimer(after)
		defer wait.Stop()
		what := "shown"
		for {
			select {
			case <-kctx.Done():
				return
			case <-wait.C:
			}
			cur, err := t.Store.GetWindow(kctx, w.ReplyWindowID)
			if err != nil || cur.State != vocab.WindowOpen || cur.Transmitted > 0 || cur.Reserved > 0 {
				return
			}
			m, err := t.Store.GetMessage(kctx, w.SourceMessageKey)
			if err != nil || m.Status != vocab.MessageProcessing {
				return
			}
			show(what)
			what = "kept alive"
			wait.Reset(every)
		}
	}()
}

// typer is the activities' Typer (Activities.Typer, or one of their own).
func (a *Activities) typer() *Typer {
	a.typerOnce.Do(func() {
		if a.Typer == nil {
			a.Typer = &Typer{Store: a.Store, Client: a.Config.Client, NewClient: a.NewClient, Logger: a.Logger}
		}
	})
	return a.Typer
}

// stopTyping cancels "typing" for a conversation, logging a failure (never failing).
func (a *Activities) stopTyping(ctx context.Context, accountKey, peerID string) {
	if err := a.typer().Typing(ctx, accountKey, peerID, false); err != nil {
		a.log().Warn("typing could not be cancelled", "account", accountKey, "error", err)
	}
}
