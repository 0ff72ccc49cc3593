package activities

import (
	"reflect"
	"slices"
	"testing"

	"github.com/ilinkflow/ilinkflow/internal/actapi"
)

// The workflows schedule activities by the names of package actapi, and the worker
// registers every exported method of *Activities under its name: the two sets must be
// one, or a workflow schedules an activity no worker runs (or the worker runs one nothing
// calls).
func TestTheContractsActivityNamesAreExactlyTheWorkersActivities(t *testing.T) {
	typ := reflect.TypeFor[*Activities]()
	var methods []string
	for i := range typ.NumMethod() {
		methods = append(methods, typ.Method(i).Name)
	}
	names := slices.Clone(actapi.Names)
	slices.Sort(methods)
	slices.Sort(names)
	if !slices.Equal(methods, names) {
		t.Fatalf("methods of *Activities %v, actapi.Names %v: they must be equal", methods, names)
	}
	if len(slices.Compact(names)) != len(actapi.Names) {
		t.Fatalf("actapi.Names repeats a name: %v", actapi.Names)
	}
}
