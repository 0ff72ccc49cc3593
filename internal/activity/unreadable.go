package activity

import (
	"strconv"
	"sync"

	"github.com/ilinkflow/ilinkflow/internal/store"
)

// unreadableAccounts is what this worker knows of the accounts whose bot token it cannot
// open with its sealing keys (store.UnreadableToken): each account generation is logged
// once per process, and the accounts currently known are counted in the
// ilinkflow_accounts_unreadable gauge. Its zero value is ready to use.
type unreadableAccounts struct {
	mu sync.Mutex
	// known are the accounts currently known unreadable, by account key.
	known map[string]store.UnreadableToken
	// logged are the account generations ("key/generation") already logged.
	logged map[string]bool
}

// noteUnreadable records an account found unreadable (a poll's read of it).
func (a *Activities) noteUnreadable(u store.UnreadableToken) {
	a.unreadable.mu.Lock()
	defer a.unreadable.mu.Unlock()
	a.unreadable.add(a, u)
	a.Metrics.UnreadableAccounts(len(a.unreadable.known))
}

// noteReadable records that an account's bot token opened (at generation or a later one).
func (a *Activities) noteReadable(accountKey string, generation int32) {
	a.unreadable.mu.Lock()
	defer a.unreadable.mu.Unlock()
	if u, ok := a.unreadable.known[accountKey]; ok && u.AccountGeneration <= generation {
		delete(a.unreadable.known, accountKey)
		a.Metrics.UnreadableAccounts(len(a.unreadable.known))
	}
}

// noteActiveUnreadable records the unreadable accounts among all the active ones (an
// enrollment's listing): they replace those known so far.
func (a *Activities) noteActiveUnreadable(unreadable []store.UnreadableToken) {
	a.unreadable.mu.Lock()
	defer a.unreadable.mu.Unlock()
	clear(a.unreadable.known)
	for _, u := range unreadable {
		a.unreadable.add(a, u)
	}
	a.Metrics.UnreadableAccounts(len(a.unreadable.known))
}

// add records u (the caller holds mu) and logs it at its first sighting in this process.
func (s *unreadableAccounts) add(a *Activities, u store.UnreadableToken) {
	if s.known == nil {
		s.known, s.logged = map[string]store.UnreadableToken{}, map[string]bool{}
	}
	s.known[u.AccountKey] = u
	id := u.AccountKey + "/" + strconv.Itoa(int(u.AccountGeneration))
	if s.logged[id] {
		return
	}
	s.logged[id] = true
	a.log().Warn("account skipped: its bot token cannot be opened with the configured sealing keys",
		"account", u.AccountKey, "generation", u.AccountGeneration, "key_generation", u.KeyGeneration,
		"problem", u.Problem(), "fix", u.Fix())
}
