package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// The web console's login throttle (migration 00019) counts wrong operator tokens in the
// database, so that every worker behind a load balancer counts the same ones: N workers
// give an attacker one budget, not N. Unlike the rest of the store it reads the
// database's clock, the one clock all workers share.

// LoginThrottle is the throttle's rule (package webui's limits): per client address,
// Burst wrong tokens, then one more per Every; over all addresses together, AllBurst, then
// one per AllEvery, a ceiling that holds back only the addresses that sent a wrong token
// within their last Burst×Every (the remembered ones), so that an address that sent none
// is heard whatever others send. At most MaxAddresses addresses are remembered: beyond
// them, a new address counts as one that failed before.
type LoginThrottle struct {
	Burst        int
	Every        time.Duration
	AllBurst     int
	AllEvery     time.Duration
	MaxAddresses int
}

// loginSweep is how many forgotten addresses one counted wrong token deletes: more than
// the one row it may add, so that forgotten rows never pile up.
const loginSweep = 16

// maxClientAddress is the longest client address kept as it is; a longer one, or one
// that is not plain text, is kept as its SHA-256.
const maxClientAddress = 64

func (r LoginThrottle) valid() error {
	if r.Burst < 1 || r.AllBurst < 1 || r.MaxAddresses < 1 || r.Every < time.Microsecond || r.AllEvery < time.Microsecond ||
		r.Burst > 1<<20 || r.AllBurst > 1<<20 || r.MaxAddresses > 1<<30 || r.Every > 24*time.Hour || r.AllEvery > 24*time.Hour {
		return fail(vocab.CodeInvalidInput, "a login throttle needs bursts and an address bound of at least 1 and intervals between 1µs and 24h")
	}
	return nil
}

// throttleKey is the row key of a client address: the address itself when it is short
// plain text (an IP address, an IPv6 prefix), else "sha256:" and its hash in hex.
func throttleKey(addr string) string {
	if len(addr) <= maxClientAddress && utf8.ValidString(addr) &&
		!strings.ContainsFunc(addr, func(c rune) bool { return !unicode.IsPrint(c) }) {
		return addr
	}
	h := sha256.Sum256([]byte(addr))
	return "sha256:" + hex.EncodeToString(h[:])
}

// WebUILoginAttempt decides whether a login attempt from clientAddress is looked at now
// (allowed) and, when it is and its token was wrong, counts that wrong token: one
// statement, atomic under concurrent workers (a wrong token is let in only when it got
// its address's token, and its address's and the ceiling's for a remembered address, each
// taken on the row under its lock). A right token writes nothing, so the operator's login
// never waits for the rows an attack holds. A counted wrong token also deletes a few
// forgotten addresses. An error means the database could not be asked: nothing was
// decided, and the caller must not look at the token.
func (s *Store) WebUILoginAttempt(ctx context.Context, rule LoginThrottle, clientAddress string, wrong bool) (allowed bool, err error) {
	if err := rule.valid(); err != nil {
		return false, err
	}
	err = s.read(ctx, "web UI login throttle", func(q *dbq.Queries) error {
		row, err := q.WebUILoginAttempt(ctx, dbq.WebUILoginAttemptParams{
			ClientAddress: throttleKey(clientAddress), Wrong: wrong,
			Burst: int32(rule.Burst), EveryUs: rule.Every.Microseconds(),
			AllBurst: int32(rule.AllBurst), AllEveryUs: rule.AllEvery.Microseconds(),
			MaxAddresses: int32(rule.MaxAddresses), Sweep: loginSweep,
		})
		allowed = row.Allowed
		return err
	})
	return allowed && err == nil, err
}
