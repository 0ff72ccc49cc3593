package e2e_test

import (
	"encoding/base64"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/operator"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// dumpData is `pg_dump --data-only` of the test's schema: every row as the database holds it.
func (a *apiSystem) dumpData() string {
	a.t.Helper()
	pgDump, err := exec.LookPath("pg_dump")
	if err != nil {
		a.t.Fatalf("this test reads the database with pg_dump (PostgreSQL's client tools): %v", err)
	}
	var schema string
	if err := a.pool.QueryRow(a.ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		a.t.Fatal(err)
	}
	out, err := exec.CommandContext(a.ctx, pgDump, "--dbname", dbtest.URL(), "--schema", schema, "--data-only").Output()
	if err != nil {
		a.t.Fatalf("pg_dump: %v", err)
	}
	return string(out)
}

// A WeChat user's conversation (an image, a text answered nine times with a tenth reply
// held, the window still open) is erased by `starter forget`'s operation: afterwards the
// database holds none of the user's text, the replies to it, the image's bytes or the
// context tokens, no workflow of the user is left in Temporal, the gateway goes on
// answering another user, and a second erasure finds nothing left. (An iLink bot talks to
// its owner only, so the other user is the owner of a second bot.)
func TestForgettingAUserLeavesNoneOfTheirContentInTheDatabaseOrTemporal(t *testing.T) {
	t.Parallel()
	a := startAPI(t, store.DefaultLimits(), nil)
	const user, other = "o9cq8forgetuser000000000001@im.wechat", "o9cq8forgetother00000000001@im.wechat"
	acct := a.enroll("qo_e2e_forget_user", user)
	otherAcct := a.enroll("qo_e2e_forget_other", other)
	bot, otherBot := a.botOf(user), a.botOf(other)

	var secrets []string // what the database must not hold afterwards
	img := pngBytes(t, 42)
	inj, err := a.ctl.Inject(a.ctx, bot.BotID, ilinksim.InjectRequest{Kind: "image", Data: img})
	if err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, inj.ContextToken, string(img), base64.StdEncoding.EncodeToString(img), inj.Media.AESKeyHex, inj.Media.AESKey)
	w1, _ := a.openWindow(acct.AccountKey, 0)
	const question = "my private question about my health"
	if inj, err = a.ctl.InjectText(a.ctx, bot.BotID, "", question); err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, inj.ContextToken, question)
	w2, _ := a.openWindow(acct.AccountKey, w1.ReplyWindowID)
	tok := a.tokenOf(w2.ReplyWindowID)
	for i := 1; i <= 9; i++ {
		text := fmt.Sprintf("private answer %d about your health", i)
		sent(t, a.replyAs(tok, text, fmt.Sprintf("r-%d", i), false, nil))
		secrets = append(secrets, text)
	}
	const heldText = "a private answer that waits for your next message"
	held(t, a.replyAs(tok, heldText, "r-held", false, nil), string(vocab.CodeReplySlotsReserved), 1)
	secrets = append(secrets, heldText)

	if _, err := a.ctl.InjectText(a.ctx, otherBot.BotID, "", "the other user's question"); err != nil {
		t.Fatal(err)
	}
	ow1, _ := a.openWindow(otherAcct.AccountKey, 0)
	sent(t, a.replyAs(a.tokenOf(ow1.ReplyWindowID), "the other user's answer", "o-1", false, nil))

	peerQuery := fmt.Sprintf("IlinkPeer = %q", user)
	if ids, err := a.listIDs(peerQuery); err != nil || len(ids) == 0 {
		t.Fatalf("the user's workflows before the erasure: %v %v", ids, err)
	}

	res, err := operator.Forget(a.ctx, a.store, a.tc, a.ns, store.ForgetInput{PeerID: user, RequestedBy: "e2e-dpo"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Messages != 2 || res.Attempts != 9 || res.HeldReplies != 1 || res.ContextTokens != 1 || res.Images == 0 ||
		len(res.OpenWindows) != 1 || res.OpenWindows[0] != w2.ReplyWindowID || len(res.Windows) != 2 || res.WorkflowsDeleted < 2 {
		t.Fatalf("forget: %+v", res)
	}

	a.eventually("no workflow of the user is listed", time.Minute, func() (bool, error) {
		ids, err := a.listIDs(peerQuery)
		return err == nil && len(ids) == 0, err
	})
	for _, id := range []int64{w1.ReplyWindowID, w2.ReplyWindowID} {
		if _, err := a.tc.DescribeWorkflow(a.ctx, a.windowWF(id), ""); err == nil {
			t.Errorf("the workflow of window %d is still there", id)
		}
	}
	dump := a.dumpData()
	for _, s := range secrets {
		if s != "" && strings.Contains(dump, s) {
			t.Errorf("the database still holds %.40q after the erasure", s)
		}
	}
	if !strings.Contains(dump, "the other user's question") || !strings.Contains(dump, "the other user's answer") {
		t.Fatal("the dump lacks the other user's conversation: it does not read what the test thinks")
	}

	// The gateway goes on answering: the other user, and the user who writes again.
	if _, err := a.ctl.InjectText(a.ctx, otherBot.BotID, "", "the other user's second question"); err != nil {
		t.Fatal(err)
	}
	ow2, _ := a.openWindow(otherAcct.AccountKey, ow1.ReplyWindowID)
	sent(t, a.replyAs(a.tokenOf(ow2.ReplyWindowID), "the other user's second answer", "o-2", false, nil))
	if got := a.sentTexts(otherBot.BotID); len(got) != 2 || got[1] != "the other user's second answer" {
		t.Fatalf("the other user got %q", got)
	}
	if _, err := a.ctl.InjectText(a.ctx, bot.BotID, "", "hello again"); err != nil {
		t.Fatal(err)
	}
	w3, _ := a.openWindow(acct.AccountKey, w2.ReplyWindowID)
	sent(t, a.replyAs(a.tokenOf(w3.ReplyWindowID), "welcome back", "r-again", false, nil))

	// A dry run now counts the new conversation only (the first erasure's rows are
	// erased already); erasing it, then erasing again with nothing left, succeeds.
	again, err := operator.Forget(a.ctx, a.store, a.tc, a.ns, store.ForgetInput{PeerID: user, AccountKey: acct.AccountKey,
		RequestedBy: "e2e-dpo", DryRun: true})
	if err != nil || again.Messages != 1 || again.Attempts != 1 || len(again.OpenWindows) != 1 {
		t.Fatalf("a dry run after the user wrote again counts %+v (%v), want the new conversation only", again, err)
	}
	if _, err := operator.Forget(a.ctx, a.store, a.tc, a.ns, store.ForgetInput{PeerID: user, RequestedBy: "e2e-dpo"}); err != nil {
		t.Fatal(err)
	}
	a.eventually("no workflow of the user is listed after the second erasure", time.Minute, func() (bool, error) {
		ids, err := a.listIDs(peerQuery)
		return err == nil && len(ids) == 0, err
	})
	last, err := operator.Forget(a.ctx, a.store, a.tc, a.ns, store.ForgetInput{PeerID: user, RequestedBy: "e2e-dpo"})
	if err != nil || last.Erased() || last.WorkflowsTerminated != 0 || last.WorkflowsDeleted != 0 {
		t.Fatalf("an erasure with nothing left: %+v %v", last, err)
	}
}
