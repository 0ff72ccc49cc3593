package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
)

// The README's other way to point the official plugin at ilinkflow: no QR login, the
// plugin's two account files written as `starter ilink-client bot` prints them (a bot of
// the client, its token, the facade's base URL). The plugin reads them as it reads a
// login's, polls the facade and answers.
func TestTheOfficialClientConfiguredByHandWithABotOfTheClientPollsAndReplies(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	a := startAPI(t, store.DefaultLimits(), nil)
	const owner = "o9cq8openclawbyhand0000001@im.wechat"
	key, sim := a.enrolledBot("qo_e2e_openclaw_byhand", owner)
	a.iLinkClientAdd("openclaw")
	b, err := a.store.IssueILinkBot(ctx, time.Now(), "openclaw", key, "e2e")
	if err != nil {
		t.Fatal(err)
	}
	// The files, as starter ilink-client bot names them.
	state := t.TempDir()
	accountID := strings.NewReplacer("@", "-", ".", "-").Replace(b.BotID)
	dir := filepath.Join(state, "openclaw-weixin", "accounts")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	account, _ := json.Marshal(map[string]string{"token": b.BotToken.Reveal(), "baseUrl": a.base})
	index, _ := json.Marshal([]string{accountID})
	if err := os.WriteFile(filepath.Join(dir, accountID+".json"), account, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "openclaw-weixin", "accounts.json"), index, 0o600); err != nil {
		t.Fatal(err)
	}

	oc := startOpenclaw(ctx, t, state)
	// Only the account id: the plugin's own credentials from the files above.
	oc.poll(ctx, openclawBot{BotID: accountID})
	if _, err := a.ctl.InjectText(a.ctx, sim.BotID, "", "configured by hand"); err != nil {
		t.Fatal(err)
	}
	m := oc.nextMessage(ctx)
	if m.text() != "configured by hand" || m.From != owner || m.To != b.BotID {
		t.Fatalf("the plugin got %q from %s to %s", m.text(), m.From, m.To)
	}
	if s := oc.sendText(ctx, owner, m.ContextToken, "hello from a hand-configured plugin"); !s.ok() {
		t.Fatalf("send: %+v", s)
	}
	if got := a.sentTexts(sim.BotID); len(got) != 1 || got[0] != "hello from a hand-configured plugin" {
		t.Fatalf("the user got %q", got)
	}
}
