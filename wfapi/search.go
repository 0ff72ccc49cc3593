package wfapi

import (
	"context"
	"errors"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// Search attributes. Every workflow of an account (its poller, its reply windows, the
// agent workflows of its messages) carries the account key as IlinkAccount; reply windows
// and agent workflows carry the peer (the WeChat user) as IlinkPeer. Both are Keyword, so
// that
//
//	temporal workflow list --query 'IlinkAccount="ilk_…"'
//
// lists one bot's workflows. The attributes are set when a workflow starts (StartOptions,
// the one place that sets them) and carried across continue-as-new. An enrollment names
// no account when it starts: it sets IlinkAccount (an upsert) once it is confirmed.
const (
	SearchAttributeAccount = "IlinkAccount"
	SearchAttributePeer    = "IlinkPeer"
)

// Typed keys of the search attributes.
var (
	AccountAttribute = temporal.NewSearchAttributeKeyKeyword(SearchAttributeAccount)
	PeerAttribute    = temporal.NewSearchAttributeKeyKeyword(SearchAttributePeer)
)

// SearchAttributeNames lists the search attributes the workflows carry, all Keyword.
func SearchAttributeNames() []string { return []string{SearchAttributeAccount, SearchAttributePeer} }

// SearchAttributes are the search attributes of a workflow of accountKey, with peerID for
// one about a peer's message ("" leaves either out).
func SearchAttributes(accountKey, peerID string) temporal.SearchAttributes {
	var set []temporal.SearchAttributeUpdate
	if accountKey != "" {
		set = append(set, AccountAttribute.ValueSet(accountKey))
	}
	if peerID != "" {
		set = append(set, PeerAttribute.ValueSet(peerID))
	}
	return temporal.NewSearchAttributes(set...)
}

// StartOptions are the start options of a workflow of accountKey (and of peerID's
// message; "" leaves either out): opts with the search attributes set. Every workflow of
// an account is started with them.
func StartOptions(opts client.StartWorkflowOptions, accountKey, peerID string) client.StartWorkflowOptions {
	opts.TypedSearchAttributes = SearchAttributes(accountKey, peerID)
	return opts
}

// CodeSearchAttributesMissing is the stable code of a SearchAttributesError.
const CodeSearchAttributesMissing = "search_attributes_missing"

// SearchAttributesError reports that the Temporal namespace lacks search attributes the
// workflows carry: starting them would fail. Error names the commands that create them.
type SearchAttributesError struct {
	// Code is CodeSearchAttributesMissing.
	Code string
	// Namespace is the namespace checked ("" when the caller did not know it).
	Namespace string
	// Missing names the attributes not registered.
	Missing []string
	// Cause is the server's answer about the first missing one.
	Cause error
}

// Error says what is missing and how to create it.
func (e *SearchAttributesError) Error() string {
	ns := ""
	if e.Namespace != "" {
		ns = " --namespace " + e.Namespace
	}
	var cmds []string
	for _, name := range e.Missing {
		cmds = append(cmds, "temporal operator search-attribute create"+ns+" --name "+name+" --type Keyword")
	}
	where := "the Temporal namespace"
	if e.Namespace != "" {
		where += " " + e.Namespace
	}
	msg := fmt.Sprintf("%s lacks the search attribute(s) %s that ilinkflow's workflows carry; create them with: %s (docs/operations.md)",
		where, strings.Join(e.Missing, ", "), strings.Join(cmds, "; "))
	if e.Cause != nil {
		msg += " [server: " + e.Cause.Error() + "]"
	}
	return msg
}

// Unwrap returns the server's answer.
func (e *SearchAttributesError) Unwrap() error { return e.Cause }

// CheckSearchAttributes reports, as a *SearchAttributesError, which of the search
// attributes the namespace of tc lacks: it asks for a count of the workflows carrying
// each, which the server refuses (InvalidArgument) for an unknown attribute. namespace
// only names the namespace in the error. Any other failure is returned as it is.
func CheckSearchAttributes(ctx context.Context, tc client.Client, namespace string) error {
	var missing []string
	var cause error
	for _, name := range SearchAttributeNames() {
		_, err := tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: name + ` = "ilinkflow-check"`})
		var invalid *serviceerror.InvalidArgument
		switch {
		case err == nil:
		case errors.As(err, &invalid):
			missing = append(missing, name)
			if cause == nil {
				cause = err
			}
		default:
			return fmt.Errorf("check search attribute %s: %w", name, err)
		}
	}
	if len(missing) > 0 {
		return &SearchAttributesError{Code: CodeSearchAttributesMissing, Namespace: namespace, Missing: missing, Cause: cause}
	}
	return nil
}

// RegisterSearchAttributes creates in namespace the search attributes it lacks (for a
// development server: on a cluster, an operator runs the commands of
// SearchAttributesError).
func RegisterSearchAttributes(ctx context.Context, tc client.Client, namespace string) error {
	have, err := tc.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes of %s: %w", namespace, err)
	}
	add := map[string]enumspb.IndexedValueType{}
	for _, name := range SearchAttributeNames() {
		if _, ok := have.GetCustomAttributes()[name]; !ok {
			add[name] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
		}
	}
	if len(add) == 0 {
		return nil
	}
	_, err = tc.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: namespace, SearchAttributes: add})
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("create search attributes in %s: %w", namespace, err)
	}
	return nil
}

// DevServerArgs are the `temporal server start-dev` flags that create the search
// attributes in the namespaces the dev server creates at start, and set ServerSettings.
func DevServerArgs() []string {
	var args []string
	for _, name := range SearchAttributeNames() {
		args = append(args, "--search-attribute", name+"=Keyword")
	}
	return append(args, ServerSettingArgs()...)
}
