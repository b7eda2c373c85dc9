package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestThinClient: the command line links none of the server — the engine,
// the stores, the HTTP layer — nor gocloud.dev and the cloud SDKs behind
// it: a client of the REST API, and of a file:// archive, needs none of
// them. (go list -deps lists what the binary links, its tests' imports
// left out.)
func TestThinClient(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	const module = "github.com/iwf-server/iwf-server/"
	forbidden := []string{
		module + "engine", module + "internal/store", module + "internal/server", module + "internal/httpapi",
		module + "internal/archive", // the bucket opener (the document is archivedoc, a leaf of its own)
		"gocloud.dev", "cloud.google.com/", "github.com/aws/", "github.com/Azure/", "google.golang.org/api",
		"google.golang.org/grpc", "github.com/jackc/pgx", "modernc.org/sqlite",
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, strings.TrimSuffix(f, "/")+"/") {
				t.Errorf("iwf links %s", d)
			}
		}
	}
	// It was 892 packages with the cloud SDKs; the standard library's
	// HTTP client and the generated API client are about 225.
	if len(deps) > 300 {
		t.Errorf("iwf links %d packages, more than 300:\n%s", len(deps), out)
	}
}
