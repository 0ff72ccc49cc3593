package rules

import "github.com/ilinkflow/ilinkflow/vocab"

// Completion is the outcome of a transmission as the rules read it.
type Completion struct {
	// Status is sent, failed or unknown (vocab.Attempt*).
	Status            string
	ProviderMessageID string
	// FailType is required for failed: rejected, throttled, stale_token or transport.
	FailType string
}

// CheckCompletion checks a transmission's outcome: sent has no fail type; unknown (the
// request may have reached iLink, no answer came back) has neither a fail type nor a
// provider id; failed is rejected, throttled, stale_token or transport. Anything else is
// invalid_input.
func CheckCompletion(c Completion) error {
	switch c.Status {
	case vocab.AttemptSent:
		if c.FailType != "" {
			return refuse(vocab.CodeInvalidInput, "a sent attempt has no fail type")
		}
	case vocab.AttemptUnknown:
		if c.FailType != "" || c.ProviderMessageID != "" {
			return refuse(vocab.CodeInvalidInput, "an unknown outcome has no fail type or provider id")
		}
	case vocab.AttemptFailed:
		switch c.FailType {
		case vocab.FailRejected, vocab.FailThrottled, vocab.FailStaleToken, vocab.FailTransport:
		default:
			return refuse(vocab.CodeInvalidInput, "fail type must be rejected, throttled, stale_token or transport")
		}
	default:
		return refuse(vocab.CodeInvalidInput, "status must be sent, failed or unknown")
	}
	return nil
}

// GivesSendBack reports whether an outcome gives its send back to the window's quota: a
// transport failure, whose request surely never left. Every other outcome keeps the send
// counted (iLink may have taken it).
func GivesSendBack(c Completion) bool {
	return c.Status == vocab.AttemptFailed && c.FailType == vocab.FailTransport
}

// CheckRepeatedCompletion decides a completion of an attempt that is no longer sending:
// the same outcome again (an activity's retry) finds it done; any other is
// attempt_conflict. done is the attempt's stored outcome.
func CheckRepeatedCompletion(done, asked Completion) error {
	if done.Status != asked.Status || done.ProviderMessageID != asked.ProviderMessageID || done.FailType != asked.FailType {
		return refuse(vocab.CodeAttemptConflict, "attempt is %s, not sending", done.Status)
	}
	return nil
}

// VerdictStep is what an agent's verdict on its message does (DecideVerdict).
type VerdictStep int

// The steps of a verdict.
const (
	// VerdictRecorded: the message takes the verdict's status (VerdictStatus) and its
	// sessions close.
	VerdictRecorded VerdictStep = iota
	// VerdictRepeated: the message already carries the verdict; nothing changes.
	VerdictRepeated
)

// DecideVerdict decides an agent's verdict (handled or failed) on a message of status
// current: a message received or processing records it; the same verdict again — or
// handled on a message held (its answer is held) — is a repetition; any other is
// attempt_conflict (the message is already settled otherwise).
func DecideVerdict(current, verdict string) (VerdictStep, error) {
	switch {
	case current == verdict, current == vocab.MessageHeld && verdict == vocab.MessageHandled:
		return VerdictRepeated, nil
	case current == vocab.MessageReceived, current == vocab.MessageProcessing:
		return VerdictRecorded, nil
	}
	return 0, refuse(vocab.CodeAttemptConflict, "message is already %s", current)
}

// VerdictStatus is the status a recorded verdict sets: handled means answered, so while
// some of the answer is held (heldWaiting) the message is held, and becomes handled once
// those replies are settled.
func VerdictStatus(verdict string, heldWaiting bool) string {
	if verdict == vocab.MessageHandled && heldWaiting {
		return vocab.MessageHeld
	}
	return verdict
}
