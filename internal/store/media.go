package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// maxUploadRecordBytes bounds the sealed record of an upload (its CDN reference, key and
// sizes: well under a kilobyte in practice).
const maxUploadRecordBytes = 8 << 10

// MediaRetentionAfterWindow is how long staged outbound media outlives its reply window
// before the retention sweep deletes it (no send can start after the window expired).
const MediaRetentionAfterWindow = time.Hour

// AttachmentLocator is one attachment of an agent's message with its opened CDN locator.
type AttachmentLocator struct {
	Attachment Attachment
	// Locator is what the poller sealed for the attachment (activities.ImageLocator JSON).
	Locator sealing.Secret
}

// GetAttachment resolves the index-th attachment (from 0, in the order of the message's
// attachments) of the message an agent session was opened for, with its CDN locator. The
// session must be valid (ValidateSession's rules) and opened for messageKey
// (wrong_message otherwise); an index with no downloadable attachment is
// attachment_not_found. It writes nothing.
func (s *Store) GetAttachment(ctx context.Context, now time.Time, ref SessionRef, messageKey string, index int) (AttachmentLocator, error) {
	if err := validNow(now); err != nil {
		return AttachmentLocator{}, err
	}
	if err := validMessageKey(messageKey); err != nil {
		return AttachmentLocator{}, fail(vocab.CodeAttachmentNotFound, "no such message")
	}
	if index < 0 || index >= maxAttachments {
		return AttachmentLocator{}, fail(vocab.CodeAttachmentNotFound, "no attachment at that index")
	}
	var out AttachmentLocator
	err := s.inTx(ctx, "get attachment", func(q *dbq.Queries) error {
		sess, _, err := sessionWindow(ctx, q, now, ref)
		if err != nil {
			return err
		}
		if sess.SourceMessageKey != messageKey {
			return fail(vocab.CodeWrongMessage, "the agent session was opened for another message")
		}
		m, err := q.GetInboundMessage(ctx, messageKey)
		if err != nil {
			return notFound(err, vocab.CodeAttachmentNotFound, "no such message")
		}
		var p Payload
		if err := json.Unmarshal(m.Payload, &p); err != nil {
			return &Error{Code: vocab.CodeInternal, Msg: "stored payload does not decode", Err: err}
		}
		if index >= len(p.Attachments) {
			return fail(vocab.CodeAttachmentNotFound, "the message has %d attachments", len(p.Attachments))
		}
		a := p.Attachments[index]
		if a.Kind != "image" && a.Position < vocab.MediaPositionBase {
			return fail(vocab.CodeAttachmentNotFound, "the attachment has no media to download")
		}
		row, err := q.GetInboundImage(ctx, messageKey, int32(a.Position))
		if err != nil {
			return notFound(err, vocab.CodeAttachmentNotFound, "the attachment has no media to download")
		}
		loc, err := s.keys.Open(sealing.PurposeImageLocator, imageBinding(messageKey, int32(a.Position)),
			sealing.Sealed{KeyGeneration: row.KeyGeneration, Nonce: row.Nonce, Ciphertext: row.Ciphertext})
		if err != nil {
			return &Error{Code: vocab.CodeInternal, Msg: "open attachment locator", Err: err}
		}
		out = AttachmentLocator{Attachment: a, Locator: loc}
		return nil
	})
	return out, err
}

// StageMediaInput is the media of a reply, staged before its send.
type StageMediaInput struct {
	// Session is the agent session replying (its bearer token, checked here).
	Session SessionRef
	// Kind is image, file or video.
	Kind string
	// FileName names a file (required for a file, at most 1024 bytes of UTF-8).
	FileName string
	// Data is the media plaintext (1..MaxMediaBytes bytes).
	Data []byte
}

// StagedMedia describes staged outbound media (never its bytes).
type StagedMedia struct {
	MediaID       string
	SessionID     string
	ReplyWindowID int64
	Kind          string
	FileName      string
	Size          int64
	// SHA256 is the plaintext's SHA-256 in lower-case hex.
	SHA256    string
	ExpiresAt time.Time
	// Uploaded is when the send activity recorded the CDN upload (nil before).
	Uploaded *time.Time
}

