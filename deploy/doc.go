// Package deploy holds the packaging of ilinkflow and no code: the Helm chart
// (helm/ilinkflow) and the systemd units (systemd/). Its tests check the packaging against
// the binaries: the Dockerfile builds with .ci/build-binaries, GoReleaser stamps the same
// version variables, and every environment variable the chart, the image or the unit sets
// is one the worker reads, every probe path one its admin listener serves.
package deploy
