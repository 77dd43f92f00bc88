package adversarial

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"parley"
	"parley/httpapi"
)

// apiRoute is one operation of the served OpenAPI document, which a test
// in httpapi holds equal to the route table: walking it walks every route.
type apiRoute struct {
	Method, Path string // Path relative to /api/v1, with {params}
	Body         bool   // takes a JSON request body
}

func (n *node) routes(t *testing.T) []apiRoute {
	t.Helper()
	res, err := n.srv.Client().Get(n.srv.URL + httpapi.Prefix + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.NewDecoder(res.Body).Decode(&doc); err != nil {
		t.Fatalf("decode openapi.json: %v", err)
	}
	var out []apiRoute
	for p, ops := range doc.Paths {
		for m, raw := range ops {
			if m == "parameters" {
				continue
			}
			var op struct {
				RequestBody json.RawMessage `json:"requestBody"`
			}
			json.Unmarshal(raw, &op)
			out = append(out, apiRoute{Method: strings.ToUpper(m), Path: p, Body: op.RequestBody != nil})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path+out[i].Method < out[j].Path+out[j].Method })
	if len(out) < 40 {
		t.Fatalf("openapi.json lists %d operations; the walk would miss routes", len(out))
	}
	return out
}

// params are the fixture's values for each path parameter.
func (fx *fixture) params(r apiRoute) map[string]string {
	id := fx.ch.ID
	if strings.HasPrefix(r.Path, "/messages/") {
		id = fx.msg.ID
	}
	return map[string]string{"ws": fx.ws.ID, "id": id, "user_id": fx.member.ID, "code": fx.invite,
		"root": fx.msg.ID, "emoji": "thumbsup"}
}

// fill replaces each {param} of path with vals[param], escaped as a path
// segment unless raw.
func fill(path string, vals map[string]string, raw bool) string {
	for k, v := range vals {
		if !raw {
			v = url.PathEscape(v)
		}
		path = strings.ReplaceAll(path, "{"+k+"}", v)
	}
	return path
}

// reply is a finished exchange.
type reply struct {
	status int
	body   []byte
	ctype  string
}

func (n *node) send(t *testing.T, method, path, token string, body []byte) reply {
	t.Helper()
	req, err := http.NewRequest(method, n.srv.URL+httpapi.Prefix+path, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s %q: %v", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := n.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return reply{res.StatusCode, raw, res.Header.Get("Content-Type")}
}

var slackWord = regexp.MustCompile(`^[a-z_]+$`)

// checkReply fails on a 5xx, on a 4xx that is not the error shape with the
// status of its code, and, when wantClientError, on anything but a 4xx.
func checkReply(t *testing.T, what string, r reply, wantClientError bool) {
	t.Helper()
	if r.status >= 500 {
		t.Errorf("%s: status %d: %.300s", what, r.status, r.body)
		return
	}
	if wantClientError && (r.status < 400 || r.status >= 500) {
		t.Errorf("%s: status %d, want a 4xx: %.300s", what, r.status, r.body)
		return
	}
	if r.status < 400 {
		return
	}
	// The Slack-compatible routes (incoming webhooks, response_url) answer
	// as Slack does: one plain-text word such as no_service.
	if strings.HasPrefix(r.ctype, "text/plain") {
		if !slackWord.Match(r.body) {
			t.Errorf("%s: status %d, plain text that is no Slack answer: %.300s", what, r.status, r.body)
		}
		return
	}
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Errorf("%s: status %d, not an error body: %.300s", what, r.status, r.body)
		return
	}
	// 405 has no code of its own: httpapi answers it as a bad_request
	// (httpapi/server.go unmatched), on purpose.
	if got := httpapi.StatusOf(e.Error.Code); got != r.status && !(r.status == http.StatusMethodNotAllowed && e.Error.Code == parley.EINVALID) {
		t.Errorf("%s: status %d with code %q (which maps to %d)", what, r.status, e.Error.Code, got)
	}
}

// snapshot is the state a refused request must leave alone.
type snapshot struct {
	lastSeq    int64  // the fixture channel's event log
	channels   int    // channels of the workspace the owner sees
	workspaces int    // the owner's workspaces
	me         string // the owner's profile, as JSON
}

func (n *node) snapshot(t *testing.T, fx *fixture) snapshot {
	t.Helper()
	ctx := context.Background()
	var s snapshot
	s.lastSeq = n.lastSeq(t, fx)
	chs, err := n.store.ListChannels(ctx, fx.owner.ID, fx.ws.ID, parley.ChannelQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	s.channels = len(chs.Channels)
	wss, err := n.store.ListWorkspaces(ctx, fx.owner.ID)
	if err != nil {
		t.Fatal(err)
	}
	s.workspaces = len(wss)
	me, err := n.store.GetMe(ctx, fx.owner.ID)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(me)
	s.me = string(raw)
	return s
}

// hostileBodies are JSON bodies no route may accept: malformed, wrong
// types, NUL and invalid UTF-8 in strings, numbers out of every range,
// strings of a megabyte, and bodies over the size limit.
func hostileBodies(fx *fixture) map[string][]byte {
	mb := strings.Repeat("x", 1<<20-64) // a 1 MB string inside the body limit
	out := map[string][]byte{
		"empty":              nil,
		"truncated":          []byte(`{"text":"a`),
		"NUL byte":           []byte("\x00"),
		"invalid UTF-8 raw":  []byte("\xff\xfe{}"),
		"array":              []byte(`[1,2,3]`),
		"string":             []byte(`"text"`),
		"two values":         []byte(`{} {}`),
		"deep nesting":       []byte(strings.Repeat("[", 100000)),
		"over the limit":     append(append([]byte(`{"text":"`), strings.Repeat("y", httpapi.MaxBodyBytes)...), `"}`...),
		"number too big":     []byte(`{"seq":1e400,"limit":1e400,"max_uses":1e400,"expires_in_s":1e400}`),
		"int64 overflow":     []byte(`{"seq":9223372036854775808,"limit":9223372036854775808,"max_uses":9223372036854775808}`),
		"float for int":      []byte(`{"seq":1.5,"limit":0.5,"max_uses":2.5}`),
		"wrong types":        []byte(`{"max_uses":"5","expires_in_s":[],"text":1,"name":[],"email":{},"user_ids":"x","ids":7,"channels":[],"role":5,"seq":"1","workspace_id":true}`),
		"null everywhere":    []byte(`{"text":null,"name":null,"email":null,"user_ids":null,"channels":null,"role":null,"workspace_id":null}`),
		"NUL in strings":     []byte(`{"text":"a\u0000b","name":"a\u0000b","email":"a\u0000@b.c","handle":"a\u0000b","slug":"a\u0000b","role":"a\u0000","workspace_id":"` + fx.ws.ID + `\u0000","user_ids":["\u0000"],"ids":["\u0000"],"emoji":"\u0000","topic":"\u0000","channels":{"\u0000":1}}`),
		"invalid UTF-8":      []byte("{\"text\":\"\xff\xfe\",\"name\":\"\xc3\x28\",\"email\":\"\xff@b.c\",\"handle\":\"\xff\",\"user_ids\":[\"\xff\"],\"channels\":{\"\xff\":1}}"),
		"lone surrogate":     []byte(`{"text":"\ud800","name":"\udfff","topic":"\ud800","channels":{"\ud800":1}}`),
		"negative numbers":   []byte(`{"seq":-1,"limit":-1,"max_uses":-5,"expires_in_s":-9223372036854775808,"channels":{"` + fx.ch.ID + `":-9223372036854775808}}`),
		"huge numbers":       []byte(`{"seq":9223372036854775807,"limit":9223372036854775807,"max_uses":9223372036854775807,"expires_in_s":9223372036854775807,"channels":{"` + fx.ch.ID + `":9223372036854775807}}`),
		"megabyte strings":   []byte(`{"text":"` + mb + `"}`),
		"megabyte name":      []byte(`{"name":"` + mb + `","topic":"` + mb[:1000] + `"}`),
		"megabyte id list":   []byte(`{"user_ids":["` + strings.Repeat(`x","`, (1<<20-64)/4) + `x"]}`),
		"megabyte map":       []byte(`{"channels":{` + strings.Repeat(`"x":1,`, (1<<20-64)/6) + `"y":1}}`),
		"unknown role":       []byte(`{"role":"superuser"}`),
		"email injection":    []byte(`{"email":"a@b.c\r\nBcc: x@y.z","password":"correct horse battery","name":"x","handle":"x-y"}`),
		"unknown kind":       []byte(`{"name":"x","kind":"dm"}`),
		"prototype keys":     []byte(`{"__proto__":{"admin":true},"constructor":{"prototype":{}}}`),
		"past expiry status": []byte(`{"emoji":"x","text":"t","expires_at":"0001-01-01T00:00:00Z"}`),
		"bad time":           []byte(`{"expires_at":"not a time"}`),
	}
	return out
}

// onlyFor limits the megabyte cases to the routes that have the field, to
// keep the run short (the body limit itself is checked on every route by
// "over the limit").
var onlyFor = map[string][]string{
	"megabyte strings": {"/channels/{id}/messages", "/messages/{id}"},
	"megabyte name":    {"/me", "/workspaces", "/workspaces/{ws}/channels", "/channels/{id}", "/auth/signup"},
	"megabyte id list": {"/users/batch", "/channels/{id}/members", "/dms"},
	"megabyte map":     {"/sync"},
}

// alwaysRefused are the body cases that every route which reads a body
// must refuse. The others are refused by some routes and are merely
// harmless to the rest (a route that ignores "seq" may accept a huge one).
var alwaysRefused = []string{"empty", "truncated", "NUL byte", "invalid UTF-8 raw", "array", "string",
	"two values", "deep nesting", "over the limit", "wrong types"}

// TestHostileBodies sends every hostile body to every route that reads one,
// on both stores: never a 5xx, a clear 4xx where the input cannot be
// meant, and nothing stored (for PATCH /me a no-op update is an answer, so
// the profile is compared too).
func TestHostileBodies(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			n := newNode(t, d)
			fx := n.mustFixture(t)
			routes := n.routes(t)
			bodies := hostileBodies(fx)
			names := make([]string, 0, len(bodies))
			for k := range bodies {
				names = append(names, k)
			}
			sort.Strings(names)
			for _, r := range routes {
				if !r.Body {
					continue
				}
				path := fill(r.Path, fx.params(r), false)
				before, allRefused := n.snapshot(t, fx), true
				for _, name := range names {
					if only, ok := onlyFor[name]; ok && !slices.Contains(only, r.Path) {
						continue // a megabyte of a field this route has not
					}
					// The invite body is optional: an empty one asks for
					// the defaults.
					refused := slices.Contains(alwaysRefused, name) && !(name == "empty" && r.Path == "/workspaces/{ws}/invites")
					rep := n.send(t, r.Method, path, fx.owner.Token, bodies[name])
					checkReply(t, fmt.Sprintf("%s %s with %s", r.Method, r.Path, name), rep, refused)
					allRefused = allRefused && rep.status >= 400
				}
				// Some bodies are valid for some routes ({"name":"x"} for
				// PATCH /me); where all were refused, nothing may differ.
				if after := n.snapshot(t, fx); allRefused && after != before {
					t.Errorf("%s %s: every body refused, but state changed:\nbefore %+v\nafter  %+v", r.Method, r.Path, before, after)
				}
			}
			n.checkNoPanics(t)
		})
	}
}

