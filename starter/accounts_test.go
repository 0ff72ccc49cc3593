package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/operator"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
)

func TestAccountsShowsAnUnreadableTokenWithTheMissingKeyGeneration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	var schema string
	if err := pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	register := func(keys *sealing.Keyring, bot, owner string) string {
		t.Helper()
		st, err := store.New(pool, keys, store.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		a, err := storetest.RegisterAccount(ctx, st, time.Now(), store.ConfirmInput{ProviderAccountID: bot, OwnerPeerID: owner,
			BaseURL: "https://ilinkai.weixin.qq.com", BotToken: sealing.NewSecret(bot + ":token")})
		if err != nil {
			t.Fatal(err)
		}
		return a.AccountKey
	}
	other, err := sealing.NewKeyring(3, map[int32][]byte{3: []byte("a-key-the-operator-does-not-have")})
	if err != nil {
		t.Fatal(err)
	}
	good := register(testkit.Keyring, "00000000000a@im.bot", "o9-readable@im.wechat")
	bad := register(other, "00000000000b@im.bot", "o9-unreadable@im.wechat")

	accounts := func(getenv func(string) string, flags ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		args := append([]string{"accounts", "--database-url", dbtest.SchemaURL(schema)}, flags...)
		if err := run(ctx, args, nil, &out, &errOut, getenv); err != nil {
			t.Fatalf("starter accounts: %v\n%s", err, errOut.String())
		}
		return out.String()
	}
	withKeys := func(k string) string {
		if k == sealing.EnvKeys {
			return testkit.KeySpec
		}
		return ""
	}

	var rows []operator.Account
	if err := json.Unmarshal([]byte(accounts(withKeys, "--json")), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("accounts --json: %+v %v", rows, err)
	}
	for _, r := range rows {
		switch r.AccountKey {
		case good:
			if r.Token != operator.TokenReadable || r.TokenProblem != "" {
				t.Fatalf("readable account shown as %+v", r)
			}
		case bad:
			if r.Token != operator.TokenUnreadable || r.TokenProblem != "key generation 3 missing" ||
				!strings.Contains(r.TokenFix, sealing.EnvKeys) {
				t.Fatalf("unreadable account shown as %+v", r)
			}
		}
	}

	text := accounts(withKeys)
	if !strings.Contains(text, "TOKEN") || !strings.Contains(text, "unreadable (key generation 3 missing)") ||
		!strings.Contains(text, bad+": bot token unreadable (key generation 3 missing): add the key of generation 3") {
		t.Fatalf("accounts text does not show the unreadable token:\n%s", text)
	}
	if strings.Contains(text, ":token") {
		t.Fatalf("accounts text shows a bot token:\n%s", text)
	}

	// Without sealing keys nothing is checked (a throwaway key would open nothing).
	if text := accounts(func(string) string { return "" }); strings.Contains(text, "unreadable") || !strings.Contains(text, "unchecked") {
		t.Fatalf("accounts without keys:\n%s", text)
	}
}
