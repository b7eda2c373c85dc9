// Command printinfo prints buildinfo.Get; buildinfo's tests build it with
// -ldflags -X to check the names the Makefile and the Dockerfile set.
package main

import (
	"fmt"

	"github.com/iwf-server/iwf-server/internal/buildinfo"
)

func main() { fmt.Print(buildinfo.Get().Lines()) }