// hostileSegments replace one path parameter at a time.
var hostileSegments = map[string]string{
	"NUL":            "\x00",
	"NUL suffix":     "x\x00",
	"invalid UTF-8":  "\xff\xfe",
	"huge number":    "99999999999999999999999999",
	"negative":       "-1",
	"dot dot":        "..",
	"long":           strings.Repeat("a", 8192),
	"sql":            "' OR '1'='1",
	"percent":        "%",
	"unicode":        "ｇｅｎｅｒａｌ",
	"emoji":          "👍",
	"lone surrogate": "\xed\xa0\x80",
}

// TestHostilePathParams walks every route with each path parameter in turn
// replaced by a hostile value: every answer is a clear 4xx, nothing
// changes.
func TestHostilePathParams(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			n := newNode(t, d)
			fx := n.mustFixture(t)
			before := n.snapshot(t, fx)
			for _, r := range n.routes(t) {
				vals := fx.params(r)
				for param := range vals {
					if !strings.Contains(r.Path, "{"+param+"}") {
						continue
					}
					for name, bad := range hostileSegments {
						if param == "emoji" && parley.ValidateEmoji(bad) == nil {
							continue // "-1" is a shortcode like any other
						}
						v := maps(vals, param, bad)
						path := fill(r.Path, v, false)
						what := fmt.Sprintf("%s %s with %s = %s", r.Method, r.Path, param, name)
						rep := n.send(t, r.Method, path, fx.owner.Token, []byte(`{}`))
						checkReply(t, what, rep, true)
					}
				}
			}
			if after := n.snapshot(t, fx); after != before {
				t.Errorf("hostile path parameters changed state:\nbefore %+v\nafter  %+v", before, after)
			}
			n.checkNoPanics(t)
		})
	}
}

