package httpapi

import (
	"context"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/internal/buildinfo"
)

// GetVersion serves GET /info/version (our extension): the build of this
// node (package buildinfo) and the highest migration applied to its store.
// The build is answered even when the store does not: schemaVersion is
// then left out, and the health check answers 503.
func (s *Server) GetVersion(ctx context.Context, _ iwfapi.GetVersionRequestObject) (iwfapi.GetVersionResponseObject, error) {
	info := buildinfo.Get()
	resp := iwfapi.GetVersion200JSONResponse{
		Release:   info.Release,
		Commit:    info.Commit,
		BuildDate: info.BuildDate,
		GoVersion: info.GoVersion,
	}
	if v, err := s.svc.SchemaVersion(ctx); err == nil {
		resp.SchemaVersion = ptr(int32(v))
	}
	return resp, nil
}
