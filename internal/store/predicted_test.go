package store_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// A page decided on the state the account's last commit left (CommitPage's one round
// trip) is committed exactly as the same page read first, whatever changed since that
// commit: two bots live the same history, and the second one's last page is committed by
// a store that holds no state of it (so it reads first). Their page results and their
// inboxes and windows must match.
func TestAPredictedPageIsCommittedAsThePageReadFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	later := t0.Add(time.Minute)
	nextMessage := func(b *bot, _ store.PageEntry) []store.PageEntry { return []store.PageEntry{b.msg("next", later)} }
	answer := func(e *env, _ *bot, last store.PageResult) {
		e.t.Helper()
		if _, err := e.pool.Exec(e.ctx, `UPDATE inbound_messages SET status = 'handled' WHERE message_key = $1`, last.Deliverable.MessageKey); err != nil {
			e.t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		// between changes the state after the first page; page is the second page.
		between func(e *env, b *bot, last store.PageResult)
		page    func(b *bot, first store.PageEntry) []store.PageEntry
	}{
		{"nothing changed: the last message was answered", answer,
			nextMessage},
		{"the last message is unanswered: merged", func(*env, *bot, store.PageResult) {},
			nextMessage},
		{"the last message was handed out and nothing was sent", func(e *env, b *bot, last store.PageResult) {
			e.t.Helper()
			tok := sealing.NewSecret("predicted-session-token-" + b.key)
			if _, _, err := e.store.OpenAgentSession(e.ctx, t0, store.OpenSessionInput{ReplyWindowID: last.Deliverable.ReplyWindowID, Token: tok}); err != nil {
				e.t.Fatal(err)
			}
		}, nextMessage},
		{"the open window expired", func(e *env, _ *bot, last store.PageResult) {
			e.t.Helper()
			if _, err := e.store.ExpireWindow(e.ctx, t0.Add(48*time.Hour), last.Deliverable.ReplyWindowID); err != nil {
				e.t.Fatal(err)
			}
		}, nextMessage},
		{"the account was rotated while the page was in flight", func(e *env, b *bot, last store.PageResult) {
			answer(e, b, last)
			if _, err := e.store.RotateAccount(e.ctx, t0, store.RotateInput{AccountKey: b.key, ExpectedGeneration: b.generation,
				ProviderAccountID: b.provider, OwnerPeerID: b.owner, BaseURL: "https://ilinkai.weixin.qq.com",
				BotToken: sealing.NewSecret("rotated-token-" + b.key)}); err != nil {
				e.t.Fatal(err)
			}
		}, nextMessage},
		{"a message of the page is stored already", answer,
			func(b *bot, first store.PageEntry) []store.PageEntry {
				return []store.PageEntry{first, b.msg("next", later)}
			}},
		{"the page's message is older than the open window's", answer,
			func(b *bot, _ store.PageEntry) []store.PageEntry {
				return []store.PageEntry{b.msg("older", t0.Add(-time.Minute))}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var outcomes [2]string
			for i := range outcomes {
				e := &env{t: t, ctx: e.ctx, pool: e.pool, store: e.store}
				b := e.register()
				first := b.msg("first", t0)
				last := e.commit(b, t0, first)
				c.between(e, b, last)
				if i == 1 { // a store that holds nothing of the bot reads the page first
					s, err := store.New(e.pool, testKeys, store.DefaultLimits())
					if err != nil {
						t.Fatal(err)
					}
					e.store = s
				}
				first.Cursor = b.cursor
				res := e.commit(b, later, c.page(b, first)...)
				outcomes[i] = pageOutcome(e, b, res)
			}
			if outcomes[0] != outcomes[1] {
				t.Fatalf("predicted:\n%s\nread first:\n%s", outcomes[0], outcomes[1])
			}
		})
	}
}

// pageOutcome describes a page result and the bot's inbox and windows without their keys
// and ids, so that two bots' can be compared.
func pageOutcome(e *env, b *bot, res store.PageResult) string {
	e.t.Helper()
	var out strings.Builder
	fmt.Fprintf(&out, "inserted %d duplicates %d absorbed %d deferred %d retired %d deliverable %v opened %v status %s generation %d\n",
		res.Inserted, res.Duplicates, res.Absorbed, res.Deferred, len(res.RetiredWindowIDs), res.Deliverable != nil, res.Opened != nil,
		res.AccountStatus, res.Generation)
	out.WriteString(e.lines("", `SELECT 'message ' || m.status || ' ' || coalesce(m.payload::text, '-') || ' window ' || w.state || ' '
			|| coalesce(w.retired_reason, '-') || ' generation ' || w.account_generation || ' secret ' || (s.reply_window_id IS NOT NULL)
		FROM inbound_messages AS m JOIN reply_windows AS w ON w.source_message_key = m.message_key
		LEFT JOIN reply_window_secrets AS s ON s.reply_window_id = w.reply_window_id
		WHERE m.account_key = $1 ORDER BY m.inbox_seq`, b.key))
	var cursor string
	if err := e.pool.QueryRow(e.ctx, `SELECT cursor FROM accounts WHERE account_key = $1`, b.key).Scan(&cursor); err != nil {
		e.t.Fatal(err)
	}
	fmt.Fprintf(&out, "cursor moved %v\n", cursor == b.cursor)
	return out.String()
}
