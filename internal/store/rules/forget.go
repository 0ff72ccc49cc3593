package rules

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/ilinkflow/ilinkflow/vocab"
)

// ErasedFingerprint is the fingerprint an erased send attempt or held reply keeps: all
// zeros, since the SHA-256 of a short text is guessable by trying texts.
var ErasedFingerprint = strings.Repeat("0", 64)

// ForgetDropsHeld lists the held reply statuses that erasing the conversation drops (never
// to be sent): the replies still waiting, and the one being sent (its attempt goes on; its
// outcome no longer moves the dropped reply).
var ForgetDropsHeld = []string{vocab.HeldWaiting, vocab.HeldSending}

// PurgeLocksAccount reports whether the retention purge, erasing a message's content, must
// first lock the message's account (the store's lock order: account, then its rows). A
// message still live (ForgetSettlesMessage: received, processing, held) is one a page
// commit or a send of its conversation may touch at the same moment; the lock makes them
// wait for the batch. A settled message (handled, failed, absorbed) behind a closed window
// is touched by nothing but the purge and a forget, so a batch of settled messages locks
// no account, and page commits never queue behind it.
func PurgeLocksAccount(status string) bool {
	return slices.Contains(ForgetSettlesMessage, status)
}

// ForgetSettlesMessage lists the message statuses that erasing a message settles as
// failed: nothing will answer an erased message, and it must not be merged into the
// conversation's next delivery as backlog.
var ForgetSettlesMessage = []string{vocab.MessageReceived, vocab.MessageProcessing, vocab.MessageHeld}

// CheckPeerFound refuses an erasure that finds nothing of the peer on the accounts asked
// about: no account that holds its messages or is its bot, and no quarantined page with a
// message from or to it. A peer whose rows are all erased already is found (its rows
// stay): erasing again is a run that erases nothing.
func CheckPeerFound(accounts, quarantinedPages int) error {
	if accounts == 0 && quarantinedPages == 0 {
		return refuse(vocab.CodePeerNotFound, "no data of this WeChat user on the selected accounts")
	}
	return nil
}

// QuarantineHoldsPeer reports whether the content of a quarantined page (the messages as
// iLink handed them out, a JSON array of messages or of {"message": …, "reason": …}) holds
// a message from or to peerID. Content that is not such an array is searched for the
// peer id as a JSON string anywhere in it, so that an unexpected shape errs on the side of
// erasing.
func QuarantineHoldsPeer(content []byte, peerID string) bool {
	if peerID == "" {
		return false
	}
	var entries []struct {
		From    *string `json:"from_user_id"`
		To      *string `json:"to_user_id"`
		Message *struct {
			From string `json:"from_user_id"`
			To   string `json:"to_user_id"`
		} `json:"message"`
	}
	if err := json.Unmarshal(content, &entries); err == nil {
		parsed := true
		for _, e := range entries {
			switch {
			case e.Message != nil:
				if e.Message.From == peerID || e.Message.To == peerID {
					return true
				}
			case e.From != nil || e.To != nil:
				if (e.From != nil && *e.From == peerID) || (e.To != nil && *e.To == peerID) {
					return true
				}
			default:
				parsed = false
			}
		}
		if parsed {
			return false
		}
	}
	quoted, err := json.Marshal(peerID)
	if err != nil {
		return false
	}
	return bytes.Contains(content, quoted)
}
