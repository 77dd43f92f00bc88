package httpapi

import (
	_ "embed"
	"net/http"
)

// openAPIDoc is the hand-written OpenAPI 3.1 description of every route in
// the route table (openapi_test.go keeps the two in step).
//
//go:embed openapi.json
var openAPIDoc []byte

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request, _ *caller) error {
	w.WriteHeader(http.StatusOK)
	w.Write(openAPIDoc)
	return nil
}
