package store

import (
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store/rules"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// Limits are the observed iLink limits and the gateway's own bounds. iLink's limits are
// not documented and have changed, so each one is configuration with the observed default.
type Limits struct {
	// WindowLifetime is how long a context token allows replies after the user's message.
	WindowLifetime time.Duration
	// MaxSends is the reply quota of one context token.
	MaxSends int32
	// MaxMergedSummaryBytes caps the summary of a message that absorbed a backlog.
	MaxMergedSummaryBytes int
	// MaxTextBytes caps one outbound text item (UTF-8 bytes).
	MaxTextBytes int
	// MaxClockSkew is how far in the future an inbound sent-at may lie.
	MaxClockSkew time.Duration
	// MaxMediaBytes caps the plaintext of one outbound media item staged for a reply
	// (0: DefaultMaxMediaBytes).
	MaxMediaBytes int64
	// FinalSlots is how many of a window's last sends are kept for replies marked final
	// (vocab.SendCap); 0 keeps none.
	FinalSlots int32
	// MaxHeldReplies, MaxHeldBytes and MaxHeldAge limit one conversation's held replies
	// (0: the vocab defaults).
	MaxHeldReplies int32
	MaxHeldBytes   int64
	MaxHeldAge     time.Duration
}

// HeldLimits returns the effective limits of one conversation's held replies.
func (l Limits) HeldLimits() (replies int32, bytes int64, age time.Duration) {
	replies, bytes, age = l.MaxHeldReplies, l.MaxHeldBytes, l.MaxHeldAge
	if replies <= 0 {
		replies = vocab.DefaultMaxHeldReplies
	}
	if bytes <= 0 {
		bytes = vocab.DefaultMaxHeldBytes
	}
	if age <= 0 {
		age = vocab.DefaultMaxHeldAge
	}
	return replies, bytes, age
}

// DefaultMaxMediaBytes is the default cap of one outbound media item (20 MiB).
const DefaultMaxMediaBytes = 20 << 20

// MediaCap is the effective cap of one outbound media item.
func (l Limits) MediaCap() int64 {
	if l.MaxMediaBytes <= 0 {
		return DefaultMaxMediaBytes
	}
	return l.MaxMediaBytes
}

// DefaultLimits returns the default limits: iLink's observed limits from vocab and the
// store's own (docs/architecture.md#limits-and-defaults).
func DefaultLimits() Limits {
	return Limits{
		WindowLifetime:        vocab.DefaultWindowLifetime,
		MaxSends:              vocab.DefaultMaxSends,
		MaxMergedSummaryBytes: vocab.DefaultMaxMergedSummaryBytes,
		MaxTextBytes:          vocab.MaxTextBytes,
		MaxClockSkew:          vocab.DefaultMaxClockSkew,
		MaxMediaBytes:         DefaultMaxMediaBytes,
		FinalSlots:            vocab.DefaultFinalSlots,
	}
}

// Fixed bounds of the data model.
const (
	maxCursorBytes     = 256 * 1024
	maxProviderIDBytes = 256
	maxSendIndex       = rules.MaxSendIndex
	maxPageEntries     = 1000
	maxSummaryBytes    = 64 * 1024
	maxAttachments     = 64
	maxMetadataBytes   = 8 * 1024
)
