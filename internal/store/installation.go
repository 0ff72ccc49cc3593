package store

import (
	"context"
	"regexp"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// installationIDPattern is the form of an installation id (the schema's CHECK).
var installationIDPattern = regexp.MustCompile(`^[0-9a-f]{12}$`)

// Installation returns this database's installation: its id, which names the workflows
// the installation starts (wfapi.Installation, docs/workflow-ids.md). The row never
// changes, so the first successful read is cached: later calls make no round trip.
func (s *Store) Installation(ctx context.Context) (wfapi.Installation, error) {
	if in := s.installation.Load(); in != nil {
		return *in, nil
	}
	var id string
	err := s.read(ctx, "read installation", func(q *dbq.Queries) error {
		var err error
		id, err = q.GetInstallationID(ctx)
		return err
	})
	if err != nil {
		return wfapi.Installation{}, err
	}
	if !installationIDPattern.MatchString(id) {
		return wfapi.Installation{}, fail(vocab.CodeInternal, "read installation: malformed installation id %q", id)
	}
	in := wfapi.Installation{ID: id}
	s.installation.Store(&in)
	return in, nil
}

// WindowWorkflowID returns the workflow id of a reply window's ReplyWindow workflow
// (wfapi.Installation.WindowWorkflowID). It reads nothing but the cached installation.
func (s *Store) WindowWorkflowID(ctx context.Context, windowID int64) (string, error) {
	in, err := s.Installation(ctx)
	if err != nil {
		return "", err
	}
	return in.WindowWorkflowID(windowID), nil
}
