package store_test

import "testing"

func TestSmokeDeliverReserveStartComplete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	_, tok := e.deliver(b, "hello")
	a, err := e.store.ReserveReply(e.ctx, t0, storeReply(tok, "hi"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.StartReply(e.ctx, t0, tok, a.AttemptID); err != nil {
		t.Fatal(err)
	}
}
