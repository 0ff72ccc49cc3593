package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// otherStore is a store on e's schema whose keyring holds key under generation gen only:
// what it seals, e's store (generation 1, testkit.SealingKey) cannot open.
func (e *env) otherStore(gen int32, key string) *store.Store {
	e.t.Helper()
	k, err := sealing.NewKeyring(gen, map[int32][]byte{gen: []byte(key)})
	if err != nil {
		e.t.Fatal(err)
	}
	s, err := store.New(e.pool, k, store.DefaultLimits())
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func TestAnUnreadableBotTokenIsReportedApartAndNeverHidesTheReadableOnes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	readable := e.register()
	// One sealed under a generation e's keys lack, one under generation 1 with another key
	// (a dev key file, then a key from `starter keygen`).
	missing, err := storetest.RegisterAccount(e.ctx, e.otherStore(3, "fedcba9876543210fedcba9876543210"), t0,
		registerInput("0000000000a3@im.bot", "o9-unreadable-3@im.wechat"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := storetest.RegisterAccount(e.ctx, e.otherStore(1, "another-key-under-generation-1!!"), t0,
		registerInput("0000000000a1@im.bot", "o9-unreadable-1@im.wechat"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]store.UnreadableToken{
		missing.AccountKey: {AccountKey: missing.AccountKey, AccountGeneration: 1, KeyGeneration: 3, KeyMissing: true},
		other.AccountKey:   {AccountKey: other.AccountKey, AccountGeneration: 1, KeyGeneration: 1},
	}
	secrets := []string{"0000000000a3@im.bot:secret-token", "0000000000a1@im.bot:secret-token"}

	ok, bad, err := e.store.ListActiveAccountsWithSecrets(e.ctx)
	if err != nil {
		t.Fatalf("the bulk read failed: %v", err)
	}
	if len(ok) != 1 || ok[0].AccountKey != readable.key || !strings.HasPrefix(ok[0].BotToken.Reveal(), readable.provider+":tok") {
		t.Fatalf("readable accounts %+v, want only %s", ok, readable.key)
	}
	if len(bad) != 2 || bad[0] != want[bad[0].AccountKey] || bad[1] != want[bad[1].AccountKey] || bad[0] == bad[1] {
		t.Fatalf("unreadable accounts %+v, want %+v", bad, want)
	}

	all, err := e.store.ListAccounts(e.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	checked, err := e.store.UnreadableTokens(e.ctx, all)
	if err != nil || len(checked) != 2 || checked[0] != want[checked[0].AccountKey] || checked[1] != want[checked[1].AccountKey] {
		t.Fatalf("UnreadableTokens: %+v %v, want %+v", checked, err, want)
	}

	for key, u := range want {
		_, err := e.store.GetAccountWithSecret(e.ctx, key)
		wantCode(t, err, vocab.CodeSealedUnreadable)
		if !errors.Is(err, store.ErrSealedUnreadable) || !errors.Is(err, sealing.ErrOpen) || !store.IsRuleViolation(err) {
			t.Fatalf("error %v: want store.ErrSealedUnreadable wrapping sealing.ErrOpen, a rule violation", err)
		}
		if got, ok := store.UnreadableTokenOf(err); !ok || got != u {
			t.Fatalf("UnreadableTokenOf: %+v %v, want %+v", got, ok, u)
		}
		msg := err.Error()
		if !strings.Contains(msg, key) || !strings.Contains(msg, u.Problem()) || !strings.Contains(msg, sealing.EnvKeys) {
			t.Fatalf("error %q does not name the account, the problem and the fix", msg)
		}
		for _, s := range secrets {
			if strings.Contains(msg, s) {
				t.Fatalf("error %q contains a bot token", msg)
			}
		}
	}
	if p := want[missing.AccountKey].Problem(); p != "key generation 3 missing" {
		t.Fatalf("problem %q", p)
	}
	if p := want[other.AccountKey].Problem(); p != "key generation 1 is another key" {
		t.Fatalf("problem %q", p)
	}
}
