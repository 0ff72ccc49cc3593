package rules_test

import (
	"testing"

	"github.com/ilinkflow/ilinkflow/internal/store/rules"
	"github.com/ilinkflow/ilinkflow/vocab"
)

func TestAQuarantinedPageIsTheUsersWhenOneOfItsMessagesIsFromOrToThem(t *testing.T) {
	t.Parallel()
	const peer = "o9cq8user@im.wechat"
	cases := []struct {
		name, content string
		want          bool
	}{
		{"a page from the user", `[{"from_user_id":"o9cq8user@im.wechat","to_user_id":"bot@im.bot","item_list":[]}]`, true},
		{"a page to the user", `[{"from_user_id":"bot@im.bot","to_user_id":"o9cq8user@im.wechat"}]`, true},
		{"messages left out", `[{"message":{"from_user_id":"o9cq8user@im.wechat","to_user_id":"bot@im.bot"},"reason":"x"}]`, true},
		{"another user's page", `[{"from_user_id":"o9cq8other@im.wechat","to_user_id":"bot@im.bot"}]`, false},
		{"another user's page naming the user in a text",
			`[{"from_user_id":"o9cq8other@im.wechat","to_user_id":"bot@im.bot","item_list":[{"text_item":{"text":"o9cq8user@im.wechat"}}]}]`, false},
		{"a prefix of the id is not the id", `[{"from_user_id":"o9cq8user@im.wechat.cn","to_user_id":"bot@im.bot"}]`, false},
		{"an unknown shape naming the user", `{"messages":[{"from":"o9cq8user@im.wechat"}]}`, true},
		{"an unknown shape without the user", `{"messages":[{"from":"o9cq8other@im.wechat"}]}`, false},
		{"an array of unknown entries naming the user", `[{"sender":"o9cq8user@im.wechat"}]`, true},
		{"empty", `[]`, false},
		{"not JSON", `o9cq8user`, false},
	}
	for _, c := range cases {
		if got := rules.QuarantineHoldsPeer([]byte(c.content), peer); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	if rules.QuarantineHoldsPeer([]byte(`[{"from_user_id":""}]`), "") {
		t.Error("an empty peer id matched")
	}
}

func TestAPeerWithNothingOnTheSelectedAccountsIsNotFound(t *testing.T) {
	t.Parallel()
	if code := codeOf(rules.CheckPeerFound(0, 0)); code != vocab.CodePeerNotFound {
		t.Fatalf("nothing found: %q, want %s", code, vocab.CodePeerNotFound)
	}
	for _, c := range [][2]int{{1, 0}, {0, 1}, {2, 3}} {
		if err := rules.CheckPeerFound(c[0], c[1]); err != nil {
			t.Errorf("accounts %d, quarantined pages %d: %v", c[0], c[1], err)
		}
	}
	if len(rules.ErasedFingerprint) != 64 {
		t.Fatalf("erased fingerprint %q is not 64 hex digits", rules.ErasedFingerprint)
	}
}

func TestThePurgeLocksTheAccountOfALiveMessageOnly(t *testing.T) {
	t.Parallel()
	for status, want := range map[string]bool{
		vocab.MessageReceived:   true,
		vocab.MessageProcessing: true,
		vocab.MessageHeld:       true,
		vocab.MessageHandled:    false,
		vocab.MessageFailed:     false,
		vocab.MessageAbsorbed:   false,
	} {
		if got := rules.PurgeLocksAccount(status); got != want {
			t.Errorf("a %s message: the purge locks its account %v, want %v", status, got, want)
		}
	}
}
