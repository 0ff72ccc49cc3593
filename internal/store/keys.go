package store

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// Stable identities. Each is a prefixed hash so it is safe to log, fits an index, and is
// the same every time it is derived from the same inputs (retries map to the same rows).

func hashHex(parts ...string) string {
	h := sha256.New()
	for i, p := range parts {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// AccountKey derives the account key of a provider bot id (e.g. "b0f5860fdecb@im.bot").
func AccountKey(providerAccountID string) string {
	return "ilk_" + hashHex("ilinkflow/account", providerAccountID)[:32]
}

// MessageKey derives the dedupe identity of an inbound message.
func MessageKey(accountKey, providerMessageID string) string {
	return "im_" + hashHex("ilinkflow/message", accountKey, providerMessageID)[:32]
}

// AttemptID derives the id of the send attempt with physical index sendIndex of a message.
func AttemptID(messageKey string, sendIndex int32) string {
	return "sa_" + hashHex("ilinkflow/attempt", messageKey, strconv.Itoa(int(sendIndex)))[:29]
}

// ClientMessageID derives the client_id sent to iLink for a send attempt: the same
// reservation always maps to the same client message id.
func ClientMessageID(messageKey string, sendIndex int32) string {
	return "ilinkflow:" + hashHex("ilinkflow/client-message", messageKey, strconv.Itoa(int(sendIndex)))[:32]
}

func tokenHash(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}
