package agent_test

import (
	"os/exec"
	"strings"
	"testing"
)

// agentFacing are the packages an agent or an integrator imports: none may pull in a
// database driver or the gateway's internals (an agent that verifies webhooks or replies
// through a window builds without them).
var agentFacing = []string{"agent", "webhook", "wfapi", "vocab", "sealing", "payloadcodec", "temporalconn"}

func TestAgentFacingPackagesDependOnNoDatabaseDriverOrInternalPackage(t *testing.T) {
	t.Parallel()
	for _, pkg := range agentFacing {
		out, err := exec.Command("go", "list", "-deps", "github.com/ilinkflow/ilinkflow/"+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.Contains(dep, "jackc/pgx") || strings.Contains(dep, "ilinkflow/ilinkflow/internal/") ||
				strings.Contains(dep, "ilinkflow/ilinkflow/db") {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}
