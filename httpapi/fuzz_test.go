package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"parley"
)

// FuzzRequestBody sends fuzzed bodies to every route of the route table
// that takes one, on a real server over a real SQLite store, and holds the
// API to its contract for bad input: never a 5xx, and every 4xx is a JSON
// error of the documented shape whose code maps to that status.
//
// An input is the route ("POST /api/v1/channels/{id}/messages") and the
// body. A key that names no route picks one by its bytes, so mutations of
// the key still reach every route. In bodies, $WS, $CH, $MSG, $USER and
// $ME stand for the fixture's ids, so that realistic seeds get past the
// lookups to the validation behind them. More seeds are in
// testdata/fuzz/FuzzRequestBody.
func FuzzRequestBody(f *testing.F) {
	e := newEnv(f, func(c *Config) {
		c.Rates = parley.LiveRatesOff()
	})
	var withBody []route
	for _, rt := range e.api.routes() {
		if rt.Method == http.MethodPost || rt.Method == http.MethodPut || rt.Method == http.MethodPatch {
			withBody = append(withBody, rt)
		}
	}
	realistic := map[string][]string{
		"POST /auth/signup":                           {`{"email":"fz@example.com","password":"correct horse battery","name":"Fz","handle":"fz"}`},
		"POST /auth/login":                            {`{"email":"fz@example.com","password":"correct horse battery"}`},
		"POST /auth/logout":                           {``},
		"PATCH /me":                                   {`{"name":"Ann","title":"Ops","avatar_hash":"abc123"}`, `{"name":null}`},
		"PUT /me/status":                              {`{"emoji":"palm_tree","text":"away","expires_at":"2030-01-01T00:00:00Z"}`, `{"expires_at":"1969-01-01T00:00:00Z"}`},
		"POST /users/batch":                           {`{"ids":["$ME","$USER"]}`},
		"POST /workspaces":                            {`{"name":"Team","slug":"team-fz"}`},
		"POST /workspaces/{ws}/invites":               {`{"max_uses":5,"expires_in_s":3600}`, `{"max_uses":-1,"expires_in_s":9223372036854775807}`},
		"POST /invites/{code}/accept":                 {``},
		"PUT /workspaces/{ws}/members/{user_id}/role": {`{"role":"admin"}`, `{"role":"owner"}`, `{"role":"god"}`},
		"POST /boot":                                  {`{"workspace_id":"$WS","channel_id":"$CH","limit":50}`, `{"workspace_id":"$WS","since":"x","limit":-5}`},
		"POST /workspaces/{ws}/channels":              {`{"name":"fz","kind":"public","topic":"t","purpose":"p"}`, `{"name":"fz","kind":"dm"}`},
		"POST /dms":                                   {`{"workspace_id":"$WS","user_ids":["$USER"]}`, `{"workspace_id":"$WS","user_ids":["$ME","$ME"]}`},
		"PATCH /channels/{id}":                        {`{"name":"renamed","topic":"t","purpose":"p"}`},
		"POST /channels/{id}/members":                 {`{"user_ids":["$USER"]}`},
		"POST /channels/{id}/read":                    {`{"seq":1}`, `{"seq":-1}`, `{"seq":9223372036854775807}`},
		"POST /channels/{id}/messages":                {`{"text":"hi @here :tada:","client_msg_id":"c1"}`, `{"text":"reply","thread_root_id":"$MSG"}`},
		"PATCH /messages/{id}":                        {`{"text":"edited"}`},
		"POST /threads/{root}/read":                   {``},
		"POST /sync":                                  {`{"channels":{"$CH":0}}`, `{"channels":{"$CH":-9223372036854775808}}`},
	}
	hostile := []string{
		``, `{}`, `null`, `[]`, `"x"`, `0`, `{"a":1}{"b":2}`, `{`, `{"text":`, "\x00", "{\"text\":\"a\x00b\"}",
		`{"text":"\u0000"}`, "{\"text\":\"\xff\xfe\"}", `{"text":"\ud800"}`, `{"seq":1e400}`, `{"seq":"1"}`,
		`{"user_ids":"$USER"}`, `{"user_ids":[1,2]}`, `{"channels":[]}`, `{"name":{"$gt":""}}`,
		`{"limit":99999999999999999999}`, `{"max_uses":1.5}`, `{"text":"` + strings.Repeat("x", 40001) + `"}`,
		strings.Repeat("[", 10000),
	}
	// Every route gets its realistic seeds; the hostile ones go round
	// the routes (three routes each), which keeps the seeds' plain
	// `go test` run short. package adversarial sends every hostile body to
	// every route.
	keys := make([]string, len(withBody))
	for i, rt := range withBody {
		keys[i] = rt.Method + " " + strings.TrimPrefix(rt.Pattern, Prefix)
		for _, b := range realistic[keys[i]] {
			f.Add(keys[i], []byte(b))
		}
	}
	for i, b := range hostile {
		for k := range 3 {
			f.Add(keys[(3*i+k)%len(keys)], []byte(b))
		}
	}

	ctx := context.Background()
	owner, member := mustAccount(f, e.store, "owner"), mustAccount(f, e.store, "member")
	ws := mustWorkspace(f, e.store, owner)
	mustJoin(f, e.store, ws, owner, member)
	inv, err := e.store.CreateInvite(ctx, owner.ID, ws.ID, parley.InviteParams{})
	if err != nil {
		f.Fatal(err)
	}

	f.Fuzz(func(t *testing.T, key string, body []byte) {
		rt, ok := routeFor(withBody, key)
		if !ok {
			return
		}
		// A fresh channel and message each time: archive, leave, delete
		// and friends must not starve the routes that follow them.
		ch := mustChannel(t, e.store, ws, owner, parley.KindPublic)
		msg := mustPost(t, e.store, owner, ch, "root @member")
		token := owner.Token
		if strings.HasSuffix(rt.Pattern, "/auth/logout") {
			token = mustToken(t, e.store, owner.ID)
		}
		path := strings.NewReplacer("{ws}", ws.ID, "{user_id}", member.ID, "{code}", inv.Code,
			"{root}", msg.ID, "{emoji}", "thumbsup").Replace(strings.TrimPrefix(rt.Pattern, Prefix))
		if strings.HasPrefix(path, "/messages/") {
			path = strings.Replace(path, "{id}", msg.ID, 1)
		} else {
			path = strings.Replace(path, "{id}", ch.ID, 1)
		}
		body = []byte(strings.NewReplacer("$WS", ws.ID, "$CH", ch.ID, "$MSG", msg.ID, "$USER", member.ID, "$ME", owner.ID).Replace(string(body)))

		req, err := http.NewRequest(rt.Method, e.srv.URL+Prefix+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res := e.do(t, req)
		checkResponse(t, rt.Method+" "+path, body, res)
	})
}

// routeFor returns the route key names, or one picked by key's bytes.
func routeFor(rs []route, key string) (route, bool) {
	if len(rs) == 0 {
		return route{}, false
	}
	sum := 0
	for i, rt := range rs {
		if key == rt.Method+" "+strings.TrimPrefix(rt.Pattern, Prefix) {
			return rs[i], true
		}
	}
	for _, c := range []byte(key) {
		sum += int(c)
	}
	return rs[sum%len(rs)], true
}

// do sends req and reads the whole answer.
func (e *env) do(tb testing.TB, req *http.Request) *response {
	tb.Helper()
	res, err := e.srv.Client().Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer res.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(res.Body); err != nil {
		tb.Fatalf("%s %s: read body: %v", req.Method, req.URL.Path, err)
	}
	return &response{Status: res.StatusCode, Header: res.Header, Body: buf.Bytes()}
}

// checkResponse fails unless res is a success or a well-formed client
// error: JSON {"error":{"code","message"}} with the status of its code.
var slackWord = regexp.MustCompile(`^[a-z_]+$`)

func checkResponse(tb testing.TB, what string, body []byte, res *response) {
	tb.Helper()
	short := body
	if len(short) > 200 {
		short = short[:200]
	}
	if res.Status >= 500 {
		tb.Fatalf("%s with body %q: status %d, body %s", what, short, res.Status, res.Body)
	}
	if res.Status == http.StatusNoContent {
		return
	}
	// The Slack-compatible routes (webhooks, response_url) answer as Slack
	// does: one plain-text word (ok, invalid_payload, no_service...).
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain") {
		if !slackWord.Match(res.Body) {
			tb.Fatalf("%s with body %q: status %d, plain text that is no Slack answer: %q", what, short, res.Status, res.Body)
		}
		return
	}
	if !json.Valid(res.Body) {
		tb.Fatalf("%s with body %q: status %d, not JSON: %q", what, short, res.Status, res.Body)
	}
	if res.Status < 400 {
		return
	}
	var e struct {
		Error *struct {
			Code    *string `json:"code"`
			Message *string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(res.Body, &e); err != nil || e.Error == nil || e.Error.Code == nil || e.Error.Message == nil {
		tb.Fatalf("%s with body %q: status %d, not an error body: %s", what, short, res.Status, res.Body)
	}
	if StatusOf(*e.Error.Code) != res.Status || *e.Error.Message == "" {
		tb.Fatalf("%s with body %q: status %d with error %s", what, short, res.Status, res.Body)
	}
}
