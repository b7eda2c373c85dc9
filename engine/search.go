package engine

import (
	"context"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// SearchWorkflows is not implemented yet (POST /api/v1/workflow/search).
func (e *Engine) SearchWorkflows(ctx context.Context, req iwfapi.WorkflowSearchRequest) (iwfapi.WorkflowSearchResponse, error) {
	return iwfapi.WorkflowSearchResponse{}, Errorf(CodeUnimplemented, "search is not supported yet")
}
