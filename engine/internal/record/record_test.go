package record

import (
	"go/build"
	"strings"
	"testing"
)

// TestNoWireTypes keeps the stored format independent of the generated
// wire types: this package imports the standard library only, so never
// api/iwfapi.
func TestNoWireTypes(t *testing.T) {
	pkg, err := build.Default.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if strings.Contains(imp, "iwf-server") {
			t.Errorf("package record imports %s; it must depend on the standard library only", imp)
		}
	}
}

func TestDecodeVersions(t *testing.T) {
	// A row of the first releases carries no version.
	r, err := DecodeRun([]byte(`{"workerUrl":"http://w","start":{"workflowId":"a","iwfWorkflowType":"T","workflowTimeoutSeconds":0,"iwfWorkerUrl":"http://w","workflowStartOptions":{"workflowAlreadyStartedOptions":{"ignoreAlreadyStartedError":true,"requestId":"r"}}},"config":{"continueAsNewThreshold":100}}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.V != FormatVersion || r.Counters == nil || r.Start.StartOptions.WorkflowAlreadyStartedOptions.RequestID == nil {
		t.Fatalf("decoded %+v", r)
	}
	if _, err := DecodeRun([]byte(`{"v":99}`)); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("a newer version decoded: %v", err)
	}
	x, err := DecodeExecution([]byte(`{"done":[true,false],"options":{"skipStartApi":true}}`))
	if err != nil || x.V != FormatVersion || !*x.Options.SkipStartAPI || len(x.Done) != 2 {
		t.Fatalf("decoded %+v, %v", x, err)
	}
	if _, err := DecodeExecution([]byte(`{"v":2}`)); err == nil {
		t.Fatal("a newer execution version decoded")
	}
}
