package activity

import (
	"reflect"
	"slices"
	"testing"

	"github.com/ilinkflow/ilinkflow/activities"
)

// The workflows schedule activities by the names of package activities, and the worker
// registers every exported method of *Activities under its name: the two sets must be
// one, or a workflow schedules an activity no worker runs (or the worker runs one nothing
// calls).
func TestTheContractsActivityNamesAreExactlyTheWorkersActivities(t *testing.T) {
	typ := reflect.TypeFor[*Activities]()
	var methods []string
	for i := range typ.NumMethod() {
		methods = append(methods, typ.Method(i).Name)
	}
	names := slices.Clone(activities.Names)
	slices.Sort(methods)
	slices.Sort(names)
	if !slices.Equal(methods, names) {
		t.Fatalf("methods of *Activities %v, activities.Names %v: they must be equal", methods, names)
	}
	if len(slices.Compact(names)) != len(activities.Names) {
		t.Fatalf("activities.Names repeats a name: %v", activities.Names)
	}
}
