package pgtemporal_test

import (
	"context"
	"os"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/ilinkflow/ilinkflow/internal/pgtemporal"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// The PostgreSQL-backed server starts from nothing (databases, schemas, config), serves a
// namespace with ilinkflow's search attributes, answers the visibility query the
// start-up reconcile lists running workflows with, and leaves no database behind.
func TestTheServerOnPostgreSQLServesANamespaceWithTheSearchAttributesAndVisibility(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the PostgreSQL-backed Temporal server (built on first use)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	srv, err := pgtemporal.New(ctx, pgtemporal.Options{DatabaseURL: os.Getenv("DATABASE_URL"), Namespace: "ilinkflow-pg-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	if err := wfapi.CheckSearchAttributes(ctx, srv.Client, srv.Namespace); err != nil {
		t.Fatalf("search attributes: %v", err)
	}
	_, err = srv.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: `WorkflowId STARTS_WITH "ilink-account/x/" AND ExecutionStatus = 'Running'`})
	if err != nil {
		t.Fatalf("visibility query: %v", err)
	}
}
