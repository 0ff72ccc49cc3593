package temporalconn_test

import (
	"os"
	"testing"

	"github.com/ilinkflow/ilinkflow/internal/devserver"
)

func TestMain(m *testing.M) { os.Exit(devserver.Main(m)) }
