package rules

import (
	"fmt"

	"github.com/ilinkflow/ilinkflow/vocab"
)

// Refusal is a rule's refusal: the failure code (one of vocab's) and a message that
// never contains a secret. The store turns it into its *store.Error with the same code
// and message.
type Refusal struct {
	Code vocab.Code
	Msg  string
}

// Error implements error.
func (r *Refusal) Error() string { return fmt.Sprintf("rules: %s: %s", r.Code, r.Msg) }

// refuse builds a refusal; it returns error so that callers never hold a typed nil.
func refuse(code vocab.Code, format string, args ...any) error {
	return &Refusal{Code: code, Msg: fmt.Sprintf(format, args...)}
}
