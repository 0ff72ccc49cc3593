package wfapi

// RetentionWorkflow is the workflow type the retention schedule starts: it runs the
// PurgeExpired activity once, by the retention settings of the worker that runs it, and
// ends. It takes no input.
const RetentionWorkflow = "Retention"

// RetentionScheduleID is the id of an installation's one retention schedule
// (ilink-retention/<installation>); the workflows it starts get ids made of it and their
// scheduled time.
func (i Installation) RetentionScheduleID() string { return "ilink-retention/" + i.ID }
