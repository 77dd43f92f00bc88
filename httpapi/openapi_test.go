package httpapi

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

type openAPIDocument struct {
	OpenAPI string                                `json:"openapi"`
	Paths   map[string]map[string]json.RawMessage `json:"paths"`
}

// openAPIPath turns a mux pattern into an OpenAPI path relative to the
// server URL (/api/v1): "{ws}" stays "{ws}", "{rest...}" becomes "{rest}".
func openAPIPath(pattern string) string {
	p := strings.TrimPrefix(pattern, Prefix)
	return strings.ReplaceAll(p, "...}", "}")
}

var httpMethods = map[string]bool{"get": true, "put": true, "post": true, "delete": true, "patch": true, "head": true, "options": true, "trace": true}

// TestOpenAPICoversRoutes fails when a route of the table is missing from
// the document, or the document describes an operation the table lacks.
func TestOpenAPICoversRoutes(t *testing.T) {
	var doc openAPIDocument
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatalf("openapi.json is not valid JSON: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Errorf("openapi version %q, want 3.x", doc.OpenAPI)
	}
	inTable := map[string]bool{}
	for _, rt := range (&Server{}).routes() {
		path := openAPIPath(rt.Pattern)
		method := strings.ToLower(rt.Method)
		inTable[method+" "+path] = true
		ops, ok := doc.Paths[path]
		if !ok {
			t.Errorf("route %s %s: path %s missing from openapi.json", rt.Method, rt.Pattern, path)
			continue
		}
		raw, ok := ops[method]
		if !ok {
			t.Errorf("route %s %s: operation %s missing from openapi.json", rt.Method, rt.Pattern, method)
			continue
		}
		var op struct {
			Summary   string                     `json:"summary"`
			Security  *[]any                     `json:"security"`
			Responses map[string]json.RawMessage `json:"responses"`
		}
		if err := json.Unmarshal(raw, &op); err != nil {
			t.Errorf("%s %s: %v", method, path, err)
			continue
		}
		if op.Summary != rt.Summary {
			t.Errorf("%s %s: summary %q, route table says %q", method, path, op.Summary, rt.Summary)
		}
		if len(op.Responses) == 0 {
			t.Errorf("%s %s: no responses documented", method, path)
		}
		// Public routes say so with an empty security list; the others
		// inherit the document's bearer requirement and document 401.
		public := op.Security != nil && len(*op.Security) == 0
		if public == rt.Auth {
			t.Errorf("%s %s: documented public=%v, but the route table says auth=%v", method, path, public, rt.Auth)
		}
		if rt.Auth {
			if _, ok := op.Responses["401"]; !ok {
				t.Errorf("%s %s: 401 not documented", method, path)
			}
		}
		if _, ok := op.Responses["429"]; rt.Tier != TierRead && !ok {
			t.Errorf("%s %s: in rate-limit tier %s, but 429 not documented", method, path, rt.Tier)
		}
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			if httpMethods[method] && !inTable[method+" "+path] {
				t.Errorf("openapi.json describes %s %s, which the route table lacks", method, path)
			}
		}
	}
}

// TestOpenAPIRefsResolve checks that every $ref names a component that
// exists and every path parameter is declared.
func TestOpenAPIRefsResolve(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if k == "$ref" {
					ref, _ := x.(string)
					if lookup(doc, ref) == nil {
						t.Errorf("unresolved $ref %q", ref)
					}
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)

	paramRe := regexp.MustCompile(`\{([^}]+)\}`)
	paths := doc["paths"].(map[string]any)
	for path, item := range paths {
		declared := map[string]bool{}
		collect := func(list any) {
			params, _ := list.([]any)
			for _, p := range params {
				m := p.(map[string]any)
				if ref, ok := m["$ref"].(string); ok {
					m, _ = lookup(doc, ref).(map[string]any)
				}
				if m != nil && m["in"] == "path" {
					declared[m["name"].(string)] = true
				}
			}
		}
		ops := item.(map[string]any)
		collect(ops["parameters"])
		for method, op := range ops {
			if httpMethods[method] {
				collect(op.(map[string]any)["parameters"])
			}
		}
		for _, m := range paramRe.FindAllStringSubmatch(path, -1) {
			if !declared[m[1]] {
				t.Errorf("%s: path parameter %s is not declared", path, m[1])
			}
		}
	}
}

// lookup resolves a local "#/a/b/c" reference.
func lookup(doc map[string]any, ref string) any {
	if !strings.HasPrefix(ref, "#/") {
		return nil
	}
	var cur any = doc
	for _, part := range strings.Split(ref[2:], "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
	}
	return cur
}

func TestOpenAPIServed(t *testing.T) {
	e := newEnv(t)
	r := e.must(http.StatusOK, "GET", "/openapi.json", "", nil, nil)
	if string(r.Body) != string(openAPIDoc) {
		t.Errorf("served document differs from the embedded one")
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
}
