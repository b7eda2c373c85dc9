package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/internal/httpapi"
)

// TestConfigExternalStorage: the external storage settings come from a
// flag, the environment or the file; off by default; each is checked.
func TestConfigExternalStorage(t *testing.T) {
	d := DefaultConfig()
	if d.externalStorageOn() || d.ExternalStorageThreshold != 64<<10 || d.ExternalStorageMaxBodyBytes != 64<<20 ||
		d.ExternalStorageGrace != time.Hour || d.maxBodyBytes() != httpapi.DefaultMaxBodyBytes {
		t.Fatalf("defaults: %+v", d)
	}
	m, err := parse(t, []string{"--external-storage-url", "main=s3://b?region=eu-west-1",
		"--external-storage-read-url", "old=file:///var/lib/iwf/old", "--external-storage-read-url", "older=gs://x",
		"--external-storage-threshold", "1000"}, env{"IWF_EXTERNAL_STORAGE_GRACE": "2h"})
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config
	x, err := c.externalStorage()
	if err != nil || x.Active.ID != "main" || x.Active.URL != "s3://b?region=eu-west-1" || len(x.Reads) != 2 || x.Reads[1].ID != "older" {
		t.Fatalf("stores: %+v %v", x, err)
	}
	if c.ExternalStorageThreshold != 1000 || c.ExternalStorageGrace != 2*time.Hour || c.maxBodyBytes() != 64<<20 {
		t.Fatalf("settings: %+v", c)
	}
	m, err = parse(t, nil, env{"IWF_EXTERNAL_STORAGE_URL": "a=file:///x", "IWF_EXTERNAL_STORAGE_READ_URLS": "b=file:///y c=file:///z\nd=file:///w"})
	if err != nil || len(m.Config.ExternalStorageReadURLs) != 3 {
		t.Fatalf("environment: %v %v", m.Config.ExternalStorageReadURLs, err)
	}
	m, err = parse(t, nil, env{"IWF_CONFIG": writeFile(t, "external-storage-url: a=file:///x\nexternal-storage-read-urls:\n  - b=file:///y\nexternal-storage-max-body-bytes: 8388608\n")})
	if err != nil || m.Config.ExternalStorageURL != "a=file:///x" || len(m.Config.ExternalStorageReadURLs) != 1 || m.Config.maxBodyBytes() != 8<<20 {
		t.Fatalf("file: %+v %v", m.Config, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--external-storage-url", "s3://bucket?region=x"}, "want ID=URL"},
		{[]string{"--external-storage-url", "a=bucket-with-secret"}, "want a URL with a scheme"},
		{[]string{"--external-storage-url", "a=http://x"}, "unsupported scheme"},
		{[]string{"--external-storage-url", "a=file:///x", "--external-storage-read-url", "a=file:///y"}, `the store id "a" is given twice`},
		{[]string{"--external-storage-threshold", "0"}, "external-storage-threshold must be a positive"},
		{[]string{"--external-storage-url", "a=file:///x", "--external-storage-max-body-bytes", "1024"}, "must be at least max-body-bytes"},
		{[]string{"--external-storage-grace", "10s"}, "external-storage-grace must be at least 1m"},
	} {
		_, err := parse(t, c.args, env{})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%v: %v, want an error with %q", c.args, err, c.want)
		}
	}
}

