package store

import (
	"context"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// A reservation and its attempt are written in one round trip with COMMIT, so the
// attempt's insert itself refuses a pending or sending attempt whose reservation did not
// take effect: nothing half is ever committed.
func TestAnAttemptIsNotRecordedWithoutItsReservation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys := testkit.Keyring
	s, err := New(dbtest.NewPool(t), keys, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	a, err := enroll(ctx, s, now, ConfirmInput{ProviderAccountID: "guard@im.bot", OwnerPeerID: "guard-owner@im.wechat",
		BaseURL: "https://ilinkai.weixin.qq.com", BotToken: sealing.NewSecret("guard-token")})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.CommitPage(ctx, now, PageInput{AccountKey: a.AccountKey, Generation: a.Generation, NextCursor: "c1",
		Entries: []PageEntry{{ProviderMessageID: "1", PeerID: "guard-owner@im.wechat", SentAt: now,
			ContextToken: sealing.NewSecret("ctx"), Payload: Payload{Summary: "hi"}}}})
	if err != nil || res.Deliverable == nil {
		t.Fatalf("commit %+v %v", res, err)
	}
	key := res.Deliverable.MessageKey
	insert := func(status string) error {
		_, err := batchRow[dbq.SendAttempt](dbq.New(s.pool).InsertSendAttempt(ctx, []dbq.InsertSendAttemptParams{{
			AttemptID: AttemptID(key, 0), ClientMessageID: ClientMessageID(key, 0), SourceMessageKey: key,
			AccountKey: a.AccountKey, PeerID: "guard-owner@im.wechat", ReplyWindowID: res.Deliverable.ReplyWindowID,
			SendIndex: 0, WindowSendIndex: 0, Source: "agent", ContentType: "text", Payload: []byte(`{"type":"text","text":"x"}`),
			Metadata: []byte(`{}`), Fingerprint: "0000000000000000000000000000000000000000000000000000000000000000",
			Status: status, FailType: map[string]string{vocab.AttemptFailed: vocab.FailRefused}[status], Now: now,
		}}))
		return err
	}
	for _, status := range []string{vocab.AttemptPending, vocab.AttemptSending} {
		if err := insert(status); err == nil {
			t.Fatalf("a %s attempt was recorded without its reservation", status)
		}
	}
	if err := insert(vocab.AttemptFailed); err != nil {
		t.Fatalf("a refused attempt needs no reservation: %v", err)
	}
}
