package rules_test

import (
	"testing"

	"github.com/ilinkflow/ilinkflow/internal/store/rules"
	"github.com/ilinkflow/ilinkflow/vocab"
)

func TestATransmissionsOutcomeIsCheckedBeforeItIsRecorded(t *testing.T) {
	t.Parallel()
	cases := []struct {
		c    rules.Completion
		want vocab.Code
	}{
		{rules.Completion{Status: vocab.AttemptSent, ProviderMessageID: "9"}, ""},
		{rules.Completion{Status: vocab.AttemptSent, FailType: vocab.FailRejected}, vocab.CodeInvalidInput},
		{rules.Completion{Status: vocab.AttemptUnknown}, ""},
		{rules.Completion{Status: vocab.AttemptUnknown, ProviderMessageID: "9"}, vocab.CodeInvalidInput},
		{rules.Completion{Status: vocab.AttemptUnknown, FailType: vocab.FailTransport}, vocab.CodeInvalidInput},
		{rules.Completion{Status: vocab.AttemptFailed, FailType: vocab.FailRejected}, ""},
		{rules.Completion{Status: vocab.AttemptFailed, FailType: vocab.FailThrottled}, ""},
		{rules.Completion{Status: vocab.AttemptFailed, FailType: vocab.FailStaleToken}, ""},
		{rules.Completion{Status: vocab.AttemptFailed, FailType: vocab.FailTransport}, ""},
		{rules.Completion{Status: vocab.AttemptFailed, FailType: vocab.FailRefused}, vocab.CodeInvalidInput},
		{rules.Completion{Status: vocab.AttemptFailed}, vocab.CodeInvalidInput},
		{rules.Completion{Status: vocab.AttemptSending}, vocab.CodeInvalidInput},
		{rules.Completion{Status: vocab.AttemptPending}, vocab.CodeInvalidInput},
	}
	for _, c := range cases {
		if got := codeOf(rules.CheckCompletion(c.c)); got != c.want {
			t.Errorf("CheckCompletion(%+v) = %q, want %q", c.c, got, c.want)
		}
	}
}

func TestOnlyATransportFailureGivesItsSendBackToTheQuota(t *testing.T) {
	t.Parallel()
	cases := []struct {
		c    rules.Completion
		want bool
	}{
		{rules.Completion{Status: vocab.AttemptFailed, FailType: vocab.FailTransport}, true},
		{rules.Completion{Status: vocab.AttemptFailed, FailType: vocab.FailRejected}, false},
		{rules.Completion{Status: vocab.AttemptFailed, FailType: vocab.FailThrottled}, false},
		{rules.Completion{Status: vocab.AttemptFailed, FailType: vocab.FailStaleToken}, false},
		{rules.Completion{Status: vocab.AttemptUnknown}, false}, // it may have reached iLink
		{rules.Completion{Status: vocab.AttemptSent}, false},
	}
	for _, c := range cases {
		if got := rules.GivesSendBack(c.c); got != c.want {
			t.Errorf("GivesSendBack(%+v) = %v, want %v", c.c, got, c.want)
		}
	}
}

func TestACompletionRepeatedWithTheSameOutcomeIsARetry(t *testing.T) {
	t.Parallel()
	sent := rules.Completion{Status: vocab.AttemptSent, ProviderMessageID: "9"}
	cases := []struct {
		name  string
		asked rules.Completion
		want  vocab.Code
	}{
		{"the same outcome", sent, ""},
		{"another provider id", rules.Completion{Status: vocab.AttemptSent, ProviderMessageID: "8"}, vocab.CodeAttemptConflict},
		{"another status", rules.Completion{Status: vocab.AttemptUnknown}, vocab.CodeAttemptConflict},
		{"another fail type", rules.Completion{Status: vocab.AttemptSent, ProviderMessageID: "9", FailType: vocab.FailRejected}, vocab.CodeAttemptConflict},
	}
	for _, c := range cases {
		if got := codeOf(rules.CheckRepeatedCompletion(sent, c.asked)); got != c.want {
			t.Errorf("%s: CheckRepeatedCompletion = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestAnAgentsVerdictSettlesItsMessageOnce(t *testing.T) {
	t.Parallel()
	cases := []struct {
		current, verdict string
		heldWaiting      bool
		step             rules.VerdictStep
		status           string // the status a recorded verdict sets
		err              vocab.Code
	}{
		{vocab.MessageProcessing, vocab.MessageHandled, false, rules.VerdictRecorded, vocab.MessageHandled, ""},
		{vocab.MessageReceived, vocab.MessageFailed, false, rules.VerdictRecorded, vocab.MessageFailed, ""},
		{vocab.MessageProcessing, vocab.MessageHandled, true, rules.VerdictRecorded, vocab.MessageHeld, ""},
		{vocab.MessageProcessing, vocab.MessageFailed, true, rules.VerdictRecorded, vocab.MessageFailed, ""},
		{vocab.MessageHandled, vocab.MessageHandled, false, rules.VerdictRepeated, "", ""},
		{vocab.MessageHeld, vocab.MessageHandled, false, rules.VerdictRepeated, "", ""},
		{vocab.MessageFailed, vocab.MessageFailed, false, rules.VerdictRepeated, "", ""},
		{vocab.MessageHandled, vocab.MessageFailed, false, 0, "", vocab.CodeAttemptConflict},
		{vocab.MessageHeld, vocab.MessageFailed, false, 0, "", vocab.CodeAttemptConflict},
		{vocab.MessageAbsorbed, vocab.MessageHandled, false, 0, "", vocab.CodeAttemptConflict},
	}
	for _, c := range cases {
		step, err := rules.DecideVerdict(c.current, c.verdict)
		if codeOf(err) != c.err || (err == nil && step != c.step) {
			t.Errorf("DecideVerdict(%s, %s) = %v, %v; want %v, %q", c.current, c.verdict, step, err, c.step, c.err)
			continue
		}
		if step == rules.VerdictRecorded && err == nil {
			if got := rules.VerdictStatus(c.verdict, c.heldWaiting); got != c.status {
				t.Errorf("VerdictStatus(%s, held %v) = %s, want %s", c.verdict, c.heldWaiting, got, c.status)
			}
		}
	}
}