func maps(m map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(m))
	for kk, vv := range m {
		out[kk] = vv
	}
	out[k] = v
	return out
}

// hostileQueries are query strings for the reading routes: paging numbers
// out of range, cursors that are not ours, search text with NUL and
// invalid UTF-8.
var hostileQueries = []string{
	"limit=99999999999999999999", "limit=-9223372036854775808", "limit=9223372036854775807", "limit=abc", "limit=1e3",
	"after_seq=-1", "after_seq=9223372036854775807", "after_seq=99999999999999999999",
	"before_seq=-1", "before_seq=9223372036854775807", "before_seq=0", "around_seq=9223372036854775807", "around_seq=-5",
	"cursor=%00", "cursor=AA", "cursor=%FF%FE", "cursor=" + strings.Repeat("A", 8192), "cursor=-1", "cursor=9223372036854775807",
	"q=%00", "q=%FF%FE", "q=a%00b", "q=" + strings.Repeat("x", 4096), "q=%22", "q=*", "q=%5C",
	"unread=maybe", "since=%00", "since=9999-99-99",
}

// TestHostileQueries sends each hostile query string to every GET route:
// never a 5xx, and every 4xx is a clear error.
func TestHostileQueries(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			n := newNode(t, d)
			fx := n.mustFixture(t)
			for _, r := range n.routes(t) {
				if r.Method != http.MethodGet {
					continue
				}
				path := fill(r.Path, fx.params(r), false)
				for _, q := range hostileQueries {
					rep := n.send(t, r.Method, path+"?"+q, fx.owner.Token, nil)
					checkReply(t, fmt.Sprintf("GET %s?%.60s", r.Path, q), rep, false)
				}
			}
			n.checkNoPanics(t)
		})
	}
}