// post sends a JSON body and returns the status and the decoded answer.
func post(t *testing.T, url string, body any) (int, map[string]any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// TestMainExternalStorage: a server with --external-storage-url keeps a
// big data attribute in its file:// store (streamed there as the start
// request's body arrived: its path is _request/…), answers
// dataobjects/get with the data and its reference, and resolves the
// reference over the wire with encodedobject/load; a reference it did not
// write is a 400. Its body limit is external-storage-max-body-bytes.
func TestMainExternalStorage(t *testing.T) {
	dir := t.TempDir()
	m, out := startMain(t, "--external-storage-url", "local=file://"+dir, "--external-storage-threshold", "16")
	if !strings.Contains(out.String(), "payloads over 16 bytes are kept in the external store local=file://"+dir) {
		t.Fatalf("the banner does not name the external store:\n%s", out)
	}
	base := "http://" + m.Addr() + "/api/v1/workflow/"
	bigData := strings.Repeat("payload ", 8)
	if status, body := post(t, base+"start", map[string]any{"workflowId": "ext-1", "iwfWorkflowType": "T", "workflowTimeoutSeconds": 60,
		"iwfWorkerUrl": "http://127.0.0.1:1", "workflowStartOptions": map[string]any{"dataAttributes": []any{
			map[string]any{"key": "doc", "value": map[string]any{"encoding": "json", "data": bigData}},
		}}}); status != 200 {
		t.Fatalf("start: %d %v", status, body)
	}
	status, got := post(t, base+"dataobjects/get", map[string]any{"workflowId": "ext-1"})
	objs, _ := got["objects"].([]any)
	if status != 200 || len(objs) != 1 {
		t.Fatalf("dataobjects/get: %d %v", status, got)
	}
	v, _ := objs[0].(map[string]any)["value"].(map[string]any)
	path, _ := v["extPath"].(string)
	if v["data"] != bigData || v["extStoreId"] != "local" || !strings.HasPrefix(path, "_request/") {
		t.Fatalf("dataobjects/get: %v", v)
	}
	if b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(path))); err != nil || string(b) != bigData {
		t.Fatalf("the object: %q %v", b, err)
	}
	// The wire round trip of a reference.
	status, loaded := post(t, base+"encodedobject/load", map[string]any{"encoding": "json", "extStoreId": "local", "extPath": path})
	if status != 200 || loaded["data"] != bigData || loaded["encoding"] != "json" || loaded["extPath"] != path {
		t.Fatalf("encodedobject/load: %d %v", status, loaded)
	}
	for _, bad := range []map[string]any{
		{"extStoreId": "elsewhere", "extPath": path},
		{"extStoreId": "local", "extPath": "../iwf.db"},
		{"extStoreId": "local", "extPath": "ext-1/00000000-0000-4000-8000-000000000000"},
	} {
		if status, body := post(t, base+"encodedobject/load", bad); status != 400 || body["detail"] == nil {
			t.Errorf("encodedobject/load of %v: %d %v", bad, status, body)
		}
	}
	// A body over max-body-bytes (4 MiB) and under the external storage
	// limit is taken, and its payload kept out of the rows.
	huge := strings.Repeat("h", 5<<20)
	if status, body := post(t, base+"signal", map[string]any{"workflowId": "ext-1", "signalChannelName": "s",
		"signalValue": map[string]any{"data": huge}}); status != 200 {
		t.Fatalf("a 5 MiB signal: %d %v", status, body)
	}
	db, err := os.ReadFile(filepath.Join(filepath.Dir(m.Config.DB[len("sqlite://"):]), "iwf.db"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(db, []byte(huge[:1<<20])) {
		t.Fatal("the database file holds the signal's payload")
	}
}

// TestMainWithoutExternalStorage: without external storage,
// encodedobject/load answers 404 as in iWF, and max-body-bytes holds.
func TestMainWithoutExternalStorage(t *testing.T) {
	m, _ := startMain(t)
	base := "http://" + m.Addr() + "/api/v1/workflow/"
	if status, _ := post(t, base+"encodedobject/load", map[string]any{"extStoreId": "local", "extPath": "a/b"}); status != 404 {
		t.Fatalf("encodedobject/load: %d", status)
	}
	if status, _ := post(t, base+"signal", map[string]any{"workflowId": "x", "signalChannelName": "s",
		"signalValue": map[string]any{"data": strings.Repeat("h", 5<<20)}}); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a 5 MiB signal: %d, want 413", status)
	}
}
