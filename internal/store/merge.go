package store

import "github.com/ilinkflow/ilinkflow/internal/store/rules"

// mergeText is what a merge reads of a payload (rules.PlanMerge decides the merge).
func mergeText(p Payload) rules.MergeText {
	return rules.MergeText{Summary: p.Summary, Body: p.Body, Merged: p.Merged, Omitted: p.Omitted}
}
