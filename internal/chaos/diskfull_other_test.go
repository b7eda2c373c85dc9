//go:build !linux

package chaos

import (
	"errors"
	"testing"
)

func mountTmpfs(*testing.T, string) error { return errors.New("tmpfs mounts are Linux only") }

func diskFull(string) func(*driver, func(*workflow), func() *workflow) error { return nil }
