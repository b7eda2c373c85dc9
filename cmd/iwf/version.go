package main

import (
	"context"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/internal/buildinfo"
)

// cmdVersion prints the command line's own build; it calls no server
// (a server names its own in GET /info/version).
func cmdVersion(_ context.Context, c *cli, args []string) error {
	fs := c.flagSet("version", "iwf version")
	if err := c.parseSub(fs, args); err != nil {
		return err
	}
	info := buildinfo.Get()
	if c.json {
		return printValueJSON(c.stdout, iwfapi.VersionInfo{
			Release: info.Release, Commit: info.Commit, BuildDate: info.BuildDate, GoVersion: info.GoVersion,
		})
	}
	var b kv
	b.add("Release", info.Release)
	b.add("Commit", info.Commit)
	b.add("Build date", info.BuildDate)
	b.add("Go version", info.GoVersion)
	b.write(c.stdout)
	return nil
}
