//go:build !faultpoints

package faultpoint

// Hit marks that the process reached point (with detail, e.g. the account key). It does
// nothing in the product's build.
func Hit(point, detail string) {}
