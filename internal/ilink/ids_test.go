package ilink

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestIDParsesMaxUint64WithoutLoss(t *testing.T) {
	var m Message
	if err := json.Unmarshal([]byte(`{"message_id":18446744073709551615}`), &m); err != nil {
		t.Fatal(err)
	}
	if m.MessageID != ID(^uint64(0)) {
		t.Fatalf("got %d", m.MessageID)
	}
	if m.MessageID.String() != "18446744073709551615" {
		t.Fatalf("String() = %s", m.MessageID)
	}
}

func TestIDAbove2To53DoesNotRoundThroughFloat(t *testing.T) {
	var m Message
	if err := json.Unmarshal([]byte(`{"message_id":9007199254740993}`), &m); err != nil {
		t.Fatal(err)
	}
	if m.MessageID != 9007199254740993 {
		t.Fatalf("got %d, want 9007199254740993", m.MessageID)
	}
}

func TestIDAcceptsNumberAndStringForms(t *testing.T) {
	cases := map[string]uint64{
		`"18446744073709551615"`: ^uint64(0),
		`18446744073709551615`:   ^uint64(0),
		`"0"`:                    0,
		`""`:                     0,
		`42`:                     42,
	}
	for in, want := range cases {
		var id ID
		var sid StringID
		if err := json.Unmarshal([]byte(in), &id); err != nil || uint64(id) != want {
			t.Errorf("ID %s: got %d, %v", in, id, err)
		}
		if err := json.Unmarshal([]byte(in), &sid); err != nil || uint64(sid) != want {
			t.Errorf("StringID %s: got %d, %v", in, sid, err)
		}
	}
}

func TestIDRejectsNonIntegerLiterals(t *testing.T) {
	for _, in := range []string{`-1`, `1.0`, `1e3`, `18446744073709551616`, `"abc"`, `" 1"`, `"+1"`, `true`, `{}`, `[]`} {
		var id ID
		if err := json.Unmarshal([]byte(in), &id); err == nil {
			t.Errorf("%s: accepted as %d", in, id)
		}
	}
}

func TestIDNullLeavesZero(t *testing.T) {
	var m Message
	if err := json.Unmarshal([]byte(`{"message_id":null,"item_list":[{"type":1,"msg_id":null}]}`), &m); err != nil {
		t.Fatal(err)
	}
	if m.MessageID != 0 || m.ItemList[0].MsgID != 0 {
		t.Fatalf("got %d/%d", m.MessageID, m.ItemList[0].MsgID)
	}
}

func TestIDMarshalsAsNumberAndStringIDAsString(t *testing.T) {
	it := Item{Type: ItemText, MsgID: StringID(^uint64(0)), RefMsg: &RefMessage{SvrID: 7}}
	m := Message{MessageID: ID(^uint64(0)), ItemList: []Item{it}}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"message_id":18446744073709551615,"from_user_id":"","to_user_id":"","item_list":[{"type":1,"msg_id":"18446744073709551615","ref_msg":{"svr_id":"7"}}]}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}

func TestParseIDStrictDecimal(t *testing.T) {
	if v, err := ParseID("18446744073709551615"); err != nil || v != ID(^uint64(0)) {
		t.Fatalf("got %d, %v", v, err)
	}
	if _, err := ParseID("0x10"); !errors.Is(err, errBadID) {
		t.Fatalf("got %v", err)
	}
}

func TestMessageIDFallsBackToFirstItemMsgID(t *testing.T) {
	m := Message{ItemList: []Item{{Type: ItemText, MsgID: 99}}}
	if m.ID() != 99 {
		t.Fatalf("got %d", m.ID())
	}
	m.MessageID = 5
	if m.ID() != 5 {
		t.Fatalf("got %d", m.ID())
	}
}

func TestDecimalStringAcceptsStringAndNumber(t *testing.T) {
	var f FileItem
	if err := json.Unmarshal([]byte(`{"len":"1234"}`), &f); err != nil || f.Len != "1234" {
		t.Fatalf("string form: %q %v", f.Len, err)
	}
	if err := json.Unmarshal([]byte(`{"len":1234}`), &f); err != nil || f.Len != "1234" {
		t.Fatalf("number form: %q %v", f.Len, err)
	}
	if n, err := f.Len.Int64(); err != nil || n != 1234 {
		t.Fatalf("Int64: %d %v", n, err)
	}
	b, _ := json.Marshal(FileItem{Len: "5"})
	if string(b) != `{"len":"5"}` {
		t.Fatalf("marshal: %s", b)
	}
}
