package wfapi

import (
	"fmt"
	"slices"
)

// ServerSettings are the Temporal server dynamic-config values ilinkflow is run and
// measured with, beside the server's defaults (docs/operations.md, "Temporal server
// settings"):
//   - system.enableActivityEagerExecution: the worker that completes a workflow task that
//     schedules an activity on its own task queue gets the activity in the answer and runs
//     it at once, without the trip through matching (the SDK asks for it by default; the
//     server's default is off). A reply's send and its message's finish are such
//     activities; a poll opts out (workflows' poll options), so that it goes to any worker.
func ServerSettings() map[string]any {
	return map[string]any{
		"system.enableActivityEagerExecution": true,
	}
}

// ServerSettingArgs are ServerSettings as `temporal server start-dev` flags, in the order
// of their names.
func ServerSettingArgs() []string {
	settings := ServerSettings()
	names := make([]string, 0, len(settings))
	for name := range settings {
		names = append(names, name)
	}
	slices.Sort(names)
	var args []string
	for _, name := range names {
		args = append(args, "--dynamic-config-value", fmt.Sprintf("%s=%v", name, settings[name]))
	}
	return args
}
