package wfapi_test

import (
	"errors"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/wfapi"
)

func TestWorkflowsOfAnAccountStartWithItsAccountKeyAndPeerAsSearchAttributes(t *testing.T) {
	t.Parallel()
	opts := wfapi.StartOptions(client.StartWorkflowOptions{ID: "w", TaskQueue: "q"}, "ilk_1", "peer@im.wechat")
	if opts.ID != "w" || opts.TaskQueue != "q" {
		t.Fatalf("options changed: %+v", opts)
	}
	sa := opts.TypedSearchAttributes
	if v, ok := sa.GetKeyword(wfapi.AccountAttribute); !ok || v != "ilk_1" {
		t.Errorf("IlinkAccount %q %v", v, ok)
	}
	if v, ok := sa.GetKeyword(wfapi.PeerAttribute); !ok || v != "peer@im.wechat" {
		t.Errorf("IlinkPeer %q %v", v, ok)
	}
	poller := wfapi.SearchAttributes("ilk_1", "")
	if _, ok := poller.GetKeyword(wfapi.PeerAttribute); ok || poller.Size() != 1 {
		t.Errorf("a poller carries the account only: %d attributes", poller.Size())
	}
	if wfapi.SearchAttributes("", "").Size() != 0 {
		t.Error("no account, no attribute")
	}
	args := strings.Join(wfapi.DevServerArgs(), " ")
	if args != "--search-attribute IlinkAccount=Keyword --search-attribute IlinkPeer=Keyword --dynamic-config-value system.enableActivityEagerExecution=true" {
		t.Errorf("dev server args %q", args)
	}
}

func TestMissingSearchAttributesErrorNamesTheCommandsThatCreateThem(t *testing.T) {
	t.Parallel()
	cause := errors.New("IlinkPeer is not defined")
	var err error = &wfapi.SearchAttributesError{Code: wfapi.CodeSearchAttributesMissing, Namespace: "prod",
		Missing: []string{"IlinkPeer"}, Cause: cause}
	msg := err.Error()
	for _, want := range []string{"namespace prod", "temporal operator search-attribute create --namespace prod --name IlinkPeer --type Keyword",
		"docs/operations.md", cause.Error()} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	if !errors.Is(err, cause) {
		t.Error("the server's answer must unwrap")
	}
}