// StagedMediaData is staged media with its opened bytes and, once uploaded, the opened
// upload result.
type StagedMediaData struct {
	StagedMedia
	Data sealing.Secret
	// Upload is the recorded upload result (zero before the upload).
	Upload sealing.Secret
}

func validMediaKind(kind, fileName string) error {
	switch kind {
	case "image", "video":
	case "file":
		if fileName == "" {
			return fail(vocab.CodeInvalidInput, "a file needs a file name")
		}
	default:
		return fail(vocab.CodeInvalidInput, "media kind must be image, file or video")
	}
	if len(fileName) > 1024 || !utf8.ValidString(fileName) {
		return fail(vocab.CodeInvalidInput, "file name must be at most 1024 bytes of UTF-8")
	}
	return nil
}

// StageMedia checks the session (ValidateSession's rules) and the window's quota
// (reply_quota_exhausted) and stages the media of a reply sealed, for the send activity
// to upload. The retention sweep runs in the same
// transaction: staged media past its expiry (its window's expiry plus
// MediaRetentionAfterWindow) is deleted.
func (s *Store) StageMedia(ctx context.Context, now time.Time, in StageMediaInput) (StagedMedia, error) {
	if err := validNow(now); err != nil {
		return StagedMedia{}, err
	}
	if err := validMediaKind(in.Kind, in.FileName); err != nil {
		return StagedMedia{}, err
	}
	if len(in.Data) == 0 || int64(len(in.Data)) > s.limits.MediaCap() {
		return StagedMedia{}, fail(vocab.CodeInvalidInput, "media must be 1..%d bytes", s.limits.MediaCap())
	}
	now = now.Truncate(time.Microsecond)
	sum := sha256.Sum256(in.Data)
	var out StagedMedia
	err := s.inTx(ctx, "stage media", func(q *dbq.Queries) error {
		sess, w, err := sessionWindow(ctx, q, now, in.Session)
		if err != nil {
			return err
		}
		if w.Reserved+w.Transmitted >= w.MaxSends {
			return fail(vocab.CodeReplyQuotaExhausted, "reply quota of the window is exhausted")
		}
		id := uuid.New()
		sealed, err := s.keys.Seal(sealing.PurposeOutboundMedia, mediaBinding(id.String()), sealing.NewSecret(string(in.Data)))
		if err != nil {
			return &Error{Code: vocab.CodeInternal, Msg: "seal media", Err: err}
		}
		if _, err := q.DeleteExpiredOutboundMedia(ctx, now); err != nil {
			return err
		}
		expires := w.ExpiresAt.Add(MediaRetentionAfterWindow).Truncate(time.Microsecond)
		if err := q.InsertOutboundMedia(ctx, dbq.InsertOutboundMediaParams{
			MediaID: id, SessionID: sess.SessionID, ReplyWindowID: w.ReplyWindowID, Kind: in.Kind, FileName: in.FileName,
			Size: int64(len(in.Data)), Sha256: hex.EncodeToString(sum[:]), KeyGeneration: sealed.KeyGeneration,
			Nonce: sealed.Nonce, Ciphertext: sealed.Ciphertext, Now: now, TtlMs: expires.Sub(now).Milliseconds(),
		}); err != nil {
			return err
		}
		out = StagedMedia{MediaID: id.String(), SessionID: sess.SessionID.String(), ReplyWindowID: w.ReplyWindowID,
			Kind: in.Kind, FileName: in.FileName, Size: int64(len(in.Data)), SHA256: hex.EncodeToString(sum[:]),
			ExpiresAt: now.Add(time.Duration(expires.Sub(now).Milliseconds()) * time.Millisecond)}
		return nil
	})
	return out, err
}

