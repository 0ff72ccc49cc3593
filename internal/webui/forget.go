package webui

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/operator"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// --- forgetting a WeChat user ---
//
// A bot's conversations page offers "Forget this user" for each user it lists (and a
// field for any other user's id). The action is the console's `starter forget`: the
// same operator.Forget, first as a dry run (POST /accounts/{key}/forget: the counts of
// what would be erased, nothing written), then, from the dry run's confirmation form,
// the erasure itself (POST /accounts/{key}/forget/confirm with confirm=yes). Both are
// POST forms, so they need the session's CSRF token like every other action, and the
// user's id never reaches a URL (nor the log). The store writes the audit line
// (forget_audit: who asked, the counts, nothing about the user).

// ForgetBy is who the console records as having asked for an erasure (forget_audit's
// requested_by, and the dropper of the held replies it drops): the console's login is
// its one operator token, which names no one, so the console names itself, as its route
// changes do (RouteBy).
const ForgetBy = RouteBy

// forgetTimeout bounds a dry run or an erasure from the console (a long conversation is
// erased in many short transactions, then its workflows are deleted one by one), at
// least Config.Timeout.
const forgetTimeout = 2 * time.Minute

// The scopes of an erasure from a bot's conversations page (form field scope).
const (
	forgetScopeAccount = "account" // the bot of the page only (the default)
	forgetScopeEvery   = "every"   // every bot of the installation
)

// forgetView is what the forget page shows: a dry run's counts and its confirmation
// form, or what an erasure erased.
type forgetView struct {
	// Account is the bot whose conversations page the action started from, Peer the
	// WeChat user, Scope forgetScopeAccount or forgetScopeEvery (Every: the latter).
	Account, Peer, Scope string
	Every                bool
	DryRun               bool
	// Outcome is dry-run, erased, nothing-left (nothing was or is left to erase) or
	// unfinished (the erasure failed part-way: Unfinished says so, and the confirmation
	// form runs it again).
	Outcome    string
	Unfinished string
	// Counted: the store's counts are known (Accounts, Counts).
	Counted  bool
	Accounts []string
	Counts   []forgetCount
	// Unreadable counts the quarantined pages no sealing key opens any more (kept).
	Unreadable int
}

// forgetCount is one line of the forget page's counts.
type forgetCount struct {
	Key, Label string
	N          int
}

// The outcomes of forgetView.
const (
	forgetDryRun      = "dry-run"
	forgetErased      = "erased"
	forgetNothingLeft = "nothing-left"
	forgetUnfinished  = "unfinished"
)

// forgetDryRunPage counts what forgetting the form's user would erase, and offers to.
func (s *server) forgetDryRunPage(w http.ResponseWriter, r *http.Request, sess *session) {
	s.forget(w, r, sess, true)
}

// forgetConfirmed erases the form's user's content: only with the dry run's explicit
// confirmation (confirm=yes), as `starter forget` needs --yes.
func (s *server) forgetConfirmed(w http.ResponseWriter, r *http.Request, sess *session) {
	if r.PostFormValue("confirm") != "yes" {
		s.fail(w, r, http.StatusBadRequest, "The erasure cannot be undone and needs its confirmation: "+
			"start again from the bot's conversations page. Nothing was erased.")
		return
	}
	s.forget(w, r, sess, false)
}

