package store_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/ilinkflow/ilinkflow/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// Completions that arrive together share a transaction (the store's completion batches):
// each is still committed as if alone. Every attempt moves on once, each caller learns its
// own attempt's outcome and window, a repeated completion finds its attempt done, and of
// two conflicting completions of one attempt exactly one wins.
func TestCompletionsArrivingTogetherAreEachCommittedAsAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const bots = 16
	type sending struct {
		attempt store.Attempt
		left    int32
	}
	started := make([]sending, bots)
	for i := range started {
		b := e.register()
		_, tok := e.deliver(b, "hello")
		prep, err := e.store.ReserveAndStart(e.ctx, t0, store.ReplyInput{Session: store.ByToken(tok),
			Content: text(fmt.Sprintf("reply %d", i))}, store.SendPacing{})
		if err != nil || prep.Started == nil {
			t.Fatalf("send %d: %+v %v", i, prep, err)
		}
		started[i] = sending{attempt: prep.Attempt, left: prep.Window.SendsLeft()}
	}
	// Every attempt is completed once; the first four twice alike; the last two also by a
	// conflicting completion.
	type call struct {
		bot      int
		provider string
	}
	var calls []call
	for i := range started {
		calls = append(calls, call{i, fmt.Sprintf("pm-%d", i)})
		if i < 4 {
			calls = append(calls, call{i, fmt.Sprintf("pm-%d", i)})
		}
		if i >= bots-2 {
			calls = append(calls, call{i, fmt.Sprintf("pm-%d-other", i)})
		}
	}
	outs := make([]store.SendOutcome, len(calls))
	errs := make([]error, len(calls))
	var ready, wg sync.WaitGroup
	ready.Add(len(calls))
	gate := make(chan struct{})
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ready.Done()
			<-gate
			outs[i], errs[i] = e.store.CompleteSend(e.ctx, t0, store.Completion{AttemptID: started[c.bot].attempt.AttemptID,
				Status: vocab.AttemptSent, ProviderMessageID: c.provider})
		}()
	}
	ready.Wait()
	close(gate)
	wg.Wait()

	won := map[int]string{}
	for i, c := range calls {
		if errs[i] != nil {
			if c.bot < bots-2 {
				t.Fatalf("completion %d of bot %d: %v", i, c.bot, errs[i])
			}
			wantCode(t, errs[i], vocab.CodeAttemptConflict)
			continue
		}
		got := outs[i]
		if got.Attempt.AttemptID != started[c.bot].attempt.AttemptID || got.Attempt.Status != vocab.AttemptSent ||
			got.Attempt.ProviderMessageID != c.provider {
			t.Fatalf("completion %d of bot %d answered %+v, want its own attempt sent as %s", i, c.bot, got.Attempt, c.provider)
		}
		if got.Window.ReplyWindowID != started[c.bot].attempt.ReplyWindowID || got.Window.SendsLeft() != started[c.bot].left {
			t.Fatalf("completion %d of bot %d answered window %+v, want its own with %d sends left", i, c.bot, got.Window, started[c.bot].left)
		}
		if prev, ok := won[c.bot]; ok && prev != c.provider {
			t.Fatalf("bot %d: both %s and %s won", c.bot, prev, c.provider)
		}
		won[c.bot] = c.provider
	}
	for i, s := range started {
		a, err := e.store.GetAttempt(e.ctx, s.attempt.AttemptID)
		if err != nil {
			t.Fatal(err)
		}
		if a.Status != vocab.AttemptSent || a.ProviderMessageID != won[i] {
			t.Fatalf("bot %d: attempt %s as %q, want sent as %q", i, a.Status, a.ProviderMessageID, won[i])
		}
	}
}
