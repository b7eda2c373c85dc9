package httpapi_test

import (
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/internal/httpapi"
)

// TestLoadEncodedObject: with external storage, encodedobject/load takes
// an EncodedObject and answers the service's EncodedObject; a body that
// is not one is a 400. Without it the path answers 404 (TestNotFound).
func TestLoadEncodedObject(t *testing.T) {
	s := newTestServer(t, httpapi.Options{ExternalStorage: true})
	resp := s.post(t, "/api/v1/workflow/encodedobject/load", `{"encoding":"json","extStoreId":"local","extPath":"wf/1"}`)
	if resp.status != 200 || !strings.Contains(string(resp.body), `"data":"loaded wf/1"`) || !strings.Contains(string(resp.body), `"extPath":"wf/1"`) {
		t.Fatalf("load: %d %s", resp.status, resp.body)
	}
	if got, ok := s.svc.lastCall().(iwfapi.EncodedObject); !ok || deref(got.ExtStoreId) != "local" {
		t.Fatalf("the service got %#v", s.svc.lastCall())
	}
	for _, body := range []string{`not json`, `{"data":5}`, `[]`} {
		if resp := s.post(t, "/api/v1/workflow/encodedobject/load", body); resp.status != 400 {
			t.Errorf("load of %s: %d %s", body, resp.status, resp.body)
		}
	}
}

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