func (s *server) forget(w http.ResponseWriter, r *http.Request, sess *session, dry bool) {
	key := r.PathValue("key")
	if !accountKeyPattern.MatchString(key) {
		s.fail(w, r, http.StatusNotFound, "No such account.")
		return
	}
	v := forgetView{Account: key, Peer: r.PostFormValue("peer"), Scope: forgetScopeAccount, DryRun: dry}
	if r.PostFormValue("scope") == forgetScopeEvery {
		v.Scope, v.Every = forgetScopeEvery, true
	}
	if store.ValidPeerID(v.Peer) != nil {
		s.fail(w, r, http.StatusBadRequest, "That is not a WeChat user id (1 to 256 bytes, no spaces around it). Nothing was erased.")
		return
	}
	// The bot must exist whatever the scope: the page leads back to its conversations.
	err := s.bounded(r, func(ctx context.Context) error {
		_, err := s.cfg.Store.GetAccount(ctx, key)
		return err
	})
	if errors.Is(err, store.ErrAccountNotFound) || store.CodeOf(err) == vocab.CodeInvalidInput {
		s.fail(w, r, http.StatusNotFound, "No such account.")
		return
	}
	if err != nil {
		s.internal(w, r, "read the account", err)
		return
	}
	in := store.ForgetInput{PeerID: v.Peer, RequestedBy: ForgetBy, DryRun: dry}
	if !v.Every {
		in.AccountKey = key
	}
	ctx, cancel := context.WithTimeout(r.Context(), max(s.cfg.Timeout, forgetTimeout))
	defer cancel()
	res, err := operator.Forget(ctx, s.cfg.Store, s.cfg.Temporal, s.cfg.Namespace, in)
	if err != nil {
		// operator.Forget's errors name a step, not the user; a server's own text (a
		// refused visibility query quotes itself) could: the log never gets the user's id.
		err = &withoutPeer{err: err, peer: v.Peer}
	}
	// The store's part is done when it reported the accounts it found the user on (a
	// user found is found on one at least): a later error is Temporal's.
	storeDone := len(res.Accounts) > 0
	scope := key
	if v.Every {
		scope = "every account"
	}
	switch {
	case err == nil:
	case errors.Is(err, store.ErrPeerNotFound):
		where := "this bot"
		if v.Every {
			where = "any bot"
		}
		s.fail(w, r, http.StatusNotFound, "No data of this WeChat user is stored on "+where+" ("+string(vocab.CodePeerNotFound)+
			"). Nothing was erased.")
		return
	case errors.Is(err, store.ErrAccountNotFound):
		s.fail(w, r, http.StatusNotFound, "No such account.")
		return
	case store.CodeOf(err) == vocab.CodeInvalidInput:
		s.fail(w, r, http.StatusBadRequest, "The store refused the erasure's input ("+string(vocab.CodeInvalidInput)+"). Nothing was erased.")
		return
	case dry && !storeDone:
		s.internal(w, r, "count the user's data", err)
		return
	case dry:
		s.internal(w, r, "list the user's workflows in Temporal", err)
		return
	default:
		// The erasure stopped part-way: the store's part (its short transactions) or
		// Temporal's. Each run finds only what is left: the page offers to run it again.
		s.log.Warn("webui: forget", "scope", scope, "store_done", storeDone, "error", err)
		status, cause := http.StatusInternalServerError, "the server log has the details"
		if b := unreachableBackend(err); b != "" {
			status, cause = http.StatusServiceUnavailable, "cannot reach "+b+" right now"
		}
		v.Outcome = forgetUnfinished
		if storeDone {
			v.fill(res)
			v.Unfinished = "The user's content was erased from PostgreSQL, but their workflows in Temporal were not all deleted: " +
				cause + ". Erase again to finish: each run erases only what is left."
		} else {
			v.Unfinished = "The erasure did not finish: " + cause + ". Part of the user's content may be erased already; " +
				"erase again to finish: each run erases only what is left."
		}
		s.render(w, status, "forget", sess, v)
		return
	}
	v.fill(res)
	switch {
	case !res.Erased() && (dry && res.WorkflowsFound == 0 || !dry && res.WorkflowsTerminated+res.WorkflowsDeleted == 0):
		v.Outcome = forgetNothingLeft
	case dry:
		v.Outcome = forgetDryRun
	default:
		v.Outcome = forgetErased
	}
	if !dry {
		// Counts only: the user's id stays out of the log (forget_audit has the run).
		s.log.Info("webui: a WeChat user's content was erased", "scope", scope, "accounts", len(res.Accounts),
			"messages", res.Messages, "windows_ended", len(res.OpenWindows), "workflows_deleted", res.WorkflowsDeleted,
			"nothing_left", v.Outcome == forgetNothingLeft)
	}
	s.render(w, http.StatusOK, "forget", sess, v)
}

// fill sets the view's counts from a dry run's or an erasure's result, in the order and
// words of `starter forget`.
func (v *forgetView) fill(res operator.ForgetResult) {
	v.Counted, v.Accounts, v.Unreadable = true, res.Accounts, res.UnreadableQuarantinedPages
	ended := "Open reply windows ended"
	if v.DryRun {
		ended = "Open reply windows to end"
	}
	v.Counts = []forgetCount{
		{"messages", "Messages", res.Messages},
		{"attachments", "Attachments", res.Images},
		{"context_tokens", "Context tokens", res.ContextTokens},
		{"replies", "Replies", res.Attempts},
		{"held_replies", "Held replies", res.HeldReplies},
		{"staged_media", "Staged media", res.StagedMedia},
		{"sessions", "Agent sessions", res.Sessions},
		{"quarantined_pages", "Quarantined pages", res.QuarantinedPages},
		{"windows", "Reply windows", len(res.Windows)},
		{"windows_ended", ended, len(res.OpenWindows)},
	}
	if v.DryRun {
		v.Counts = append(v.Counts, forgetCount{"workflows_found", "Workflows in Temporal to delete with their histories", res.WorkflowsFound})
	} else {
		v.Counts = append(v.Counts,
			forgetCount{"workflows_terminated", "Workflows terminated in Temporal", res.WorkflowsTerminated},
			forgetCount{"workflows_deleted", "Workflows deleted with their histories", res.WorkflowsDeleted})
	}
}

// withoutPeer is an error of an erasure whose text never holds the user's id (as given
// or quoted), for the log; errors.Is and errors.As see the error itself.
type withoutPeer struct {
	err  error
	peer string
}

func (e *withoutPeer) Error() string {
	msg := e.err.Error()
	for _, p := range []string{strconv.Quote(e.peer), e.peer} {
		msg = strings.ReplaceAll(msg, p, "<peer>")
	}
	return msg
}

func (e *withoutPeer) Unwrap() error { return e.err }

// convPeer is one WeChat user of the conversations page, whom its "Forget this user"
// action forgets (forget.go).
type convPeer struct {
	PeerID string
	// Messages counts the user's messages the page lists; Latest, LatestAt when the
	// newest of them was received ("" when the page lists none).
	Messages         int
	Latest, LatestAt string
}

// peersOf lists the users of the page's rows once each: those with messages first,
// newest message first, then those of the windows, replies and held replies only.
func peersOf(conv store.Conversations, now time.Time) []convPeer {
	var out []convPeer
	at := map[string]int{}
	add := func(peer string) int {
		i, ok := at[peer]
		if !ok {
			i = len(out)
			at[peer] = i
			out = append(out, convPeer{PeerID: peer})
		}
		return i
	}
	for _, m := range conv.Messages {
		p := &out[add(m.PeerID)]
		if p.Messages == 0 {
			p.Latest, p.LatestAt = relative(m.ReceivedAt, now), stamp(m.ReceivedAt)
		}
		p.Messages++
	}
	for _, w := range conv.Windows {
		add(w.PeerID)
	}
	for _, a := range conv.Replies {
		add(a.PeerID)
	}
	for _, h := range conv.Held {
		add(h.PeerID)
	}
	return out
}
