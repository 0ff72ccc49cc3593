// Package metrics holds ilinkflow's own Prometheus metrics. Every method is safe on a nil
// *Product, so code that records metrics never needs to check whether metrics are on.
package metrics

// Product records the product's counters (polls, pages, messages by outcome, sends by
// outcome). Gauges read from the store at scrape time (windows by state, throttle
// breakers open, seconds since the last good poll) are collected separately.
type Product struct{}

// Poll records one getupdates round trip of an account; outcome is ok, stale_token or an
// ilink error code.
func (p *Product) Poll(accountKey, outcome string) {}

// Page records one committed page.
func (p *Product) Page(accountKey string) {}

// Messages records n inbound messages with an outcome: inserted, duplicate, absorbed,
// deferred or deliverable.
func (p *Product) Messages(outcome string, n int) {}

// Send records one send with its outcome: sent, failed, unknown, refused or throttled.
func (p *Product) Send(outcome string) {}
