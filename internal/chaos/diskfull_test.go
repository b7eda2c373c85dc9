//go:build linux

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/internal/crashtest"
)

// tmpfsSize is the size of the database's tmpfs while space is plentiful
// (tmpfs takes memory only for what is written).
const tmpfsSize = "2g"

// mountTmpfs mounts a tmpfs on dir, unmounted when the test ends (after its
// servers were killed, when they were started after this call).
func mountTmpfs(t *testing.T, dir string) error {
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+tmpfsSize, "tmpfs", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("mount -t tmpfs: %v: %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v: %s", dir, err, out)
		}
	})
	return nil
}

// resize changes the size of the tmpfs on dir; "full" shrinks it to what
// is in use, so that no file on it can grow.
func resize(dir, size string) error {
	if size != "full" {
		return remount(dir, size)
	}
	// The server may write between reading the usage and the remount, and a
	// tmpfs refuses to shrink below what it holds (EINVAL): read the usage
	// again and retry while it keeps growing.
	var err error
	for range 100 {
		var used uint64
		if used, err = inUse(dir); err != nil {
			return err
		}
		if err = remount(dir, fmt.Sprint(used)); err == nil {
			return nil
		}
		if now, uerr := inUse(dir); uerr != nil || now == used {
			return err // the usage did not move: a real failure
		}
	}
	return err
}

// inUse is the number of bytes the file system on dir holds.
func inUse(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return (st.Blocks - st.Bfree) * uint64(st.Bsize), nil
}

func remount(dir, size string) error {
	if out, err := exec.Command("mount", "-o", "remount,size="+size, dir).CombinedOutput(); err != nil {
		return fmt.Errorf("remount %s size=%s: %v: %s", dir, size, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ballast makes a probe's start request large, so that its transaction
// must grow the database files.
var ballast = `"` + strings.Repeat("b", 128<<10) + `"`

// diskFull is the disk-full fault on the SQLite tmpfs dir: it fills the
// disk and starts workflows until the server refuses one with 503 "the store
// (SQLite) is unavailable" (a start it acknowledged before is a workflow like
// the others), gives the space back, and hands the probes to the clients: they and every other workflow
// must then finish as if nothing had happened.
func diskFull(dir string) func(d *driver, launch func(*workflow), newWorkflow func() *workflow) error {
	return func(d *driver, launch func(*workflow), newWorkflow func() *workflow) error {
		if err := resize(dir, "full"); err != nil {
			return err
		}
		var probes []*workflow
		defer func() {
			for _, wf := range probes {
				launch(wf)
			}
		}()
		refused := false
		var last string
		deadline := time.Now().Add(2 * time.Minute)
		for !refused && time.Now().Before(deadline) {
			wf := newWorkflow()
			wf.probe = true
			probes = append(probes, wf)
			srv := d.c.pick()
			status, body, err := d.startOnce(srv, wf, &[]iwfapi.KeyValue{{Key: ptr("ballast"), Value: crashtest.Object(ballast)}})
			switch {
			case err != nil:
				last = err.Error()
			case status == http.StatusOK:
				wf.started = true
			case status == http.StatusServiceUnavailable && strings.Contains(body, "the store (SQLite) is unavailable"):
				refused = true
			default:
				last = fmt.Sprintf("%d %s", status, body)
			}
			if last != "" {
				break
			}
		}
		if refused {
			// Leave the disk full a moment longer, so that the engine's own
			// transactions (worker answers, timers) fail too.
			time.Sleep(time.Duration(200+rand.IntN(500)) * time.Millisecond)
		}
		if err := resize(dir, tmpfsSize); err != nil {
			return err
		}
		if !refused {
			return fmt.Errorf("the server did not refuse work with a full disk after %d starts (last: %s)", len(probes), last)
		}
		return nil
	}
}

// startOnce sends one start request for wf, with extra data attributes.
func (d *driver) startOnce(srv *crashtest.Server, wf *workflow, attrs *[]iwfapi.KeyValue) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := d.startRequest(wf)
	req.WorkflowStartOptions.DataAttributes = attrs
	resp, err := srv.Client().StartWorkflowWithResponse(ctx, req)
	if err != nil {
		return 0, "", err
	}
	return resp.StatusCode(), string(resp.Body), nil
}