// GetStagedMedia returns staged media with its bytes and its upload result, if any
// (media_not_found when it is unknown or was swept).
func (s *Store) GetStagedMedia(ctx context.Context, mediaID string) (StagedMediaData, error) {
	id, err := uuid.Parse(mediaID)
	if err != nil {
		return StagedMediaData{}, fail(vocab.CodeMediaNotFound, "unknown media")
	}
	var out StagedMediaData
	err = s.read(ctx, "get staged media", func(q *dbq.Queries) error {
		m, err := q.GetOutboundMedia(ctx, id)
		if err != nil {
			return notFound(err, vocab.CodeMediaNotFound, "unknown media")
		}
		out.StagedMedia = StagedMedia{MediaID: m.MediaID.String(), SessionID: m.SessionID.String(), ReplyWindowID: m.ReplyWindowID,
			Kind: m.Kind, FileName: m.FileName, Size: m.Size, SHA256: m.Sha256, ExpiresAt: m.ExpiresAt, Uploaded: m.UploadedAt}
		if out.Data, err = s.keys.Open(sealing.PurposeOutboundMedia, mediaBinding(mediaID),
			sealing.Sealed{KeyGeneration: m.KeyGeneration, Nonce: m.Nonce, Ciphertext: m.Ciphertext}); err != nil {
			return &Error{Code: vocab.CodeInternal, Msg: "open staged media", Err: err}
		}
		if m.UploadKeyGeneration != nil {
			if out.Upload, err = s.keys.Open(sealing.PurposeMediaUpload, mediaBinding(mediaID),
				sealing.Sealed{KeyGeneration: *m.UploadKeyGeneration, Nonce: m.UploadNonce, Ciphertext: m.UploadCiphertext}); err != nil {
				return &Error{Code: vocab.CodeInternal, Msg: "open media upload", Err: err}
			}
		}
		return nil
	})
	return out, err
}

// RecordMediaUpload records the result of uploading staged media to the CDN (its CDN
// reference and AES key: a secret, stored sealed) before the message is sent. The first
// record wins: it returns the upload result now recorded, which is an earlier one when
// another execution recorded first.
func (s *Store) RecordMediaUpload(ctx context.Context, now time.Time, mediaID string, upload sealing.Secret) (sealing.Secret, error) {
	if err := validNow(now); err != nil {
		return sealing.Secret{}, err
	}
	id, err := uuid.Parse(mediaID)
	if err != nil {
		return sealing.Secret{}, fail(vocab.CodeMediaNotFound, "unknown media")
	}
	if upload.IsZero() || len(upload.Reveal()) > maxUploadRecordBytes {
		return sealing.Secret{}, fail(vocab.CodeInvalidInput, "upload result is missing or too long")
	}
	sealed, err := s.keys.Seal(sealing.PurposeMediaUpload, mediaBinding(mediaID), upload)
	if err != nil {
		return sealing.Secret{}, &Error{Code: vocab.CodeInternal, Msg: "seal media upload", Err: err}
	}
	var out sealing.Secret
	err = s.inTx(ctx, "record media upload", func(q *dbq.Queries) error {
		n, err := q.RecordMediaUpload(ctx, dbq.RecordMediaUploadParams{MediaID: id, KeyGeneration: sealed.KeyGeneration,
			Nonce: sealed.Nonce, Ciphertext: sealed.Ciphertext, Now: now})
		if err != nil {
			return err
		}
		if n == 1 {
			out = upload
			return nil
		}
		m, err := q.GetOutboundMedia(ctx, id)
		if err != nil {
			return notFound(err, vocab.CodeMediaNotFound, "unknown media")
		}
		if m.UploadKeyGeneration == nil {
			return &Error{Code: vocab.CodeInternal, Msg: "media upload not recorded"}
		}
		out, err = s.keys.Open(sealing.PurposeMediaUpload, mediaBinding(mediaID),
			sealing.Sealed{KeyGeneration: *m.UploadKeyGeneration, Nonce: m.UploadNonce, Ciphertext: m.UploadCiphertext})
		if err != nil {
			return &Error{Code: vocab.CodeInternal, Msg: "open media upload", Err: err}
		}
		return nil
	})
	return out, err
}

// SweepMedia deletes staged media past its retention and reports how many rows went.
func (s *Store) SweepMedia(ctx context.Context, now time.Time) (int64, error) {
	if err := validNow(now); err != nil {
		return 0, err
	}
	var n int64
	err := s.inTx(ctx, "sweep media", func(q *dbq.Queries) error {
		var err error
		n, err = q.DeleteExpiredOutboundMedia(ctx, now)
		return err
	})
	return n, err
}

// mediaBinding binds sealed media (and its upload) to its id.
func mediaBinding(mediaID string) string { return "outbound_media/" + mediaID }
