package wfapi_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/wfapi"
)

func TestDurationsInInputsEncodeAndDecodeAsReadableStrings(t *testing.T) {
	t.Parallel()
	in := wfapi.WindowInput{ReplyWindowID: 1, ReofferAfter: wfapi.Duration(10 * time.Minute)}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"ReofferAfter":"10m0s"`) {
		t.Fatalf("encoded %s, want ReofferAfter as \"10m0s\"", b)
	}
	p, err := json.Marshal(wfapi.PollerInput{Config: wfapi.PollerConfig{StalePause: wfapi.Duration(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(p), `"StalePause":"1h0m0s"`) || !strings.Contains(string(p), `"ShortBackoff":"0s"`) {
		t.Fatalf("encoded %s", p)
	}
	var e wfapi.EnrollmentInput
	if err := json.Unmarshal([]byte(`{"Lifetime":"10m0s","PollGap":"250ms"}`), &e); err != nil {
		t.Fatal(err)
	}
	if e.Lifetime.D() != 10*time.Minute || e.PollGap.D() != 250*time.Millisecond {
		t.Fatalf("decoded to %v, %v", e.Lifetime, e.PollGap)
	}
	for _, bad := range []string{`{"Lifetime":"ten minutes"}`, `{"Lifetime":true}`, `{"Lifetime":1.5}`, `{"Lifetime":600000000000}`} {
		var e wfapi.EnrollmentInput
		if err := json.Unmarshal([]byte(bad), &e); err == nil {
			t.Errorf("%s decoded to %v, want an error", bad, e.Lifetime)
		}
	}
	var round wfapi.WindowInput
	if err := json.Unmarshal(b, &round); err != nil || round.ReofferAfter != in.ReofferAfter {
		t.Fatalf("round trip: %v, %v", round.ReofferAfter, err)
	}
}
